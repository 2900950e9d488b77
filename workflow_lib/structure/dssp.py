"""Secondary structure from ``mkdssp`` (DSSP, Kabsch & Sander 1983) in 8 and 3 states.

HHsearch's secondary structure score (Söding 2005, Bioinformatics 21:951): template residues carry their known
DSSP state (H, E, C, G, B, S, T, I) and query residues a PSIPRED-style 3-state prediction (H, E, C); the score
compares the two.

States used here:

- 8-state string (:data:`DSSP_STATES`): ``H`` α-helix, ``G`` 3₁₀-helix, ``I`` π-helix, ``E`` strand, ``B`` isolated
  bridge, ``T`` turn, ``S`` bend, ``P`` polyproline II (written by DSSP ≥ 4 only), ``C`` coil (DSSP's blank),
  and ``-`` for a residue DSSP did not assign (missing backbone atoms) or when DSSP is unavailable.
- 3-state reduction (:func:`reduce_to_three`): H ← H, G, I; E ← E, B; C ← everything else (T, S, P, C);
  ``-`` stays ``-``. This is the reduction HH-suite and PSIPRED's training use.

mkdssp 4.x writes classic DSSP text with ``--output-format dssp`` (checked with mkdssp 4.2.2) and refuses a PDB
file without a ``HEADER`` record, so :func:`run_dssp` adds one to a copy when needed. There is no built-in
fallback assignment: without mkdssp, :func:`secondary_structure` either raises :class:`ToolError` or, with
``on_missing_tool="unknown"``, returns all ``-``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from workflow_lib.errors import ToolError
from workflow_lib.seqio.atomic import write_bytes_atomic, write_text_atomic
from workflow_lib.structure.parse import Chain, read_structure_bytes
from workflow_lib.structure.pdb_writer import CRYST1, format_pdb

DSSP_STATES = "HGIEBTSPC"
"""The 8-state alphabet (DSSP's 8 states with its blank as C, plus P from DSSP ≥ 4); ``-`` means unknown."""
UNKNOWN_STATE = "-"
_TO_THREE = {"H": "H", "G": "H", "I": "H", "E": "E", "B": "E", "T": "C", "S": "C", "P": "C", "C": "C",
             UNKNOWN_STATE: UNKNOWN_STATE}
_HEADER = f"{'HEADER    TRACKFOLD INPUT':<50}{'01-JAN-00':<9}   XXXX".ljust(80)


@dataclass(frozen=True)
class DsspResidue:
    """One residue line of classic DSSP output."""

    chain_id: str
    residue_number: str  # author number + insertion code, as in :attr:`Chain.residue_numbers`
    amino_acid: str
    state: str  # one of DSSP_STATES


@dataclass(frozen=True)
class SecondaryStructure:
    """Per-residue states of one chain (strings of length L, aligned with the chain's residues)."""

    ss8: str
    ss3: str


def reduce_to_three(ss8: str) -> str:
    """8-state string → 3-state string (H: H, G, I; E: E, B; C: the rest; ``-`` unknown)."""
    try:
        return "".join(_TO_THREE[state] for state in ss8)
    except KeyError as error:
        raise ValueError(f"{error.args[0]!r} is not a DSSP state ({DSSP_STATES} or -)") from None


def mkdssp_version(executable: str = "mkdssp") -> str | None:
    """The version line of ``mkdssp --version``, or None when the program is not installed."""
    if shutil.which(executable) is None:
        return None
    done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=30, check=False)
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def parse_dssp(text: str) -> list[DsspResidue]:
    """Residue records of classic DSSP output (chain-break ``!`` lines are skipped).

    Column layout (DSSP 2–4): residue number 6–10, insertion code 11, chain 12, amino acid 14, state 17.
    """
    lines = text.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith("  #  RESIDUE")), None)
    if start is None:
        raise ValueError("no '  #  RESIDUE' header: not classic DSSP output")
    records = []
    for line in lines[start + 1:]:
        if len(line) < 17 or line[13] == "!":
            continue
        state = line[16] if line[16] != " " else "C"
        if state not in DSSP_STATES:
            raise ValueError(f"unknown DSSP state {state!r} in line {line[:40]!r}")
        records.append(DsspResidue(chain_id=line[11].strip(), residue_number=line[5:11].strip(),
                                   amino_acid=line[13], state=state))
    return records


