"""Training examples: a chain's true backbone, its crops, and the network inputs and loss targets of a crop.

Targets of a crop: the 6D maps of the true chain (virtual Cβ from N, CA, C as RoseTTAFold; bins of
:func:`~workflow_lib.structure.geometry.bin_pair_geometry`), the N, CA, C coordinates and their mask. The
residue index given to the network follows the structure's numbering across chain breaks (a missing loop of
k residues is a jump of k + 1), so unobserved residues do not look bonded; features' own ``residue_index``
(0..L−1) is ignored in training. Templates come from a training pack's template hits (the best usable hits of
each chain, :func:`workflow_lib.training.pack.usable_templates`), dropped at random per crop
(:func:`pick_templates`); chains read from feature files train without templates. A model with
``msa_statistics`` also gets each crop's deletion counts, profile and deletion mean. The MSA of a crop is the query
plus at most ``max_msa_rows − 1`` other rows (:func:`subsample_msa_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from workflow_lib.errors import InputError
from workflow_lib.features.build import read_features
from workflow_lib.features.coevolution import coevolution_features
from workflow_lib.features.couplings import coupling_features
from workflow_lib.features.msa_features import weighted_profile
from workflow_lib.features.templates import TemplateColumns, columns_features
from workflow_lib.seqio.alphabet import GAP_CODE, encode
from workflow_lib.structure.geometry import bin_pair_geometry, pair_geometry
from workflow_lib.structure.backbones import is_backbone_archive
from workflow_lib.structure.cbeta import virtual_cb
from workflow_lib.structure.parse import Chain
from workflow_lib.training.data import chain_key, read_chains
from workflow_lib.training.losses import bonded_pairs


@dataclass(frozen=True)
class TrainingChain:
    """A chain's true backbone and the residue index the network sees (module docstring).

    The MSA features come from ``features_path`` (a feature file) or, for a chain of a training pack
    (:mod:`workflow_lib.training.pack`), from ``msa`` / ``seq_weights`` / ``coevolution`` held in memory.
    """

    name: str
    features_path: Path | None
    coords: np.ndarray          # float32 [L, 3, 3] N, CA, C (NaN where missing)
    atom_mask: np.ndarray       # bool [L, 3]
    residue_index: np.ndarray   # int64 [L]
    msa: np.ndarray | None = None           # int8 [N, L] residue codes, the query first
    seq_weights: np.ndarray | None = None   # float32 [N]
    coevolution: np.ndarray | None = None   # [L, L, C_c]; None: computed from msa on first use, then kept
    deletions: np.ndarray | None = None     # uint8 [N, L] insertions before each column (packs since v2)
    templates: tuple[TemplateColumns, ...] = ()   # template hits on the chain's columns, rank order (packs)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def neff(self) -> float:
        """The alignment's number of effective sequences: the sum of the pack's sequence weights, or the feature
        file's ``neff``."""
        if self.seq_weights is not None:
            return float(np.sum(self.seq_weights, dtype=np.float64))
        if "neff" not in self._cache:
            self._cache["neff"] = float(read_features(self.features_path)["neff"])
        return self._cache["neff"]

    def features(self) -> dict[str, np.ndarray]:
        """``msa`` and ``coevolution``: from memory (the pack's sequence weights shape the statistics), or read
        from the feature file; with the deletion counts (a feature file, or a pack that holds them) also
        ``deletion_matrix``, ``profile`` and ``deletion_mean``, the pack's computed from its rows as the feature
        builder does."""
        if self.features_path is not None:
            return read_features(self.features_path)
        coevolution = self.coevolution
        if coevolution is None:
            if "coevolution" not in self._cache:
                weights = self.seq_weights.astype(np.float64)
                self._cache["coevolution"] = np.concatenate([coevolution_features(self.msa, weights),
                                                             coupling_features(self.msa, weights)], axis=-1)
            coevolution = self._cache["coevolution"]
        out = {"msa": self.msa, "coevolution": coevolution}
        if self.deletions is not None:
            if "profile" not in self._cache:   # computed once per chain, as the co-evolution maps are
                self._cache["profile"] = weighted_profile(self.msa, self.seq_weights.astype(np.float64)
                                                          ).astype(np.float32)
                self._cache["deletion_mean"] = self.deletions.mean(axis=0, dtype=np.float64).astype(np.float32)
            out.update(deletion_matrix=self.deletions, profile=self._cache["profile"],
                       deletion_mean=self._cache["deletion_mean"])
        return out

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
    for row, chain in table_chains(table):
        features_path = features_dir / f"{row.name}.npz"
        features = read_features(features_path)
        query = features["msa"][0].astype(np.uint8)
        if not np.array_equal(query, encode(chain.sequence)):
            raise InputError(f"feature query (L={query.size}) is not the chain's sequence (L={len(chain)})",
                             path=features_path, record=row.name)
        out.append(TrainingChain(row.name, features_path, np.array(chain.coords[:, :3], dtype=np.float32),
                                 np.array(chain.mask[:, :3]), structure_residue_index(chain)))
    return out


