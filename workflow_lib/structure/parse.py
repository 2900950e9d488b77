"""Protein chains from PDB and mmCIF files (plain or gzip), as frozen dataclasses of NumPy arrays.

Reading policy (the parsers are Biopython's ``PDBParser(QUIET=True)`` and ``MMCIFParser(QUIET=True)``):

- **First model only.** NMR ensembles and multi-model files contribute their first ``MODEL`` (file order).
- **Alternate locations**: every disordered atom is resolved to its altloc of highest occupancy (ties: the
  alphabetically first altloc label), per atom. Biopython 1.88 already does this while parsing, but older
  releases and hand-edited files differ, so it is done explicitly. A point mutation (one position with two
  residue names) keeps the residue whose atoms have the highest mean occupancy.
- **Which residues.** A residue is kept when its name is an amino acid — one of the 20, a modified amino acid in
  :data:`MODIFIED_RESIDUES` or in Biopython's ``protein_letters_3to1_extended`` (≈1000 PDB chemical
  components with a parent amino acid) — or ``UNK``, and it has at least one of N, CA, C. So HETATM modified
  residues (MSE, SEP, ...) stay; waters, ions (``CA`` calcium), ligands, caps (ACE, NH2) and nucleotides go.
  Chains left with no residue are dropped.
- **Sequence letters**: the parent amino acid of a modified residue (MSE → M), then the alphabet's policy
  (:mod:`workflow_lib.seqio.alphabet`: U → C, O → K); anything else X.
- **Numbering**: author numbering (mmCIF ``auth_seq_id``/``auth_asym_id``, as Biopython reads it) plus the
  insertion code, as strings (``"52"``, ``"100A"``, ``"-3"``).
- **Chain breaks**: index i (1 ≤ i < L) is a break between residues i−1 and i when CA(i−1)–CA(i) > 4.2 Å; when
  either CA is missing, when the residue numbers are not consecutive (same number with a new insertion code
  counts as consecutive). Numbering alone is not used when both CAs exist because trypsin-like (chymotrypsin
  numbering) and antibody (Kabat/Chothia) chains skip numbers in contiguous chains: in the Docking
  Benchmark 5.5 there are 151 numbering jumps with CA–CA < 4.2 Å.
"""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from Bio.Data.PDBData import protein_letters_3to1, protein_letters_3to1_extended
from Bio.PDB import MMCIFParser, PDBParser
from Bio.PDB.PDBExceptions import PDBConstructionException

from workflow_lib.errors import InputError
from workflow_lib.seqio.alphabet import AMINO_ACIDS, normalize_residues
from workflow_lib.structure.cbeta import fill_cb

BACKBONE_ATOMS = ("N", "CA", "C", "O")
"""Atom order of :attr:`Chain.coords`."""
CA_BREAK_DISTANCE = 4.2
"""CA–CA distance (Å) above which consecutive residues are not bonded (ideal trans peptide: 3.8 Å)."""

MODIFIED_RESIDUES: dict[str, str] = {
    # the common ones, spelled out so the policy is readable without Biopython's table
    "MSE": "M",  # selenomethionine
    "SEC": "C",  # selenocysteine (U → C, as the alphabet does)
    "PYL": "K",  # pyrrolysine (O → K)
    "SEP": "S", "TPO": "T", "PTR": "Y",  # phosphorylated Ser/Thr/Tyr
    "CSO": "C", "CSD": "C", "CME": "C", "OCS": "C", "CAS": "C",  # oxidised / modified cysteines
    "MLY": "K", "M3L": "K", "KCX": "K", "LLP": "K", "ALY": "K",  # methyl-, carboxy-, PLP-, acetyl-lysines
    "HYP": "P",  # hydroxyproline
    "PCA": "Q",  # pyroglutamate (as Biopython; made from Gln or Glu)
    "FME": "M",  # N-formylmethionine
    "UNK": "X", "ASX": "X", "GLX": "X", "XLE": "X", "XAA": "X",  # unknown or ambiguous
}
"""Residue names outside the 20 and their one-letter parent; Biopython's extended table covers the rest."""


