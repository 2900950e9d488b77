"""Training packs: the chains, MSAs and backbones of a training run in one compact file, for a GPU node.

A run's feature files hold each chain's co-evolution maps (``L²`` floats per chain, about 300 KB at L = 200), so
thousands of chains come to gigabytes; a training pack (:data:`~workflow_lib.schemas.training.TRAINING_PACK`)
holds only what they are computed from: the MSA rows (the query and at most ``max_rows`` others, chosen as
:func:`~workflow_lib.features.msa_features.sample_rows` does), their sequence weights
(:func:`~workflow_lib.features.msa_features.sequence_weights`), the backbone (N, CA, C in 0.01 Å) and the
residue index, and the rows' insertion counts (for a model that reads MSA statistics; the profile and deletion
mean are computed from the rows), compressed (a pack's size for thousands of chains: benchmarks/RESULTS.md,
"Structure prediction: trained on 4,123 PDB chains, and folding from the distogram"). ``trackfold train --pack``
reads it and computes each chain's co-evolution features on the training device
(:func:`~workflow_lib.features.coevolution.coevolution_features_torch`, equal to the feature files' to
rounding; statistics over the kept rows instead of up to 16,384).

``trackfold train-pack`` builds one from a training table (``train-data``) and the chains' A3Ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from workflow_lib.errors import InputError
from workflow_lib.features.coevolution import coevolution_features_torch
from workflow_lib.features.couplings import coupling_features_torch
from workflow_lib.features.msa_features import DELETION_CLIP, sample_rows, sequence_weights
from workflow_lib.features.templates import TemplateColumns, hit_columns, read_hits
from workflow_lib.schemas.io import read_npz, write_npz
from workflow_lib.schemas.training import TRAINING_PACK
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.templates.database import load_template_db
from workflow_lib.training.examples import TrainingChain, structure_residue_index, table_chains
from workflow_lib.training.settings import PACK_MAX_ROWS

NAME_BYTES = 64
TEMPLATE_MAX_IDENTITY = 0.9
"""Hits more identical than this (over their aligned columns) are not packed as a chain's templates."""
PACK_MAX_TEMPLATES = 4
"""Usable template hits packed per chain: each training crop draws up to ``train.max_templates`` of them."""
MISSING_COORD = np.iinfo(np.int16).min
"""A template atom without coordinates in the pack's int16 coordinates."""


def find_a3m(name: str, dirs: Sequence[str | Path]) -> Path | None:
    """``{name}.a3m`` in the first of ``dirs`` that has it."""
    for folder in dirs:
        path = Path(folder) / f"{name}.a3m"
        if path.is_file():
            return path
    return None


def usable_templates(hits: pd.DataFrame, chain: str, cluster: int, is_validation: bool,
                     clusters: dict[str, int], validation: set[str], *, max_identity: float) -> pd.DataFrame:
    """The hits a chain may train with, in rank order: never itself, nor a chain of its own identity cluster,
    nor one more than ``max_identity`` identical over the aligned columns (so the network learns to use
    templates, not to copy them), and for a training chain never a validation chain (whose structure would
    otherwise reach training)."""
    keep = (hits["template"] != chain) & (hits["identity"] <= max_identity)
    keep &= ~hits["template"].map(lambda name: clusters.get(name) == cluster)
    if not is_validation:
        keep &= ~hits["template"].isin(validation)
    return hits[keep].sort_values("rank", kind="stable")


def best_template_identity(chain: TrainingChain) -> float:
    """Identity of a chain's best usable template (the first packed hit) over its aligned columns; NaN when the
    chain has none."""
    if not chain.templates:
        return float("nan")
    hit = chain.templates[0]
    return float(hit.identical.sum() / max(1, hit.aligned.sum()))


