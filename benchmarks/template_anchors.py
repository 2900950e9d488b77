"""Template anchors in the fold, on whole validation chains: the fold from the restrained distogram alone against
the same fold with the best template's own Cα–Cα distances held (``predict.template_anchor``), beside the template's
coordinates copied.

    python benchmarks/template_anchors.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB
        --structures pdb_chains_promod3/backbone.npz --chains CHAINS.parquet --work WORK
        [--anchors 0,3,6] [--model models/trackfold_lite_v1.pt] [--results-md benchmarks/RESULTS.md]

Per validation chain of a training run's ``chains.parquet`` with an A3M and a hits table (the chain itself and
hits above 90% identity left out, as ``benchmarks/predict_cost.py`` does), features with up to 2 templates, one
network pass as ``trackfold predict`` runs it (window 128, ``crop_pairs: contacts``), then the fold from the
distogram with the template restraints of ``predict.template_weight`` and each anchor weight of ``--anchors``
(:func:`workflow_lib.inference.template_restraints.fold_anchors`; 0: none). The network's outputs and the first
template's Cα are cached in ``--work`` (one npz per chain), so settings can be added without another pass. Scores:
lDDT-Cα and TM-score over the whole chain; the copy baseline places the first template's aligned Cα on the
query's residues (an unplaced residue scores 0). Regimes by the first template's identical residues over the
query's length (the identity the anchors and restraints are scaled by). Fold CPU seconds per chain, one thread.
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
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_window import add_chain_arguments, chains_to_run, usable_hits  # noqa: E402
from search_bench.report import publish  # noqa: E402
from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.features.template_maps import template_ca  # noqa: E402
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram, template_anchors  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_group  # noqa: E402
from workflow_lib.inference.settings import DEFAULT_TEMPLATE_WEIGHT, default_model_path  # noqa: E402
from workflow_lib.inference.template_restraints import (restrained_distogram, restraint_weight,  # noqa: E402
                                                        template_identity)
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402

SECTION = "## Structure prediction: template anchors in the fold (validation chains)"
BINS = ((0.0, 0.2, "< 20%"), (0.2, 0.3, "20–30%"), (0.3, 0.5, "30–50%"), (0.5, 1.01, "≥ 50%"))


def network_outputs(model, name: str, a3m: Path, hits: Path, database, cache: Path) -> dict | None:
    """The chain's restrained distogram, covered pairs, template identity and first template's Cα (cached);
    None when it has no usable template."""
    if not cache.exists():
        with tempfile.TemporaryDirectory() as scratch:
            features = build_features(a3m, templates=database, template_hits=usable_hits(hits, name, Path(scratch)),
                                      max_templates=2)
        if not features["template_mask"].size:
            np.savez(cache, none=np.zeros(0))
            return None
        ((_, raw),) = predict_group(model, [(name, features)], PredictOptions(fold="network", pair_heads=("dist",)))
        length = features["msa"].shape[1]
        covered = raw.covered if raw.covered is not None else np.ones((length, length), dtype=bool)
        np.savez_compressed(cache, restr=restrained_distogram(raw.probs["dist"], features,
                                                              DEFAULT_TEMPLATE_WEIGHT).astype(np.float32),
                            covered=covered, identity=template_identity(features),
                            tca=template_ca(features)[0])
    with np.load(cache) as data:
        return None if "restr" not in data else {key: data[key] for key in data.files}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_chain_arguments(parser)
    parser.add_argument("--work", type=Path, required=True, help="cache of the network outputs (npz per chain)")
    parser.add_argument("--anchors", default="0,3,6", help="comma-separated predict.template_anchor weights")
    parser.add_argument("--model", type=Path, default=default_model_path())
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    weights = [float(w) for w in args.anchors.split(",")]
    model, _ = load_checkpoint(args.model)
    model.eval()
    database = load_template_db(args.templates)
    chains = chains_to_run(args.chains, args.a3m_dir, args.hits_dir, 0)
    natives = {e.chain.name: e.chain for e in read_backbone_archive(args.structures, names={c[0] for c in chains})}
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, length, a3m, hits in chains:
        out = network_outputs(model, name, a3m, hits, database, args.work / f"{name}.npz")
        if out is None:
            continue
        true_ca = natives[name].coords[:, 1].astype(np.float64)
        present = np.isfinite(true_ca).all(axis=1)
        reference = out["tca"].astype(np.float64)
        row = {"chain": name, "identity": float(out["identity"]),
               "copy": float(lddt_ca(reference, true_ca, present).score)}
        for weight in weights:
            began = time.process_time()
            anchors = template_anchors(reference, restraint_weight(row["identity"], weight))
            backbone, _ = fold_from_distogram(out["restr"], FoldOptions(), covered=out["covered"], anchors=anchors)
            row[weight] = (float(lddt_ca(backbone[:, 1], true_ca, present).score),
                           float(tm_score(backbone[:, 1], true_ca, present)), time.process_time() - began)
        rows.append(row)
        print(name, length, f"{row['identity']:.2f}", " ".join(f"{w:g}:{row[w][0]:.3f}" for w in weights), flush=True)
    lines = [f"`python benchmarks/template_anchors.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB "
             f"--structures STRUCTURES --chains CHAINS.parquet --work WORK --anchors {args.anchors} --model "
             f"{args.model.name}`, written {datetime.now():%Y-%m-%d}: the {len(rows)} validation chains with a "
             f"usable template (whole chains, up to 2 templates, the template restraints at their default weight "
             f"{DEFAULT_TEMPLATE_WEIGHT:g}); one torch thread, {platform.machine()}, torch {torch.__version__}. "
             f"lDDT-Cα / TM-score (paired Δ lDDT-Cα against the first setting ± its standard error); anchors: "
             f"`predict.template_anchor`; then the fold's CPU s per chain.", "",
             "| first template's identity | chains | template copied (lDDT-Cα) | "
             + " | ".join(f"anchors {w:g}" for w in weights) + " |",
             "|---|---|---|" + "---|" * len(weights)]
    for low, high, label in BINS + ((0.0, 1.01, "all"),):
        chosen = [r for r in rows if low <= r["identity"] < high]
        if not chosen:
            continue
        cells = []
        for weight in weights:
            lddt, tm, cpu = (np.mean([r[weight][k] for r in chosen]) for k in range(3))
            cell = f"{lddt:.3f} / {tm:.3f}"
            if weight != weights[0]:
                delta = np.array([r[weight][0] - r[weights[0]][0] for r in chosen])
                se = delta.std(ddof=1) / np.sqrt(len(delta)) if len(delta) > 1 else float("nan")
                cell += f" ({delta.mean():+.3f} ± {se:.3f})"
            cells.append(cell + f"; {cpu:.2f} s")
        lines.append(f"| {label} | {len(chosen)} | {np.mean([r['copy'] for r in chosen]):.3f} | "
                     + " | ".join(cells) + " |")
    publish("\n".join(lines) + "\n", args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
