"""The view: pure plain data and text, both ways (no Monarch, no IPython, no threads).

- :mod:`.args`: the cell's line parsed into :class:`~.args.RemoteArgs`.
- :mod:`.model` (the run model, :class:`~.model.RunState`) over :mod:`.events` and :mod:`.lines`.
- :mod:`.render` (a run as text), :mod:`.livefold` (identical output folded live),
  :mod:`.quiet` (ranks quiet for a while), :mod:`.liveness` (lost or only silent),
  :mod:`.stacks` (stacks folded), :mod:`.diff`, :mod:`.resources`, :mod:`.results`
  (``--save``), :mod:`.session_text` (``--session``'s folded errors and values).

It imports only :mod:`..wire` below it, plus the package's pure leaves (``text/``, ``schema/``).
"""
