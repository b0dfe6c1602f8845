"""The worker side of ``%%remote``: what runs on each host, next to the command it started.

THE RULE: these modules travel to the workers by value (``engines.send_by_value`` →
``cloudpickle.register_pickle_by_value``; a worker needs only torchmonarch), so each imports
only

- the standard library,
- ``monarch`` (only :mod:`.actor`, the one module that is a Monarch actor),
- ``cloudpickle`` (only :mod:`.session` and :mod:`.session_server`: Monarch's own dependency, on
  every worker; the namespace server is sent to its process by value with it),
- each other (``monarch_jupyter.remote.host.*``),
- the stdlib-only leaves ``monarch_jupyter.system.procfs``, ``monarch_jupyter.system.files`` (which imports
  ``monarch_jupyter.errors``, stdlib-only too), ``monarch_jupyter.remote.wire.protocol`` (the
  messages both sides share, stdlib-only) and ``monarch_jupyter.remote.wire.pyspy`` (py-spy's JSON
  parsed, stdlib-only).

``tests/unit/test_host_rule.py`` parses every one of them and fails on any other import. Nothing of
the kernel side (runner, runs index, magics, session) may be imported here; the kernel side
imports :mod:`.layout` (the on-host run layout) and :mod:`.runs` (what a host knows about runs).

- :mod:`.layout`: the runs folder, its folder and file names, status and meta read-write.
- :mod:`.spares`: rank folders made ahead, pruned ones emptied for reuse.
- :mod:`.shell`: the wrapper shell forked ahead, and the keeper that keeps one ready.
- :mod:`.capture`: a command we started, its output read from its rank folder.
- :mod:`.tail`: inotify, hole punching, tailing a rank's files.
- :mod:`.runs`: what a host knows about runs: state, strays, stop, prune, following.
- :mod:`.dumps`: what a run's processes are doing (py-spy stacks, process lines).
- :mod:`.search`: the lines of a rank's output matching a pattern (``%remote grep``).
- :mod:`.usage`: CPU %, RSS and GPU memory of a run's ranks (``%remote runs``).
- :mod:`.session`: each rank's namespace process of a ``--session`` (found or started), a cell in it.
- :mod:`.session_server`: that process's program (standard library only, sent by value).
- :mod:`.actor`: the Monarch actor, endpoints over the above.
"""