def build_pack(table: pd.DataFrame, msa_dirs: Sequence[str | Path], out: str | Path, *,
               max_rows: int = PACK_MAX_ROWS, template_hits: str | Path | None = None,
               templates: str | Path | None = None, max_templates: int = PACK_MAX_TEMPLATES,
               template_max_identity: float = TEMPLATE_MAX_IDENTITY) -> dict[str, int]:
    """Write the training pack of every chain of ``table`` (:data:`~workflow_lib.schemas.training.TRAINING_CHAINS`)
    with its A3M from ``msa_dirs``; a missing A3M, or one whose query is not the chain, is an InputError.

    With ``template_hits`` (a folder of ``{name}.hits.parquet`` from ``trackfold templates search`` against the
    template database ``templates``) each chain also keeps its best ``max_templates`` usable hits
    (:func:`usable_templates`) laid on its columns (:class:`~workflow_lib.features.templates.TemplateColumns`);
    a chain without a hits file is an InputError. Returns counts (chains, residues, MSA rows, templates)."""
    if max_rows < 1:
        raise InputError(f"max_rows must be at least 1, got {max_rows}")
    if (template_hits is None) != (templates is None):
        raise InputError("a pack with templates needs both the template hits folder and the template database")
    if max_templates < 0 or not 0.0 < template_max_identity <= 1.0:
        raise InputError("need max_templates >= 0 and 0 < template_max_identity <= 1")
    database = None if templates is None else load_template_db(templates)
    clusters = dict(zip(table["name"], table["cluster"].astype(int)))
    validation = set(table.loc[table["split"] == "validation", "name"])
    packed_templates: list[list[TemplateColumns]] = []
    names, lengths, depths, residue_index, coords, masks, msas, weights = [], [], [], [], [], [], [], []
    deletions = []
    for row, chain in table_chains(table):
        if len(row.name.encode()) > NAME_BYTES:
            raise InputError(f"chain name longer than {NAME_BYTES} bytes", record=row.name)
        a3m = find_a3m(row.name, msa_dirs)
        if a3m is None:
            raise InputError(f"no {row.name}.a3m in {', '.join(str(d) for d in msa_dirs)}", record=row.name)
        alignment = read_a3m(a3m)
        codes = np.asarray(alignment.matches)
        if not np.array_equal(codes[0].astype(np.uint8), encode(chain.sequence)):
            raise InputError(f"the A3M's query (L={codes.shape[1]}) is not the chain's sequence (L={len(chain)})",
                             path=a3m, record=row.name)
        kept_rows = sample_rows(alignment, max_rows)
        kept = codes[kept_rows]
        inserted = np.asarray(alignment.insertions)[kept_rows, :codes.shape[1]]
        xyz = np.array(chain.coords[:, :3], dtype=np.float64)
        mask = np.array(chain.mask[:, :3])
        centre = np.nanmean(xyz[:, 1][mask[:, 1]], axis=0) if mask[:, 1].any() else np.zeros(3)
        centi = np.round((xyz - centre) * 100.0)
        if np.nanmax(np.abs(centi), initial=0.0) > np.iinfo(np.int16).max:
            raise InputError("a backbone atom lies more than 327 Å from the chain's centre", record=row.name)
        if database is not None:
            hits_path = Path(template_hits) / f"{row.name}.hits.parquet"
            if not hits_path.is_file():
                raise InputError("no template hits for this chain", path=hits_path, record=row.name)
            usable = usable_templates(read_hits(hits_path), row.name, int(row.cluster), row.split == "validation",
                                      clusters, validation, max_identity=template_max_identity)
            packed_templates.append([hit_columns(hit, database, codes[0], where=hits_path)
                                     for _, hit in usable.head(max_templates).iterrows()])
        names.append(row.name)
        lengths.append(len(chain))
        depths.append(kept.shape[0])
        residue_index.append(structure_residue_index(chain).astype(np.int32))
        coords.append(np.where(mask[..., None], np.nan_to_num(centi), 0).astype(np.int16))
        masks.append(mask)
        msas.append(kept.astype(np.int8).ravel())
        deletions.append(np.minimum(inserted, DELETION_CLIP).astype(np.uint8).ravel())
        weights.append(sequence_weights(kept).astype(np.float32))
    if not names:
        raise InputError("no chains to pack")
    arrays = {
        "names": np.array(names, dtype=f"S{NAME_BYTES}"),
        "is_validation": (table["split"] == "validation").to_numpy(),
        "cluster": table["cluster"].to_numpy(np.int32),
        "lengths": np.array(lengths, dtype=np.int32), "depths": np.array(depths, dtype=np.int32),
        "residue_index": np.concatenate(residue_index), "coords": np.concatenate(coords),
        "atom_mask": np.concatenate(masks), "msa": np.concatenate(msas), "seq_weights": np.concatenate(weights),
        "deletions": np.concatenate(deletions),
    }
    if database is not None:
        arrays.update(_template_arrays(packed_templates, lengths, names))
    write_npz(out, arrays, TRAINING_PACK)
    return {"chains": len(names), "residues": int(sum(lengths)), "msa_rows": int(sum(depths)),
            "templates": sum(len(hits) for hits in packed_templates)}


def _template_arrays(packed: list[list[TemplateColumns]], lengths: list[int], names: list[str]
                     ) -> dict[str, np.ndarray]:
    """The pack's template keys: per chain a count, per hit a name and confidence, per hit column the rest
    (coordinates in 0.01 Å about the hit's mean placed CA, ``MISSING_COORD`` where absent)."""
    counts = np.array([len(hits) for hits in packed], dtype=np.int32)
    hits = [hit for chain_hits in packed for hit in chain_hits]
    coords = []
    for chain_hits, name in zip(packed, names):
        for hit in chain_hits:
            ca = hit.coords[hit.placed, 1]
            centre = ca.mean(axis=0) if len(ca) else np.zeros(3, dtype=np.float32)
            centi = np.round((hit.coords - centre) * 100.0)
            if np.nanmax(np.abs(centi), initial=0.0) > np.iinfo(np.int16).max:
                raise InputError(f"template {hit.template}: an atom lies more than 327 Å from its centre",
                                 record=name)
            coords.append(np.where(np.isnan(centi), MISSING_COORD, centi).astype(np.int16))

    def cat(key: str, dtype: str) -> np.ndarray:
        return (np.concatenate([getattr(hit, key) for hit in hits]).astype(dtype) if hits
                else np.zeros(0, dtype=dtype))

    return {
        "template_counts": counts,
        "template_names": np.array([hit.template for hit in hits], dtype=f"S{NAME_BYTES}"),
        "template_confidence": np.array([hit.confidence for hit in hits], dtype=np.float32),
        "template_coords": np.concatenate(coords) if coords else np.zeros((0, 5, 3), dtype=np.int16),
        "template_placed": cat("placed", "bool"), "template_aligned": cat("aligned", "bool"),
        "template_identical": cat("identical", "bool"), "template_positive": cat("positive", "bool"),
        "template_codes": cat("codes", "int8"), "template_ss": cat("ss", "int8"),
    }


