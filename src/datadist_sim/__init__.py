"""datadist-sim: an in-process simulator of Huawei CANN's LLM-DataDist (``llm_datadist``).

``SimWorld`` is the simulated fabric; ``install()`` makes ``import llm_datadist`` resolve to the fake;
``status_info(code)`` gives each status code's meaning, retryability and remedy; ``Fault`` rules go in
``world.faults``; ``datadist_sim.scenarios`` reads scenario files; ``world.trace`` records every call.

PYTEST_DONT_REWRITE: ``datadist-sim exec`` imports this package as pytest starts, before pytest's
assertion rewriter exists; the marker tells pytest that is expected (it rewrites nothing here anyway).
"""

from datadist_sim._install import install as install
from datadist_sim._install import installed as installed
from datadist_sim._install import is_installed as is_installed
from datadist_sim._install import uninstall as uninstall
from datadist_sim._status import LLMException as LLMException
from datadist_sim._status import LLMStatusCode as LLMStatusCode
from datadist_sim._status_table import STATUS_TABLE as STATUS_TABLE
from datadist_sim._status_table import StatusInfo as StatusInfo
from datadist_sim._status_table import retryable_codes as retryable_codes
from datadist_sim._status_table import status_info as status_info
from datadist_sim._views import tensor_views as tensor_views
from datadist_sim._world.surface import HCCS_BYTES_PER_S as HCCS_BYTES_PER_S
from datadist_sim._world.surface import ROCE_BYTES_PER_S as ROCE_BYTES_PER_S
from datadist_sim._world.surface import BlocksForever as BlocksForever
from datadist_sim._world.surface import MemoryAccessError as MemoryAccessError
from datadist_sim._world.surface import RealClock as RealClock
from datadist_sim._world.surface import SimConfig as SimConfig
from datadist_sim._world.surface import SimWorld as SimWorld
from datadist_sim._world.surface import TraceEvent as TraceEvent
from datadist_sim._world.surface import VirtualClock as VirtualClock
from datadist_sim._world.surface import activate as activate
from datadist_sim._world.surface import current_world as current_world
from datadist_sim._world.surface import default_world as default_world
from datadist_sim._world.surface import read_jsonl as read_trace
from datadist_sim._world.surface import reset_default_world as reset_default_world
from datadist_sim._world.surface import summarise as summarise_trace
from datadist_sim.faults import Fault as Fault
from datadist_sim.faults import FaultPlan as FaultPlan

__version__ = "0.1.0"

__all__ = [
    "BlocksForever",
    "HCCS_BYTES_PER_S",
    "Fault",
    "FaultPlan",
    "LLMException",
    "LLMStatusCode",
    "MemoryAccessError",
    "TraceEvent",
    "read_trace",
    "summarise_trace",
    "ROCE_BYTES_PER_S",
    "STATUS_TABLE",
    "RealClock",
    "SimConfig",
    "SimWorld",
    "StatusInfo",
    "VirtualClock",
    "__version__",
    "activate",
    "current_world",
    "default_world",
    "install",
    "installed",
    "is_installed",
    "reset_default_world",
    "retryable_codes",
    "status_info",
    "tensor_views",
    "uninstall",
]