@dataclass(frozen=True, eq=False)
class Chain:
    """One protein chain of the first model. Arrays are read-only.

    Attributes:
        name: ``{entry}_{chain_id}`` where entry is the file name without extensions (``1abc_A``); a blank
            chain id gives ``{entry}_``.
        chain_id: author chain id (may be ``""`` in old PDB files).
        sequence: one-letter residues ``L`` (modified residues as their parent, unknown as X).
        coords: float32 ``[L, 4, 3]`` N, CA, C, O in Å; NaN where the atom is missing.
        mask: bool ``[L, 4]``: the atom is present.
        cb: float32 ``[L, 3]`` the file's Cβ; NaN where missing (always for glycine). See :meth:`cb_filled`.
        residue_numbers: author residue number + insertion code per residue (``"100A"``).
        chain_breaks: int64 ``[B]`` indices i where residue i does not follow residue i−1 (module docstring).
        bfactors: float32 ``[L]`` B-factor of CA (NaN without CA); pLDDT in predicted models.
        source: the file it came from.
    """

    name: str
    chain_id: str
    sequence: str
    coords: np.ndarray
    mask: np.ndarray
    cb: np.ndarray
    residue_numbers: tuple[str, ...]
    chain_breaks: np.ndarray
    bfactors: np.ndarray
    source: str = field(default="")

    def __post_init__(self) -> None:
        length = len(self.sequence)
        expected = {"coords": (length, 4, 3), "mask": (length, 4), "cb": (length, 3), "bfactors": (length,)}
        for key, shape in expected.items():
            if np.shape(getattr(self, key)) != shape:
                raise ValueError(f"Chain {self.name}: {key} has shape {np.shape(getattr(self, key))}, "
                                 f"expected {shape}")
        if len(self.residue_numbers) != length:
            raise ValueError(f"Chain {self.name}: {len(self.residue_numbers)} residue numbers for {length} residues")
        for key in ("coords", "mask", "cb", "chain_breaks", "bfactors"):
            array = np.array(getattr(self, key))  # a private copy, so freezing never touches the caller's array
            array.setflags(write=False)
            object.__setattr__(self, key, array)

    def __len__(self) -> int:
        return len(self.sequence)

    @property
    def n(self) -> np.ndarray:
        """float32 ``[L, 3]`` backbone N."""
        return self.coords[:, 0]

    @property
    def ca(self) -> np.ndarray:
        """float32 ``[L, 3]`` CA."""
        return self.coords[:, 1]

    @property
    def c(self) -> np.ndarray:
        """float32 ``[L, 3]`` backbone C."""
        return self.coords[:, 2]

    def cb_filled(self) -> np.ndarray:
        """float32 ``[L, 3]``: the file's Cβ, and the virtual Cβ where it is missing (glycine included)."""
        return fill_cb(self.n, self.ca, self.c, self.cb).astype(np.float32)


_STRUCTURE_SUFFIXES = re.compile(r"(\.(pdb|ent|cif|mmcif|pdb\d+))?(\.gz)?$", re.IGNORECASE)


def entry_name(path: str | Path) -> str:
    """The file name without ``.gz`` and the format extension: ``/x/1abc.cif.gz`` → ``1abc``."""
    return _STRUCTURE_SUFFIXES.sub("", Path(path).name) or Path(path).name


def residue_letter(resname: str) -> str | None:
    """One-letter code of a residue name, or None when it is not an amino acid (water, ligand, nucleotide)."""
    resname = resname.strip().upper()
    letter = protein_letters_3to1.get(resname) or MODIFIED_RESIDUES.get(resname) \
        or protein_letters_3to1_extended.get(resname)
    if letter is None:
        return None
    letter = normalize_residues(letter)
    return letter if letter in AMINO_ACIDS else "X"


