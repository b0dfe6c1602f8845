"""The ``%job`` verbs, by family; importing this package declares them all (``jobs/args.py``
builds their parsers, the magic dispatches to them). The order of the imports below is the order
``%job?`` lists the verbs in, so they are not sorted."""

# ruff: noqa: I001

from __future__ import annotations

from . import lifecycle  # status, apply, kill
from . import batch_runs  # batch, logs
from . import telemetry  # query, profile, topology
from . import upkeep  # reconnect, refresh, trust, debug
from . import context  # context ls, use, create, rm
from .registry import REGISTRY, Cell, dispatch

__all__ = ["REGISTRY", "Cell", "batch_runs", "context", "dispatch", "lifecycle", "telemetry", "upkeep"]
