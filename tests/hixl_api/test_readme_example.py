"""The README's example of the ``hixl`` API runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_hixl_example_runs() -> None:
    found = re.search(r"<!-- example: hixl -->\n```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert found is not None
    out = subprocess.run([sys.executable, "-c", found.group(1)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
