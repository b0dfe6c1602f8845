"""Monarch's runtime as the kernel lives with it: the one event loop (``loop``), the one reader
of Monarch's private fields (``introspect``), our logger (``log``), Monarch's chatter kept out of
cells (``chatter``), its fault hook (``faults``) and its own log file (``monarch_log``)."""
