"""Faults, on their own floor under the world: the actions (``actions``), the codes the engine gives
per operation and mode (``engine_codes``), rules (``rules``, checked by ``checks``), the plan that fires
them (``plan``), what a fired rule does to a call (``effects``), scenario files (``files``) and their
re-timing for the benchmark (``retime``). Imports nothing of the world or the tools: the world
applies effects through the hooks the plan is given."""

from datadist_sim.faults.actions import ACTION_TABLE as ACTION_TABLE
from datadist_sim.faults.actions import Action as Action
from datadist_sim.faults.checks import API_OPS as API_OPS
from datadist_sim.faults.effects import Effect as Effect
from datadist_sim.faults.engine_codes import EngineMode as EngineMode
from datadist_sim.faults.engine_codes import codes_for as codes_for
from datadist_sim.faults.engine_codes import fault_codes as fault_codes
from datadist_sim.faults.engine_codes import timeout_code as timeout_code
from datadist_sim.faults.files import Scenario as Scenario
from datadist_sim.faults.files import Workload as Workload
from datadist_sim.faults.plan import Call as Call
from datadist_sim.faults.plan import FaultPlan as FaultPlan
from datadist_sim.faults.plan import WorldHooks as WorldHooks
from datadist_sim.faults.plan import never_fired as never_fired
from datadist_sim.faults.rules import ACTIONS as ACTIONS
from datadist_sim.faults.rules import LINK_OPS as LINK_OPS
from datadist_sim.faults.rules import SERVING as SERVING
from datadist_sim.faults.rules import TRANSFER_OPS as TRANSFER_OPS
from datadist_sim.faults.rules import Fault as Fault
from datadist_sim.faults.rules import current_op as current_op
