"""The cell: ``%%remote``'s IPython glue, the only room of :mod:`..remote` that imports IPython.

- :mod:`.magic`: ``%%remote`` and ``%remote VERB`` registered on the shell, the pump that shows a
  run's events in the running cell, Ctrl-C.
- :mod:`.verbs`: each ``%remote VERB``'s parser and handler, registered together.
- :mod:`.autoremote`: ``%autoremote``'s input transformer.

It calls down into :mod:`..run` (orchestration) and :mod:`..view` (pure text); nothing below
imports it (``lint-imports`` contract ``remote-rooms``).
"""
