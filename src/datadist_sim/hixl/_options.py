"""``initialize``'s options: parsed as hixl parses them, and which engine they pick.

hixl parses every option before it chooses an engine (``src/hixl/engine/hixl_options.cc:212-228``); a
parse error leaves no engine and ``initialize`` answers ``PARAM_INVALID`` (``engine_factory.cc:41-45``,
``hixl_impl.cc:88-90``). The engine is then the first match of ``engine_factory.cc:38-77``: fabric memory
(``EnableUseFabricMem`` 1), ``LocalCommRes`` JSON of version 1.3 (``hixl_cs``, other JSON ``comm``, not
JSON refused), a ``GlobalResourceConfig`` with a ``protocol_desc`` (``hixl_cs``), else ``comm`` (the SoC
V5 rule of ``:70-74`` does not apply: the simulated SoC is not V5). The chosen engine refuses keys it
does not know (``hixl_options.cc:230-236``): ``comm`` knows all seven plus the adxl spellings
(``comm_engine.cc:15-24``), ``hixl_cs`` all but ``EnableUseFabricMem`` (``hixl_engine.cc:31-37``).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Dict, Mapping, Optional

from datadist_sim._world.door import EngineKind, EngineSettings
from datadist_sim.hixl import _codes as codes

_log = logging.getLogger("datadist_sim.hixl")
_ADXL = ("adxl.RdmaTrafficClass", "adxl.RdmaServiceLevel", "adxl.BufferPool", "adxl.LocalCommRes")
_HIXL = (
    codes.OPTION_ENABLE_USE_FABRIC_MEM,
    codes.OPTION_RDMA_TRAFFIC_CLASS,
    codes.OPTION_RDMA_SERVICE_LEVEL,
    codes.OPTION_BUFFER_POOL,
    codes.OPTION_GLOBAL_RESOURCE_CONFIG,
    codes.OPTION_AUTO_CONNECT,
    codes.OPTION_LOCAL_COMM_RES,
)
_KNOWN = {EngineKind.COMM: frozenset(_HIXL + _ADXL), EngineKind.HIXL_CS: frozenset(_HIXL[1:] + _ADXL)}


class Refused(Exception):
    """The options leave no engine: ``code`` is what ``initialize`` returns."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _number(text: str, what: str) -> int:
    """hixl's ``ToNumber``: the whole text a decimal integer."""
    stripped = text.strip()
    if not stripped or not stripped.lstrip("+-").isdigit():
        raise Refused(codes.PARAM_INVALID, f"{what} is not a number: {text!r}")
    return int(stripped)


def _in_range(value: int, low: int, high: int, what: str) -> None:
    if not low <= value <= high:
        raise Refused(codes.PARAM_INVALID, f"{what} must be in [{low}, {high}], got {value}")


def _either(options: Mapping[str, str], key: str, adxl: str, env: Optional[str] = None) -> str:
    value = options.get(key, options.get(adxl, ""))
    return value if value or env is None else os.environ.get(env, "")


def _global_config(text: str) -> Dict[str, object]:
    """``GlobalResourceConfig``: a JSON object of dotted keys (``hixl_options.cc:342-369, 161-189``)."""
    try:
        config = json.loads(text)
    except ValueError:
        raise Refused(codes.PARAM_INVALID, "GlobalResourceConfig is not JSON") from None
    if not isinstance(config, dict):
        raise Refused(codes.PARAM_INVALID, "GlobalResourceConfig must be a JSON object")
    ranges = {
        "connect_pool.thread_num": (1, 64),
        "connect_pool.task_queue_capacity": (1, 65535),
        "comm_resource_config.listen_port": (1, 65535),
        "comm_resource_config.max_active_channels": (1, (1 << 32) - 1),
    }
    for key, (low, high) in ranges.items():
        if key in config:
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool):
                raise Refused(codes.PARAM_INVALID, f"{key} must be an integer")
            _in_range(value, low, high, key)
    return config


def read_options(options: Mapping[str, str]) -> EngineSettings:
    """The settings of the engine ``options`` pick, or ``Refused``."""
    tc = _either(options, codes.OPTION_RDMA_TRAFFIC_CLASS, _ADXL[0], "HCCL_RDMA_TC")
    if tc:  # hixl_options.cc:246-271
        value = _number(tc, "RdmaTrafficClass")
        _in_range(value, 0, 255, "RdmaTrafficClass")
        if value % 4:
            raise Refused(codes.PARAM_INVALID, f"RdmaTrafficClass must be a multiple of 4, got {value}")
    sl = _either(options, codes.OPTION_RDMA_SERVICE_LEVEL, _ADXL[1], "HCCL_RDMA_SL")
    if sl:  # :273-294
        _in_range(_number(sl, "RdmaServiceLevel"), 0, 7, "RdmaServiceLevel")
    fabric = options.get(codes.OPTION_ENABLE_USE_FABRIC_MEM, "")
    if fabric:  # :309-321
        _in_range(_number(fabric, "EnableUseFabricMem"), 0, 1, "EnableUseFabricMem")
    auto = options.get(codes.OPTION_AUTO_CONNECT)
    if auto is not None:  # :323-340
        _in_range(_number(auto, "AutoConnect"), 0, 1, "AutoConnect")
    config_text = options.get(codes.OPTION_GLOBAL_RESOURCE_CONFIG, "")
    config = _global_config(config_text) if config_text else {}
    kind = _kind(options, fabric, config)
    unknown = sorted(set(options) - _KNOWN[kind])
    if unknown:
        raise Refused(codes.PARAM_INVALID, f"option {unknown[0]!r} is unknown to the {kind.value} engine")
    _buffer_pool(_either(options, codes.OPTION_BUFFER_POOL, _ADXL[2]), kind)
    workers = config.get("connect_pool.thread_num", 2)
    capacity = config.get("connect_pool.task_queue_capacity", 128)
    assert isinstance(workers, int)
    assert isinstance(capacity, int)
    return EngineSettings(kind, auto is not None and int(auto) == 1, workers, capacity)


def _kind(options: Mapping[str, str], fabric: str, config: Mapping[str, object]) -> EngineKind:
    if fabric and int(fabric) == 1:
        _log.warning("hixl: the fabric-memory engine (EnableUseFabricMem=1) is not simulated")
        raise Refused(codes.FAILED, "the fabric-memory engine is not simulated")
    local = _either(options, codes.OPTION_LOCAL_COMM_RES, _ADXL[3])
    if local:  # engine_factory.cc:51-65
        try:
            parsed = json.loads(local)
        except ValueError:
            raise Refused(codes.PARAM_INVALID, "LocalCommRes is not JSON") from None
        is_cs = isinstance(parsed, dict) and parsed.get("version") == "1.3"
        return EngineKind.HIXL_CS if is_cs else EngineKind.COMM
    if config.get("comm_resource_config.protocol_desc"):  # engine_factory.cc:24-31, 66-69
        return EngineKind.HIXL_CS
    return EngineKind.COMM


def _buffer_pool(text: str, kind: EngineKind) -> None:
    """``hixl_cs`` takes only ``"0:0"`` (``hixl_engine.cc:62-69``); ``comm`` ``"<count>:<MiB>"``, both
    above 0, or ``"0:0"`` (``adxl_inner_engine.cc:216-248``)."""
    if not text or text == "0:0":
        return
    parts = text.split(":")
    if kind is EngineKind.COMM and len(parts) == 2 and all(p.isdigit() and int(p) > 0 for p in parts):
        return
    raise Refused(codes.PARAM_INVALID, f"BufferPool {text!r} is not valid for the {kind.value} engine")
