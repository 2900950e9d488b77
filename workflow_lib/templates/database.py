"""Load a template database (:mod:`workflow_lib.templates.build`) for searching and for template features."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.aligner.calibration import decoy_profiles
from workflow_lib.aligner.profile import Profile
from workflow_lib.db.build import sha256_file
from workflow_lib.db.kmer_index import build_kmer_index
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.schemas.io import read_frame, read_npz
from workflow_lib.schemas.templates import TEMPLATE_ARRAYS, TEMPLATE_CHAINS
from workflow_lib.seqio.alphabet import encode
from workflow_lib.templates.build import ARRAYS_FILE, CHAINS_FILE, read_template_manifest


@dataclass(frozen=True)
class TemplateStructure:
    """The structure side of one template: observed residues and how profile positions map onto them."""

    template: str
    sequence: str            # profile sequence, length P
    coords: np.ndarray       # float32 [R, 5, 3] N, CA, C, O, CB (NaN missing)
    atom_mask: np.ndarray    # bool [R, 5]
    residue_map: np.ndarray  # int32 [P] -> 0..R-1 or -1
    ss3: str                 # length R, H/E/C or '-'


class TemplateDatabase:
    """A loaded template database: the chains table, the arrays, and per-template profiles and structures."""

    def __init__(self, db_dir: str | Path, *, verify: bool = True) -> None:
        self.path = Path(db_dir)
        self.manifest = read_template_manifest(self.path)
        if verify:
            for name, digest in self.manifest.get("files", {}).items():
                if not (self.path / name).is_file() or sha256_file(self.path / name) != digest:
                    raise SchemaError(f"{self.path / name}: missing or changed since the manifest was written; "
                                      "rebuild the template database")
        self.chains: pd.DataFrame = read_frame(self.path / CHAINS_FILE, TEMPLATE_CHAINS)
        self.arrays = read_npz(self.path / ARRAYS_FILE, TEMPLATE_ARRAYS)
        if len(self.chains) != self.manifest["templates"]:
            raise SchemaError(f"{self.path}: {len(self.chains)} chains, manifest says {self.manifest['templates']}")
        self._index = {name: k for k, name in enumerate(self.chains["template"])}
        self._decoys: dict[tuple[int, int], list[Profile]] = {}

    def __len__(self) -> int:
        return len(self.chains)

    @property
    def ids(self) -> list[str]:
        return list(self.chains["template"])

    def index(self, template: str, *, where: str | Path | None = None) -> int:
        try:
            return self._index[template]
        except KeyError:
            raise InputError(f"template {template!r} is not in the template database {self.path}",
                             path=where) from None

    @cached_property
    def _profile_columns(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-chain fields of the profiles, read once as whole columns: names, first row in the P arrays,
        lengths, Neff, sequence offsets into the concatenated codes, and those codes."""
        lengths = self.chains["length"].to_numpy(np.int64)
        sequences = self.chains["sequence"]
        mismatched = np.flatnonzero(sequences.str.len().to_numpy(np.int64) != lengths)
        if mismatched.size:
            k = int(mismatched[0])
            raise SchemaError(f"{self.path / CHAINS_FILE}: template {self.chains['template'].iloc[k]!r} has a "
                              f"sequence of {len(sequences.iloc[k])} residues and length {lengths[k]}")
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return (self.chains["template"].tolist(), self.chains["profile_offset"].to_numpy(np.int64), lengths,
                self.chains["neff"].to_numpy(np.float64), starts, encode("".join(sequences)))

    def profile(self, k: int) -> Profile:
        """Template ``k``'s profile; its arrays are read-only views of the database's arrays."""
        names, offsets, lengths, neffs, starts, codes = self._profile_columns
        p0, length = int(offsets[k]), int(lengths[k])
        q0 = p0 + k
        a = self.arrays
        return Profile(names[k], codes[starts[k]:starts[k + 1]], a["emissions"][p0:p0 + length],
                       a["transitions"][q0:q0 + length + 1], a["column_neff"][q0:q0 + length + 1],
                       float(neffs[k]), a["background"][k], True)

    @cached_property
    def profiles(self) -> list[Profile]:
        """Every template's profile (:meth:`profile`), built once per loaded database."""
        return [self.profile(k) for k in range(len(self))]

    def decoys(self, n_decoys: int, seed: int) -> list[Profile]:
        """The null model's shuffled templates (:func:`~workflow_lib.aligner.calibration.decoy_profiles` of
        :attr:`profiles`): the same for every query, so made once per ``(n_decoys, seed)``."""
        key = (int(n_decoys), int(seed))
        if key not in self._decoys:
            self._decoys[key] = decoy_profiles(self.profiles, key[0], seed=key[1])
        return self._decoys[key]

    @cached_property
    def prefilter_arrays(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``(k-mer index, residues, offsets)`` of the templates' profile sequences, laid out as a sequence
        database shard (:func:`~workflow_lib.db.kmer_index.build_kmer_index`), for the template prefilter; built
        on first use (about a second for 20,000 chains) and kept with the database."""
        residues = encode("".join(self.chains["sequence"]))
        offsets = np.concatenate([[0], np.cumsum(self.chains["length"].to_numpy(np.int64))]).astype(np.int64)
        return build_kmer_index(residues, offsets), residues, offsets

    def structure(self, k: int) -> TemplateStructure:
        row = self.chains.iloc[k]
        p0, length = int(row["profile_offset"]), int(row["length"])
        r0, n_res = int(row["coord_offset"]), int(row["structure_length"])
        return TemplateStructure(str(row["template"]), str(row["sequence"]),
                                 self.arrays["coords"][r0:r0 + n_res], self.arrays["atom_mask"][r0:r0 + n_res],
                                 self.arrays["residue_map"][p0:p0 + length], str(row["ss3"]))


def load_template_db(db_dir: str | Path, *, verify: bool = True) -> TemplateDatabase:
    """Open a template database directory (checked against its manifest when ``verify``)."""
    return TemplateDatabase(db_dir, verify=verify)
