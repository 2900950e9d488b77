"""Fit, cross-validate and store the pLDDT calibration of a checkpoint on held-out chains of known structure.

    python benchmarks/plddt_calibration.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB
        --structures pdb_chains_promod3/backbone.npz --chains CHAINS.parquet --work WORK [--every 2]
        [--checkpoint models/trackfold_small_v4.pt] [--write-checkpoint OUT.pt] [--name NAME]
        [--results-md benchmarks/RESULTS.md]

With ``fold: distogram`` a prediction's confidence is the lDDT its folded backbone expects under the predicted
distogram (:func:`workflow_lib.inference.confidence.expected_lddt`). It ranks residues and chains by accuracy
but reads low, so this script fits the monotone map from it to the real lDDT-Cα
(:func:`~workflow_lib.inference.confidence.fit_calibration`) and stores it in the checkpoint's metadata, where
``trackfold predict`` finds it (:class:`~workflow_lib.inference.confidence.PlddtCalibration`).

Chains: every ``--every``-th (by length) of the validation split of a training run's ``chains.parquet`` (never
trained on) with an A3M (``{name}.a3m`` under ``--a3m-dir``) and template hits (``{name}.hits.parquet`` in
``--hits-dir``), at full length. The chains alternate, two by two, between two template regimes that a
proteome run meets: *remote* (the chain's hits without itself and none above 90% identity) and *as searched*
(its hits as the template search returned them: a solved protein finds its own chain). Each goes through the
product's predict path (default window, ``fold: distogram``, no calibration); per residue the expected lDDT and
the real lDDT-Cα of the folded backbone against the PDB backbone are kept in ``WORK/{chain}.npz`` (a rerun
reuses them when the checkpoint, the regime and the template count are the same).

Cross-validation: chains at even and odd positions form two halves; a calibration fitted on one half is scored on
the other (mean absolute error per residue and of the per-chain mean, and the real lDDT-Cα of the residues in
each of AlphaFold DB's pLDDT bands). The calibration written is fitted on all chains. Writes the section
"pLDDT calibration: {checkpoint} on validation chains".
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from predict_window import MAX_TEMPLATE_IDENTITY, add_chain_arguments, chains_to_run, usable_hits  # noqa: E402
from search_bench.report import publish  # noqa: E402
from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.inference.confidence import CALIBRATION_KEY, PlddtCalibration, fit_calibration  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_group  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from workflow_lib.seqio.atomic import atomic_path  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.workflow.config import FeatureConfig  # noqa: E402

SECTION = "## pLDDT calibration: {checkpoint} on validation chains"
BANDS = ((0.0, 50.0, "< 50"), (50.0, 70.0, "50-70"), (70.0, 90.0, "70-90"), (90.0, 101.0, "≥ 90"))
"""AlphaFold DB's pLDDT bands (very low, low, confident, very high)."""
REGIMES = ("remote", "as searched")


