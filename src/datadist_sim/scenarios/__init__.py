"""Scenarios: the reference workload a scenario file runs against (``runner``, ``client_run``).

Scenario files themselves (parsing, ``Scenario``, ``Workload``, the bundled files) belong to the faults
(``datadist_sim.faults.files``); their names are handed on here, where users have always found them.
"""

from datadist_sim.faults.files import Scenario as Scenario
from datadist_sim.faults.files import Workload as Workload
from datadist_sim.faults.files import find as find
from datadist_sim.faults.files import load as load
from datadist_sim.faults.files import names as names
from datadist_sim.faults.files import parse as parse
from datadist_sim.faults.files import rule_from_spec as rule_from_spec

__all__ = ["Scenario", "Workload", "find", "load", "names", "parse", "rule_from_spec"]
