"""A JobTrait that starts nothing: for unit tests of the session facade.

It lives in its own module so the session's pickle cache can load it back.
Every step is logged in ``LOG`` (module-level: a job loaded from the cache is a
new object).
"""

from __future__ import annotations

from monarch.job import JobTrait

LOG: list[tuple[str, str]] = []


class FakeJob(JobTrait):
    def __init__(self, name: str, *, fail: str | None = None, kill_fails: str | None = None) -> None:
        super().__init__()
        self.name, self.fail, self.kill_fails = name, fail, kill_fails
        self.alive = True

    # what the session calls (JobTrait's own state() would connect to real workers)
    def state(self, cached_path=None):
        LOG.append(("start", self.name))
        if self.fail:
            raise RuntimeError(self.fail)
        if not self.active:
            self.apply()
        return f"state-{self.name}"

    def kill(self):
        LOG.append(("kill", self.name))
        if self.kill_fails:
            raise RuntimeError(self.kill_fails)
        super().kill()

    # JobTrait's abstract methods
    def _create(self, client_script):
        pass

    def _state(self):
        raise AssertionError("not used")

    def can_run(self, spec):
        return isinstance(spec, FakeJob) and spec.name == self.name and self.alive

    def _kill(self):
        self.alive = False