def table_chains(table: pd.DataFrame) -> Iterator[tuple[Any, Chain]]:
    """Each row of a training table with its chain (each structure file or archive read once), checked.

    The chain is looked up by name in a backbone archive and by chain id in a PDB/mmCIF file
    (:func:`workflow_lib.training.data.chain_key`); a missing chain or another sequence is an InputError.
    """
    by_structure: dict[str, dict[str, Chain]] = {}
    for structure, rows in table.groupby("structure", sort=False):
        wanted = set(rows["name"]) if is_backbone_archive(structure) else None
        by_structure[structure] = {chain_key(structure, c): c for c in read_chains(structure, wanted)}
    for row in table.itertuples(index=False):
        chain = by_structure[row.structure].get(row.chain)
        if chain is None:
            raise InputError(f"no chain {row.chain!r}", path=row.structure, record=row.name)
        if chain.sequence != row.sequence:
            raise InputError("the chain's sequence differs from the training table's", path=row.structure,
                             record=row.name)
        yield row, chain


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


def pick_templates(templates: Sequence[TemplateColumns], max_templates: int, dropout: float,
                   rng: np.random.Generator | None) -> list[TemplateColumns]:
    """The templates a crop gets: in rank order, each dropped with probability ``dropout`` (training: ``rng``
    given; validation, ``rng`` None: none dropped), then at most ``max_templates``."""
    kept = list(templates)
    if rng is not None and dropout > 0.0 and kept:
        kept = [hit for hit, draw in zip(kept, rng.random(len(kept))) if draw >= dropout]
    return kept[:max_templates]


SELF_TEMPLATE_NOISE = 0.5
"""Root-mean-square displacement (Å) of each residue of a training crop's self template
(:attr:`~workflow_lib.training.settings.TrainSettings.self_template_rate`): every residue's backbone is moved as a
rigid body by an isotropic Gaussian shift, about the Cα spread between two crystal structures of one protein."""


