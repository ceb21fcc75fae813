"""The fabric's host: the process that owns the one simulated world and serves it. The server and its
sessions (one per client process), shared memory backing the world's allocations, raw copies routed
through the process that owns a pointer, the hosted ``hixl`` engines, and the ``datadist-sim fabric``
command."""
