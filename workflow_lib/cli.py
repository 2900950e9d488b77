"""The ``trackfold`` command line: one sub-command per stage, the same calls the Snakemake rules make.

Each stage family owns a ``cli`` module with ``register(subparsers)``; this module only assembles them, so a
new stage adds its module and its command names to :data:`COMMAND_MODULES` and nothing else here changes.
A command imports only the module that owns it (the model's modules import torch, the report's matplotlib:
seconds of imports that every Snakemake job of the search stage would otherwise pay); ``trackfold --help`` imports them
all. Errors raised on purpose (:class:`~workflow_lib.errors.TrackfoldError`) are printed as one line and exit
with status 2. Every command ends by logging its own resource use (:data:`RESOURCES_PREFIX`: CPU seconds of the
process and its children, peak resident memory): the workflow's job logs carry exact CPU, where Snakemake's
``benchmark:`` files sample it (every 0.5 s for 15 s, then every 30 s, so a job's last seconds can be missed).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import resource
import sys
import time

from workflow_lib import __version__
from workflow_lib.errors import TrackfoldError

COMMAND_MODULES = {
    "workflow_lib.db.cli": ("db", "chunk", "chunk-extract"),
    "workflow_lib.seqio.cli": ("validate", "convert"),
    "workflow_lib.aligner.cli": ("align",),
    "workflow_lib.search.cli": ("search", "msa", "search-profiles", "search-shard", "msa-merge", "msa-final"),
    "workflow_lib.features.cli": ("features",),
    "workflow_lib.templates.cli": ("templates",),
    "workflow_lib.inference.cli": ("predict",),
    "workflow_lib.training.cli": ("train-data", "train", "train-pack", "train-batch", "train-select", "train-hits",
                                  "train-targets", "train-card"),
    "workflow_lib.report.cli": ("summarize",),
    "workflow_lib.workflow.cli": ("status",),
    "workflow_lib.evaluate.cli": ("evaluate",),
}
"""Sub-command modules and the commands each registers (a test checks both agree)."""


def command_modules(argv: list[str]) -> list[str]:
    """The module owning the first command word of ``argv``, or every module (help, typos, no command)."""
    for word in argv:
        if not word.startswith("-"):
            owners = [name for name, commands in COMMAND_MODULES.items() if word in commands]
            return owners or list(COMMAND_MODULES)
    return list(COMMAND_MODULES)


def build_parser(modules: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``trackfold`` parser with the sub-commands of ``modules`` (default: all)."""
    parser = argparse.ArgumentParser(
        prog="trackfold",
        description="Proteome-scale MSAs, templates, features and three-track structure prediction.")
    parser.add_argument("--version", action="version", version=f"trackfold {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (list(COMMAND_MODULES) if modules is None else modules):
        importlib.import_module(name).register(subparsers)
    return parser


RESOURCES_PREFIX = "trackfold resources:"
"""Marks the last log message of every command: ``trackfold resources: command=NAME cpu_s=… max_rss_mb=…
wall_s=…`` (:func:`workflow_lib.report.collect.read_log_resources` reads it back)."""


def resources_line(command: str, started: float) -> str:
    """The :data:`RESOURCES_PREFIX` line: CPU (user + system) of this process and its waited-for children, the
    larger of their peak resident memories (MiB, as Snakemake's benchmark files; Linux reports KiB, macOS bytes),
    wall seconds since ``started``."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    per_mib = 2.0 ** 20 if sys.platform == "darwin" else 1024.0
    peak = max(own.ru_maxrss, children.ru_maxrss) / per_mib
    return (f"{RESOURCES_PREFIX} command={command} cpu_s={cpu:.2f} max_rss_mb={peak:.0f} "
            f"wall_s={time.perf_counter() - started:.2f}")


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_modules(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except TrackfoldError as error:
        print(f"trackfold {args.command}: error: {error}", file=sys.stderr)
        return 2
    finally:
        logging.getLogger("workflow_lib.cli").info(resources_line(args.command, started))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
