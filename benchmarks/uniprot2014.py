"""Build the UniProt-2014 FASTA (435,059 distinct sequences, 165 M residues) from Debian's ``metastudent-data``.

The package holds UniProtKB proteins of January 2014 with GO annotations as three BLAST databases (BPO, MFO,
CCO; GPL-2+ packaging, UniProt CC BY 4.0). This script downloads the package with ``apt-get download``,
unpacks it, dumps the three databases with ``blastdbcmd`` (Debian's ``ncbi-blast+``), and writes every
distinct sequence once, in a fixed order, as ``uniprot2014.fasta.gz``: record ID = the accession (the header's
first ``|`` field), description = the GO terms of its first occurrence. Same package, same file (the output's
SHA-256 is printed and written next to it).

    python benchmarks/uniprot2014.py --out SCRATCH/uniprot2014     # needs apt-get download and blastdbcmd

Sequences are kept as they are: the database build decides what it accepts (``trackfold db build
--on-bad-record``). The output is large (about 100 MB): keep it in a scratch directory, never in git.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "metastudent-data"
ONTOLOGIES = ("BPO", "MFO", "CCO")
DATASET = "usr/share/metastudent-data/dataset_201401/{ontology}/goasp.fasta"


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(command), file=sys.stderr)
    return subprocess.run(command, check=True, **kwargs)


def unpack_package(work: Path) -> Path:
    """``apt-get download`` the package into ``work`` and extract it; returns the extracted root."""
    run(["apt-get", "download", PACKAGE], cwd=work)
    deb = sorted(work.glob(f"{PACKAGE}_*.deb"))[-1]
    root = work / "extracted"
    run(["dpkg-deb", "-x", str(deb), str(root)])
    return root


def records(root: Path):
    """``(accession, description, sequence)`` of every entry of the three BLAST databases, in database order."""
    for ontology in ONTOLOGIES:
        database = root / DATASET.format(ontology=ontology)
        dump = run(["blastdbcmd", "-db", str(database), "-entry", "all", "-outfmt", "%a\t%t\t%s"],
                   capture_output=True, text=True).stdout
        for line in dump.splitlines():
            accession, title, sequence = line.split("\t")
            header = title.split(" ", 1)[0] if title else accession
            accession_id, _, terms = header.partition("|")
            yield accession_id or accession, terms, sequence.strip()


def write_distinct(root: Path, out: Path) -> tuple[int, int, str]:
    """Write each distinct sequence once (first occurrence); returns (sequences, residues, sha256)."""
    seen: set[bytes] = set()
    sequences = residues = 0
    tmp = out.with_name(f".{out.name}.tmp")
    with gzip.open(tmp, "wt", compresslevel=6) as handle:
        for accession, terms, sequence in records(root):
            key = hashlib.blake2b(sequence.encode(), digest_size=16).digest()
            if key in seen:
                continue
            seen.add(key)
            handle.write(f">{accession} {terms}\n" if terms else f">{accession}\n")
            for start in range(0, len(sequence), 60):
                handle.write(sequence[start:start + 60] + "\n")
            sequences += 1
            residues += len(sequence)
    tmp.replace(out)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    return sequences, residues, digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder (a scratch directory outside the repository)")
    args = parser.parse_args(argv)
    for tool in ("apt-get", "dpkg-deb", "blastdbcmd"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} not found (blastdbcmd: apt-get install ncbi-blast+)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "uniprot2014.fasta.gz"
    with tempfile.TemporaryDirectory(dir=out_dir) as work:
        root = unpack_package(Path(work))
        sequences, residues, digest = write_distinct(root, out)
    (out_dir / "uniprot2014.fasta.gz.sha256").write_text(f"{digest}  {out.name}\n")
    print(f"{out}: {sequences:,} sequences, {residues:,} residues, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
