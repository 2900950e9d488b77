"""The fold from the distogram: one compiled energy call per step against the torch graph, on real PDB chains.

    python benchmarks/fold_speed.py --archive pdb_chains_promod3/backbone.npz [--chains 40] [--min-length 40]
        [--max-length 500] [--proteome UP000000625_83333.fasta.gz] [--features-dir RESULTS/P/features]
        [--checkpoint models/trackfold_small_v4.pt] [--results-md benchmarks/RESULTS.md]

Chains: ``--chains`` chains of a backbone archive (``pdb_chains_promod3``) with ``--min-length`` to
``--max-length`` residues and no chain break (every Cα–Cα step under 4.2 Å), evenly spaced over the archive's
length-sorted list, so the sample spans the lengths. Each chain's distogram is made from its own structure the
way a network's looks, not perfect: its true Cβ bin blurred over neighbouring bins (``--sharpness`` bins) and,
for a random ``--noise`` fraction of the pairs, half of the probability spread evenly over every bin (seeded).

Each distogram is folded twice by :func:`workflow_lib.inference.fold.fold_from_distogram` with the default
options, in one process on one torch thread: with the whole energy and its gradient in one compiled call per
step (the default, :class:`~workflow_lib.inference.fold_compiled.ChainEnergy`) and with the frames, atoms, Cβ
and chain terms as a torch graph around the compiled restraint and clash terms (:func:`graph_energy`, the
previous default). Reported per length band: CPU seconds (``time.process_time``) of both, and the folded
backbone's lDDT-Cα and TM-score against the chain. The minimisation is chaotic (two float roundings part the
trajectories after a few dozen steps), so single chains differ either way and the means are what compare. With
``--proteome``, each path's seconds are fitted as ``a + b L + c L²`` and summed over that proteome's lengths.
With ``--features-dir``, the distograms the checkpoint predicts from those feature files (a proteome run's) are
folded both ways too, beside the network's own CPU seconds for them: what the new path saves of inference.
Writes the section "Structure prediction: the fold's compiled energy" of ``--results-md``.
"""

from __future__ import annotations

import argparse
import contextlib
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
from workflow_lib.features.build import read_features  # noqa: E402
from workflow_lib.inference.fold import fold_from_distogram, graph_energy  # noqa: E402
from workflow_lib.inference.predict import DEFAULT_WINDOW, PredictOptions, predict_features  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.seqio.fasta import iter_fasta  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.geometry import DIST_BINS, bin_pair_geometry, pair_geometry  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402

SECTION = "## Structure prediction: the fold's compiled energy"
BANDS = ((0, 100), (100, 200), (200, 300), (300, 10_000))
MAX_CA_STEP = 4.2
"""A Cα–Cα step longer than this (Å) is a chain break; such chains are not sampled."""


def sample_chains(archive: Path, count: int, min_length: int, max_length: int) -> list[tuple[str, np.ndarray]]:
    """``(name, N/CA/C coordinates [L, 3, 3])`` of ``count`` unbroken chains spanning the lengths."""
    found = []
    for entry in read_backbone_archive(archive):
        coords = np.asarray(entry.chain.coords[:, :3], dtype=np.float64)
        if not min_length <= len(coords) <= max_length or not np.isfinite(coords).all():
            continue
        if np.linalg.norm(np.diff(coords[:, 1], axis=0), axis=1).max() > MAX_CA_STEP:
            continue
        found.append((len(coords), entry.chain.name, coords))
    if not found:
        raise SystemExit(f"fold_speed: no unbroken chain of {min_length}-{max_length} residues in {archive}")
    found.sort(key=lambda item: (item[0], item[1]))
    picks = np.unique(np.linspace(0, len(found) - 1, min(count, len(found))).round().astype(int))
    return [(found[k][1], found[k][2]) for k in picks]