def read_structure_bytes(path: Path) -> bytes:
    """The bytes of a structure file, gunzipped when gzip-compressed; InputError naming the file otherwise."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read structure file: {error.strerror or error}", path=path) from error
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise InputError(f"corrupt gzip data: {error}", path=path) from error
    return raw


def _read_text(path: Path) -> str:
    raw = read_structure_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _is_mmcif(path: Path, text: str) -> bool:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in (".cif", ".mmcif"):
        return True
    if suffixes and suffixes[-1] in (".pdb", ".ent"):
        return False
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    return first.startswith("data_")


def _parse_first_model(path: Path):
    text = _read_text(path)
    mmcif = _is_mmcif(path, text)
    parser = MMCIFParser(QUIET=True) if mmcif else PDBParser(QUIET=True)
    try:
        structure = parser.get_structure(entry_name(path), io.StringIO(text))
    except (ValueError, KeyError, IndexError, TypeError, PDBConstructionException) as error:
        kind = "mmCIF" if mmcif else "PDB"
        raise InputError(f"not a readable {kind} file: {type(error).__name__}: {error}", path=path) from error
    models = list(structure)
    if not models:
        raise InputError("no atoms (no model) in structure file", path=path)
    return models[0]


def _resolve_altlocs(residue) -> None:
    """Select, on every disordered atom of ``residue``, the altloc of highest occupancy (ties: first label)."""
    for atom in residue:
        if atom.is_disordered():
            children = atom.child_dict
            best = min(children, key=lambda alt: (-(children[alt].get_occupancy() or 0.0), alt))
            atom.disordered_select(best)


def _select_residue(residue):
    """A DisorderedResidue (point mutation) resolved to the residue name with highest mean occupancy."""
    if not residue.is_disordered() or not hasattr(residue, "disordered_get_id_list"):
        return residue
    best_name, best_occupancy = None, -1.0
    for resname in residue.disordered_get_id_list():
        child = residue.child_dict[resname]
        occupancies = [atom.get_occupancy() or 0.0 for atom in child.get_unpacked_list()]
        mean = float(np.mean(occupancies)) if occupancies else 0.0
        if mean > best_occupancy:
            best_name, best_occupancy = resname, mean
    residue.disordered_select(best_name)
    return residue.disordered_get()


def _residue_number(residue) -> str:
    _, number, icode = residue.get_id()
    return f"{number}{icode.strip()}"


def _chain_breaks(ca: np.ndarray, numbers: list[tuple[int, str]]) -> np.ndarray:
    breaks = []
    for i in range(1, len(numbers)):
        if np.isfinite(ca[i - 1]).all() and np.isfinite(ca[i]).all():
            broken = float(np.linalg.norm(ca[i] - ca[i - 1])) > CA_BREAK_DISTANCE
        else:
            (prev_num, prev_icode), (num, icode) = numbers[i - 1], numbers[i]
            broken = not (num == prev_num + 1 or (num == prev_num and icode != prev_icode))
        if broken:
            breaks.append(i)
    return np.asarray(breaks, dtype=np.int64)


def _build_chain(bio_chain, entry: str, source: str) -> Chain | None:
    letters, numbers, labels, coords, cbs, bfactors = [], [], [], [], [], []
    for residue in bio_chain:
        residue = _select_residue(residue)
        if residue.get_id()[0] == "W":
            continue
        letter = residue_letter(residue.get_resname())
        if letter is None or not any(name in residue for name in ("N", "CA", "C")):
            continue
        _resolve_altlocs(residue)
        xyz = np.full((4, 3), np.nan, dtype=np.float32)
        for k, atom_name in enumerate(BACKBONE_ATOMS):
            if atom_name in residue:
                xyz[k] = residue[atom_name].get_coord()
        cb = residue["CB"].get_coord() if "CB" in residue else np.full(3, np.nan, dtype=np.float32)
        letters.append(letter)
        numbers.append((residue.get_id()[1], residue.get_id()[2]))
        labels.append(_residue_number(residue))
        coords.append(xyz)
        cbs.append(cb)
        bfactors.append(residue["CA"].get_bfactor() if "CA" in residue else np.nan)
    if not letters:
        return None
    coords_array = np.asarray(coords, dtype=np.float32)
    chain_id = bio_chain.id.strip()
    return Chain(name=f"{entry}_{chain_id}", chain_id=chain_id, sequence="".join(letters),
                 coords=coords_array, mask=np.isfinite(coords_array).all(axis=-1),
                 cb=np.asarray(cbs, dtype=np.float32), residue_numbers=tuple(labels),
                 chain_breaks=_chain_breaks(coords_array[:, 1].astype(np.float64), numbers),
                 bfactors=np.asarray(bfactors, dtype=np.float32), source=source)


def read_structure(path: str | Path) -> list[Chain]:
    """Every protein chain of the first model of a PDB or mmCIF file (``.gz`` allowed), in file order.

    The format is taken from the extension (``.cif``/``.mmcif`` vs ``.pdb``/``.ent``), else from the content
    (``data_`` starts an mmCIF file). Raises :class:`InputError` naming the file when it cannot be read or
    holds no protein chain.
    """
    path = Path(path)
    model = _parse_first_model(path)
    entry = entry_name(path)
    chains = [chain for chain in (_build_chain(bio_chain, entry, str(path)) for bio_chain in model)
              if chain is not None]
    if not chains:
        raise InputError("no protein chain (no amino-acid residue with backbone atoms) in the first model",
                         path=path)
    return chains


def read_chain(path: str | Path, chain_id: str) -> Chain:
    """One chain of :func:`read_structure` by author chain id (``""`` or ``" "`` for a blank id)."""
    chains = read_structure(path)
    wanted = chain_id.strip()
    for chain in chains:
        if chain.chain_id == wanted:
            return chain
    available = ", ".join(repr(chain.chain_id) for chain in chains)
    raise InputError(f"no protein chain {chain_id!r}; the file has {available}", path=path, record=chain_id)
