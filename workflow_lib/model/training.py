"""Training the three-track network on experimental chains (issue 6, "Training loop and a first real checkpoint").

Two steps, each a command (:mod:`workflow_lib.model.train_cli`):

1. **Data** (:func:`collect_chains`, :func:`split_by_identity`, :func:`prepare_training_data`): every protein
   chain of the structure files with ``min_length ≤ L ≤ max_length``, at most 5% unknown residues and N, CA, C
   on at least 80% of its residues; identical sequences kept once. Chains are clustered by single linkage
   over pairwise sequence identity and whole clusters go to the validation split, so no validation chain is
   more than ``identity`` (30%) identical to a training chain. **Identity** of two chains = identical residues
   in the best local alignment (trackfold's own Viterbi, :func:`workflow_lib.aligner.align_queries`, the
   chain's single-sequence profile against the other chain) divided by the length of the *shorter* chain
   (the CD-HIT convention; an asymmetric pair counts when either direction exceeds the threshold). The table
   (:data:`TRAINING_CHAINS`) lists each chain's structure file and chain id; a query-only A3M per chain is
   written for ``trackfold features`` (replace it with a real MSA to train on alignments).
2. **Training** (:func:`train`): per step one chain (a cluster drawn uniformly, then a member uniformly), a
   random contiguous crop of ``crop_size`` residues, the query plus a random subset of at most
   ``max_msa_rows − 1`` other MSA rows; losses of :mod:`workflow_lib.model.losses`; AdamW with linear warm-up
   and cosine decay to 10%, global gradient-norm clipping; FAVOR+ features redrawn every ``redraw_every``
   steps from a generator seeded by the step. A training state (model, optimizer, step, torch and NumPy RNG
   states, metrics so far) is written every ``checkpoint_every`` steps and a rerun resumes from it exactly:
   same parameters as an uninterrupted run. The state is a ``torch.save`` file of tensors and plain
   containers read back with ``weights_only=True``; everything that is not a tensor is one JSON string.

Targets of a crop: the 6D maps of the true chain (virtual Cβ from N, CA, C as RoseTTAFold; bins of
:func:`~workflow_lib.structure.geometry.bin_pair_geometry`), the N, CA, C coordinates and their mask. The
residue index given to the network follows the structure's numbering across chain breaks (a missing loop of
k residues is a jump of k + 1), so unobserved residues do not look bonded; features' own ``residue_index``
(0..L−1) is ignored in training. Templates are not used in training (T = 0).

Validation (:func:`evaluate`): every validation chain, whole when ``L ≤ val_crop`` else its central
``val_crop`` residues, the first ``max_msa_rows`` MSA rows, eval mode. Metrics per chain, then the mean:
lDDT-Cα of predicted vs true CA (:func:`workflow_lib.structure.metrics.lddt_ca`), distogram top-1 accuracy
(argmax distance bin = true bin, no-contact bin included, over scored pairs ``i ≠ j``), and contact precision
of the ``L/5`` most likely contacts (``P(d_Cβ < 8 Å)`` = the first 12 distance bins) with sequence separation
≥ 24 ("long") and ≥ 12 ("medium + long").
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from workflow_lib.errors import InputError, SchemaError
from workflow_lib.evaluate.contacts import CONTACT_BINS, contact_precision
from workflow_lib.features.build import read_features
from workflow_lib.model.checkpoint import check_state_dict, load_weights, save_checkpoint
from workflow_lib.model.config import ModelConfig, preset
from workflow_lib.model.losses import LossWeights, total_loss
from workflow_lib.train_defaults import TrainSettings
from workflow_lib.model.network import ThreeTrackNetwork, count_parameters
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import atomic_path, write_text_atomic
from workflow_lib.seqio.schemas import TableSchema, write_table
from workflow_lib.structure.geometry import bin_pair_geometry, pair_geometry
from workflow_lib.structure.metrics import lddt_ca
from workflow_lib.structure.parse import Chain, read_structure

log = logging.getLogger(__name__)

STATE_FORMAT_VERSION = 1

TRAINING_CHAINS = TableSchema("training_chains", 1, pa.schema([
    ("name", pa.string()),           # {entry}_{chain}; the A3M / feature stem
    ("structure", pa.string()),      # structure file (PDB or mmCIF)
    ("chain", pa.string()),          # author chain id
    ("sequence", pa.string()),       # one-letter residues of the observed chain
    ("length", pa.int32()),
    ("cluster", pa.int32()),         # single-linkage identity cluster
    ("split", pa.string()),          # "train" or "validation"
]), "Chains for training: structure, chain, identity cluster and split (workflow_lib.model.training).")

TRAINING_METRICS = TableSchema("training_metrics", 1, pa.schema([
    ("step", pa.int32()),            # optimizer steps done
    ("split", pa.string()),          # "train" (one crop) or "validation" (mean over chains)
    ("loss", pa.float64()),
    ("distogram", pa.float64()),
    ("fape", pa.float64()),
    ("plddt", pa.float64()),
    ("lddt_ca", pa.float64()),       # validation only (NaN for train rows)
    ("dist_top1", pa.float64()),
    ("contact_precision_long", pa.float64()),
    ("contact_precision_medlong", pa.float64()),
    ("lr", pa.float64()),
    ("wall_s", pa.float64()),        # training wall time so far
    ("n_chains", pa.int32()),
]), "Training curve: one row per training step and per validation pass.")

VALIDATION_CHAINS = TableSchema("validation_chains", 1, pa.schema([
    ("name", pa.string()),
    ("length", pa.int32()),          # residues evaluated (after the central crop)
    ("lddt_ca", pa.float64()),
    ("dist_top1", pa.float64()),
    ("contact_precision_long", pa.float64()),
    ("contact_precision_medlong", pa.float64()),
    ("loss", pa.float64()),
]), "Per-chain validation metrics of a trained model.")


# ---------------------------------------------------------------------------------------------------------
# data: chains, identity clusters, split
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChainRecord:
    """A chain selected for training."""

    name: str
    structure: str
    chain: str
    sequence: str


def chain_ok(chain: Chain, *, min_length: int, max_length: int, max_unknown: float = 0.05,
             min_backbone: float = 0.8) -> str:
    """Why ``chain`` is not usable for training (``""`` when it is)."""
    length = len(chain)
    if length < min_length:
        return f"shorter than {min_length}"
    if length > max_length:
        return f"longer than {max_length}"
    if chain.sequence.count("X") > max_unknown * length:
        return "too many unknown residues"
    if chain.mask[:, :3].all(axis=1).mean() < min_backbone:
        return "too many residues without N, CA, C"
    return ""


def collect_chains(paths: Iterable[str | Path], *, min_length: int = 40, max_length: int = 400
                   ) -> tuple[list[ChainRecord], dict[str, int]]:
    """Usable chains of the structure files (module docstring), identical sequences once; and skip counts."""
    records: list[ChainRecord] = []
    seen: set[str] = set()
    skipped: dict[str, int] = {}
    for path in sorted(str(p) for p in paths):
        for chain in read_structure(path):
            reason = chain_ok(chain, min_length=min_length, max_length=max_length)
            if not reason and chain.sequence in seen:
                reason = "identical sequence already taken"
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            seen.add(chain.sequence)
            name = chain.name.replace(".", "_")
            records.append(ChainRecord(name, path, chain.chain_id, chain.sequence))
    names = [r.name for r in records]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"two structure files give the same chain name(s) {dup[:5]}")
    return records, skipped


def identity_links(sequences: Sequence[str], threshold: float, *, cpus: int = 1) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, identity)``, ``i < j``, whose identity (module docstring) exceeds ``threshold``."""
    from workflow_lib.aligner import align_queries, profile_from_sequence

    codes = [encode(s) for s in sequences]
    profiles = [profile_from_sequence(s, name=str(k)) for k, s in enumerate(sequences)]
    links: dict[tuple[int, int], float] = {}
    hits = align_queries(profiles, codes, backtrace=True, cpus=cpus)
    for i, row in enumerate(hits):
        for j, hit in enumerate(row):
            if i == j or hit is None or hit.aligned_columns == 0:
                continue
            pairs = hit.pairs
            same = int(np.sum(codes[i][pairs[:, 0]] == codes[j][pairs[:, 1]]))
            identity = same / min(len(sequences[i]), len(sequences[j]))
            if identity > threshold:
                key = (min(i, j), max(i, j))
                links[key] = max(links.get(key, 0.0), identity)
    return sorted((i, j, v) for (i, j), v in links.items())


