"""Feature files with the templates' atoms against files with their pair maps: CPU, bytes and memory.

    OMP_NUM_THREADS=1 python benchmarks/template_atoms.py --a3m-dir A3M_DIR --hits-dir HITS_DIR \
        --templates TEMPLATE_DB [--proteins 60] [--seed 0] [--predict STEM] [--out template_atoms.md]

A random sample of ``--proteins`` proteins with template hits (``{stem}.hits.parquet`` in ``--hits-dir``,
at most ``features.max_templates`` of them used) is built both ways, in one process, alternating per protein:

- **maps** (feature files of layout 5): the template pair maps ``[T, L, L, 131]`` float16 of the whole query
  stored in the file (:func:`~workflow_lib.features.templates.columns_features`), and ``template_ca``;
- **atoms** (layout 6, :func:`~workflow_lib.features.templates.template_features`): the placed residues' N, CA,
  C, Cβ ``[T, L, 4, 3]``; the maps of the columns one network call reads are made when it reads them
  (:func:`~workflow_lib.features.templates.template_pair`).

Reported per protein (CPU seconds, ``time.process_time``): the template features, writing the compressed file
(:func:`~workflow_lib.schemas.io.write_npz` at the feature stage's zlib level), its bytes; at inference, reading
it back (:func:`~workflow_lib.features.build.read_features`) and everything ``predict`` does with it before the
network: the crop plan (template contacts) and the inputs of every crop
(:func:`~workflow_lib.inference.predict.model_inputs` with the default checkpoint's config and options); and
whether the inputs of every crop are identical both ways. ``--predict STEM`` also builds protein STEM's two
files and runs ``trackfold predict`` (the workflow's defaults) on each in a child process, reporting its CPU
seconds and peak memory (the command's own resources line).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workflow_lib.features.build import FEATURE_COMPRESSLEVEL, read_features, write_features  # noqa: E402
from workflow_lib.features.msa_features import msa_features  # noqa: E402
from workflow_lib.features.templates import (DEFAULT_MAX_TEMPLATES, TEMPLATE_ATOMS, columns_atoms,  # noqa: E402
                                             columns_features, hit_columns, read_hits)
from workflow_lib.inference.predict import PredictOptions, model_inputs, plan_crops  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.schemas.features import FEATURES, FEATURES_V5  # noqa: E402
from workflow_lib.schemas.io import write_npz  # noqa: E402
from workflow_lib.seqio.msa import a3m_stem, read_a3m  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.cli import RESOURCES_PREFIX  # noqa: E402
from workflow_lib.workflow.config import PredictConfig  # noqa: E402

WAYS = ("maps", "atoms")


def template_keys(way: str, hits, database, codes: np.ndarray, where: Path) -> dict[str, np.ndarray]:
    """The template keys of one feature file, built ``way``."""
    ordered = hits.sort_values("rank", kind="stable").head(DEFAULT_MAX_TEMPLATES)
    columns = [hit_columns(row, database, codes, where=where) for _, row in ordered.iterrows()]
    index = np.arange(codes.shape[0])
    out = columns_features(columns, index, atoms=way == "atoms")
    if way == "maps":                       # layout 5 also kept the templates' Cα
        out["template_ca"] = columns_atoms(columns, index)[:, :, TEMPLATE_ATOMS.index(1)]
    return out


def inputs_before_network(path: Path, config, options: PredictOptions) -> list[dict[str, np.ndarray]]:
    """What ``predict`` does with a feature file before the network: read, plan the crops, make their inputs."""
    features = read_features(path)
    crops = plan_crops(features, options)
    return [model_inputs(features, config, columns=crop.indices, max_msa=options.max_msa, seed=options.seed)
            for crop in crops] or [model_inputs(features, config, max_msa=options.max_msa, seed=options.seed)]


def predict_in_child(path: Path, out_dir: Path) -> tuple[float, float]:
    """CPU seconds and peak resident memory (GB) of ``trackfold predict`` on one feature file, from the
    command's own last log line (``trackfold resources: ... cpu_s=... max_rss_mb=...``)."""
    done = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "predict", "--out-dir", str(out_dir), str(path)],
                          check=True, cwd=ROOT, capture_output=True, text=True)
    line = next(line for line in (done.stderr + done.stdout).splitlines()[::-1] if RESOURCES_PREFIX in line)
    fields = dict(item.split("=", 1) for item in line.split(RESOURCES_PREFIX, 1)[1].split())
    return float(fields["cpu_s"]), float(fields["max_rss_mb"]) / 1024


