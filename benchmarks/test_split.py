"""Draw the fixed test split of PDB chains: chains nothing is trained or chosen on.

Candidates are the chains of a backbone archive (``pdb_chains_promod3``) of 40-500 residues (the training
filters) that are in neither the training list nor the validation list; they are examined in a seeded random
order and kept when at most 30% identical to every training and validation chain listed and to every test
chain kept before them, identity measured in both directions over the shorter chain's whole length
(:func:`workflow_lib.training.data.draw_test_split`). Writes the names, one per line under a comment header,
and a JSON record of what was measured.

    python benchmarks/test_split.py --archive ../shared/data/pdb_chains_promod3/backbone.npz \\
        --held config/pdb_chains/train_chains.txt config/pdb_chains/val_chains.txt --size 330 \\
        --out config/pdb_chains/test_chains.txt
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.training.data import collect_chains, draw_test_split, read_chains

SEED = 20261206


def read_names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--held", type=Path, nargs="+", required=True, help="name lists of training/validation")
    parser.add_argument("--size", type=int, default=330)
    parser.add_argument("--identity", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    held_names = {name for path in args.held for name in read_names(path)}
    held = [chain.sequence for chain in read_chains(args.archive, held_names)]
    records, skipped = collect_chains([args.archive], min_length=40, max_length=500)
    candidates = [r for r in records if r.name not in held_names]
    began = time.process_time()
    kept, measured = draw_test_split(candidates, held, size=args.size, identity=args.identity, seed=args.seed,
                                     cpus=args.cpus)
    header = (f"# The fixed test split of the PDB-chain models: {len(kept)} chains of {args.archive.name} "
              f"(40-500 residues) drawn at random\n# (numpy default_rng({args.seed})), each at most "
              f"{args.identity:.0%} identical, both directions, over the shorter chain, to every chain of\n"
              f"# {', '.join(p.name for p in args.held)} and to each other (benchmarks/test_split.py). Never "
              f"train on these chains or choose anything on them.\n")
    write_text_atomic(args.out, header + "".join(f"{r.name}\n" for r in kept))
    record = {"chains": len(kept), "held": len(held), "candidates": len(candidates), "seed": args.seed,
              "identity": args.identity, "cpu_s": round(time.process_time() - began, 1), **measured}
    write_text_atomic(args.out.with_suffix(".json"), json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