def single_linkage(n: int, links: Iterable[tuple[int, int, float]]) -> np.ndarray:
    """Cluster labels 0..C−1 (in order of first member) of the connected components of ``links``."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in links:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots: dict[int, int] = {}
    return np.array([roots.setdefault(find(k), len(roots)) for k in range(n)], dtype=np.int32)


def split_by_identity(records: Sequence[ChainRecord], *, identity: float = 0.3, val_fraction: float = 0.1,
                      seed: int = 0, cpus: int = 1) -> pd.DataFrame:
    """The :data:`TRAINING_CHAINS` table: clusters at ``identity`` and whole clusters drawn for validation
    (in a seeded random order, until ``val_fraction`` of the chains is reached; clusters larger than 5% of the
    chains always stay in training)."""
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"val_fraction must be in (0, 1), got {val_fraction}")
    labels = single_linkage(len(records), identity_links([r.sequence for r in records], identity, cpus=cpus))
    sizes = np.bincount(labels)
    rng = np.random.default_rng(seed)
    wanted = val_fraction * len(records)
    val_clusters: set[int] = set()
    taken = 0
    for cluster in rng.permutation(len(sizes)):
        if taken >= wanted:
            break
        if sizes[cluster] > max(1, 0.05 * len(records)):
            continue
        val_clusters.add(int(cluster))
        taken += int(sizes[cluster])
    return pd.DataFrame({
        "name": [r.name for r in records],
        "structure": [r.structure for r in records],
        "chain": [r.chain for r in records],
        "sequence": [r.sequence for r in records],
        "length": [len(r.sequence) for r in records],
        "cluster": labels,
        "split": ["validation" if int(c) in val_clusters else "train" for c in labels],
    })


def max_cross_identity(table: pd.DataFrame, *, cpus: int = 1) -> float:
    """Highest identity (module docstring) between a validation chain and a training chain (0 if none)."""
    from workflow_lib.aligner import align_queries, profile_from_sequence

    val = table[table["split"] == "validation"]["sequence"].tolist()
    train = table[table["split"] == "train"]["sequence"].tolist()
    if not val or not train:
        return 0.0
    best = 0.0
    train_codes = [encode(s) for s in train]
    for direction in ((val, train, train_codes, False), (train, val, [encode(s) for s in val], True)):
        queries, targets, codes, _ = direction
        hits = align_queries([profile_from_sequence(s) for s in queries], codes, backtrace=True, cpus=cpus)
        for qi, row in enumerate(hits):
            q = encode(queries[qi])
            for tj, hit in enumerate(row):
                if hit.aligned_columns:
                    same = int(np.sum(q[hit.pairs[:, 0]] == codes[tj][hit.pairs[:, 1]]))
                    best = max(best, same / min(len(queries[qi]), len(targets[tj])))
    return best


def prepare_training_data(structures: Sequence[str | Path], out_dir: str | Path, *, min_length: int = 40,
                          max_length: int = 400, identity: float = 0.3, val_fraction: float = 0.1, seed: int = 0,
                          cpus: int = 1) -> pd.DataFrame:
    """Write ``out_dir/chains.parquet`` (:data:`TRAINING_CHAINS`), ``out_dir/a3m/{name}.a3m`` (query only)
    and ``out_dir/split.json`` (counts, settings, measured maximum cross-split identity)."""
    out_dir = Path(out_dir)
    records, skipped = collect_chains(structures, min_length=min_length, max_length=max_length)
    if len(records) < 2:
        raise InputError(f"only {len(records)} usable chain(s) in {len(structures)} structure file(s)")
    table = split_by_identity(records, identity=identity, val_fraction=val_fraction, seed=seed, cpus=cpus)
    write_table(out_dir / "chains.parquet", table, TRAINING_CHAINS)
    for name, sequence in zip(table["name"], table["sequence"]):
        write_text_atomic(out_dir / "a3m" / f"{name}.a3m", f">{name}\n{sequence}\n")
    summary = {
        "structures": len(structures), "chains": len(table), "skipped": skipped,
        "clusters": int(table["cluster"].nunique()),
        "train_chains": int((table["split"] == "train").sum()),
        "validation_chains": int((table["split"] == "validation").sum()),
        "validation_clusters": int(table[table["split"] == "validation"]["cluster"].nunique()),
        "identity_threshold": identity, "min_length": min_length, "max_length": max_length, "seed": seed,
        "max_cross_identity": max_cross_identity(table, cpus=cpus),
    }
    write_text_atomic(out_dir / "split.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return table


# ---------------------------------------------------------------------------------------------------------
# examples, crops, batches
# ---------------------------------------------------------------------------------------------------------
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


def training_device(name: str | torch.device) -> torch.device:
    """``auto`` → CUDA when torch sees a GPU, else the CPU; ``cuda`` without a GPU is an :class:`InputError`."""
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("train: --device cuda requested but torch sees no CUDA device")
    if name not in ("cpu", "cuda"):
        raise InputError(f"train: device must be auto, cpu or cuda, got {name!r}")
    return torch.device(name)


def to_device(example: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], device: torch.device
              ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """:func:`make_example`'s inputs and targets moved to ``device`` (no copy on the CPU)."""
    inputs, targets = example
    return ({k: v.to(device) for k, v in inputs.items()}, {k: v.to(device) for k, v in targets.items()})


