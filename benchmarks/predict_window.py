"""The crop-and-stitch window: accuracy and CPU of windows of several sizes, and of one pass over the whole
chain, on held-out chains with known structures.

    python benchmarks/predict_window.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB
        --structures pdb_chains_promod3/backbone.npz --chains CHAINS.parquet [--min-length 330]
        [--max-length 0] [--every 1] [--windows 128,300,512] [--checkpoint models/trackfold_small_v4.pt]
        [--results-md benchmarks/RESULTS.md]

A protein longer than ``predict.window`` is cut into ``window // 2``-residue segments and every pair of segments
is one network call (:mod:`workflow_lib.inference.stitch`; window 300: 3 calls at 301-450 residues, 6 up to
600); a window at least the chain's length is one pass over the whole chain. This benchmark chose the default
window (128, the checkpoint's training crop).

Chains: the rows of ``--chains`` (a training run's ``chains.parquet``) in the validation split with at least
``--min-length`` residues, whose A3M (``{name}.a3m`` anywhere under ``--a3m-dir``) and template hits
(``{name}.hits.parquet`` in ``--hits-dir``) exist. Features are built as the workflow builds them, with the
chain's usable template hits: never the chain itself and none above 90% sequence identity (a homologue, not the
answer). Each window setting predicts the chain the way a proteome run does (``fold: distogram``, no 6D maps
kept) in one process on one torch thread; CPU seconds (``time.process_time``), lDDT-Cα and TM-score of the
folded backbone against the chain's PDB backbone, and mean pLDDT are reported. Writes the section
"Structure prediction: crop-and-stitch windows W on validation chains of L residues" (one per run; the section
"the crop-and-stitch window" of RESULTS.md is put together from several runs).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.features.templates import read_hits  # noqa: E402
from workflow_lib.inference.confidence import PlddtCalibration  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_group  # noqa: E402
from workflow_lib.inference.stitch import crop_plan  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.schemas.io import write_table  # noqa: E402
from workflow_lib.schemas.templates import TEMPLATE_HITS  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.workflow.config import FeatureConfig  # noqa: E402

SECTION = "## Structure prediction: crop-and-stitch windows {windows} on validation chains of {span} residues"
MAX_TEMPLATE_IDENTITY = 0.9


def chains_to_run(chains: Path, a3m_dir: Path, hits_dir: Path, min_length: int, max_length: int = 0,
                  every: int = 1) -> list[tuple[str, int, Path, Path]]:
    """Validation chains of ``min_length`` to ``max_length`` (0: any) residues with an A3M and a hits table, by
    length (ties by name); every ``every``-th of them."""
    table = pd.read_parquet(chains, columns=["name", "length", "split"])
    table = table[(table["split"] == "validation") & (table["length"] >= min_length)
                  & ((table["length"] <= max_length) | (max_length == 0))]
    a3ms = {path.stem: path for path in a3m_dir.rglob("*.a3m")}
    found = []
    for name, length in zip(table["name"], table["length"]):
        hits = hits_dir / f"{name}.hits.parquet"
        if name in a3ms and hits.exists():
            found.append((str(name), int(length), a3ms[name], hits))
    if not found:
        raise SystemExit(f"predict_window: no validation chain of >= {min_length} residues with an A3M under "
                         f"{a3m_dir} and hits in {hits_dir}")
    return sorted(found, key=lambda item: (item[1], item[0]))[::every]


def usable_hits(path: Path, name: str, out_dir: Path) -> Path:
    """The chain's hits without itself and without hits above :data:`MAX_TEMPLATE_IDENTITY`, as a new table."""
    hits = read_hits(path)
    keep = hits[(hits["template"] != name) & (hits["identity"] <= MAX_TEMPLATE_IDENTITY)].copy()
    keep["rank"] = np.arange(1, len(keep) + 1)
    out = out_dir / f"{name}.hits.parquet"
    write_table(out, keep, TEMPLATE_HITS)
    return out


