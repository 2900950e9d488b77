"""Backbone archives: many PDB chains' N, CA, C, O in one npz, with their sequences and DSSP states beside it.

The layout is ProMod3's structure database exported as ``backbone.npz``, ``chains.fasta.gz`` and
``dssp.fasta.gz`` in one folder (the template and training sources of the proteome and training workflows):

- ``backbone.npz``: ``names`` (bytes ``XXXX_C``: PDB entry and chain), ``offsets`` (int64 ``[n + 1]``: chain i is
  rows ``offsets[i]:offsets[i + 1]``), ``start_resnum`` (int32 ``[n]``: the PDB number of its first residue),
  ``coords_centi_angstrom`` (int16 ``[R, 4, 3]``: N, CA, C, O in 0.01 Å; each chain translated on its own, so
  only distances within a chain mean anything);
- ``chains.fasta.gz``: one record per chain, same order, ``>XXXX_C start=RESNUM len=L``;
- ``dssp.fasta.gz``: the DSSP 8-state string of each chain, same order (``C`` for coil, as DSSP's ``' '``).

Each entry is one gap-free stretch of a chain, so a chain has no breaks and consecutive residue numbers. No Cβ is
stored: :attr:`Chain.cb` is NaN and consumers build the virtual Cβ (:func:`~workflow_lib.structure.virtual_cb`),
as they do for glycine. Any disagreement between the three files (names, order, lengths) is an
:class:`~workflow_lib.errors.InputError` naming the file and the chain.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow_lib.errors import InputError
from workflow_lib.seqio.fasta import Record, iter_fasta, open_text
from workflow_lib.structure.dssp import DSSP_STATES
from workflow_lib.structure.parse import Chain

ARCHIVE_KEYS = ("names", "offsets", "start_resnum", "coords_centi_angstrom")
SEQUENCES_FILE = "chains.fasta.gz"
DSSP_FILE = "dssp.fasta.gz"


@dataclass(frozen=True)
class BackboneChain:
    """One chain of an archive: the chain (N, CA, C, O; no Cβ) and its DSSP 8-state string."""

    chain: Chain
    ss8: str


def companion_files(path: str | Path) -> list[Path]:
    """The sequence and DSSP files a backbone archive is read with (inputs of a build, as the archive is)."""
    return [Path(path).parent / SEQUENCES_FILE, Path(path).parent / DSSP_FILE]


def is_backbone_archive(path: str | Path) -> bool:
    """True for an ``.npz`` file (a backbone archive, as opposed to a PDB or mmCIF file)."""
    return Path(path).name.lower().endswith(".npz")


def _companion(path: Path, name: str) -> Path:
    companion = path.parent / name
    if not companion.is_file():
        raise InputError(f"a backbone archive needs {name} beside it (not found: {companion})", path=path)
    return companion


def _dssp_records(path: Path) -> Iterator[Record]:
    """The DSSP strings as records (not through the protein FASTA reader: they are states, not residues)."""
    name, parts = None, []
    with open_text(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith(">"):
                if name is not None:
                    yield Record(name, "", "".join(parts), name)
                name, parts = line[1:].split()[0] if line[1:].split() else "", []
            elif line:
                parts.append(line)
    if name is not None:
        yield Record(name, "", "".join(parts), name)


def read_backbone_archive(path: str | Path, *, names: set[str] | None = None) -> Iterator[BackboneChain]:
    """The chains of a backbone archive in file order (only those in ``names`` when given)."""
    path = Path(path)
    try:
        with np.load(path) as data:
            missing = [key for key in ARCHIVE_KEYS if key not in data.files]
            if missing:
                raise InputError(f"not a backbone archive: keys {missing} missing (has {sorted(data.files)})",
                                 path=path)
            arrays = {key: data[key] for key in ARCHIVE_KEYS}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise InputError(f"cannot read the backbone archive: {error}", path=path) from None
    chain_names = [n.decode("ascii") if isinstance(n, bytes) else str(n) for n in arrays["names"]]
    offsets = arrays["offsets"].astype(np.int64)
    coords = arrays["coords_centi_angstrom"]
    if offsets.shape != (len(chain_names) + 1,) or offsets[0] != 0 or offsets[-1] != len(coords) \
            or np.any(np.diff(offsets) < 0) or coords.shape[1:] != (4, 3) \
            or arrays["start_resnum"].shape != (len(chain_names),):
        raise InputError(f"inconsistent archive: {len(chain_names)} names, offsets {offsets.shape}, start_resnum "
                         f"{arrays['start_resnum'].shape}, coordinates {coords.shape}", path=path)
    sequences_path, dssp_path = _companion(path, SEQUENCES_FILE), _companion(path, DSSP_FILE)
    sequences = iter_fasta(sequences_path, check_nucleotide=False)
    states = _dssp_records(dssp_path)
    for k, name in enumerate(chain_names):
        record, dssp = next(sequences, None), next(states, None)
        for source, other in ((sequences_path, record), (dssp_path, dssp)):
            if other is None or other.id != name:
                found = "nothing" if other is None else f"'{other.id}'"
                raise InputError(f"record {k + 1} should be '{name}' (the archive's order), found {found}",
                                 path=source)
        length = int(offsets[k + 1] - offsets[k])
        if len(record.sequence) != length or len(dssp.sequence) != length:
            raise InputError(f"{len(record.sequence)} residues and {len(dssp.sequence)} DSSP states for "
                             f"{length} coordinates", path=sequences_path, record=name)
        if names is not None and name not in names:
            continue
        bad = sorted(set(dssp.sequence) - set(DSSP_STATES))
        if bad:
            raise InputError(f"DSSP states {bad} are not among {DSSP_STATES}", path=dssp_path, record=name)
        entry, _, chain_id = name.rpartition("_")
        xyz = coords[offsets[k]:offsets[k + 1]].astype(np.float32) / 100.0
        start = int(arrays["start_resnum"][k])
        chain = Chain(name=name, chain_id=chain_id, sequence=record.sequence, coords=xyz,
                      mask=np.ones((length, 4), dtype=bool), cb=np.full((length, 3), np.nan, dtype=np.float32),
                      residue_numbers=tuple(str(start + i) for i in range(length)),
                      chain_breaks=np.zeros(0, dtype=np.int64), bfactors=np.full(length, np.nan, np.float32),
                      source=str(path))
        yield BackboneChain(chain, dssp.sequence)
    for source, rest in ((sequences_path, sequences), (dssp_path, states)):
        extra = next(rest, None)
        if extra is not None:
            raise InputError(f"more records than the archive's {len(chain_names)} chains (the first extra one: "
                             f"'{extra.id}')", path=source)