# ---------------------------------------------------------------------------------------------------------
# configuration and state
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainSettings):
    """Settings of :func:`train` (the model's own are in ``model``, a :class:`ModelConfig` dict)."""

    model: dict[str, Any]
    loss_weights: dict[str, float] = dataclasses.field(default_factory=lambda: dataclasses.asdict(LossWeights()))

    def __post_init__(self) -> None:
        ModelConfig.from_dict(self.model)
        for name in ("steps", "crop_size", "max_msa_rows", "checkpoint_every", "val_every", "val_max_chains",
                     "val_crop", "redraw_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"training config: {name} must be a positive integer, got {value!r}")
        if self.warmup_steps < 0 or not self.lr > 0 or self.clip_norm <= 0 or not 0 <= self.min_lr_fraction <= 1:
            raise InputError("training config: need warmup_steps ≥ 0, lr > 0, clip_norm > 0, "
                             "0 ≤ min_lr_fraction ≤ 1")
        LossWeights(**self.loss_weights)

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.model)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"training config: unknown key(s) {unknown}")
        return cls(**data)


def training_model_config(preset_name: str = "small", **overrides: Any) -> ModelConfig:
    """A preset with the feature file's co-evolution (2) and template (131 / 26) channel widths."""
    from workflow_lib.features.schema import C_COEVOLUTION, C_TEMPLATE_1D, C_TEMPLATE_PAIR

    return preset(preset_name, **{"c_coevolution": C_COEVOLUTION, "c_template_pair": C_TEMPLATE_PAIR,
                                  "c_template_1d": C_TEMPLATE_1D, **overrides})


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay to ``min_lr_fraction · lr`` at ``steps``."""
    if config.warmup_steps and step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    floor = config.min_lr_fraction
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def _differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(wanted))
    return [f"{key}: state {stored.get(key)!r} vs requested {wanted.get(key)!r}" for key in keys
            if stored.get(key) != wanted.get(key)]


def save_training_state(path: str | Path, model: ThreeTrackNetwork, optimizer: torch.optim.Optimizer,
                        info: dict[str, Any]) -> None:
    """Atomically write the resumable state: tensors + the JSON string ``info`` (step, RNG, config, metrics)."""
    payload = {
        "format_version": STATE_FORMAT_VERSION,
        "config": model.config.to_json(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "info": json.dumps(info, sort_keys=True),
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_training_state(path: str | Path, model: ThreeTrackNetwork, optimizer: torch.optim.Optimizer,
                        config: TrainConfig) -> dict[str, Any]:
    """Restore ``model`` and ``optimizer`` and the torch RNG; returns the ``info`` dict.

    Refuses (:class:`SchemaError` naming the keys) a state written with another model or training config,
    or whose tensors do not match the model.
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported the same way
        raise SchemaError(f"{path}: not a trackfold training state: {err}") from err
    if not isinstance(payload, dict) or payload.get("format_version") != STATE_FORMAT_VERSION:
        raise SchemaError(f"{path}: not a trackfold training state (format_version "
                          f"{payload.get('format_version') if isinstance(payload, dict) else None!r})")
    stored_model = json.loads(payload["config"])
    diff = _differences(stored_model, model.config.to_dict())
    if diff:
        raise SchemaError(f"{path}: training state has another model config: {'; '.join(diff)}")
    info = json.loads(payload["info"])
    diff = _differences(info["train_config"], config.to_dict())
    if diff:
        raise SchemaError(f"{path}: training state has another training config: {'; '.join(diff)}")
    check_state_dict(path, model, payload["state_dict"])
    model.load_state_dict(payload["state_dict"], strict=True)
    optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["torch_rng"])
    return info


