"""Inference throughput on one device (a GPU when there is one), projected to a whole proteome.

    python benchmarks/device_predict.py --features-dir SAMPLE --lengths CHUNKS.parquet [--device cuda]
        [--window 128] [--settings 1:0:float32,16:40000:float32,16:40000:bfloat16]
        [--checkpoint models/trackfold_small_v4.pt]
        [--out OUT.json] [--results-md benchmarks/RESULTS.md]

On a GPU node, with a sample and the chunk table copied there (every 200th *E. coli* protein: 25 MB)::

    python3 benchmarks/device_predict.py --features-dir sample --lengths chunks.parquet --out device_predict.json

``SAMPLE``: feature files (``*.npz`` as the workflow writes them) spanning the proteome's lengths, e.g. every
150th file of a proteome run by length (``--pick-from RESULTS/ecoli/features --every 150`` copies such a sample
into ``--features-dir`` first, to be copied to a GPU node). ``--lengths``: the proteome's chunk
table (``trackfold chunk``'s ``chunks.parquet``, its ``length`` column).

Each setting ``batch_size:max_tokens:precision`` predicts the whole sample the way a proteome run does
(``fold: distogram``, no 6D maps kept; proteins sorted by length and batched by :func:`plan_batches`) after one
warm-up protein, timing every forward pass and fold in wall seconds (the device synchronised). A protein's
seconds are its pass's seconds shared by residues, as ``trackfold predict --stats`` reports them. The whole
proteome is projected by interpolating seconds over length (linear between the sample's lengths; beyond the
longest, in proportion to the network calls of the crop plan; with ``batch_size`` above 1 the crops of a long
protein share passes, so this overestimates it a little). Reports per setting the sample's seconds, the
projected proteome hours and structures per day, and the largest memory the device allocated.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.features.build import read_features  # noqa: E402
from workflow_lib.inference.predict import (  # noqa: E402
    DEFAULT_WINDOW,
    PredictOptions,
    plan_batches,
    predict_group,
    resolve_device,
)
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.workflow.config import PredictConfig  # noqa: E402

SECTION = "## Three-track inference on the {device}: batching, throughput and the whole proteome"
"""One section per kind of device (``CPU``, ``GPU``), so that the two are read side by side."""


def pick(source: Path, every: int, target: Path) -> None:
    """Copy every ``every``-th feature file of ``source`` by length (ties by name) into ``target``."""
    found = []
    for path in sorted(source.glob("*.npz")):
        with np.load(path) as data:
            if "msa" in data.files:
                found.append((int(data["msa"].shape[1]), path.name, path))
    if not found:
        raise SystemExit(f"device_predict: no feature files in {source}")
    target.mkdir(parents=True, exist_ok=True)
    for _, _, path in sorted(found)[::every]:
        shutil.copyfile(path, target / path.name)


def parse_settings(text: str) -> list[tuple[int, int, str]]:
    """``batch:max_tokens:precision,...`` -> tuples."""
    settings = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 3:
            raise SystemExit(f"device_predict: a setting is batch_size:max_tokens:precision, got {item!r}")
        settings.append((int(parts[0]), int(parts[1]), parts[2]))
    return settings


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_setting(model, items: list[tuple[str, dict]], options: PredictOptions,
                device: torch.device) -> dict[str, float]:
    """Seconds per protein (pass seconds shared by residues) of one setting over the sample."""
    lengths = [features["msa"].shape[1] for _, features in items]
    seconds: dict[str, float] = {}
    for group in plan_batches(lengths, options):
        synchronize(device)
        start = time.perf_counter()
        predictions = predict_group(model, [items[i] for i in group], options)
        synchronize(device)
        elapsed = time.perf_counter() - start
        residues = sum(lengths[i] for i in group)
        for (name, _), i in zip(predictions, group):
            seconds[name] = elapsed * lengths[i] / residues
    return seconds


def project(sample_lengths: np.ndarray, sample_seconds: np.ndarray, lengths: np.ndarray, window: int) -> np.ndarray:
    """Seconds of each of ``lengths`` from the sample (module docstring)."""
    order = np.argsort(sample_lengths, kind="stable")
    xs, ys = sample_lengths[order].astype(float), sample_seconds[order]
    out = np.interp(lengths, xs, ys)
    calls = PredictConfig(window=window).network_calls
    beyond = lengths > xs[-1]
    out[beyond] = [ys[-1] * calls(int(length)) / calls(int(xs[-1])) for length in lengths[beyond]]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features-dir", type=Path, required=True)
    parser.add_argument("--lengths", type=Path, required=True, help="the proteome's chunks.parquet")
    parser.add_argument("--pick-from", type=Path, help="copy a sample of this folder's feature files first")
    parser.add_argument("--every", type=int, default=150)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="predict.window")
    parser.add_argument("--settings", default="1:0:float32,16:40000:float32,16:40000:bfloat16")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    if args.pick_from is not None:
        pick(args.pick_from, args.every, args.features_dir)
        print(f"copied a sample of {len(list(args.features_dir.glob('*.npz')))} feature files to {args.features_dir}")
    device = resolve_device(args.device)
    model, _ = load_checkpoint(args.checkpoint, map_location=device)
    items = [(path.stem, read_features(path)) for path in sorted(args.features_dir.glob("*.npz"))]
    if not items:
        raise SystemExit(f"device_predict: no feature files in {args.features_dir}")
    lengths = pd.read_parquet(args.lengths, columns=["length"])["length"].to_numpy()
    sample_lengths = np.array([features["msa"].shape[1] for _, features in items])
    shortest = int(np.argmin(sample_lengths))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    report = {"device": name, "torch": torch.__version__, "sample": len(items), "proteome": int(lengths.size),
              "settings": []}
    lines = []
    for batch_size, max_tokens, precision in parse_settings(args.settings):
        options = PredictOptions(device=args.device, window=args.window, batch_size=batch_size, max_tokens=max_tokens,
                                 precision=precision, fold="distogram", pair_heads=())
        predict_group(model, [items[shortest]], options)   # warm-up: kernels, allocator, autotuning
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds = run_setting(model, items, options, device)
        per = np.array([seconds[protein] for protein, _ in items])
        whole = project(sample_lengths, per, lengths, options.window)
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
        row = {"batch_size": batch_size, "max_tokens": max_tokens, "precision": precision,
               "sample_seconds": float(per.sum()), "proteome_hours": float(whole.sum() / 3600),
               "structures_per_day": float(lengths.size / whole.sum() * 86400), "peak_gib": peak,
               "per_protein": {protein: float(value) for (protein, _), value in zip(items, per)}}
        report["settings"].append(row)
        lines.append(f"| {batch_size} | {max_tokens or 'no limit'} | {precision} | {row['sample_seconds']:.1f} | "
                     f"{row['proteome_hours']:.2f} | {row['structures_per_day']:,.0f} | "
                     f"{'-' if np.isnan(peak) else f'{peak:.1f}'} |")
        print(lines[-1], flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
    threads = torch.get_num_threads()
    plural = "" if threads == 1 else "s"
    body = "\n".join([
        f"`python benchmarks/device_predict.py --features-dir SAMPLE --lengths CHUNKS.parquet --device "
        f"{args.device} --window {args.window} --settings {args.settings}`, written {datetime.now():%Y-%m-%d %H:%M}: {len(items)} feature "
        f"files spanning the lengths of a {lengths.size:,}-protein proteome run (lengths "
        f"{sample_lengths.min()}-{sample_lengths.max()}), checkpoint `{args.checkpoint.name}`, `fold: distogram`, "
        f"no 6D maps kept, on {name}"
        f"{'' if device.type == 'cuda' else f' ({threads} torch thread{plural})'}, torch {torch.__version__}; "
        "wall seconds, the device synchronised after each "
        "pass, the fold from the distogram included; the proteome projected from the sample by length.",
        "",
        "| batch size | max tokens | precision | sample, s | proteome, h (projected) | structures per day | "
        "peak device memory, GiB |",
        "|---|---|---|---|---|---|---|",
        *lines,
    ])
    publish(body, args.results_md, SECTION.format(device="GPU" if device.type == "cuda" else "CPU"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