def collect(args: argparse.Namespace, model) -> list[dict]:
    """Per chain: name, regime, half, expected lDDT and real lDDT-Cα per residue (cached in ``--work``)."""
    chains = chains_to_run(args.chains, args.a3m_dir, args.hits_dir, args.min_length, 0, args.every)
    fingerprint = weights_fingerprint(model)
    args.work.mkdir(parents=True, exist_ok=True)
    database = None
    natives = None
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k, (name, length, a3m, hits) in enumerate(chains):
            regime = REGIMES[(k // 2) % 2]
            cache = args.work / f"{name}.npz"
            stamp = f"{fingerprint} {regime} {args.max_templates}"
            if cache.exists():
                with np.load(cache) as data:
                    stale = "stamp" not in data or str(data["stamp"]) != stamp   # other weights, regime, templates
                if stale:
                    cache.unlink()
            if not cache.exists():
                if database is None:
                    database = load_template_db(args.templates)
                    natives = {entry.chain.name: entry.chain for entry in
                               read_backbone_archive(args.structures, names={c[0] for c in chains})}
                if name not in natives:
                    raise SystemExit(f"plddt_calibration: {name} is not in {args.structures}")
                native = natives[name]
                hit_table = usable_hits(hits, name, Path(scratch)) if regime == "remote" else hits
                features = build_features(a3m, templates=database, template_hits=hit_table,
                                          max_templates=args.max_templates)
                ((_, prediction),) = predict_group(model, [(name, features)],
                                                   PredictOptions(fold="distogram", pair_heads=()))
                true_ca = native.coords[:, 1].astype(np.float64)
                present = np.isfinite(true_ca).all(axis=1)
                lddt = lddt_ca(prediction.backbone[:, 1].astype(np.float64), true_ca, present).per_residue
                with atomic_path(cache) as tmp, open(tmp, "wb") as handle:
                    np.savez(handle, expected=prediction.plddt.astype(np.float64) / 100.0, lddt=lddt,
                             stamp=np.array(stamp))
                print(f"{name} L={length} {regime}: expected {prediction.plddt.mean() / 100:.3f}, "
                      f"real {np.nanmean(lddt):.3f}", flush=True)
            with np.load(cache) as data:
                rows.append({"chain": name, "length": length, "regime": regime, "half": k % 2,
                             "expected": data["expected"], "lddt": data["lddt"]})
    return rows


def score(rows: list[dict], calibration: PlddtCalibration | None) -> dict:
    """Errors and bands of ``rows`` under ``calibration`` (None: the expected lDDT as it is)."""
    predicted, real, chain_errors = [], [], []
    for row in rows:
        keep = np.isfinite(row["lddt"])
        value = row["expected"][keep] if calibration is None else calibration(row["expected"][keep])
        predicted.append(np.asarray(value, dtype=np.float64))
        real.append(row["lddt"][keep])
        chain_errors.append(abs(float(predicted[-1].mean()) - float(real[-1].mean())))
    predicted, real = 100.0 * np.concatenate(predicted), np.concatenate(real)
    bands = []
    for low, high, _ in BANDS:
        inside = (predicted >= low) & (predicted < high)
        bands.append((float(inside.mean()), float(real[inside].mean()) if inside.any() else float("nan")))
    return {"residue_mae": float(np.abs(predicted / 100.0 - real).mean()), "chain_mae": float(np.mean(chain_errors)),
            "mean": float(predicted.mean() / 100.0), "real": float(real.mean()), "bands": bands,
            "residues": int(real.size)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_chain_arguments(parser)
    parser.add_argument("--work", type=Path, required=True, help="folder for the per-chain results (resumable)")
    parser.add_argument("--min-length", type=int, default=40)
    parser.add_argument("--every", type=int, default=2, help="every N-th validation chain by length")
    parser.add_argument("--knots", type=int, default=40, help="knots of the calibration (groups of residues)")
    parser.add_argument("--max-templates", type=int, default=FeatureConfig().max_templates)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--write-checkpoint", type=Path, help="write the checkpoint with the calibration here")
    parser.add_argument("--name", help="the checkpoint's name in the section heading (default: its file name)")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, extra = load_checkpoint(args.checkpoint)
    name = args.name or args.checkpoint.name
    rows = collect(args, model)
    halves = [[row for row in rows if row["half"] == h] for h in (0, 1)]
    cross = []
    for fit_half, test_half in ((0, 1), (1, 0)):
        fitted = fit_calibration(np.concatenate([r["expected"] for r in halves[fit_half]]),
                                 np.concatenate([r["lddt"] for r in halves[fit_half]]), bins=args.knots)
        cross.extend((row, fitted) for row in halves[test_half])
    calibration = fit_calibration(np.concatenate([r["expected"] for r in rows]),
                                  np.concatenate([r["lddt"] for r in rows]), bins=args.knots)

    def held_out(regime: str | None) -> tuple[dict, dict]:
        chosen = [(row, fitted) for row, fitted in cross if regime in (None, row["regime"])]
        raw = score([row for row, _ in chosen], None)
        predicted_rows = [dict(row, expected=np.asarray(fitted(row["expected"]), dtype=np.float64))
                          for row, fitted in chosen]
        return raw, score(predicted_rows, None)

    lines = []
    for regime in (None, *REGIMES):
        raw, calibrated = held_out(regime)
        label = "all" if regime is None else regime
        count = sum(1 for row in rows if regime in (None, row["regime"]))
        for kind, result in (("expected lDDT", raw), ("calibrated", calibrated)):
            lines.append(f"| {label} | {count} | {kind} | {result['real']:.3f} | {result['mean']:.3f} | "
                         f"{result['residue_mae']:.3f} | {result['chain_mae']:.3f} | "
                         + " | ".join(f"{share:.0%}: {value:.2f}" if share else "-" for share, value in result["bands"])
                         + " |")
    knots = ", ".join(f"{x:.2f}→{y:.2f}" for x, y in zip(calibration.expected[::4], calibration.lddt[::4]))
    body = "\n".join([
        f"`python benchmarks/plddt_calibration.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB "
        f"--structures STRUCTURES --chains CHAINS.parquet --work WORK --every {args.every} --knots {args.knots} "
        f"--checkpoint {name}`, written {datetime.now():%Y-%m-%d %H:%M}: {len(rows)} validation "
        f"chains of {min(r['length'] for r in rows)}-{max(r['length'] for r in rows)} residues at full length "
        f"(every {ordinal(args.every)} by length; {sum(r['regime'] == 'remote' for r in rows)} with remote "
        f"templates only "
        f"(never the chain itself, none above {MAX_TEMPLATE_IDENTITY:.0%} identity), the others with their hits as "
        f"searched, own chain included; up to {args.max_templates} templates), the predict path's defaults "
        f"(`fold: distogram`). Held out: each half of the chains scored with the calibration fitted on the other "
        f"half. Band cells: share of residues in the pLDDT band, then their real lDDT-Cα.",
        "",
        "| chains | n | pLDDT | real lDDT-Cα | mean pLDDT / 100 | MAE per residue | MAE of chain means | "
        + " | ".join(f"pLDDT {label}" for _, _, label in BANDS) + " |",
        "|" + "---|" * (7 + len(BANDS)),
        *lines,
        "",
        f"- The calibration stored (fitted on all {len(rows)} chains, {calibration_residues(rows):,} residues, "
        f"{len(calibration.expected)} knots; every 4th shown, expected → real): {knots}.",
    ])
    publish(body, args.results_md, SECTION.format(checkpoint=name))
    if args.write_checkpoint:
        metadata = {key: repo_relative(value) for key, value in extra.items()}
        save_checkpoint(args.write_checkpoint, model, extra={**metadata, CALIBRATION_KEY: calibration.to_extra()})
        print(f"wrote {args.write_checkpoint} with its pLDDT calibration")
    return 0


def weights_fingerprint(model) -> str:
    """BLAKE2b-128 of the network's config and weights: the same for a checkpoint with or without a calibration."""
    digest = hashlib.blake2b(model.config.to_json().encode(), digest_size=16)
    for key, value in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def repo_relative(value):
    """Checkpoint metadata with this repository's absolute path dropped from its strings (a training run's
    ``init_model``, say, becomes ``models/…``), so that the checkpoint written names no machine's folders."""
    if isinstance(value, str):
        return value.replace(f"{ROOT}/", "")
    return value


def calibration_residues(rows: list[dict]) -> int:
    return int(sum(np.isfinite(row["lddt"]).sum() for row in rows))


if __name__ == "__main__":
    raise SystemExit(main())
