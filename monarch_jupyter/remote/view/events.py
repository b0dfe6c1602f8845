"""The events a run's drive reports (:mod:`..run.drive`), applied by :meth:`.model.RunState.apply`.

Plain data, no imports of the kernel side; :mod:`.model` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Started:
    index: int
    pid: int | None = None


@dataclass(slots=True)
class Output:
    """A chunk of a rank's output. Not frozen, unlike the other events: one is made per message,
    and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) is several times slower."""

    index: int
    stream: str  # OUT or ERR
    text: str
    newlines: int | None = None  # text.count("\n") when the sender counted them already


@dataclass(frozen=True)
class Exited:
    index: int
    returncode: int | None
    duration: float
    error: str | None = None
    stopped_by: str | None = None  # who stopped the run, as its host recorded it
    value: str | None = None  # a session cell's last expression, as repr shows it


@dataclass(frozen=True)
class Lost:
    """The rank's worker is gone (its process died, or a probe of it failed)."""

    index: int
    message: str


@dataclass(frozen=True)
class Silent:
    """Ranks silent past the threshold whose workers are not known to be gone (nothing is
    killed): ``line`` says so, e.g. ``hosts=7 silent for 12 s (worker alive)``."""

    indices: tuple[int, ...]
    seconds: float
    line: str


@dataclass(frozen=True)
class Stopping:
    """The run is being stopped: ``reason`` is ``interrupted`` or ``timed_out``."""

    reason: str


@dataclass(frozen=True)
class Finished:
    """No more events will come."""

    error: str | None = None


Event = Started | Output | Exited | Lost | Silent | Stopping | Finished
