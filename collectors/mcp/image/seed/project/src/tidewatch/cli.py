"""Command line: tidewatch check | report | stations."""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tidewatch")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check")
    check.add_argument("file")
    report = commands.add_parser("report")
    report.add_argument("file")
    report.add_argument("--station", required=True)
    report.add_argument("--out", default="out")
    commands.add_parser("stations")
    args = parser.parse_args(argv)
    print(f"tidewatch {args.command}: not wired up yet", file=sys.stderr)
    return 2
