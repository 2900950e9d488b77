"""Sub-command ``trackfold summarize``: a proteome's ``summary.parquet`` (and ``summary.tsv``),
``runtime.parquet``, report PNGs and HTML pages (an index and one page per protein, :mod:`.pages`).

    trackfold summarize --results results --proteome ecoli --out results/ecoli/summary.parquet \\
        --tsv results/ecoli/summary.tsv --runtime-out results/ecoli/runtime.parquet \\
        --plots-dir results/ecoli/report --pages-dir results/ecoli/report [--require msa,predict]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from workflow_lib.errors import InputError
from workflow_lib.report import plots
from workflow_lib.report.collect import OPTIONAL_STAGES, a3m_path, build_summary, read_plddt, residues_path
from workflow_lib.report.compare import is_measured
from workflow_lib.report.pages import write_pages
from workflow_lib.report.progress import track
from workflow_lib.report.settings import PLOT_PROTEINS
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.report import RUNTIME, SUMMARY
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.msa import read_a3m

LOG = logging.getLogger(__name__)

PLOTS = ("msa_coverage.png", "plddt_per_residue.png", "distributions.png", "neff_vs_plddt.png", "runtime.png")
"""The PNG files written to ``--plots-dir`` (the report rule declares them)."""


def _stages(text: str) -> list[str]:
    stages = [s for s in (part.strip() for part in text.split(",")) if s]
    unknown = sorted(set(stages) - set(OPTIONAL_STAGES))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown stage(s) {unknown}; known: {', '.join(OPTIONAL_STAGES)}")
    return stages


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "summarize", help="per-proteome summary table, runtime table and report plots",
        description="Gather a proteome's chunk plan, MSA statistics, template hits, per-residue pLDDT and "
                    "benchmark files into summary.parquet (columns of absent stages are null) and plots.")
    parser.add_argument("--results", required=True, help="the workflow's results folder")
    parser.add_argument("--proteome", required=True, help="proteome name (results/NAME/)")
    parser.add_argument("--out", required=True, help="summary table (Parquet)")
    parser.add_argument("--tsv", help="the summary's results as a tab-separated table (no run times, so two runs "
                                      "of one configuration write the same file); empty cells are null")
    parser.add_argument("--runtime-out", help="runtime table, one row per benchmarked job (Parquet)")
    parser.add_argument("--logs", help="the workflow's logs folder: each job's CPU and peak memory from the "
                                       "resources line its command logged (exact), else from its benchmark file")
    parser.add_argument("--plots-dir", help=f"write the report PNGs here ({', '.join(PLOTS)})")
    parser.add_argument("--require", type=_stages, default=[],
                        help="comma-separated stages that must have a file for every protein "
                             f"({', '.join(OPTIONAL_STAGES)})")
    parser.add_argument("--pages-dir", help="write the HTML pages here: index.html (every protein) and "
                                            "proteins/{safe_id}.html (MSA, template hits, pLDDT, links to files)")
    parser.add_argument("--cpus", type=int, default=1,
                        help="processes writing the protein pages (the pages do not depend on it; default "
                             "%(default)s)")
    parser.add_argument("--plot-proteins", type=int, default=PLOT_PROTEINS,
                        help="proteins in the per-protein plots, those given with --protein included "
                             "(default %(default)s)")
    parser.add_argument("--protein", action="append", default=[],
                        help="a protein (FASTA or safe ID) to include in the per-protein plots; repeatable")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    results = Path(args.results)
    if not (results / args.proteome / "chunks" / "chunks.parquet").exists():
        raise InputError(f"no chunk table for proteome '{args.proteome}' under {results} "
                         f"(expected {results / args.proteome / 'chunks' / 'chunks.parquet'})")
    others = [p.parent.parent.name for p in results.glob("*/chunks/chunks.parquet")]
    summary, runtime = build_summary(results, args.proteome, require=args.require, other_proteomes=others,
                                     logs=args.logs)
    write_table(args.out, summary, SUMMARY)
    if args.tsv:
        results_only = summary[[column for column in summary.columns if not is_measured(column)]]
        write_text_atomic(args.tsv, results_only.to_csv(sep="\t", index=False, na_rep="", float_format="%.4g"))
    if args.runtime_out:
        write_table(args.runtime_out, runtime, RUNTIME)
    if args.plots_dir:
        write_plots(results, args.proteome, summary, runtime, Path(args.plots_dir),
                    count=args.plot_proteins, wanted=args.protein)
    if args.pages_dir:
        pages = write_pages(results, args.proteome, summary, args.pages_dir, cpus=args.cpus)
        LOG.info("wrote %d protein pages and %s", pages, Path(args.pages_dir) / "index.html")
    LOG.info("wrote %s (%d proteins)", args.out, len(summary))
    return 0


def write_plots(results: Path, proteome: str, summary, runtime, out_dir: Path, *, count: int,
                wanted: list[str]) -> None:
    """The report PNGs of one proteome; per-protein panels for :func:`plots.select_proteins`."""
    selected = plots.select_proteins(summary, count, wanted)
    alignments = {}
    plddt = {}
    for safe_id in track(selected, "per-protein plot data", unit="proteins"):
        a3m = a3m_path(results, proteome, safe_id)
        if a3m.exists():
            alignments[safe_id] = read_a3m(a3m)
        residues = residues_path(results, proteome, safe_id)
        if residues.exists():
            plddt[safe_id] = read_plddt(residues)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots.plot_msa_coverage(alignments, out_dir / "msa_coverage.png")
    plots.plot_plddt_per_residue(plddt, out_dir / "plddt_per_residue.png")
    plots.plot_distributions(summary, out_dir / "distributions.png")
    plots.plot_neff_vs_plddt(summary, out_dir / "neff_vs_plddt.png")
    plots.plot_runtime(runtime, out_dir / "runtime.png")
