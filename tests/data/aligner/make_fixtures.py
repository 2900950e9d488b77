"""Regenerate the aligner fixtures in this directory from shared/data with HH-suite (run once; see README).

    python tests/data/aligner/make_fixtures.py ../shared/data

Writes ``hhm/*.hhm`` (``hhmake`` profiles of real MSAs), ``hhalign/*.atab`` and ``hhalign/scores.tsv`` (the
``hhalign -norealign`` Viterbi alignments and scores of the pairs in ``PAIRS``), and ``versions.txt``.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFORMAT = "/usr/share/hhsuite/scripts/reformat.pl"

# name -> (path relative to shared/data, how to turn it into A3M)
SOURCES = {
    "t1078_e3_cov75": ("rosettafold_example/hhblits_evalue_series/t000_.1e-3.id90cov75.a3m.gz", "a3m"),
    "t1078_e6_cov50": ("rosettafold_example/hhblits_evalue_series/t000_.1e-6.id90cov50.a3m.gz", "a3m"),
    "t1078_e10_cov75": ("rosettafold_example/hhblits_evalue_series/t000_.1e-10.id90cov75.a3m.gz", "a3m"),
    "t1078_e30": ("rosettafold_example/hhblits_evalue_series/t000_.1e-30.a3m.gz", "a3m"),
    "t1078_e30_cov50": ("rosettafold_example/hhblits_evalue_series/t000_.1e-30.id90cov50.a3m.gz", "a3m"),
    "t1078_msa0": ("rosettafold_example/end-to-end/t000_.msa0.a3m", "a3m"),
    "of_short_bfd": ("openfold_template_example/alignments/bfd_uniclust_hits.a3m", "a3m"),
    "of_short_mgnify": ("openfold_template_example/alignments/mgnify_hits.sto", "sto-first"),
    "of_short_uniref90": ("openfold_template_example/alignments/uniref90_hits.sto", "sto-first"),
    "q2k_bfd": ("openfold_template_example/alignments/2q2k_A/bfd_uniclust_hits.a3m", "a3m"),
    "q2k_mgnify": ("openfold_template_example/alignments/2q2k_A/mgnify_hits.sto", "sto-first"),
    "q2k_uniref90": ("openfold_template_example/alignments/2q2k_A/uniref90_hits.sto", "sto-first"),
    "q2k_uniprot": ("openfold_template_example/alignments/2q2k_A/uniprot_hits.sto", "sto-first"),
    "t1001": ("msa_examples/trRosetta_T1001.a3m", "a3m"),
    "fam69b": ("hhsuite_examples/query.a3m", "a3m"),
    "pkinase": ("hmmer_examples/tutorial/Pkinase.sto", "sto-50"),
    "fn3": ("hmmer_examples/tutorial/fn3.sto", "sto-50"),
    "globins4": ("hmmer_examples/tutorial/globins4.sto", "sto-50"),
    "rrm1": ("hmmer_examples/testsuite/RRM_1.sto", "sto-50"),
    "caudal_act": ("hmmer_examples/testsuite/Caudal_act.sto", "sto-50"),
}

PAIRS = [
    ("t1078_e3_cov75", "t1078_e30"), ("t1078_e6_cov50", "t1078_msa0"), ("t1078_e10_cov75", "t1078_e30_cov50"),
    ("t1078_msa0", "t1078_e30"), ("t1078_e30_cov50", "t1078_e3_cov75"), ("t1078_e6_cov50", "t1078_e10_cov75"),
    ("of_short_bfd", "of_short_mgnify"), ("of_short_bfd", "of_short_uniref90"),
    ("of_short_uniref90", "of_short_mgnify"),
    ("q2k_bfd", "q2k_mgnify"), ("q2k_bfd", "q2k_uniref90"), ("q2k_bfd", "q2k_uniprot"),
    ("q2k_mgnify", "q2k_uniref90"), ("q2k_uniprot", "q2k_mgnify"), ("q2k_uniref90", "q2k_uniprot"),
    ("fam69b", "pkinase"), ("pkinase", "fam69b"),
    ("globins4", "pkinase"), ("fn3", "rrm1"), ("t1001", "t1078_msa0"), ("caudal_act", "fn3"),
    ("t1001", "globins4"), ("of_short_bfd", "q2k_uniprot"), ("rrm1", "t1001"),
]
"""(query, template) pairs: 15 pairs of profiles of the same protein from different MSAs, 2 remote homologs
(FAM69B is a protein-kinase-like family), 7 unrelated pairs (to spread the scores)."""

HHALIGN_OPTIONS = ["-norealign", "-nocontxt", "-pc_hhm_nocontxt_mode", "2", "-pc_hhm_nocontxt_a", "1",
                   "-pc_hhm_nocontxt_b", "10", "-pc_hhm_nocontxt_c", "1", "-sc", "0", "-ssm", "0", "-v", "0"]
"""Viterbi only (no MAC), substitution-matrix pseudocounts with τ = 1/(1 + (Neff − 1)/10) (the PSI-BLAST rule,
β = 10), column score log2 Σ q t / f (``-sc 0``), no secondary-structure score. Everything else default."""


def to_a3m(source: Path, kind: str, out: Path) -> None:
    if kind == "a3m":
        opener = gzip.open if source.suffix == ".gz" else open
        with opener(source, "rt") as handle:
            out.write_text(handle.read())
        return
    mode = "first" if kind == "sto-first" else "50"
    subprocess.run(["perl", REFORMAT, "sto", "a3m", str(source), str(out), "-M", mode, "-r", "-noss"], check=True,
                   stdout=subprocess.DEVNULL)


def run_hhalign(query: Path, template: Path, atab: Path, hhr: Path) -> None:
    subprocess.run(["hhalign", "-i", str(query), "-t", str(template), "-o", str(hhr), "-atab", str(atab),
                    *HHALIGN_OPTIONS], check=True)


def hhr_score(hhr: Path) -> tuple[float, int]:
    """(Score, Cols) of hit 1 from the hit list of an .hhr file."""
    lines = hhr.read_text().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(" No Hit"))
    fields = lines[start + 1][35:].split()
    return float(fields[3]), int(fields[5])


def main(shared: Path) -> None:
    for tool in ("hhmake", "hhalign", "perl"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    (HERE / "hhm").mkdir(exist_ok=True)
    (HERE / "hhalign").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (relative, kind) in SOURCES.items():
            a3m = Path(tmp) / f"{name}.a3m"
            to_a3m(shared / relative, kind, a3m)
            subprocess.run(["hhmake", "-i", str(a3m), "-o", str(HERE / "hhm" / f"{name}.hhm"), "-name", name,
                            "-v", "0"], check=True)
            if kind != "a3m":
                shutil.copy(a3m, HERE / "hhm" / f"{name}.a3m")
        rows = ["query\ttemplate\tscore\tcols"]
        for query, template in PAIRS:
            stem = f"{query}__{template}"
            hhr = Path(tmp) / f"{stem}.hhr"
            run_hhalign(HERE / "hhm" / f"{query}.hhm", HERE / "hhm" / f"{template}.hhm",
                        HERE / "hhalign" / f"{stem}.atab", hhr)
            score, cols = hhr_score(hhr)
            rows.append(f"{query}\t{template}\t{score}\t{cols}")
        (HERE / "hhalign" / "scores.tsv").write_text("\n".join(rows) + "\n")
    version = subprocess.run(["hhalign", "-h"], capture_output=True, text=True).stdout.splitlines()[0]
    (HERE / "versions.txt").write_text(f"{version}\nhhalign options: {' '.join(HHALIGN_OPTIONS)}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[3].parent / "shared" / "data"))
