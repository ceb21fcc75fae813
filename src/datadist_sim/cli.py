"""``datadist-sim``: the command line. ``codes`` prints the status-code table; ``demo`` runs the main job."""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional, Sequence

from datadist_sim._status_table import STATUS_TABLE, StatusInfo


def _select(name_filter: Optional[str], retryable: Optional[str]) -> List[StatusInfo]:
    rows = list(STATUS_TABLE.values())
    if name_filter:
        rows = [r for r in rows if name_filter.upper() in r.name]
    if retryable:
        rows = [r for r in rows if r.retryable == retryable]
    return rows


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([line.rstrip(), "  ".join("-" * w for w in widths), *body])


def cmd_codes(args: argparse.Namespace) -> int:
    rows = _select(args.filter, args.retryable)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "value": r.value,
                        "description": r.description,
                        "retryable": r.retryable,
                        "remedy": r.remedy,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
    else:
        cells = [[r.name, str(r.value), r.retryable, r.description] for r in rows]
        print(_table(cells, ["code", "integer", "retryable", "meaning"]))
        if args.remedy:
            for r in rows:
                print(f"\n{r.name}: {r.remedy}")
    return 0 if rows else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from datadist_sim._demo import run_demo

    return run_demo(seed=args.seed, as_json=args.json)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="datadist-sim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    codes = sub.add_parser("codes", help="the LLMStatusCode table: integer, retryable, meaning, remedy")
    codes.add_argument("filter", nargs="?", help="only codes whose name contains this text")
    codes.add_argument("--retryable", choices=["yes", "no", "n.a."])
    codes.add_argument("--remedy", action="store_true", help="also print each code's documented remedy")
    codes.add_argument("--json", action="store_true", help="machine-readable output")
    codes.set_defaults(func=cmd_codes)
    demo = sub.add_parser("demo", help="Prompt + Decode clusters, a link, pulls, a fault, a summary")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--json", action="store_true", help="machine-readable summary")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit codes: 0 success, 1 nothing matched or the demo's checks failed, 2 usage error."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