def _read_templates(arrays: dict[str, np.ndarray], lengths: np.ndarray, path: str | Path
                    ) -> list[tuple[TemplateColumns, ...]]:
    """Each chain's template hits from the pack (empty tuples when the pack has none)."""
    if "template_counts" not in arrays:
        return [()] * len(lengths)
    counts = arrays["template_counts"].astype(np.int64)
    if len(counts) != len(lengths) or counts.sum() != len(arrays["template_names"]) \
            or int((counts * lengths).sum()) != len(arrays["template_placed"]):
        raise InputError("the pack's template counts do not add up to its template arrays", path=path)
    out, hit, column = [], 0, 0
    for count, length in zip(counts, lengths):
        chain_hits = []
        for _ in range(int(count)):
            cols = slice(column, column + int(length))
            raw = arrays["template_coords"][cols]
            coords = np.where(raw == MISSING_COORD, np.nan, raw.astype(np.float32) / 100.0).astype(np.float32)
            chain_hits.append(TemplateColumns(
                arrays["template_names"][hit].decode("ascii"), coords, arrays["template_placed"][cols],
                arrays["template_aligned"][cols], arrays["template_identical"][cols],
                arrays["template_positive"][cols], arrays["template_codes"][cols], arrays["template_ss"][cols],
                float(arrays["template_confidence"][hit])))
            hit += 1
            column += int(length)
        out.append(tuple(chain_hits))
    return out


def read_pack(path: str | Path, *, device: str | torch.device = "cpu") -> tuple[pd.DataFrame, list[TrainingChain]]:
    """The pack's table (``name``, ``length``, ``cluster``, ``split``) and its chains. On a CUDA ``device`` every
    chain's co-evolution features are computed there at once (kept as NumPy arrays); on the CPU each chain's
    are computed with NumPy when the chain is first used."""
    on_gpu = torch.device(device).type == "cuda"
    arrays = read_npz(path, TRAINING_PACK)
    lengths, depths = arrays["lengths"].astype(np.int64), arrays["depths"].astype(np.int64)
    residue_ends = np.cumsum(lengths)
    msa_ends = np.cumsum(depths * lengths)
    weight_ends = np.cumsum(depths)
    deletions = arrays.get("deletions")   # absent from packs written before deletion counts were packed
    chain_templates = _read_templates(arrays, lengths, path)
    if residue_ends[-1] != len(arrays["coords"]) or msa_ends[-1] != len(arrays["msa"]) \
            or weight_ends[-1] != len(arrays["seq_weights"]):
        raise InputError("the pack's lengths and depths do not add up to its arrays", path=path)
    chains = []
    for k, raw_name in enumerate(arrays["names"]):
        name = raw_name.decode("ascii")
        length, depth = int(lengths[k]), int(depths[k])
        residues = slice(residue_ends[k] - length, residue_ends[k])
        msa = arrays["msa"][msa_ends[k] - depth * length:msa_ends[k]].reshape(depth, length)
        weights = arrays["seq_weights"][weight_ends[k] - depth:weight_ends[k]]
        mask = arrays["atom_mask"][residues]
        coords = np.where(mask[..., None], arrays["coords"][residues].astype(np.float32) / 100.0, np.nan)
        coevolution = None
        if on_gpu:
            codes = torch.from_numpy(msa.astype(np.int64)).to(device)
            packed_weights = torch.from_numpy(weights.astype(np.float64)).to(device)
            coevolution = torch.cat([coevolution_features_torch(codes, packed_weights),
                                     coupling_features_torch(codes, packed_weights)], dim=-1).cpu().numpy()
        chain_deletions = None if deletions is None else \
            deletions[msa_ends[k] - depth * length:msa_ends[k]].reshape(depth, length)
        chains.append(TrainingChain(name, None, coords.astype(np.float32), mask,
                                    arrays["residue_index"][residues].astype(np.int64), msa=msa,
                                    seq_weights=weights, coevolution=coevolution, deletions=chain_deletions,
                                    templates=chain_templates[k]))
    table = pd.DataFrame({"name": [c.name for c in chains], "length": lengths.astype(np.int32),
                          "cluster": arrays["cluster"],
                          "split": np.where(arrays["is_validation"], "validation", "train")})
    return table, chains
