"""Inference cost against the MSA rows given to the network (``predict.max_msa``), on a proteome run's features.

    python benchmarks/predict_msa_rows.py --features-dir RESULTS/ecoli/features [--every 100] [--rows 64,256]
        [--checkpoint models/trackfold_small_v4.pt] [--results-md benchmarks/RESULTS.md]

Sorts the feature files by length, keeps every ``--every``-th one, and predicts each with every ``--rows``
setting the way a proteome run does (``fold: distogram``, no 6D maps kept), in one process on one torch thread,
measuring CPU seconds (``time.process_time``). Reports per protein its length, MSA rows in the feature file,
the CPU seconds per setting, mean pLDDT per setting and the TM-score between the two structures (the first and
the last setting; the fold from the distogram is a chaotic minimisation, so a small change of the distogram can
end in another local minimum). Writes the section "Structure prediction: MSA rows at inference (E. coli)".
"""

from __future__ import annotations

import argparse
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
from workflow_lib.inference.confidence import PlddtCalibration  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_group  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.structure.metrics import tm_score  # noqa: E402

SECTION = "## Structure prediction: MSA rows at inference (E. coli)"


def sample(features_dir: Path, every: int) -> list[tuple[int, int, Path]]:
    """Every ``every``-th feature file by length: ``(length, rows, path)``."""
    found = []
    for path in sorted(features_dir.glob("*.npz")):
        with np.load(path) as data:
            if "msa" in data.files:
                found.append((int(data["msa"].shape[1]), int(data["msa"].shape[0]), path))
    if not found:
        raise SystemExit(f"predict_msa_rows: no feature files in {features_dir}")
    found.sort(key=lambda item: (item[0], item[2].name))
    return found[::every]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features-dir", type=Path, required=True)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--rows", default="64,256", help="comma-separated max_msa settings")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    settings = [int(value) for value in args.rows.split(",")]
    torch.set_num_threads(1)
    model, extra = load_checkpoint(args.checkpoint)
    calibration = PlddtCalibration.from_extra(extra)   # pLDDT as `trackfold predict` writes it
    lines = []
    totals = {rows: 0.0 for rows in settings}
    for length, depth, path in sample(args.features_dir, args.every):
        features = read_features(path)
        runs = {}
        for rows in settings:
            start = time.process_time()
            ((_, prediction),) = predict_group(model, [(path.stem, features)],
                                               PredictOptions(max_msa=rows, fold="distogram", pair_heads=()),
                                               calibration=calibration)
            runs[rows] = (time.process_time() - start, prediction)
            totals[rows] += runs[rows][0]
        first, last = runs[settings[0]][1], runs[settings[-1]][1]
        agreement = tm_score(first.backbone[:, 1], last.backbone[:, 1])
        lines.append(f"| {path.stem} | {length} | {depth} | "
                     + " | ".join(f"{runs[rows][0]:.1f}" for rows in settings) + " | "
                     + " | ".join(f"{float(runs[rows][1].plddt.mean()):.1f}" for rows in settings)
                     + f" | {agreement:.2f} |")
        print(lines[-1], flush=True)
    header = ("| protein | L | rows | " + " | ".join(f"CPU s, {rows} rows" for rows in settings) + " | "
              + " | ".join(f"pLDDT, {rows} rows" for rows in settings)
              + f" | TM-score {settings[0]} vs {settings[-1]} |")
    body = "\n".join([
        f"`python benchmarks/predict_msa_rows.py --features-dir RESULTS/ecoli/features --every {args.every} "
        f"--rows {args.rows}`, written {datetime.now():%Y-%m-%d %H:%M}: every {args.every}th feature file of the "
        f"*E. coli* proteome run by length, checkpoint `{args.checkpoint.name}`, `fold: distogram`, no 6D maps "
        f"kept (what a proteome run does), one torch thread, {platform.machine()}, torch {torch.__version__}; CPU "
        "seconds of one process (the machine's other core was busy).",
        "",
        header,
        "|" + "---|" * (4 + 2 * len(settings)),
        *lines,
        "",
        "- Total CPU s: " + ", ".join(f"{rows} rows {totals[rows]:.0f}" for rows in settings)
        + f" ({totals[settings[-1]] / totals[settings[0]]:.2f}x).",
    ])
    publish(body, args.results_md, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
