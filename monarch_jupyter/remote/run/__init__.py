"""The run: orchestration on the kernel's one event loop, no IPython.

- :mod:`.runner`: plans a run (which ranks, warm actors per mesh), starts it, asks every rank.
- :mod:`.drive`: one run followed on the loop (stop, health, heartbeat, receive).
- :mod:`.follow`: a detached run's grid followed in the background.
- :mod:`.sessions`: ``--session`` namespaces, their book, pull and push.
- :mod:`.index`: the runs index (one JSON entry per run), :mod:`.spool` the run log.
- :mod:`.grep`: ``%remote grep`` over the kept logs; :mod:`.distributed`: ``--torch``'s master.
- :mod:`.hang`: ranks waiting on a failed one or in different collectives, named live; a
  session's blocked ranks kept at a stop.

It imports :mod:`..view`, :mod:`..wire` and :mod:`..host`, never :mod:`..cell`.
"""