def add_chain_arguments(parser: argparse.ArgumentParser) -> None:
    """The inputs that pick validation chains and build their features (:func:`chains_to_run`)."""
    parser.add_argument("--a3m-dir", type=Path, required=True)
    parser.add_argument("--hits-dir", type=Path, required=True)
    parser.add_argument("--templates", type=Path, required=True, help="template database (trackfold templates build)")
    parser.add_argument("--structures", type=Path, required=True, help="backbone archive of the chains")
    parser.add_argument("--chains", type=Path, required=True, help="a training run's chains.parquet")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_chain_arguments(parser)
    parser.add_argument("--min-length", type=int, default=330)
    parser.add_argument("--max-length", type=int, default=0, help="longest chain (0: any)")
    parser.add_argument("--every", type=int, default=1, help="every N-th of those chains by length")
    parser.add_argument("--windows", default="128,300,512", help="comma-separated predict.window settings")
    parser.add_argument("--max-templates", type=int, default=FeatureConfig().max_templates,
                        help="template hits per chain (default: the workflow's features.max_templates)")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    windows = [int(value) for value in args.windows.split(",")]
    torch.set_num_threads(1)
    model, extra = load_checkpoint(args.checkpoint)
    calibration = PlddtCalibration.from_extra(extra)   # pLDDT as `trackfold predict` writes it
    database = load_template_db(args.templates)
    chains = chains_to_run(args.chains, args.a3m_dir, args.hits_dir, args.min_length, args.max_length,
                           args.every)
    natives = {entry.chain.name: entry.chain for entry in
               read_backbone_archive(args.structures, names={name for name, *_ in chains})}
    lines, rows = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for name, length, a3m, hits in chains:
            native = natives.get(name)
            if native is None:
                raise SystemExit(f"predict_window: {name} is not in {args.structures}")
            features = build_features(a3m, templates=database, template_hits=usable_hits(hits, name, Path(scratch)),
                                      max_templates=args.max_templates)
            if features["msa"].shape[1] != len(native.sequence):
                raise SystemExit(f"predict_window: {name}: the A3M query has {features['msa'].shape[1]} residues, "
                                 f"the structure {len(native.sequence)}")
            true_ca = native.coords[:, 1].astype(np.float64)
            present = np.isfinite(true_ca).all(axis=1)
            row = {"chain": name, "length": length, "templates": int(features["template_mask"].size)}
            for window in windows:
                start = time.process_time()
                ((_, prediction),) = predict_group(model, [(name, features)],
                                                   PredictOptions(window=window, fold="distogram", pair_heads=()),
                                                   calibration=calibration)
                seconds = time.process_time() - start
                ca = prediction.backbone[:, 1].astype(np.float64)
                row[window] = {"calls": len(crop_plan(length, window)), "seconds": seconds,
                               "lddt": float(lddt_ca(ca, true_ca, present).score),
                               "tm": tm_score(ca, true_ca, present), "plddt": float(prediction.plddt.mean())}
            rows.append(row)
            lines.append(f"| {name} | {length} | {row['templates']} | "
                         + " | ".join(f"{row[w]['calls']}" for w in windows) + " | "
                         + " | ".join(f"{row[w]['lddt']:.3f} / {row[w]['tm']:.3f}" for w in windows) + " | "
                         + " | ".join(f"{row[w]['plddt']:.1f}" for w in windows) + " | "
                         + " | ".join(f"{row[w]['seconds']:.1f}" for w in windows) + " |")
            print(lines[-1], flush=True)
    mean = {w: {key: float(np.mean([row[w][key] for row in rows])) for key in ("lddt", "tm", "plddt")}
            for w in windows}
    total = {w: sum(row[w]["seconds"] for row in rows) for w in windows}
    first, last = windows[0], windows[-1]
    better = sum(row[last]["lddt"] > row[first]["lddt"] for row in rows)
    header = ("| chain | L | templates | " + " | ".join(f"calls, window {w}" for w in windows) + " | "
              + " | ".join(f"lDDT-Cα / TM, window {w}" for w in windows) + " | "
              + " | ".join(f"pLDDT, window {w}" for w in windows) + " | "
              + " | ".join(f"CPU s, window {w}" for w in windows) + " |")
    span = f"{args.min_length}-{args.max_length}" if args.max_length else f"at least {args.min_length}"
    body = "\n".join([
        f"`python benchmarks/predict_window.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB --structures "
        f"STRUCTURES --chains CHAINS.parquet --min-length {args.min_length} --max-length {args.max_length} --every "
        f"{args.every} --max-templates {args.max_templates} --windows {args.windows}`, written "
        f"{datetime.now():%Y-%m-%d %H:%M}: {len(rows)} validation chains of {span} residues"
        + ("" if args.every == 1 else f" (every {args.every}th by length)")
        + f", up to {args.max_templates} template hits each (never the chain itself, none above "
        f"{MAX_TEMPLATE_IDENTITY:.0%} identity), checkpoint `{args.checkpoint.name}`, `fold: distogram`, no 6D maps "
        f"kept; lDDT-Cα and TM-score of the folded backbone against the chain's PDB backbone over its whole length; "
        f"one torch thread, {platform.machine()}, torch {torch.__version__}; CPU seconds of one process.",
        "",
        header,
        "|" + "---|" * (3 + 4 * len(windows)),
        *lines,
        "| " + " | ".join(["**mean**", "", ""] + [""] * len(windows)
                          + [f"**{mean[w]['lddt']:.3f} / {mean[w]['tm']:.3f}**" for w in windows]
                          + [f"{mean[w]['plddt']:.1f}" for w in windows]
                          + [f"**{total[w]:.0f}** (total)" for w in windows]) + " |",
        "",
        f"- Window {last} against {first}: lDDT-Cα higher on {better} of {len(rows)} chains; CPU "
        f"{total[first] / total[last]:.2f}x of window {last}'s for window {first}.",
    ])
    publish(body, args.results_md, SECTION.format(windows=", ".join(str(w) for w in windows), span=span))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
