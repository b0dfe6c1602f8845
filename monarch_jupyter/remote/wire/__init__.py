"""The wire: what the kernel side and the host side both read (standard library only).

- :mod:`.protocol`: the messages between the kernel and the host actor.
- :mod:`.pyspy`: py-spy's JSON, parsed on the host and folded in the kernel.

:mod:`..host` travels to the workers by value and imports these; so each imports nothing but the
standard library (``tests/unit/test_host_rule.py``).
"""
