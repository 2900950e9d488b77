"""A proteome run's predictions against the proteins' own PDB structures, and how well pLDDT ranks them.

    python benchmarks/proteome_known_structures.py --results RESULTS --proteome ecoli [--templates TEMPLATE_DB]
        [--receipt-window 128] [--checkpoint CKPT] [--min-identity 0.95] [--min-coverage 0.5]
        [--results-md benchmarks/RESULTS.md]

A proteome has no answer key, but some of its proteins were solved: the template search finds their own chain
among the PDB chains. For every protein with a finished prediction (its ``{protein}.predict.done.json`` receipt;
with ``--receipt-window W`` only receipts of that window or of proteins that fit one pass, with ``--checkpoint``
only those of that checkpoint), the best-ranked
template hit with at least ``--min-identity`` sequence identity whose structure places at least
``--min-coverage`` of the protein's residues (and 30) stands for its structure. The hit's alignment lays the
template's Cα on the protein's residues (:func:`workflow_lib.features.templates.hit_columns`, as the features
do); the predicted backbone (``{protein}.pred.npz``) is scored on those residues: lDDT-Cα and TM-score (residue i
to residue i, normalised by the placed residues).

This is what a user of the run gets for a solved protein, not a blind test: that chain was one of the protein's
template hits, and those at rank ``features.max_templates`` or better (``--max-templates``) were the network's
input. The proteins are split by that. Per residue, the prediction's pLDDT is set against its lDDT-Cα: mean lDDT
per pLDDT band (AlphaFold DB's bands) and the rank correlation, which says whether a user can filter a proteome
by pLDDT. Writes the section "Proteome end to end: {proteome} predictions against their own PDB structures".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.features.templates import hit_columns, read_hits  # noqa: E402
from workflow_lib.seqio.receipts import file_fingerprint  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.workflow.config import FeatureConfig  # noqa: E402

SECTION = "## Proteome end to end: {proteome} predictions against their own PDB structures"
PLDDT_BANDS = ((0.0, 50.0, "< 50"), (50.0, 70.0, "50-70"), (70.0, 90.0, "70-90"), (90.0, 101.0, "≥ 90"))
"""AlphaFold DB's confidence bands (very low, low, confident, very high)."""
MIN_PLACED = 30


