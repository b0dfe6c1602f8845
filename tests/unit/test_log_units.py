"""_log: the switch shows both loggers' records on the current stderr, lifts the quiet filters,
and off restores what it changed."""

from __future__ import annotations

import io
import logging
import sys

from monarch_jupyter.runtime import chatter as _quiet
from monarch_jupyter.runtime import log as _log


def test_the_switch(monkeypatch):
    _quiet.install()
    job_logger = logging.getLogger("monarch._src.job.job")  # Monarch's: a level and a filter of its own
    job_logger.setLevel(logging.INFO)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(_log.DEBUG_VAR, "0")
    assert not _log.from_env()
    _log.get("lifecycle").debug("hidden")
    assert err.getvalue() == ""
    assert not job_logger.filters[0].filter(logging.makeLogRecord({"levelno": logging.INFO}))
    monkeypatch.setenv(_log.DEBUG_VAR, "1")
    try:
        assert _log.from_env()
        _log.get("lifecycle").debug("a decision")
        logging.getLogger("monarch._src.actor.x").info("monarch says")
        assert job_logger.level == logging.DEBUG
        assert job_logger.filters[0].filter(logging.makeLogRecord({"levelno": logging.INFO}))
    finally:
        _log.set_debug(False)
    lines = err.getvalue().splitlines()
    # Monarch, once imported in this process (an earlier test), adds "[actor=…]" to each record
    assert "DEBUG monarch_jupyter.lifecycle: " in lines[0] and lines[0].endswith("a decision")
    assert "INFO monarch._src.actor.x: " in lines[1] and lines[1].endswith("monarch says")
    assert job_logger.level == logging.INFO
    _log.get("lifecycle").debug("hidden again")
    assert len(err.getvalue().splitlines()) == 2
