"""Run commands side by side inside a fresh network namespace (``unshare -rn python netns_run.py SPEC``).

The vendor's samples hard-code a gloo rendezvous on port 29500 and, in rank-table mode, a master at
10.10.10.0. A private namespace gives them that address on its own loopback and keeps concurrent runs
from meeting on one port. SPEC is JSON: ``addresses`` to add to ``lo``, ``commands`` (argv lists),
``timeout`` in seconds for the lot. Prints one JSON list: each command's exit code and merged output
(``rc`` is null for one killed at the timeout).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def main() -> None:
    spec = json.loads(sys.argv[1])
    for address in spec["addresses"]:
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    runs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for argv in spec["commands"]
    ]
    deadline = time.monotonic() + float(spec["timeout"])
    results = []
    for run in runs:
        try:
            out, _ = run.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append({"rc": run.returncode, "out": out})
        except subprocess.TimeoutExpired:
            run.kill()
            out, _ = run.communicate()
            results.append({"rc": None, "out": out + "\n[killed at the timeout]"})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
