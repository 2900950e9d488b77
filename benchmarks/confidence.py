"""pLDDT against the real lDDT-Cα: the network's pLDDT head and the distogram's expected lDDT, on PDB chains.

``trackfold predict`` folds the backbone from the predicted distogram by default; its pLDDT can come from the
network's head (which scored the structure module's backbone, not the folded one) or from the distogram
(:func:`workflow_lib.inference.confidence.expected_lddt`). This script predicts PDB chains the checkpoint never
saw and reports, for both, the Pearson correlation with the folded model's true lDDT-Cα per chain (mean pLDDT
against lDDT) and per residue (pooled), and the mean absolute error.

Chains: ``--chains`` of ``pdb_chains_promod3`` (``--archive``), 60–300 residues, in a fixed order (SHA-1 of the
name), leaving out every chain that ``trackfold search`` (1 iteration, E ≤ 1e-3) finds homologous to a chain of
the checkpoint's training structures (``--exclude``: PDB files or a folder of them). MSAs: ``trackfold msa``
against ``--db`` (the fast setting), or the query alone without ``--db``. Each chain runs through
``trackfold features`` and the product's predict path (:func:`workflow_lib.inference.predict.predict_features`,
network then fold) on one CPU thread.

    python benchmarks/confidence.py --archive ARCHIVE --exclude DOCKING_DIR --db SEQ_DB --chains 60 \\
        --work SCRATCH/confidence [--model models/trackfold_small_v4.pt] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.inference.confidence import expected_lddt  # noqa: E402
from workflow_lib.inference.fold import FoldOptions, fold_from_distogram  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_features  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.seqio.fasta import write_fasta  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.cbeta import virtual_cb  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca  # noqa: E402
from workflow_lib.structure.parse import read_structure  # noqa: E402

PY = [sys.executable, "-m", "workflow_lib"]


def trackfold(*args: str) -> None:
    subprocess.run([*PY, *map(str, args)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def sample_chains(archive: Path, count: int, min_length: int = 60, max_length: int = 300) -> list:
    chains = [c.chain for c in read_backbone_archive(archive)
              if min_length <= len(c.chain.sequence) <= max_length and set(c.chain.sequence) != {"X"}]
    chains.sort(key=lambda c: hashlib.sha1(c.name.encode()).hexdigest())
    return chains[:count]


def training_sequences(exclude: Path) -> list[tuple[str, str]]:
    files = sorted(p for p in (exclude.rglob("*") if exclude.is_dir() else [exclude]) if p.is_file())
    out = []
    for path in files:
        for chain in read_structure(path):
            if len(chain.sequence) >= 20:
                out.append((f"{chain.name}_{len(out)}", chain.sequence))
    return out


def homologous_to_training(work: Path, chains: list, exclude: Path) -> set[str]:
    """Names of ``chains`` with a hit at E ≤ 1e-3 among the training structures' chains."""
    hits_path = work / "exclude_hits.m8"
    if not hits_path.exists():
        train = work / "training.fasta"
        write_fasta(train, training_sequences(exclude), width=0)
        trackfold("db", "build", train, "--out", work / "training_db", "--shards", "1")
        write_fasta(work / "candidates.fasta", [(c.name, c.sequence) for c in chains], width=0)
        trackfold("search", work / "candidates.fasta", "--db", work / "training_db", "--iterations", "1",
                  "--max-evalue", "1e-3", "--out", work / "exclude_hits.parquet", "--m8", hits_path)
    names = set()
    for line in hits_path.read_text().splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("\t")[0])
    return names


def msas(work: Path, chains: list, db: Path | None) -> Path:
    out = work / ("msa" if db else "query_only")
    out.mkdir(parents=True, exist_ok=True)
    missing = [c for c in chains if not (out / f"{c.name}.a3m").exists()]
    if not missing:
        return out
    if db is None:
        for c in missing:
            (out / f"{c.name}.a3m").write_text(f">{c.name}\n{c.sequence}\n")
        return out
    queries = work / "msa_queries.fasta"
    write_fasta(queries, [(c.name, c.sequence) for c in missing], width=0)
    trackfold("msa", queries, "--db", db, "--out-dir", out, "--cpus", "1", "--no-sensitive",
              "--pseudocounts", "substitution")
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.corrcoef(x, y)[0, 1]) if x.size > 2 and x.std() > 0 and y.std() > 0 else float("nan")


