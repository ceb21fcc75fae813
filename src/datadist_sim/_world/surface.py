"""The surface: the one world module the tools and the fabric import.

The tools (the command line, benchmarks, the fault search, the scenarios, the pytest plugin, virtual time
for asyncio and threads, the package's public names) build worlds, run them and read what they recorded;
the fabric builds a world and serves it to other processes. None of them makes a face call, so none goes
through ``door`` (the faces' way in); they come here instead of reaching into the world's rooms, so a
room can be reshaped without touching a tool.

Why each name is here:

- ``SimWorld``, ``SimConfig``: a world and its configuration; every tool that runs one builds it.
- ``HCCS_BYTES_PER_S``, ``ROCE_BYTES_PER_S``: the default link speeds, public in ``datadist_sim`` so a
  user can size a ``SimConfig`` against them.
- ``VirtualClock``, ``Wake``: the virtual time the plugin, explore, aio and timepatch drive, and the
  wake-up test explore hands it; ``RealClock``: the wall clock the fabric's host and the package offer;
  ``Clock``: the protocol ``retry`` accepts.
- ``activate``, ``current_world``, ``default_world``, ``reset_default_world``: which world a call is
  served by; the package exports them, aio, timepatch and the views read the current world, bench
  activates the one it built, the fabric's host makes the world it serves the default.
- ``SimError``, ``MemoryAccessError``: the world's errors, caught by the views, the fabric and users;
  ``BlocksForever``: a call the real engine would never return from.
- ``TraceEvent``, ``TraceSummary``, ``read_jsonl``, ``summarise``: the trace's events and their summary
  (scenarios, explore, assertions, coverage, the package); ``expand_trace_path``, ``open_trace_sink``:
  where a trace is written (cli, scenarios, ``_exec``, explore, the fabric's service);
  ``observe_calls``, ``observe_nodes``: the observers coverage and the fabric's host hang on every world
  of the process.
- ``tensor_views``: typed numpy views over simulated memory, behind ``datadist_sim.tensor_views``.
- For the fabric alone: ``Mode`` (the engine mode a session serves), ``AddressSpace`` and
  ``is_simulated`` (its shared-memory space and the test for an address in it), ``PROCESS_MEMORY`` and
  ``raw_view`` (raw pointers of client processes), ``copy_parties`` and ``holds`` (the ownership checks
  the host makes on memory a client names).
"""

from __future__ import annotations

from datadist_sim._world.address_space import AddressSpace as AddressSpace
from datadist_sim._world.address_space import is_simulated as is_simulated
from datadist_sim._world.address_space import tensor_views as tensor_views
from datadist_sim._world.clock import Clock as Clock
from datadist_sim._world.clock import RealClock as RealClock
from datadist_sim._world.clock import VirtualClock as VirtualClock
from datadist_sim._world.clock import Wake as Wake
from datadist_sim._world.cluster import Mode as Mode
from datadist_sim._world.config import SimConfig as SimConfig
from datadist_sim._world.current import activate as activate
from datadist_sim._world.current import current_world as current_world
from datadist_sim._world.current import default_world as default_world
from datadist_sim._world.current import reset_default_world as reset_default_world
from datadist_sim._world.errors import BlocksForever as BlocksForever
from datadist_sim._world.errors import MemoryAccessError as MemoryAccessError
from datadist_sim._world.errors import SimError as SimError
from datadist_sim._world.ownership import copy_parties as copy_parties
from datadist_sim._world.ownership import holds as holds
from datadist_sim._world.process_memory import PROCESS_MEMORY as PROCESS_MEMORY
from datadist_sim._world.process_memory import raw_view as raw_view
from datadist_sim._world.trace import TraceEvent as TraceEvent
from datadist_sim._world.trace import TraceSummary as TraceSummary
from datadist_sim._world.trace import expand_trace_path as expand_trace_path
from datadist_sim._world.trace import observe_calls as observe_calls
from datadist_sim._world.trace import observe_nodes as observe_nodes
from datadist_sim._world.trace import open_trace_sink as open_trace_sink
from datadist_sim._world.trace import read_jsonl as read_jsonl
from datadist_sim._world.trace import summarise as summarise
from datadist_sim._world.world import HCCS_BYTES_PER_S as HCCS_BYTES_PER_S
from datadist_sim._world.world import ROCE_BYTES_PER_S as ROCE_BYTES_PER_S
from datadist_sim._world.world import SimWorld as SimWorld