def finished_predictions(structures: Path, window: int | None, model: str | None) -> list[str]:
    """Proteins with a prediction receipt (of ``window`` or of a protein that fits one pass, and of the checkpoint
    with fingerprint ``model``, when given)."""
    names = []
    for path in sorted(structures.glob("*.predict.done.json")):
        key = json.loads(path.read_text())["key"]
        if window is not None and key["settings"].get("window") not in (None, window):
            continue
        if model is not None and key["inputs"].get("model") != model:
            continue
        names.append(path.name[: -len(".predict.done.json")])
    return names


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ (average ranks for ties)."""
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    return float(np.corrcoef(rx, ry)[0, 1])


def score_protein(name: str, results: Path, proteome: str, database, min_identity: float,
                  min_coverage: float) -> dict | None:
    """The protein's prediction scored against its best own-structure hit; None when it has none."""
    hits_path = results / proteome / "templates" / f"{name}.hits.parquet"
    if not hits_path.exists():
        return None
    hits = read_hits(hits_path)
    hits = hits[hits["identity"] >= min_identity].sort_values("rank")
    if hits.empty:
        return None
    prediction = np.load(results / proteome / "structures" / f"{name}.pred.npz")
    codes = prediction["aatype"]
    length = codes.shape[0]
    for _, row in hits.iterrows():
        columns = hit_columns(row, database, codes, where=hits_path)
        true_ca = columns.coords[:, 1].astype(np.float64)
        placed = columns.placed & np.isfinite(true_ca).all(axis=1)
        if placed.sum() >= max(MIN_PLACED, min_coverage * length):
            break
    else:
        return None
    pred_ca = prediction["backbone"][:, 1].astype(np.float64)
    lddt = lddt_ca(pred_ca, true_ca, placed)
    return {"protein": name, "length": length, "template": str(row["template"]), "rank": int(row["rank"]),
            "identity": float(row["identity"]), "placed": int(placed.sum()),
            "lddt": float(lddt.score), "tm": float(tm_score(pred_ca, true_ca, placed)),
            "plddt": float(prediction["plddt"][placed].mean()),
            "residue_plddt": prediction["plddt"][placed].astype(np.float64),
            "residue_lddt": lddt.per_residue[placed]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="the workflow's results folder")
    parser.add_argument("--proteome", required=True)
    parser.add_argument("--templates", type=Path, help="template database (default: RESULTS/templates/pdb)")
    parser.add_argument("--receipt-window", type=int, help="count only prediction receipts of this window")
    parser.add_argument("--checkpoint", type=Path, help="count only predictions made with this checkpoint")
    parser.add_argument("--min-identity", type=float, default=0.95)
    parser.add_argument("--min-coverage", type=float, default=0.5,
                        help="fraction of the protein's residues the hit must place")
    parser.add_argument("--max-templates", type=int, default=FeatureConfig().max_templates,
                        help="the run's features.max_templates (hits at this rank or better were inputs)")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    database = load_template_db(args.templates or args.results / "templates" / "pdb")
    names = finished_predictions(args.results / args.proteome / "structures", args.receipt_window,
                                 None if args.checkpoint is None else file_fingerprint(args.checkpoint))
    if not names:
        raise SystemExit(f"proteome_known_structures: no finished prediction in "
                         f"{args.results / args.proteome / 'structures'}")
    rows = [row for name in names
            if (row := score_protein(name, args.results, args.proteome, database, args.min_identity,
                                     args.min_coverage)) is not None]
    if not rows:
        raise SystemExit("proteome_known_structures: no finished protein has its own structure among the hits")
    table = pd.DataFrame([{key: value for key, value in row.items() if not key.startswith("residue_")}
                          for row in rows])
    residue_plddt = np.concatenate([row["residue_plddt"] for row in rows])
    residue_lddt = np.concatenate([row["residue_lddt"] for row in rows])
    scored = np.isfinite(residue_lddt)
    residue_plddt, residue_lddt = residue_plddt[scored], residue_lddt[scored]

    def summary(part: pd.DataFrame, label: str) -> str:
        if part.empty:
            return f"| {label} | 0 | | | | | | |"
        return (f"| {label} | {len(part):,} | {part['placed'].median():.0f} | {part['lddt'].mean():.3f} | "
                f"{part['tm'].mean():.3f} | {(part['tm'] >= 0.5).mean():.0%} | {part['plddt'].mean():.1f} | "
                f"{rank_correlation(part['plddt'].to_numpy(), part['lddt'].to_numpy()):.2f} |")

    used = table["rank"] <= args.max_templates
    band_lines = []
    for low, high, label in PLDDT_BANDS:
        inside = (residue_plddt >= low) & (residue_plddt < high)
        band_lines.append(f"| {label} | {inside.mean():.0%} | "
                          + (f"{residue_lddt[inside].mean():.3f} |" if inside.any() else "- |"))
    body = "\n".join([
        f"`python benchmarks/proteome_known_structures.py --results RESULTS --proteome {args.proteome}"
        + (f" --receipt-window {args.receipt_window}" if args.receipt_window else "")
        + (f" --checkpoint {args.checkpoint.name}" if args.checkpoint else "")
        + f" --min-identity {args.min_identity} --min-coverage {args.min_coverage} --max-templates "
        f"{args.max_templates}`: of {len(names):,} finished predictions, {len(table):,} proteins whose own "
        f"structure (a template hit of ≥ {args.min_identity:.0%} identity placing ≥ {args.min_coverage:.0%} of "
        f"the residues) is among the PDB chains; scored on the residues that hit places. Not a blind test: the "
        f"hit was a template input when its rank was ≤ {args.max_templates}.",
        "",
        "| proteins | n | placed residues (median) | lDDT-Cα | TM-score | TM ≥ 0.5 | mean pLDDT | ρ(pLDDT, lDDT) |",
        "|---|---|---|---|---|---|---|---|",
        summary(table, "all"),
        summary(table[used], f"own structure a template input (rank ≤ {args.max_templates})"),
        summary(table[~used], f"own structure ranked below {args.max_templates}"),
        "",
        f"Per residue ({scored.sum():,} residues): ρ(pLDDT, lDDT-Cα) = "
        f"{rank_correlation(residue_plddt, residue_lddt):.2f}.",
        "",
        "| pLDDT | residues | mean lDDT-Cα |",
        "|---|---|---|",
        *band_lines,
    ])
    publish(body, args.results_md, SECTION.format(proteome=args.proteome))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
