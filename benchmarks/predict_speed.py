"""CPU inference cost on real proteins: fused attention, contiguous-crop stitching and the compiled fold against
the explicit paths.

    python benchmarks/predict_speed.py --features-dir RESULTS/ecoli/features [--every 6] [--threads 1]
        [--checkpoint models/trackfold_small_v4.pt] [--results-md benchmarks/RESULTS.md]

Takes the feature files (``*.npz``, as the workflow writes them) of a proteome run, sorts them by length and
keeps every ``--every``-th one (a fixed sample spanning the lengths), then predicts each protein three times in
one process on ``--threads`` torch threads, measuring CPU seconds (``time.process_time``; steadier than wall
time on a shared machine):

* ``explicit, all crops``: attention logits and softmax computed explicitly
  (:func:`workflow_lib.model.primitives.explicit_attention`) and every crop of the crop plan run, as a
  prediction that keeps a 6D map must (``pair_heads = ("dist",)``);
* ``fused, all crops``: the same crops with fused attention (the default at inference);
* ``fused, contiguous crops``: what a run with ``predict.fold: network`` and ``pair_heads: []`` does now: only
  the crops that give coordinates and pLDDT;
* ``fused, all crops, bfloat16``: the second mode under bfloat16 autocast (``predict.precision: bfloat16``); its
  distogram is compared with the float32 one (largest and mean absolute probability differences);

and folds the first one's distogram (the default ``predict.fold: distogram``) twice: with the restraint and
clash terms as torch tensor expressions (``TRACKFOLD_KERNELS=numpy``, the fallback without numba) and compiled
(:mod:`workflow_lib.inference.fold_compiled`). The backbone and pLDDT of the contiguous-crop run are compared
with the explicit one (largest absolute differences), and the two folds' final energies side by side. Writes the
section "Three-track inference on real proteins (CPU)" of ``--results-md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.aligner.device import KERNELS_ENV  # noqa: E402
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_features  # noqa: E402
from workflow_lib.inference.stitch import crop_plan  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.model.primitives import explicit_attention  # noqa: E402

SECTION = "## Three-track inference on real proteins (CPU)"
MODES = ("explicit, all crops", "fused, all crops", "fused, contiguous crops", "fused, all crops, bfloat16")
FOLDS = ("fold, torch terms", "fold, compiled")


def sample(features_dir: Path, every: int) -> list[tuple[str, Path, int]]:
    """Every ``every``-th feature file by length (ties by name): ``(protein, path, length)``."""
    found = []
    for path in sorted(features_dir.glob("*.npz")):
        with np.load(path) as data:
            if "msa" not in data.files:
                continue
            found.append((path.stem, path, int(data["msa"].shape[1])))
    if not found:
        raise SystemExit(f"predict_speed: no feature files (*.npz with an msa) in {features_dir}")
    found.sort(key=lambda item: (item[2], item[0]))
    return found[::every]


def timed(model, features, options: PredictOptions, explicit: bool):
    start = time.process_time()
    if explicit:
        with explicit_attention():
            prediction = predict_features(model, features, options)
    else:
        prediction = predict_features(model, features, options)
    return prediction, time.process_time() - start


def timed_fold(dist: np.ndarray, kernels: str) -> tuple[float, float]:
    """``(CPU seconds, final energy)`` of folding ``dist`` with the given ``TRACKFOLD_KERNELS`` value."""
    previous = os.environ.get(KERNELS_ENV)
    os.environ[KERNELS_ENV] = kernels
    try:
        start = time.process_time()
        _, energy = fold_from_distogram(dist, FoldOptions())
        return time.process_time() - start, energy
    finally:
        if previous is None:
            del os.environ[KERNELS_ENV]
        else:
            os.environ[KERNELS_ENV] = previous


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features-dir", type=Path, required=True)
    parser.add_argument("--every", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--machine", default=platform.processor() or platform.machine())
    parser.add_argument("--results-md", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    loaded = load_checkpoint(args.checkpoint)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    model.eval()
    proteins = sample(args.features_dir, args.every)
    rows = []
    worst_coords = worst_plddt = worst_half = 0.0
    mean_half: list[float] = []
    for name, path, length in proteins:
        with np.load(path) as data:
            features = {key: data[key] for key in data.files}
        seconds = {}
        explicit, seconds[MODES[0]] = timed(model, features, PredictOptions(pair_heads=("dist",), fold="network"), True)
        fused, seconds[MODES[1]] = timed(model, features, PredictOptions(pair_heads=("dist",), fold="network"), False)
        lean, seconds[MODES[2]] = timed(model, features, PredictOptions(pair_heads=(), fold="network"), False)
        bf16 = PredictOptions(pair_heads=("dist",), precision="bfloat16", fold="network")
        half, seconds[MODES[3]] = timed(model, features, bf16, False)
        d_half = np.abs(half.probs["dist"] - fused.probs["dist"])
        worst_half, mean_half = max(worst_half, float(d_half.max())), mean_half + [float(d_half.mean())]
        (seconds[FOLDS[0]], energy_torch), (seconds[FOLDS[1]], energy_compiled) = (
            timed_fold(explicit.probs["dist"], "numpy"), timed_fold(explicit.probs["dist"], ""))
        d_coords = float(np.nanmax(np.abs(lean.backbone - explicit.backbone)))  # no Cβ for glycine
        d_plddt = float(np.abs(lean.plddt - explicit.plddt).max())
        worst_coords, worst_plddt = max(worst_coords, d_coords), max(worst_plddt, d_plddt)
        plan = crop_plan(length, PredictOptions().window)
        row = dict(protein=name, length=length, crops_all=len(plan), crops_lean=lean.n_crops,
                   energies=(energy_torch, energy_compiled), **seconds)
        rows.append(row)
        print(f"{name} L={length} crops {len(plan)} -> {lean.n_crops} " +
              " ".join(f"{mode}: {value:.1f}s" for mode, value in seconds.items()) +
              f" max |d backbone| {d_coords:.2e} A, |d pLDDT| {d_plddt:.2e}, fold energies {energy_torch:.3f} / "
              f"{energy_compiled:.3f}", flush=True)

    columns = MODES + FOLDS
    totals = {mode: sum(row[mode] for row in rows) for mode in columns}
    lines = [
        f"`python benchmarks/predict_speed.py --features-dir RESULTS/ecoli/features --every {args.every} "
        f"--threads {args.threads}`, written {datetime.now():%Y-%m-%d %H:%M}: {len(rows)} *E. coli* proteins "
        f"(every {args.every}th feature file of a proteome run by length: MSAs against UniProt-2014 + Swiss-Prot "
        f"subsets, up to 4 PDB templates), checkpoint `{args.checkpoint.name}`, window {PredictOptions().window}, "
        f"`max_msa` {PredictOptions().max_msa}, "
        f"{args.threads} torch thread(s), {args.machine}, torch {torch.__version__}; CPU seconds of one process, "
        "the modes one after the other per protein (the machine's other core was busy).",
        "",
        "| protein | L | crops (all / contiguous) | " + " | ".join(f"{mode}, CPU s" for mode in columns) +
        " | fold energy (torch / compiled) |",
        "|---|---|---|" + "---|" * (len(columns) + 1),
    ]
    for row in rows:
        lines.append(f"| {row['protein']} | {row['length']} | {row['crops_all']} / {row['crops_lean']} | " +
                     " | ".join(f"{row[mode]:.1f}" for mode in columns) +
                     f" | {row['energies'][0]:.2f} / {row['energies'][1]:.2f} |")
    lines.append(f"| **total** | {sum(r['length'] for r in rows)} | {sum(r['crops_all'] for r in rows)} / "
                 f"{sum(r['crops_lean'] for r in rows)} | " + " | ".join(f"**{totals[mode]:.0f}**" for mode in columns)
                 + " | |")
    base = totals[MODES[0]]
    before, after = base + totals[FOLDS[0]], totals[MODES[1]] + totals[FOLDS[1]]
    mean_energy = [float(np.mean([row["energies"][k] for row in rows])) for k in (0, 1)]
    lines += [
        "",
        f"- Fused attention: {base / totals[MODES[1]]:.2f}x on the same crops; with contiguous crops only "
        f"(`fold: network`, no 6D maps kept): {base / totals[MODES[2]]:.2f}x in all.",
        f"- The default (`fold: distogram`: every crop, then the fold): {before:.0f} CPU-s with the explicit "
        f"attention and the torch fold terms, {after:.0f} with fused attention and the compiled fold "
        f"({before / after:.2f}x); the fold alone {totals[FOLDS[0]] / totals[FOLDS[1]]:.1f}x. Final fold "
        f"energies per residue, mean: {mean_energy[0]:.2f} (torch terms) and {mean_energy[1]:.2f} (compiled): "
        "same starts and the same energy to float rounding, but the minimisation is chaotic, so trajectories "
        "part after a few dozen steps and single proteins differ either way.",
        f"- Same structures: largest backbone difference {worst_coords:.1e} A, pLDDT {worst_plddt:.1e} "
        "(float rounding of the fused kernel; the contiguous crops are the ones the stitched backbone always "
        "came from).",
        f"- bfloat16 autocast: {totals[MODES[1]] / totals[MODES[3]]:.2f}x less CPU than float32 on the same crops; "
        f"the default with it (every crop in bfloat16, then the compiled fold) {after:.0f} -> "
        f"{totals[MODES[3]] + totals[FOLDS[1]]:.0f} CPU-s ({after / (totals[MODES[3]] + totals[FOLDS[1]]):.2f}x). "
        f"Distogram probabilities differ from float32 by at most {worst_half:.3f} (mean per protein "
        f"{np.mean(mean_half):.1e}).",
    ]
    publish("\n".join(lines) + "\n", None if args.no_write else args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
