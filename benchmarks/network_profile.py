"""Where a network pass spends its time: seconds per module of one crop, on the CPU.

    python benchmarks/network_profile.py [--checkpoint models/trackfold_small_v4.pt] [--lengths 64,128]
        [--rows 64] [--templates 2] [--precision float32,bfloat16] [--repeats 3] [--results-md RESULTS.md]

One forward pass of the checkpoint's network (eval mode, ``torch.inference_mode``, one torch thread) on a crop of
L residues with ``--rows`` MSA rows and ``--templates`` templates, the inputs a feature file gives (random
values: a pass's cost depends on shapes only). Forward hooks time every module of the two- and three-track
blocks (MSA→MSA, MSA→pair, pair→pair and its parts, pair→MSA, the 3D track) and the embeddings and heads;
each module's seconds are summed over blocks and averaged over ``--repeats`` passes after one warm-up pass.
"""

from __future__ import annotations

import argparse
import collections
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
from workflow_lib.inference.predict import collate  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402

SECTION = "## Three-track inference: where a network pass spends its time (CPU)"
PARTS = {
    "msa2msa": "MSA → MSA (row and column attention)",
    "msa2pair": "MSA → pair (outer product)",
    "pair2pair.tri_out": "pair → pair: triangle update, outgoing",
    "pair2pair.tri_in": "pair → pair: triangle update, incoming",
    "pair2pair.row": "pair → pair: row attention",
    "pair2pair.column": "pair → pair: column attention",
    "pair2pair.transition": "pair → pair: transition",
    "pair2msa": "pair → MSA",
    "str2str": "3D track: structure update",
    "str2msa": "3D track: structure → MSA",
    "initial_structure": "initial structure",
    "pair_embedding": "pair embedding (templates, co-evolution)",
    "msa_embedding": "MSA embedding",
    "distogram_head": "6D heads",
}


def synthetic_batch(config, length: int, rows: int, templates: int) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    item = {"msa": rng.integers(0, 21, (rows, length)), "residue_index": np.arange(length)}
    if config.c_coevolution:
        item["coevolution"] = rng.random((length, length, config.c_coevolution), dtype=np.float32)
    if config.msa_statistics:
        item.update(deletion_matrix=np.zeros((rows, length), np.float32),
                    profile=rng.random((length, 21), dtype=np.float32), deletion_mean=np.zeros(length, np.float32))
    if templates and (config.c_template_pair or config.c_template_1d):
        item["template_mask"] = np.ones(templates, np.float32)
        if config.c_template_pair:
            item["templates_pair"] = rng.random((templates, length, length, config.c_template_pair), dtype=np.float32)
        if config.c_template_1d:
            item["templates_1d"] = rng.random((templates, length, config.c_template_1d), dtype=np.float32)
    return collate([item], torch.device("cpu"))


def part_of(name: str) -> str | None:
    """The :data:`PARTS` key a module name belongs to (block indices dropped), or None."""
    plain = ".".join(piece for piece in name.split(".") if not piece.isdigit())
    plain = plain.replace("three_track_blocks.two_track.", "").replace("two_track_blocks.", "")
    plain = plain.replace("three_track_blocks.", "")
    return plain if plain in PARTS else None


def profile(model, batch, precision: str, repeats: int) -> tuple[float, dict[str, float]]:
    seconds: dict[str, float] = collections.defaultdict(float)
    started: dict[str, float] = {}
    handles = []
    for name, module in model.named_modules():
        part = part_of(name)
        if part is None:
            continue

        def before(module, args, name=name):
            started[name] = time.perf_counter()

        def after(module, args, output, name=name, part=part):
            seconds[part] += time.perf_counter() - started[name]

        handles += [module.register_forward_pre_hook(before), module.register_forward_hook(after)]
    try:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            model(batch)
            seconds.clear()
            start = time.perf_counter()
            for _ in range(repeats):
                model(batch)
            total = (time.perf_counter() - start) / repeats
    finally:
        for handle in handles:
            handle.remove()
    return total, {key: value / repeats for key, value in seconds.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--lengths", default="64,128")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--templates", type=int, default=2)
    parser.add_argument("--precision", default="float32,bfloat16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, _ = load_checkpoint(args.checkpoint)
    columns = [(int(length), precision) for length in args.lengths.split(",") for precision in
               args.precision.split(",")]
    results = {}
    for length, precision in columns:
        batch = synthetic_batch(model.config, length, args.rows, args.templates)
        results[(length, precision)] = profile(model, batch, precision, args.repeats)
        print(length, precision, f"{results[(length, precision)][0]:.3f} s", flush=True)
    header = "| part | " + " | ".join(f"L {length}, {precision}: s (share)" for length, precision in columns) + " |"
    lines = [header, "|---|" + "---|" * len(columns)]
    for key, label in PARTS.items():
        cells = []
        for column in columns:
            total, parts = results[column]
            cells.append(f"{parts.get(key, 0.0):.3f} ({parts.get(key, 0.0) / total:.0%})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| **whole pass** | " + " | ".join(f"**{results[c][0]:.3f}**" for c in columns) + " |")
    body = "\n".join([
        f"`python benchmarks/network_profile.py --checkpoint {args.checkpoint.name} --lengths {args.lengths} --rows "
        f"{args.rows} --templates {args.templates} --precision {args.precision}`, written "
        f"{datetime.now():%Y-%m-%d %H:%M}: one forward pass of a crop of L residues, {args.rows} MSA rows, "
        f"{args.templates} templates; seconds per module summed over the blocks, mean of {args.repeats} passes; one "
        f"torch thread, {platform.machine()} ({platform.processor() or 'cpu'}), torch {torch.__version__}.",
        "", *lines, ""])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