# ---------------------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------------------
@torch.no_grad()
def chain_metrics(outputs: dict[str, torch.Tensor], targets: dict[str, torch.Tensor],
                  residue_index: np.ndarray) -> dict[str, float]:
    """lDDT-Cα, distogram top-1 accuracy and contact precisions of one prediction (batch of one)."""
    pred_ca = outputs["coords"][0, :, 1].double().cpu().numpy()
    true = targets["coords"][0].double().cpu().numpy()
    true_ca = np.where(targets["atom_mask"][0, :, 1:2].cpu().numpy(), true[:, 1], np.nan)
    lddt = lddt_ca(pred_ca, true_ca).score
    pair_mask = targets["pair_mask"][0].cpu().numpy().astype(bool)
    dist_true = targets["dist"][0].cpu().numpy()
    logits = outputs["dist_logits"][0].float().cpu()
    top1 = (logits.argmax(-1).numpy() == dist_true)
    accuracy = float(top1[pair_mask].mean()) if pair_mask.any() else float("nan")
    contact_prob = torch.softmax(logits, dim=-1)[..., :CONTACT_BINS].sum(-1).numpy()
    true_contact = dist_true < CONTACT_BINS
    top = max(1, len(residue_index) // 5)
    return {"lddt_ca": float(lddt), "dist_top1": accuracy,
            "contact_precision_long": contact_precision(contact_prob, true_contact, pair_mask, residue_index, 24,
                                                        top),
            "contact_precision_medlong": contact_precision(contact_prob, true_contact, pair_mask, residue_index,
                                                           12, top)}


@torch.no_grad()
def evaluate(model: ThreeTrackNetwork, chains: Sequence[TrainingChain], config: TrainConfig) -> pd.DataFrame:
    """Per-chain validation metrics (:data:`VALIDATION_CHAINS` columns; module docstring)."""
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    weights = LossWeights(**config.loss_weights)
    rows = []
    try:
        for chain in chains:
            length = min(len(chain), config.val_crop)
            start = (len(chain) - length) // 2
            inputs, targets = to_device(make_example(chain, start, length, None, config.max_msa_rows), device)
            outputs = model(inputs)
            _, parts = total_loss(outputs, targets, weights)
            metrics = chain_metrics(outputs, targets, inputs["residue_index"][0].cpu().numpy())
            rows.append({"name": chain.name, "length": length, **metrics, "loss": parts["loss"]})
    finally:
        model.train(was_training)
    return pd.DataFrame(rows, columns=[f.name for f in VALIDATION_CHAINS.schema])


# ---------------------------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------------------------
def _metric_row(step: int, split: str, parts: dict[str, float], lr: float, wall: float, n_chains: int,
                metrics: dict[str, float] | None = None) -> dict[str, Any]:
    nan = float("nan")
    metrics = metrics or {}
    return {"step": step, "split": split, "loss": parts.get("loss", nan), "distogram": parts.get("distogram", nan),
            "fape": parts.get("fape", nan), "plddt": parts.get("plddt", nan),
            "lddt_ca": metrics.get("lddt_ca", nan), "dist_top1": metrics.get("dist_top1", nan),
            "contact_precision_long": metrics.get("contact_precision_long", nan),
            "contact_precision_medlong": metrics.get("contact_precision_medlong", nan),
            "lr": lr, "wall_s": wall, "n_chains": n_chains}


def _validation_row(step: int, frame: pd.DataFrame, lr: float, wall: float) -> dict[str, Any]:
    means = {key: float(np.nanmean(frame[key])) if len(frame) and frame[key].notna().any() else float("nan")
             for key in ("lddt_ca", "dist_top1", "contact_precision_long", "contact_precision_medlong", "loss")}
    return _metric_row(step, "validation", {"loss": means["loss"]}, lr, wall, len(frame), means)


def write_metrics(out_dir: Path, history: list[dict[str, Any]]) -> None:
    """``metrics.json`` and ``metrics.parquet`` (:data:`TRAINING_METRICS`) and ``learning_curve.png``."""
    frame = pd.DataFrame(history, columns=[f.name for f in TRAINING_METRICS.schema])
    write_table(out_dir / "metrics.parquet", frame, TRAINING_METRICS)
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
             for row in history]
    write_text_atomic(out_dir / "metrics.json", json.dumps(clean, indent=1) + "\n")
    plot_learning_curve(frame, out_dir / "learning_curve.png")


