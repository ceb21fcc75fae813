"""Run commands inside a fresh network namespace (``unshare -rn python netns_in_turn.py SPEC``), each
started once the one before it has printed its ``ready`` text, so a client never races its server's
start-up (the hixl sample's client gives up after ten tries half a second apart). SPEC is JSON:
``commands`` (argv lists), ``ready`` (a text per command, or null to start the next at once) and
``timeout`` in seconds for the lot. Prints one JSON list: each command's exit code and merged output
(``rc`` is null for one killed at the timeout)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List


def main() -> None:
    spec = json.loads(sys.argv[1])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    deadline = time.monotonic() + float(spec["timeout"])
    outputs: List[List[str]] = []
    runs: List[subprocess.Popen[str]] = []
    pumps: List[threading.Thread] = []
    for argv, ready in zip(spec["commands"], spec["ready"]):
        run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: List[str] = []
        seen = threading.Event()
        pump = threading.Thread(target=_pump, args=(run, lines, ready, seen), daemon=True)
        pump.start()
        pumps.append(pump)
        runs.append(run)
        outputs.append(lines)
        if ready is not None:
            seen.wait(max(0.1, deadline - time.monotonic()))
    results: List[Dict[str, Any]] = []
    for run, lines, pump in zip(runs, outputs, pumps):
        try:
            run.wait(timeout=max(0.1, deadline - time.monotonic()))
            rc = run.returncode
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()
            rc = None
            lines.append("[killed at the timeout]")
        pump.join(timeout=5.0)  # its last lines
        results.append({"rc": rc, "out": "".join(lines)})
    print(json.dumps(results))


def _pump(run: subprocess.Popen[str], lines: List[str], ready: Any, seen: threading.Event) -> None:
    assert run.stdout is not None
    for line in run.stdout:
        lines.append(line)
        if ready is not None and ready in line:
            seen.set()
    seen.set()  # ended without it: the next starts anyway, and the results say why


if __name__ == "__main__":
    main()
