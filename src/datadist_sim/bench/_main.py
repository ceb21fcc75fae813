"""Argument parsing for ``datadist-sim bench``: one subcommand per benchmark."""

from __future__ import annotations

import argparse
from typing import List, Optional


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="datadist-sim bench", description="retry-policy benchmark and simulator performance"
    )
    sub = parser.add_subparsers(dest="bench", required=True)
    retry = sub.add_parser("retry", help="policy x scenario table under faults (simulated time)")
    retry.add_argument("--seed", type=int, default=0)
    perf = sub.add_parser("perf", help="control-plane, data-plane and scaling figures vs baselines")
    perf.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Exit codes: 0 done, 1 a benchmark's own checks failed, 2 usage error."""
    args = build_parser().parse_args(argv)
    print(f"datadist-sim bench {args.bench}: not implemented yet")
    return 1
