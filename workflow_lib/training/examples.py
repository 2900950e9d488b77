"""Training examples: a chain's true backbone, its crops, and the network inputs and loss targets of a crop.

Targets of a crop: the 6D maps of the true chain (virtual Cβ from N, CA, C as RoseTTAFold; bins of
:func:`~workflow_lib.structure.geometry.bin_pair_geometry`), the N, CA, C coordinates and their mask. The
residue index given to the network follows the structure's numbering across chain breaks (a missing loop of
k residues is a jump of k + 1), so unobserved residues do not look bonded; features' own ``residue_index``
(0..L−1) is ignored in training. Templates are not used in training (T = 0). The MSA of a crop is the query
plus at most ``max_msa_rows − 1`` other rows (:func:`subsample_msa_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from workflow_lib.errors import InputError
from workflow_lib.features.build import read_features
from workflow_lib.seqio.alphabet import encode
from workflow_lib.structure.geometry import bin_pair_geometry, pair_geometry
from workflow_lib.structure.parse import Chain, read_structure


@dataclass(frozen=True)
class TrainingChain:
    """A chain's true backbone and the residue index the network sees (module docstring)."""

    name: str
    features_path: Path
    coords: np.ndarray          # float32 [L, 3, 3] N, CA, C (NaN where missing)
    atom_mask: np.ndarray       # bool [L, 3]
    residue_index: np.ndarray   # int64 [L]

    def __len__(self) -> int:
        return int(self.coords.shape[0])


def structure_residue_index(chain: Chain) -> np.ndarray:
    """0, 1, 2, ... with a jump of (number difference) at each chain break whose author numbers increase."""
    index = np.zeros(len(chain), dtype=np.int64)
    breaks = set(int(b) for b in chain.chain_breaks)
    for i in range(1, len(chain)):
        step = 1
        if i in breaks:
            try:
                prev = int("".join(c for c in chain.residue_numbers[i - 1] if c.isdigit() or c == "-"))
                cur = int("".join(c for c in chain.residue_numbers[i] if c.isdigit() or c == "-"))
                step = cur - prev if cur - prev > 1 else 2
            except ValueError:
                step = 2
        index[i] = index[i - 1] + min(step, 1000)
    return index


def load_training_chains(table: pd.DataFrame, features_dir: str | Path) -> list[TrainingChain]:
    """Read every chain's structure (each file once) and check its feature file's query matches it."""
    features_dir = Path(features_dir)
    out: list[TrainingChain] = []
    cache: dict[str, dict[str, Chain]] = {}
    for row in table.itertuples(index=False):
        if row.structure not in cache:
            cache = {row.structure: {c.chain_id: c for c in read_structure(row.structure)}}
        chain = cache[row.structure].get(row.chain)
        if chain is None:
            raise InputError(f"no chain {row.chain!r}", path=row.structure, record=row.name)
        if chain.sequence != row.sequence:
            raise InputError("the chain's sequence differs from the training table's", path=row.structure,
                             record=row.name)
        features_path = features_dir / f"{row.name}.npz"
        features = read_features(features_path)
        query = features["msa"][0].astype(np.uint8)
        if not np.array_equal(query, encode(chain.sequence)):
            raise InputError(f"feature query (L={query.size}) is not the chain's sequence (L={len(chain)})",
                             path=features_path, record=row.name)
        out.append(TrainingChain(row.name, features_path, np.array(chain.coords[:, :3], dtype=np.float32),
                                 np.array(chain.mask[:, :3]), structure_residue_index(chain)))
    return out


def subsample_msa_rows(n_rows: int, max_rows: int, rng: np.random.Generator | None) -> np.ndarray:
    """Row indices: the query (0) and up to ``max_rows − 1`` others (random with ``rng``, else the first)."""
    if n_rows <= max_rows:
        return np.arange(n_rows)
    if rng is None:
        return np.arange(max_rows)
    others = np.sort(rng.choice(np.arange(1, n_rows), size=max_rows - 1, replace=False))
    return np.concatenate(([0], others))


def make_targets(coords: np.ndarray, atom_mask: np.ndarray) -> dict[str, np.ndarray]:
    """6D class maps (uint8 ``[L, L]``), the scored-pair mask, backbone coordinates and atom mask of a crop."""
    geometry = pair_geometry(coords[:, 0], coords[:, 1], coords[:, 2])
    bins = bin_pair_geometry(geometry)
    backbone = atom_mask.all(axis=1)
    pair_mask = backbone[:, None] & backbone[None, :] & ~np.eye(len(backbone), dtype=bool)
    return {**bins, "pair_mask": pair_mask, "coords": coords, "atom_mask": atom_mask}


def make_example(chain: TrainingChain, start: int, length: int, rows_rng: np.random.Generator | None,
                 max_msa_rows: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Network inputs and loss targets (batch of one) of residues ``start:start+length`` of ``chain``."""
    features = read_features(chain.features_path)
    window = slice(start, start + length)
    rows = subsample_msa_rows(features["msa"].shape[0], max_msa_rows, rows_rng)
    msa = features["msa"][rows][:, window].astype(np.int64)
    inputs = {
        "msa": torch.from_numpy(msa)[None],
        "residue_index": torch.from_numpy(chain.residue_index[window] - chain.residue_index[start])[None],
        "msa_weights": torch.from_numpy(features["seq_weights"][rows].astype(np.float32))[None],
        "coevolution": torch.from_numpy(np.ascontiguousarray(features["coevolution"][window, window]))[None],
    }
    raw = make_targets(chain.coords[window], chain.atom_mask[window])
    targets = {key: torch.from_numpy(np.ascontiguousarray(value))[None] for key, value in raw.items()}
    for key in ("dist", "omega", "theta", "phi"):
        targets[key] = targets[key].long()
    return inputs, targets


def to_device(example: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], device: torch.device
              ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """:func:`make_example`'s inputs and targets moved to ``device`` (no copy on the CPU)."""
    inputs, targets = example
    return ({k: v.to(device) for k, v in inputs.items()}, {k: v.to(device) for k, v in targets.items()})
