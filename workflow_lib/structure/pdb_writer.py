"""Write a backbone (N, CA, C, optional O and Cβ) as a PDB file that Biopython, TM-align and mkdssp read.

The file holds a ``HEADER`` line (mkdssp 4 refuses PDB files without one), ``SEQRES`` records (the chain's
sequence, which tools that align models to sequences read), a ``CRYST1`` line with a unit cell
(P 1, 1 Å — a placeholder, as AlphaFold and RoseTTAFold write), one ``ATOM`` record per present atom, ``TER``
and ``END``. Per-residue confidence (pLDDT, by convention 0–100) goes in the B-factor column of every atom of
the residue; occupancy is 1.00.

Missing atoms (NaN) are handled so that any backbone the model or a parser produced can be written:

- N, CA or C NaN: that atom is left out;
- O missing (not given, or NaN): the ideal carbonyl oxygen from :func:`~workflow_lib.structure.cbeta.ideal_oxygen`;
- Cβ missing: the virtual Cβ (:func:`~workflow_lib.structure.cbeta.virtual_cb`), except for glycine, which has
  none. Derived atoms need all of N, CA, C of the residue.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from Bio.Data.PDBData import protein_letters_1to3

from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.structure.cbeta import ideal_oxygen, virtual_cb

RESIDUE_NAMES = {letter: name.upper() for letter, name in protein_letters_1to3.items()}
RESIDUE_NAMES["X"] = "UNK"
"""Residue names of the one-letter codes (X: UNK)."""
ATOM_NAMES = ("N", "CA", "C", "O", "CB")
"""The atoms written per residue, in order (Cβ not for glycine)."""
ATOM_ELEMENTS = ("N", "C", "C", "O", "C")
CRYST1 = "CRYST1    1.000    1.000    1.000  90.00  90.00  90.00 P 1           1"


def _split_number(label: str) -> tuple[int, str]:
    """``"100A"`` → (100, "A"); ``"-3"`` → (-3, "")."""
    label = str(label).strip()
    digits = label.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    icode = label[len(digits):]
    try:
        number = int(digits)
    except ValueError:
        raise ValueError(f"residue number {label!r} is not an integer with an optional insertion code") from None
    if len(icode) > 1 or not -999 <= number <= 9999:
        raise ValueError(f"residue number {label!r} does not fit the PDB format")
    return number, icode


def complete_backbone(sequence: str, coords: np.ndarray) -> np.ndarray:
    """float64 ``[L, 5, 3]`` N, CA, C, O, Cβ from ``coords`` ``[L, 3|4|5, 3]`` with O and Cβ filled in.

    Glycine keeps a NaN Cβ; atoms that cannot be derived (N, CA or C missing) stay NaN.
    """
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim != 3 or coords.shape[1] not in (3, 4, 5) or coords.shape[2] != 3:
        raise ValueError(f"coords must have shape [L, 3|4|5, 3] (N, CA, C[, O[, CB]]), got {coords.shape}")
    if coords.shape[0] != len(sequence):
        raise ValueError(f"coords has {coords.shape[0]} residues, the sequence {len(sequence)}")
    full = np.full((coords.shape[0], 5, 3), np.nan)
    full[:, : coords.shape[1]] = coords
    n, ca, c = full[:, 0], full[:, 1], full[:, 2]
    missing_o = ~np.isfinite(full[:, 3]).all(axis=-1)
    if missing_o.any():
        full[missing_o, 3] = ideal_oxygen(n, ca, c)[missing_o]
    is_glycine = np.array([letter == "G" for letter in sequence], dtype=bool)
    missing_cb = ~np.isfinite(full[:, 4]).all(axis=-1) & ~is_glycine
    if missing_cb.any():
        full[missing_cb, 4] = virtual_cb(n, ca, c)[missing_cb]
    full[is_glycine, 4] = np.nan
    return full


def format_pdb(sequence: str, coords: np.ndarray, bfactors: np.ndarray | None = None, *, chain_id: str = "A",
               residue_numbers: list[str] | tuple[str, ...] | None = None, title: str = "TRACKFOLD MODEL") -> str:
    """The PDB text :func:`write_pdb` writes (arguments as there)."""
    unknown = sorted(set(sequence) - set(RESIDUE_NAMES))
    if unknown:
        raise ValueError(f"sequence has letters without a residue name: {''.join(unknown)}")
    if len(chain_id) != 1 or not chain_id.isprintable() or chain_id == " ":
        raise ValueError(f"chain_id must be one printable character, got {chain_id!r}")
    length = len(sequence)
    full = complete_backbone(sequence, coords)
    finite = full[np.isfinite(full)]
    if finite.size and (finite.max() > 9999.999 or finite.min() < -999.999):
        raise ValueError("coordinates outside the PDB range [-999.999, 9999.999] Å")
    if bfactors is None:
        bfactors = np.zeros(length)
    bfactors = np.asarray(bfactors, dtype=np.float64)
    if bfactors.shape != (length,):
        raise ValueError(f"bfactors must have shape [{length}], got {bfactors.shape}")
    if not np.isfinite(bfactors).all() or bfactors.min(initial=0) < -99.99 or bfactors.max(initial=0) > 999.99:
        raise ValueError("bfactors must be finite and within [-99.99, 999.99]")
    if residue_numbers is None:
        numbers = [(i + 1, "") for i in range(length)]
    else:
        if len(residue_numbers) != length:
            raise ValueError(f"{len(residue_numbers)} residue numbers for {length} residues")
        numbers = [_split_number(label) for label in residue_numbers]
    if length > 9999 and residue_numbers is None:
        raise ValueError(f"{length} residues do not fit the PDB format (at most 9999)")

    lines = [f"{'HEADER    ' + title[:40]:<50}{'01-JAN-00':<9}   XXXX".ljust(80)]
    lines += seqres_records(sequence, chain_id)
    lines.append(CRYST1.ljust(80))
    serial = 0
    for i, letter in enumerate(sequence):
        resname = RESIDUE_NAMES[letter]
        number, icode = numbers[i]
        for k, atom_name in enumerate(ATOM_NAMES):
            x, y, z = full[i, k]
            if not np.isfinite(full[i, k]).all():
                continue
            serial += 1
            if serial > 99999:
                raise ValueError("more than 99999 atoms do not fit the PDB format")
            lines.append(f"ATOM  {serial:5d}  {atom_name:<3s} {resname:3s} {chain_id}{number:4d}{icode or ' ':1s}   "
                         f"{x:8.3f}{y:8.3f}{z:8.3f}{1.0:6.2f}{bfactors[i]:6.2f}          {ATOM_ELEMENTS[k]:>2s}  ")
    last_number, last_icode = numbers[-1] if numbers else (0, "")
    lines.append(f"TER   {serial + 1:5d}      {RESIDUE_NAMES[sequence[-1]] if sequence else 'UNK':3s} "
                 f"{chain_id}{last_number:4d}{last_icode or ' ':1s}".ljust(80))
    lines.append("END".ljust(80))
    return "\n".join(lines) + "\n"


def seqres_records(sequence: str, chain_id: str) -> list[str]:
    """The ``SEQRES`` lines of one chain (13 residues a line)."""
    names = [RESIDUE_NAMES[letter] for letter in sequence]
    return [f"SEQRES {row + 1:3d} {chain_id} {len(names):4d}  {' '.join(names[start:start + 13])}".ljust(80)
            for row, start in enumerate(range(0, len(names), 13))]


def write_pdb(path: str | Path, sequence: str, coords: np.ndarray, bfactors: np.ndarray | None = None, *,
              chain_id: str = "A", residue_numbers: list[str] | tuple[str, ...] | None = None,
              title: str = "TRACKFOLD MODEL") -> None:
    """Write one chain as a PDB file, atomically.

    Args:
        path: destination; written through :func:`~workflow_lib.seqio.atomic.atomic_path`.
        sequence: one-letter residues ``L`` (the 20 and X, written as UNK).
        coords: ``[L, 3, 3]`` N, CA, C; ``[L, 4, 3]`` + O; or ``[L, 5, 3]`` + O, Cβ (Å, NaN = missing; see the
            module docstring for what is derived).
        bfactors: ``[L]`` per-residue values for the B-factor column (pLDDT); zeros when None.
        chain_id: one character.
        residue_numbers: author numbers with optional insertion code (``"100A"``); 1..L when None.
        title: text of the HEADER line (≤ 40 characters are kept).
    """
    if not sequence:
        raise ValueError("cannot write an empty chain")
    write_text_atomic(path, format_pdb(sequence, coords, bfactors, chain_id=chain_id,
                                       residue_numbers=residue_numbers, title=title))
