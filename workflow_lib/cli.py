"""The ``trackfold`` command line: one sub-command per stage, the same calls the Snakemake rules make.

Each stage family owns a ``cli`` module with ``register(subparsers)``; this module only assembles them, so a
new stage adds its module to :data:`COMMAND_MODULES` and nothing else here changes. Errors raised on purpose
(:class:`~workflow_lib.errors.TrackfoldError`) are printed as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from workflow_lib import __version__
from workflow_lib.errors import TrackfoldError

COMMAND_MODULES = (
    "workflow_lib.db.cli",
    "workflow_lib.seqio.cli",
    "workflow_lib.aligner.cli",
    "workflow_lib.search.cli",
    "workflow_lib.features.cli",
    "workflow_lib.templates.cli",
    "workflow_lib.model.predict_cli",
    "workflow_lib.model.train_cli",
    "workflow_lib.report.cli",
    "workflow_lib.evaluate.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trackfold",
        description="Proteome-scale MSAs, templates, features and three-track structure prediction.")
    parser.add_argument("--version", action="version", version=f"trackfold {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except TrackfoldError as error:
        print(f"trackfold {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