def _prepared_input(path: Path, directory: Path) -> Path:
    """A copy mkdssp accepts: decompressed, and for PDB text with a HEADER (and CRYST1) record first."""
    raw = read_structure_bytes(path)
    text = raw.decode("utf-8", errors="replace")
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.startswith("data_"):
        target = directory / "input.cif"
        write_bytes_atomic(target, raw)
        return target
    target = directory / "input.pdb"
    records = text.splitlines()
    if not first.startswith("HEADER"):
        records.insert(0, _HEADER)
    if not any(line.startswith("CRYST1") for line in records):
        records.insert(1, CRYST1)
    write_text_atomic(target, "\n".join(records) + "\n")
    return target


def run_dssp(path: str | Path, *, executable: str = "mkdssp", timeout: float = 300.0) -> list[DsspResidue]:
    """Run mkdssp on a PDB or mmCIF file (``.gz`` allowed) and parse its classic DSSP output.

    Raises :class:`ToolError` when mkdssp is missing, fails or times out (its stderr in the message). mkdssp 4
    rejects some files Biopython reads, e.g. PDB files with a blank chain id; :func:`secondary_structure` on the
    parsed :class:`Chain` works for those, since it writes a clean file first.
    """
    path = Path(path)
    if shutil.which(executable) is None:
        raise ToolError(f"{executable} not found on PATH (install DSSP, e.g. apt-get install dssp)")
    with tempfile.TemporaryDirectory(prefix="trackfold-dssp-") as tmp:
        directory = Path(tmp)
        prepared = _prepared_input(path, directory)
        output = directory / "out.dssp"
        command = [executable, "--output-format", "dssp", str(prepared), str(output)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise ToolError(f"{executable} timed out after {timeout:g} s on {path}") from error
        if done.returncode != 0 or not output.exists():
            message = (done.stderr or done.stdout).strip().replace("\n", " | ")[:1000]
            raise ToolError(f"{executable} failed on {path} (exit {done.returncode}): {message}")
        text = output.read_text(encoding="utf-8", errors="replace")
    try:
        return parse_dssp(text)
    except ValueError as error:
        raise ToolError(f"cannot parse {executable} output for {path}: {error}") from error


def secondary_structure(chain: Chain, *, executable: str = "mkdssp",
                        on_missing_tool: Literal["raise", "unknown"] = "raise") -> SecondaryStructure:
    """DSSP states of ``chain``, one per residue.

    The chain is written to a temporary PDB file (residues numbered 1..L; missing O placed ideally by the
    writer, Cβ from the file or virtual) and mkdssp is run on it, so the states line up with the chain's residues
    whatever its numbering. Residues DSSP skips (missing N, CA or C) get ``-``. Without mkdssp, raises
    :class:`ToolError`, or returns all ``-`` when ``on_missing_tool="unknown"``.
    """
    if on_missing_tool not in ("raise", "unknown"):
        raise ValueError(f"on_missing_tool must be 'raise' or 'unknown', got {on_missing_tool!r}")
    length = len(chain)
    if shutil.which(executable) is None and on_missing_tool == "unknown":
        unknown = UNKNOWN_STATE * length
        return SecondaryStructure(ss8=unknown, ss3=unknown)
    coords = np.concatenate([chain.coords, chain.cb[:, None, :]], axis=1).astype(np.float64)
    bfactors = np.nan_to_num(np.clip(chain.bfactors.astype(np.float64), -99.99, 999.99), nan=0.0)
    text = format_pdb(chain.sequence, coords, bfactors, chain_id="A")
    with tempfile.TemporaryDirectory(prefix="trackfold-ss-") as tmp:
        pdb_path = Path(tmp) / "chain.pdb"
        write_text_atomic(pdb_path, text)
        records = run_dssp(pdb_path, executable=executable)
    states = [UNKNOWN_STATE] * length
    for record in records:
        index = int(record.residue_number) - 1
        if 0 <= index < length:
            states[index] = record.state
    ss8 = "".join(states)
    return SecondaryStructure(ss8=ss8, ss3=reduce_to_three(ss8))

