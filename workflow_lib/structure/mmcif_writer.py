"""Write a predicted backbone as mmCIF with pLDDT as the per-residue quality metric (ModelCIF), as AlphaFold DB
and ColabFold do.

The file holds one data block: the entry, the polymer entity with its sequence (``_entity_poly``,
``_entity_poly_seq``), the chain (``_struct_asym``), ``_atom_site`` (the atoms of
:func:`~workflow_lib.structure.pdb_writer.complete_backbone`, pLDDT in ``B_iso_or_equiv`` as in the PDB file),
and the ModelCIF quality categories: ``_ma_qa_metric`` (pLDDT, local, and its mean, global),
``_ma_qa_metric_local`` (one row per residue) and ``_ma_qa_metric_global``. Biopython's ``MMCIFParser`` and
``MMCIF2Dict`` read it back (tested).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.structure.pdb_writer import ATOM_ELEMENTS, ATOM_NAMES, RESIDUE_NAMES, complete_backbone

SOFTWARE = "trackfold"


def _quote(text: str) -> str:
    """A CIF value: bare when it has no space or quote and does not start with a reserved character."""
    if text and not any(c in text for c in " \t'\"#") and text[0] not in "_$[;" and \
            text.lower() not in ("data_", "loop_", "stop_", "global_", ".", "?"):
        return text
    return "'" + text.replace("'", "") + "'"


def _loop(category: str, columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["loop_"] + [f"_{category}.{column}" for column in columns]
    lines += [" ".join(row) for row in rows]
    return lines + ["#"]


def format_mmcif(name: str, sequence: str, coords: np.ndarray, plddt: np.ndarray, *,
                 residue_numbers: list[int] | np.ndarray | None = None, chain_id: str = "A") -> str:
    """The mmCIF text :func:`write_mmcif` writes (arguments as there)."""
    unknown = sorted(set(sequence) - set(RESIDUE_NAMES))
    if unknown:
        raise ValueError(f"sequence has letters without a residue name: {''.join(unknown)}")
    length = len(sequence)
    plddt = np.asarray(plddt, dtype=np.float64)
    if plddt.shape != (length,) or not np.isfinite(plddt).all():
        raise ValueError(f"plddt must be {length} finite values")
    numbers = np.arange(1, length + 1) if residue_numbers is None else np.asarray(residue_numbers, dtype=np.int64)
    if numbers.shape != (length,):
        raise ValueError(f"{numbers.size} residue numbers for {length} residues")
    full = complete_backbone(sequence, coords)
    block = re.sub(r"[^A-Za-z0-9._-]", "_", name) or "model"
    names = [RESIDUE_NAMES[letter] for letter in sequence]
    lines = [f"data_{block}", "#", f"_entry.id {_quote(name)}", "#",
             f"_struct.entry_id {_quote(name)}", f"_struct.title {_quote(f'{SOFTWARE} prediction of {name}')}", "#",
             "_entity.id 1", "_entity.type polymer", "#",
             "_entity_poly.entity_id 1", "_entity_poly.type polypeptide(L)",
             f"_entity_poly.pdbx_seq_one_letter_code {sequence}", "#"]
    lines += _loop("entity_poly_seq", ["entity_id", "num", "mon_id", "hetero"],
                   [["1", str(i + 1), names[i], "n"] for i in range(length)])
    lines += ["_struct_asym.id " + chain_id, "_struct_asym.entity_id 1", "#"]
    atoms = []
    serial = 0
    for i in range(length):
        for k, atom in enumerate(ATOM_NAMES):
            if not np.isfinite(full[i, k]).all():
                continue
            serial += 1
            x, y, z = full[i, k]
            atoms.append(["ATOM", str(serial), ATOM_ELEMENTS[k], atom, ".", names[i], chain_id, "1", str(i + 1), "?",
                          f"{x:.3f}", f"{y:.3f}", f"{z:.3f}", "1.00", f"{plddt[i]:.2f}", str(int(numbers[i])),
                          names[i], chain_id, atom, "1"])
    lines += _loop("atom_site", ["group_PDB", "id", "type_symbol", "label_atom_id", "label_alt_id", "label_comp_id",
                                 "label_asym_id", "label_entity_id", "label_seq_id", "pdbx_PDB_ins_code",
                                 "Cartn_x", "Cartn_y", "Cartn_z", "occupancy", "B_iso_or_equiv", "auth_seq_id",
                                 "auth_comp_id", "auth_asym_id", "auth_atom_id", "pdbx_PDB_model_num"], atoms)
    lines += _loop("ma_qa_metric", ["id", "name", "description", "type", "mode"],
                   [["1", "pLDDT", "'Predicted lDDT-Ca'", "pLDDT", "local"],
                    ["2", "pLDDT", "'Mean predicted lDDT-Ca'", "pLDDT", "global"]])
    lines += _loop("ma_qa_metric_local", ["ordinal_id", "model_id", "label_asym_id", "label_seq_id",
                                          "label_comp_id", "metric_id", "metric_value"],
                   [[str(i + 1), "1", chain_id, str(i + 1), names[i], "1", f"{plddt[i]:.2f}"] for i in range(length)])
    lines += ["_ma_qa_metric_global.ordinal_id 1", "_ma_qa_metric_global.model_id 1",
              "_ma_qa_metric_global.metric_id 2", f"_ma_qa_metric_global.metric_value {plddt.mean():.2f}", "#"]
    return "\n".join(lines) + "\n"


def write_mmcif(path: str | Path, name: str, sequence: str, coords: np.ndarray, plddt: np.ndarray, *,
                residue_numbers: list[int] | np.ndarray | None = None, chain_id: str = "A") -> None:
    """Write one predicted chain as mmCIF, atomically.

    Args:
        path: destination.
        name: the entry ID and data block name (the protein's safe ID).
        sequence: one-letter residues ``L``.
        coords: ``[L, 3..5, 3]`` N, CA, C (+ O, Cβ) in Å, NaN = missing (derived as in the PDB writer).
        plddt: ``[L]`` pLDDT (0-100): the local quality metric and the B-factors.
        residue_numbers: author residue numbers (``auth_seq_id``); ``label_seq_id`` is always 1..L.
        chain_id: the chain (asym) ID.
    """
    if not sequence:
        raise ValueError("cannot write an empty chain")
    write_text_atomic(path, format_mmcif(name, sequence, coords, plddt, residue_numbers=residue_numbers,
                                         chain_id=chain_id))
