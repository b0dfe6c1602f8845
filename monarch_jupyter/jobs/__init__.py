"""The job side: which Monarch job a folder's context runs, kept across kernel restarts.

``magic`` (``%job``) over ``session`` (the facade) and its units: ``store`` and ``cache`` (the
context's pickle cache, ``signing``), ``attachment``, ``resolve``, ``lifecycle``, ``status``
(plain data for the views), ``formatting``; ``contexts`` (the ``.monarch/`` layout shared with the
``monarch`` CLI); ``engines/`` (what differs between kinds of job), ``specs/`` (what ``%job apply``
takes), ``services/`` (telemetry, admin, mounts, sidecar).
"""
