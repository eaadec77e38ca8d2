"""The ``monarch-cy`` console command."""

from __future__ import annotations

import argparse
import json
import sys


def _info(args: argparse.Namespace) -> int:
    from monarch_cy._info import format_report, report

    r = report()
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="monarch-cy", description="monarch_cy command line")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="print the platform, GPU runtime, devices, NCCL/RCCL and verbs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_info)
    from monarch_cy._train.cli import add_parser as add_train

    add_train(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