def plot_learning_curve(frame: pd.DataFrame, path: Path) -> None:
    """Training loss terms (moving average over 25 steps) and validation metrics against the step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = frame[frame["split"] == "train"]
    val = frame[frame["split"] == "validation"]
    fig, (ax_loss, ax_val) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("loss", "distogram", "fape", "plddt"):
        if len(train):
            ax_loss.plot(train["step"], train[key].rolling(25, min_periods=1).mean(), label=key)
    if len(val):
        ax_loss.plot(val["step"], val["loss"], "k--o", ms=3, label="validation loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (train: moving average of 25 steps)")
    ax_loss.legend(fontsize=8)
    for key, label in (("lddt_ca", "lDDT-Cα"), ("dist_top1", "distogram top-1"),
                       ("contact_precision_long", "P@L/5 long"), ("contact_precision_medlong", "P@L/5 sep≥12")):
        if len(val):
            ax_val.plot(val["step"], val[key], "-o", ms=3, label=label)
    ax_val.set_xlabel("step")
    ax_val.set_ylabel("validation (mean over chains)")
    ax_val.set_ylim(0, 1)
    if len(val):
        ax_val.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


@dataclass
class TrainResult:
    step: int
    history: list[dict[str, Any]]
    validation: pd.DataFrame | None
    model_path: Path | None
    wall_s: float


def _sample(chains: Sequence[TrainingChain], clusters: Sequence[int], rng: np.random.Generator,
            crop_size: int) -> tuple[TrainingChain, int, int]:
    members: dict[int, list[int]] = {}
    for k, cluster in enumerate(clusters):
        members.setdefault(int(cluster), []).append(k)
    keys = sorted(members)
    cluster = keys[int(rng.integers(len(keys)))]
    chain = chains[members[cluster][int(rng.integers(len(members[cluster])))]]
    length = min(len(chain), crop_size)
    start = int(rng.integers(len(chain) - length + 1))
    return chain, start, length


def train(config: TrainConfig, train_chains: Sequence[TrainingChain], train_clusters: Sequence[int],
          val_chains: Sequence[TrainingChain], out_dir: str | Path, *, resume: bool = True,
          stop_after: int | None = None, time_limit_s: float | None = None,
          final_validation: bool = True, export_extra: dict[str, Any] | None = None,
          device: str | torch.device = "cpu") -> TrainResult:
    """Run (or resume) training; writes ``out_dir/train_state.pt``, ``metrics.*``, ``learning_curve.png``,
    and at the end ``model.pt`` (:func:`~workflow_lib.model.checkpoint.save_checkpoint`) and
    ``validation.parquet`` (:data:`VALIDATION_CHAINS`, all validation chains).

    ``stop_after`` stops after that many steps in total (as if interrupted, no final export) and
    ``time_limit_s`` stops at the first step boundary past that much wall time of this call (then exports).
    ``device`` (:func:`training_device`: ``cpu``, ``cuda`` or ``auto``) is where the model trains; the state and
    checkpoint hold CPU tensors either way. Resume is bitwise exact on the CPU; on CUDA the kernels and the CUDA
    RNG (not stored) make a resumed run close to, not identical with, an uninterrupted one.
    """
    if not train_chains:
        raise InputError("no training chains")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state_path = out_dir / "train_state.pt"
    torch.manual_seed(config.seed)
    device = training_device(device)
    model = ThreeTrackNetwork(config.model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    rng = np.random.default_rng(config.seed)
    weights = LossWeights(**config.loss_weights)
    step, history, wall_before = 0, [], 0.0
    if resume and state_path.exists():
        info = load_training_state(state_path, model, optimizer, config)
        step, history, wall_before = int(info["step"]), info["history"], float(info["wall_s"])
        rng.bit_generator.state = info["numpy_rng"]
        log.info("resumed from %s at step %d", state_path, step)
    elif config.init_model:
        load_weights(config.init_model, model)
        log.info("initialised from %s", config.init_model)
    write_text_atomic(out_dir / "train_config.json", json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    log.info("model: %d parameters; %d training chains, %d validation chains", count_parameters(model),
             len(train_chains), len(val_chains))
    started = time.monotonic()
    val_subset = list(val_chains)[:config.val_max_chains]

    def wall() -> float:
        return wall_before + time.monotonic() - started

    def checkpoint() -> None:
        save_training_state(state_path, model, optimizer, {
            "step": step, "history": history, "wall_s": wall(), "numpy_rng": rng.bit_generator.state,
            "train_config": config.to_dict()})
        write_metrics(out_dir, history)

    last = config.steps if stop_after is None else min(config.steps, stop_after)
    model.train()
    while step < last:
        if time_limit_s is not None and time.monotonic() - started > time_limit_s:
            log.info("time limit reached at step %d", step)
            break
        if step % config.redraw_every == 0:
            model.redraw_performer_features(torch.Generator().manual_seed(config.seed * 1_000_003 + step))
        chain, start, length = _sample(train_chains, train_clusters, rng, config.crop_size)
        inputs, targets = to_device(make_example(chain, start, length, rng, config.max_msa_rows), device)
        lr = learning_rate(config, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        outputs = model(inputs)
        loss, parts = total_loss(outputs, targets, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        optimizer.step()
        step += 1
        history.append(_metric_row(step, "train", parts, lr, wall(), 1))
        if step % 10 == 0:
            log.info("step %d loss %.3f (dist %.3f fape %.3f plddt %.3f) %.1fs", step, parts["loss"],
                     parts["distogram"], parts["fape"], parts["plddt"], wall())
        if val_subset and step % config.val_every == 0:
            frame = evaluate(model, val_subset, config)
            history.append(_validation_row(step, frame, lr, wall()))
            log.info("step %d validation lDDT-Cα %.3f top-1 %.3f", step, history[-1]["lddt_ca"],
                     history[-1]["dist_top1"])
        if step % config.checkpoint_every == 0 or step == last:
            checkpoint()
    checkpoint()
    if stop_after is not None and step >= stop_after and step < config.steps:
        return TrainResult(step, history, None, None, wall())
    validation = None
    if final_validation and val_chains:
        validation = evaluate(model, val_chains, config)
        write_table(out_dir / "validation.parquet", validation, VALIDATION_CHAINS)
    summary = _validation_row(step, validation, float("nan"), wall()) if validation is not None else {}
    extra = {"steps": step, "train_wall_s": round(wall(), 1), "train_chains": len(train_chains),
             "validation_chains": len(val_chains), "train_config": json.dumps(config.to_dict(), sort_keys=True),
             **{f"validation_{k}": summary[k] for k in ("lddt_ca", "dist_top1", "contact_precision_long",
                                                         "contact_precision_medlong") if summary},
             **(export_extra or {})}
    model_path = save_checkpoint(out_dir / "model.pt", model, extra=extra)
    return TrainResult(step, history, validation, model_path, wall())