def native_template(chain: TrainingChain, confidence: float = 1.0, noise: float = 0.0,
                    rng: np.random.Generator | None = None) -> TemplateColumns:
    """The chain's own structure as a template hit on every column that has N, CA and C (virtual Cβ, no O,
    identical residues, no secondary structure): the upper bound of what a template can give, for checking
    that a trained network reads its templates (a native template should give a near-native prediction).
    With ``noise`` > 0 each residue is shifted by a Gaussian of that root-mean-square length (Å), drawn from
    ``rng`` (training's self templates)."""
    codes = (chain.msa[0] if chain.msa is not None else read_features(chain.features_path)["msa"][0])
    codes = np.asarray(codes, dtype=np.int8)
    placed = chain.atom_mask.all(axis=1)
    coords = np.full((len(chain), 5, 3), np.nan, dtype=np.float32)
    backbone = chain.coords[placed, :3].astype(np.float64)
    if noise > 0:
        if rng is None:
            raise ValueError("native_template: noise needs an rng")
        backbone = backbone + rng.normal(0.0, noise / np.sqrt(3.0), size=(len(backbone), 1, 3))
    n, ca, c = (backbone[:, k] for k in range(3))
    coords[placed, :3] = backbone
    coords[placed, 4] = virtual_cb(n, ca, c)
    aligned = np.ones(len(chain), dtype=bool)
    return TemplateColumns(f"{chain.name} (native)", coords, placed, aligned, aligned.copy(), aligned.copy(),
                           codes.copy(), np.full(len(chain), -1, dtype=np.int8), float(confidence))


def make_example(chain: TrainingChain, start: int, length: int, rows_rng: np.random.Generator | None,
                 max_msa_rows: int, msa_statistics: bool = False, max_templates: int = 0,
                 template_dropout: float = 0.0, self_template_rate: float = 0.0,
                 ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Network inputs and loss targets (batch of one) of residues ``start:start+length`` of ``chain``; with
    ``msa_statistics`` (a model that reads them) also the crop's deletion counts, profile and deletion mean,
    and with ``max_templates`` the features of the chain's templates (:func:`pick_templates`; ``rows_rng`` also
    draws the template dropout) on the crop's columns; with ``self_template_rate`` (training, ``rows_rng`` given)
    the crop's first template is, at that rate, its own structure perturbed by :data:`SELF_TEMPLATE_NOISE`."""
    features = chain.features()
    window = slice(start, start + length)
    rows = subsample_msa_rows(features["msa"].shape[0], max_msa_rows, rows_rng)
    msa = features["msa"][rows][:, window].astype(np.int64)
    inputs = {
        "msa": torch.from_numpy(msa)[None],
        "residue_index": torch.from_numpy(chain.residue_index[window] - chain.residue_index[start])[None],
        "coevolution": torch.from_numpy(np.ascontiguousarray(features["coevolution"][window, window]))[None],
    }
    if msa_statistics:
        if "deletion_matrix" not in features:
            raise InputError("the model reads MSA statistics but this chain has no deletion counts (a training "
                             "pack written before they were packed: rebuild it with trackfold train-pack)",
                             record=chain.name)
        deletions = features["deletion_matrix"][rows][:, window].astype(np.float32)
        inputs.update(deletion_matrix=torch.from_numpy(deletions)[None],
                      profile=torch.from_numpy(np.ascontiguousarray(features["profile"][window],
                                                                    dtype=np.float32))[None],
                      deletion_mean=torch.from_numpy(np.ascontiguousarray(features["deletion_mean"][window],
                                                                          dtype=np.float32))[None])
    picked = pick_templates(chain.templates, max_templates, template_dropout, rows_rng) if max_templates else []
    if max_templates and self_template_rate > 0 and rows_rng is not None and rows_rng.random() < self_template_rate:
        picked = [native_template(chain, noise=SELF_TEMPLATE_NOISE, rng=rows_rng), *picked][:max_templates]
    if picked:
        features_t = columns_features(picked, np.arange(start, start + length))
        inputs.update(templates_pair=torch.from_numpy(features_t["template_pair"].astype(np.float32))[None],
                      templates_1d=torch.from_numpy(features_t["template_1d"])[None],
                      template_mask=torch.ones(1, len(picked)))
    raw = make_targets(chain.coords[window], chain.atom_mask[window])
    targets = {key: torch.from_numpy(np.ascontiguousarray(value))[None] for key, value in raw.items()}
    for key in ("dist", "omega", "theta", "phi"):
        targets[key] = targets[key].long()
    targets["bonded"] = bonded_pairs(targets["atom_mask"], inputs["residue_index"])
    return inputs, targets


