"""Build ``workflow_lib/data/calibration_decoys.npz``: reversed real protein sequences for E-value calibration
(``search.calibration: reversed``; see :func:`workflow_lib.search.evalue.decoy_windows`).

    .venv/bin/python benchmarks/calibration_decoys.py [--shared ../shared/data] [--count 1000]

Source: the Swiss-Prot subsets in ``shared/data/swissprot_subsets_prokka`` (Archaea, Viruses, Staphylococcus;
no *E. coli*, whose MSAs trained the context model, and none of the Pfam or CATH benchmark files): every
sequence of at least :data:`MIN_LENGTH` residues without ambiguous
residues, taken at even steps through the files until ``count``, each reversed. A reversed protein keeps its
composition, its low-complexity stretches and the periodicity of its helices and strands, but no homology to
anything: the local structure that a context-specific profile rewards in every protein, related or not.
Writes the npz (``codes`` uint8, ``offsets`` int64) and a JSON provenance next to it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflow_lib.search.evalue import DECOY_POOL_PATH, write_decoy_pool  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta  # noqa: E402

SOURCES = ("sprot_Archaea", "sprot_Viruses", "genus_Staphylococcus")
MIN_LENGTH = 200
"""Shortest protein kept (the shipped pool's; windows are at most
:data:`~workflow_lib.search.evalue.DECOY_WINDOW_LENGTH` long, which the loader checks)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=DECOY_POOL_PATH)
    args = parser.parse_args(argv)
    eligible = []
    for name in SOURCES:
        path = args.shared / "swissprot_subsets_prokka" / f"{name}.fasta.gz"
        for record in read_fasta(path):
            if len(record.sequence) >= MIN_LENGTH and set(record.sequence) <= set("ACDEFGHIKLMNPQRSTVWY"):
                eligible.append((name, record.id, record.sequence))
    step = len(eligible) / args.count
    chosen = [eligible[int(k * step)] for k in range(min(args.count, len(eligible)))]
    write_decoy_pool(args.out, [encode(sequence)[::-1] for _, _, sequence in chosen])
    provenance = {"sources": [f"shared/data/swissprot_subsets_prokka/{name}.fasta.gz" for name in SOURCES],
                  "eligible": len(eligible), "sequences": len(chosen),
                  "residues": int(sum(len(s) for _, _, s in chosen)),
                  "min_length": MIN_LENGTH, "reversed": True,
                  "first_ids": [identifier for _, identifier, _ in chosen[:5]]}
    write_text_atomic(args.out.with_suffix(".json"), json.dumps(provenance, indent=1) + "\n")
    print(f"{len(chosen)} reversed sequences ({provenance['residues']} residues) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