def noisy_distogram(coords: np.ndarray, sharpness: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    """The chain's own Cβ distogram, blurred, with half the probability of a ``noise`` fraction of pairs spread
    over every bin (symmetric)."""
    bins = bin_pair_geometry(pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2]))["dist"].astype(int)
    logits = -np.abs(np.arange(DIST_BINS)[None, None, :] - bins[..., None]) / sharpness
    probs = np.exp(logits)
    probs /= probs.sum(-1, keepdims=True)
    noisy = np.triu(rng.random(bins.shape) < noise, k=1)
    noisy = noisy | noisy.T
    probs[noisy] = 0.5 * probs[noisy] + 0.5 / DIST_BINS
    return probs


def fit_cost(lengths: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Least-squares coefficients ``(a, b, c)`` of ``seconds ≈ a + b L + c L²``."""
    design = np.stack([np.ones_like(lengths), lengths, lengths ** 2], axis=1).astype(np.float64)
    coef, *_ = np.linalg.lstsq(design, seconds, rcond=None)
    return coef


def predicted_rows(features_dir: Path, checkpoint: Path) -> list[dict]:
    """Per feature file: the network's CPU seconds for the distogram (every crop), and each fold path's CPU
    seconds and final energy per residue on it."""
    model, _ = load_checkpoint(checkpoint)
    options = PredictOptions(window=DEFAULT_WINDOW, pair_heads=("dist",), fold="network")
    rows = []
    for path in sorted(features_dir.glob("*.npz")):
        features = read_features(path)
        start = time.process_time()
        probs = predict_features(model, features, options).probs["dist"]
        row = {"name": path.stem, "length": len(probs), "network_s": time.process_time() - start}
        for label in ("compiled", "graph"):
            start = time.process_time()
            with graph_energy() if label == "graph" else contextlib.nullcontext():
                _, row[f"{label}_e"] = fold_from_distogram(probs)
            row[f"{label}_s"] = time.process_time() - start
        rows.append(row)
        print(f"{path.stem} L={row['length']} network {row['network_s']:.2f} s, fold: compiled "
              f"{row['compiled_s']:.2f} s, graph {row['graph_s']:.2f} s", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--chains", type=int, default=40)
    parser.add_argument("--min-length", type=int, default=40)
    parser.add_argument("--max-length", type=int, default=500)
    parser.add_argument("--sharpness", type=float, default=1.5)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--proteome", type=Path, help="FASTA whose lengths the fitted costs are summed over")
    parser.add_argument("--features-dir", type=Path,
                        help="also fold the distograms the checkpoint predicts from these feature files")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    chains = sample_chains(args.archive, args.chains, args.min_length, args.max_length)
    rng = np.random.default_rng(args.seed)
    fold_from_distogram(noisy_distogram(chains[0][1][:30], args.sharpness, args.noise, rng))   # compile, warm up
    with graph_energy():
        fold_from_distogram(noisy_distogram(chains[0][1][:30], args.sharpness, args.noise, rng))
    rows = []
    for name, coords in chains:
        probs = noisy_distogram(coords, args.sharpness, args.noise, rng)
        row = {"name": name, "length": len(coords)}
        for label in ("compiled", "graph"):
            start = time.process_time()
            with graph_energy() if label == "graph" else contextlib.nullcontext():
                backbone, _ = fold_from_distogram(probs)
            row[f"{label}_s"] = time.process_time() - start
            row[f"{label}_lddt"] = lddt_ca(backbone[:, 1], coords[:, 1]).score
            row[f"{label}_tm"] = float(tm_score(backbone[:, 1], coords[:, 1]))
        rows.append(row)
        print(f"{name} L={row['length']} compiled {row['compiled_s']:.2f} s lDDT {row['compiled_lddt']:.3f} | "
              f"graph {row['graph_s']:.2f} s lDDT {row['graph_lddt']:.3f}", flush=True)
    lengths = np.array([row["length"] for row in rows], dtype=np.float64)
    lines = []
    for low, high in BANDS + ((0, 10_000),):
        band = [row for row in rows if low <= row["length"] < high]
        if not band:
            continue
        mean = {key: float(np.mean([row[key] for row in band]))
                for key in band[0] if key.endswith(("_s", "_lddt", "_tm"))}
        label = "all" if (low, high) == (0, 10_000) else (f"{low}-{high - 1}" if high < 10_000 else f"≥ {low}")
        lines.append(f"| {label} | {len(band)} | {mean['graph_s']:.2f} | {mean['compiled_s']:.2f} | "
                     f"{mean['graph_s'] / mean['compiled_s']:.2f}x | "
                     f"{mean['graph_lddt']:.3f} / {mean['graph_tm']:.3f} | "
                     f"{mean['compiled_lddt']:.3f} / {mean['compiled_tm']:.3f} |")
    notes = []
    if args.proteome is not None:
        proteome = np.array([len(record.sequence) for record in iter_fasta(args.proteome)], dtype=np.float64)
        design = np.stack([np.ones_like(proteome), proteome, proteome ** 2], axis=1)
        hours = {label: float((design @ fit_cost(lengths, np.array([row[f"{label}_s"] for row in rows]))).sum()) / 3600
                 for label in ("graph", "compiled")}
        notes.append(f"- Summed over the {proteome.size:,} proteins of `{args.proteome.name}` (each path's seconds "
                     f"fitted as a + b L + c L² on the sample): the fold costs {hours['graph']:.1f} CPU-hours with "
                     f"the torch graph and {hours['compiled']:.1f} with the compiled energy.")
    predicted = predicted_rows(args.features_dir, args.checkpoint) if args.features_dir is not None else []
    if predicted:
        totals = {key: sum(row[key] for row in predicted) for key in ("network_s", "graph_s", "compiled_s")}
        energies = {key: float(np.mean([row[key] for row in predicted])) for key in ("graph_e", "compiled_e")}
        notes += [""] * bool(notes) + [
            f"Predicted distograms (`--features-dir`): the {len(predicted)} feature files of "
            f"`{args.features_dir.name}` ({min(row['length'] for row in predicted)}-"
            f"{max(row['length'] for row in predicted)} residues), each protein's distogram predicted by "
            f"`{args.checkpoint.name}` (every crop, window 128) and folded both ways; CPU seconds summed over the "
            "proteins, and the final energy per residue (the minimised objective) averaged.",
            "",
            "| network, CPU s | fold, torch graph | fold, compiled energy | inference, torch graph | "
            "inference, compiled energy | energy per residue, graph / compiled |",
            "|---|---|---|---|---|---|",
            f"| {totals['network_s']:.1f} | {totals['graph_s']:.1f} | {totals['compiled_s']:.1f} | "
            f"{totals['network_s'] + totals['graph_s']:.1f} | {totals['network_s'] + totals['compiled_s']:.1f} "
            f"({(totals['network_s'] + totals['graph_s']) / (totals['network_s'] + totals['compiled_s']):.2f}x "
            f"less) | {energies['graph_e']:.2f} / {energies['compiled_e']:.2f} |",
        ]
    body = "\n".join([
        f"`python benchmarks/fold_speed.py --archive pdb_chains_promod3/backbone.npz --chains {args.chains} "
        f"--min-length {args.min_length} --max-length {args.max_length} --sharpness {args.sharpness} --noise "
        f"{args.noise}{' --proteome ' + args.proteome.name if args.proteome else ''}"
        f"{' --features-dir ' + args.features_dir.name if args.features_dir else ''}`, written "
        f"{datetime.now():%Y-%m-%d %H:%M}: {len(rows)} unbroken PDB chains of {int(lengths.min())}-"
        f"{int(lengths.max())} residues, each folded from its own Cβ distogram made noisy (blurred over "
        f"{args.sharpness:g} bins, {args.noise:.0%} of the pairs half flattened) with the default fold options, "
        f"one torch thread, {platform.machine()}, torch {torch.__version__}; CPU seconds per chain, lDDT-Cα / "
        "TM-score of the folded backbone against the chain.",
        "",
        "| residues | chains | CPU s, torch graph | CPU s, compiled energy | speed-up | torch graph: lDDT-Cα / TM | "
        "compiled energy: lDDT-Cα / TM |",
        "|---|---|---|---|---|---|---|",
        *lines,
        "",
        *notes,
    ])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