def chain_row(model, chain, a3m: Path) -> dict:
    features = build_features(a3m)
    started = time.process_time()
    prediction = predict_features(model, features, PredictOptions(fold="network", pair_heads=("dist",), device="cpu"))
    network_s = time.process_time() - started
    started = time.process_time()
    folded, _ = fold_from_distogram(prediction.probs["dist"], FoldOptions(seed=0))
    fold_s = time.process_time() - started
    started = time.process_time()
    estimate = expected_lddt(prediction.probs["dist"], virtual_cb(folded[:, 0], folded[:, 1], folded[:, 2]))
    estimate_s = time.process_time() - started
    true_ca = chain.coords[:, 1].astype(np.float64)
    folded_lddt = lddt_ca(folded[:, 1], true_ca)
    network_lddt = lddt_ca(prediction.backbone[:, 1].astype(np.float64), true_ca)
    depth = sum(1 for line in a3m.read_text().splitlines() if line.startswith(">"))
    return {"name": chain.name, "length": len(chain.sequence), "depth": depth,
            "lddt_folded": float(folded_lddt.score), "lddt_network": float(network_lddt.score),
            "per_residue_lddt": np.nan_to_num(folded_lddt.per_residue, nan=-1.0).round(4).tolist(),
            "plddt_network": (prediction.plddt / 100.0).round(4).tolist(),
            "plddt_distogram": estimate.round(4).tolist(),
            "seconds": {"network": network_s, "fold": fold_s, "estimate": estimate_s}}


def summary(rows: list[dict]) -> dict:
    out = {"chains": len(rows), "mean_lddt_folded": float(np.mean([r["lddt_folded"] for r in rows])),
           "mean_lddt_network": float(np.mean([r["lddt_network"] for r in rows]))}
    truth = np.array([r["lddt_folded"] for r in rows])
    residues = np.concatenate([r["per_residue_lddt"] for r in rows])
    keep = residues >= 0
    for key in ("plddt_network", "plddt_distogram"):
        means = np.array([np.mean(r[key]) for r in rows])
        pooled = np.concatenate([r[key] for r in rows])
        out[key] = {"mean": float(means.mean()), "pearson_chain": pearson(means, truth),
                    "pearson_residue": pearson(pooled[keep], residues[keep]),
                    "mae_chain": float(np.abs(means - truth).mean())}
    out["seconds_per_chain"] = {k: float(np.mean([r["seconds"][k] for r in rows]))
                                for k in ("network", "fold", "estimate")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True, type=Path)
    parser.add_argument("--exclude", required=True, type=Path, help="the checkpoint's training structures")
    parser.add_argument("--db", type=Path, help="sequence database for the MSAs (default: the query alone)")
    parser.add_argument("--chains", type=int, default=60)
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.work.mkdir(parents=True, exist_ok=True)
    candidates = sample_chains(args.archive, 3 * args.chains)
    dropped = homologous_to_training(args.work, candidates, args.exclude)
    chains = [c for c in candidates if c.name not in dropped][:args.chains]
    print(f"[confidence] {len(candidates)} candidates, {len(dropped)} homologous to training, "
          f"{len(chains)} used", file=sys.stderr, flush=True)
    msa_dir = msas(args.work, chains, args.db)
    model, _ = load_checkpoint(args.model)
    model.eval()
    rows = []
    for chain in chains:
        rows.append(chain_row(model, chain, msa_dir / f"{chain.name}.a3m"))
        r = rows[-1]
        print(f"[confidence] {chain.name} L={r['length']} depth={r['depth']} lDDT {r['lddt_folded']:.3f} "
              f"pLDDT network {np.mean(r['plddt_network']):.3f} distogram {np.mean(r['plddt_distogram']):.3f}",
              file=sys.stderr, flush=True)
    result = {"model": str(args.model.name), "msa": "trackfold msa, fast setting" if args.db else "query only",
              "dropped_homologous": len(dropped), "summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