def collate(examples: Sequence[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]
            ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Examples of :func:`make_example` (each a batch of one) as one batch, padded to the longest crop and the
    deepest MSA: padding residues have ``seq_mask`` 0, padding rows ``msa_mask`` 0 and weight 0, and no padding
    pair, atom or bond is scored. One example is returned as it is."""
    if len(examples) == 1:
        return examples[0]
    length = max(inputs["msa"].shape[2] for inputs, _ in examples)
    depth = max(inputs["msa"].shape[1] for inputs, _ in examples)
    with_templates = [inputs for inputs, _ in examples if "templates_pair" in inputs]
    n_templates = max((inputs["templates_pair"].shape[1] for inputs in with_templates), default=0)
    pair_width = with_templates[0]["templates_pair"].shape[-1] if with_templates else 0
    one_d_width = with_templates[0]["templates_1d"].shape[-1] if with_templates else 0
    batch_inputs: dict[str, list[torch.Tensor]] = {}
    batch_targets: dict[str, list[torch.Tensor]] = {}
    for inputs, targets in examples:
        n, l = inputs["msa"].shape[1:]
        pad_l, pad_n = length - l, depth - n
        padded = {
            "msa": F.pad(inputs["msa"], (0, pad_l, 0, pad_n), value=GAP_CODE),
            "residue_index": torch.cat((inputs["residue_index"], inputs["residue_index"][:, -1:]
                                        + torch.arange(1, pad_l + 1)), dim=1),
            "seq_mask": F.pad(torch.ones(1, l), (0, pad_l)),
            "msa_mask": F.pad(torch.ones(1, n, l), (0, pad_l, 0, pad_n)),
        }
        if "coevolution" in inputs:
            padded["coevolution"] = F.pad(inputs["coevolution"], (0, 0, 0, pad_l, 0, pad_l))
        if n_templates:
            pair_t = inputs.get("templates_pair")
            t = 0 if pair_t is None else pair_t.shape[1]
            if pair_t is None:
                pair_t = torch.zeros(1, 0, l, l, pair_width)
                one_d = torch.zeros(1, 0, l, one_d_width)
            else:
                one_d = inputs["templates_1d"]
            padded["templates_pair"] = F.pad(pair_t, (0, 0, 0, pad_l, 0, pad_l, 0, n_templates - t))
            padded["templates_1d"] = F.pad(one_d, (0, 0, 0, pad_l, 0, n_templates - t))
            padded["template_mask"] = F.pad(torch.ones(1, t), (0, n_templates - t))
        if "profile" in inputs:
            padded["deletion_matrix"] = F.pad(inputs["deletion_matrix"], (0, pad_l, 0, pad_n))
            padded["profile"] = F.pad(inputs["profile"], (0, 0, 0, pad_l))
            padded["deletion_mean"] = F.pad(inputs["deletion_mean"], (0, pad_l))
        for key, value in padded.items():
            batch_inputs.setdefault(key, []).append(value)
        for key, value in targets.items():
            if key == "coords":
                value = F.pad(value, (0, 0, 0, 0, 0, pad_l))
            elif key == "atom_mask":
                value = F.pad(value, (0, 0, 0, pad_l), value=False)
            elif key == "bonded":
                value = F.pad(value, (0, pad_l), value=False)
            else:  # the [1, L, L] maps and the pair mask
                value = F.pad(value, (0, pad_l, 0, pad_l))
            batch_targets.setdefault(key, []).append(value)
    return ({key: torch.cat(values) for key, values in batch_inputs.items()},
            {key: torch.cat(values) for key, values in batch_targets.items()})


def to_device(example: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], device: torch.device
              ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """:func:`make_example`'s inputs and targets moved to ``device`` (no copy on the CPU)."""
    inputs, targets = example
    return ({k: v.to(device) for k, v in inputs.items()}, {k: v.to(device) for k, v in targets.items()})