def build_both(path: Path, hits_dir: Path, database, config, options: PredictOptions, work: Path,
               seconds: dict[str, dict[str, list[float]]], sizes: dict[str, list[int]]
               ) -> tuple[int, dict[str, Path], bool]:
    """Build, write and read back one protein's feature file both ways (module docstring), appending the CPU
    seconds and bytes; returns its length, the two files and whether every crop's inputs are identical."""
    alignment = read_a3m(path)
    base = msa_features(alignment)
    hits = read_hits(hits_dir / f"{a3m_stem(path)}.hits.parquet")
    files, inputs = {}, {}
    for way in WAYS:
        started = time.process_time()
        keys = template_keys(way, hits, database, base["msa"][0], path)
        seconds[way]["templates"].append(time.process_time() - started)
        files[way] = work / f"{a3m_stem(path)}.{way}.npz"
        started = time.process_time()
        if way == "maps":
            write_npz(files[way], {**base, **keys}, FEATURES_V5, compresslevel=FEATURE_COMPRESSLEVEL)
        else:
            write_features(files[way], FEATURES.validate({**base, **keys}, str(path)))
        seconds[way]["write"].append(time.process_time() - started)
        sizes[way].append(files[way].stat().st_size)
        started = time.process_time()
        inputs[way] = inputs_before_network(files[way], config, options)
        seconds[way]["read + crop inputs"].append(time.process_time() - started)
    same = len(inputs["maps"]) == len(inputs["atoms"]) and all(
        a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        for a, b in zip(inputs["maps"], inputs["atoms"]))
    return alignment.length, files, same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a3m-dir", required=True, type=Path)
    parser.add_argument("--hits-dir", required=True, type=Path)
    parser.add_argument("--templates", required=True, help="template database directory")
    parser.add_argument("--proteins", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--predict", metavar="STEM", help="also run trackfold predict on this protein's two files")
    parser.add_argument("--out", type=Path, help="also write the tables (Markdown) here")
    args = parser.parse_args()

    database = load_template_db(args.templates)
    paths = [path for path in sorted(args.a3m_dir.glob("*.a3m"))
             if (args.hits_dir / f"{a3m_stem(path)}.hits.parquet").exists()]
    if not paths:
        parser.error(f"no A3M of {args.a3m_dir} has a hits table in {args.hits_dir}")
    rng = np.random.default_rng(args.seed)
    paths = [paths[k] for k in sorted(rng.choice(len(paths), min(args.proteins, len(paths)), replace=False))]
    model, _ = load_checkpoint(ROOT / PredictConfig().model)
    options = PredictOptions()
    seconds = {way: {"templates": [], "write": [], "read + crop inputs": []} for way in WAYS}
    sizes: dict[str, list[int]] = {way: [] for way in WAYS}
    lengths, identical = [], 0
    work = Path(tempfile.mkdtemp(prefix="template_atoms_"))
    for number, path in enumerate([paths[0]] + paths):     # the first protein twice: one-off costs not counted
        if number == 1:
            for way in WAYS:
                sizes[way].clear()
                for part in seconds[way].values():
                    part.clear()
            lengths.clear()
            identical = 0
        length, files, same = build_both(path, args.hits_dir, database, model.config, options, work, seconds, sizes)
        identical += same
        lengths.append(length)
        for file in files.values():
            file.unlink()
        print(f"{number}/{len(paths)} {a3m_stem(path)} L={length}: "
              + ", ".join(f"{way} {sum(s[-1] for s in seconds[way].values()):.2f} s {sizes[way][-1] / 1e6:.1f} MB"
                          for way in WAYS) + ("" if same else " INPUTS DIFFER"), flush=True)

    lines = ["| per protein (mean) | maps in the file | atoms in the file | ratio |", "|---|---|---|---|"]
    for part in ("templates", "write", "read + crop inputs"):
        a, b = np.mean(seconds["maps"][part]), np.mean(seconds["atoms"][part])
        lines.append(f"| {part}, CPU s | {a:.3f} | {b:.3f} | {a / b:.1f}× |")
    total = {way: sum(np.mean(v) for v in seconds[way].values()) for way in WAYS}
    lines.append(f"| all of it, CPU s | {total['maps']:.3f} | {total['atoms']:.3f} | "
                 f"{total['maps'] / total['atoms']:.1f}× |")
    lines.append(f"| file, MB | {np.mean(sizes['maps']) / 1e6:.2f} | {np.mean(sizes['atoms']) / 1e6:.2f} | "
                 f"{np.mean(sizes['maps']) / np.mean(sizes['atoms']):.1f}× |")
    text = [f"`OMP_NUM_THREADS=1 python benchmarks/template_atoms.py --a3m-dir A3M_DIR --hits-dir HITS_DIR "
            f"--templates TEMPLATE_DB --proteins {args.proteins} --seed {args.seed}"
            f"{f' --predict {args.predict}' if args.predict else ''}`: {len(paths)} proteins with template hits "
            f"(median length {int(np.median(lengths))}, longest {max(lengths)}), up to {DEFAULT_MAX_TEMPLATES} "
            f"templates each, "
            f"one thread; crop inputs with the default checkpoint and `predict` options.", "", *lines, "",
            f"Network inputs of every crop identical both ways: {identical} of {len(paths)} proteins.", ""]
    if args.predict:
        scratch = {way: {part: [] for part in seconds[way]} for way in WAYS}
        length, files, _ = build_both(args.a3m_dir / f"{args.predict}.a3m", args.hits_dir, database, model.config,
                                      options, work, scratch, {way: [] for way in WAYS})
        rows = [f"| `trackfold predict` on {args.predict} (L = {length}) | maps in the file | atoms in the file |",
                "|---|---|---|"]
        measured = {way: predict_in_child(files[way], work / f"predict_{way}") for way in WAYS}
        rows.append(f"| CPU s | {measured['maps'][0]:.1f} | {measured['atoms'][0]:.1f} |")
        rows.append(f"| peak memory, GB | {measured['maps'][1]:.2f} | {measured['atoms'][1]:.2f} |")
        text += rows + [""]
    print("\n".join(text))
    if args.out:
        args.out.write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
