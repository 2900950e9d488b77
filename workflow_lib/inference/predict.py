"""Inference: feature dict -> network inputs -> backbone, pLDDT and 6D probabilities, with crop-and-stitch.

After RoseTTAFold (Baek et al. 2021, Science 373:871: the three-track network predicts 6D inter-residue geometry
and coordinates). Proteins longer than the window are cropped and stitched (below), so the memory of a network
call stays bounded whatever the protein's length.

Inputs (:func:`model_inputs`): the feature file's ``msa`` (row 0 = query), ``residue_index`` and, when the
checkpoint's config reads them (:func:`~workflow_lib.schemas.features.feature_keys_read`), ``coevolution``,
the MSA statistics (``deletion_matrix``, ``profile``, ``deletion_mean``) and the templates (the 6D maps of the
crop's columns made from ``template_atoms``, ``template_1d``, ``template_mask``; none are passed when T = 0).
The MSA is capped at ``max_msa`` rows: the query plus a sample of the other rows drawn with
``numpy.random.default_rng(seed)`` (kept in their file order), so a fixed seed gives the same rows every time.

Crop-and-stitch for ``L > window`` (:mod:`workflow_lib.inference.stitch`): the network sees every pair of
``window // 2``-residue segments; 6D probabilities are averaged and backbones chained by superposition.

Memory: the network only ever sees ``window`` residues; the stitched 6D sums are float32 ``[L, L, 130]``
(520 bytes per residue pair: 0.5 GB at L = 1000).

Determinism: the model runs in eval mode (no dropout; the Performer projections are stored buffers), under
``torch.use_deterministic_algorithms(True)`` on CPU (:func:`deterministic`), so two CPU runs with the same
seed, threads and inputs give byte-identical arrays. Batching (:func:`plan_batches`) sorts the proteins that fit
one window by length and lets neighbours share a forward pass while the pass stays within ``batch_size``
proteins and ``max_tokens`` padded residues (batch × longest length) and the longest is at most 10% (8
residues) longer than the shortest; padding is masked, so a protein's outputs then differ from its unbatched
outputs by float rounding only. ``batch_size`` defaults to 1: a prediction then does not depend on which
proteins share its pass, and on a CPU sharing a pass costs more than it saves (benchmarks/RESULTS.md,
"Three-track inference on the CPU: batching, throughput and the whole proteome").
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from workflow_lib.errors import InputError, SchemaError
from workflow_lib.features.template_maps import template_distance_bins, template_pair
from workflow_lib.inference.confidence import PlddtCalibration, expected_lddt
from workflow_lib.inference.fold import CaAnchors, FoldOptions, fold_from_distogram
from workflow_lib.inference.settings import (  # noqa: F401  (re-exported: the library's names)
    CROP_PAIRS,
    DEFAULT_MAX_MSA,
    DEFAULT_WINDOW,
    FOLD_MODES,
    HEADS_6D,
    PRECISIONS,
    SEGMENT_CONTACTS,
    TEMPLATE_CONTACT,
    PredictSettings,
)
from workflow_lib.inference.stitch import (
    MIN_WINDOW,
    Crop,
    PairMean,
    contact_segment_pairs,
    crop_plan,
    segment_starts,
    stitch_backbone,
)
from workflow_lib.inference.template_restraints import fold_anchors, restrained_distogram
from workflow_lib.model.checkpoint import network_device
from workflow_lib.model.config import ModelConfig
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.schemas.features import (
    C_COEVOLUTION,
    C_TEMPLATE_1D,
    C_TEMPLATE_PAIR,
)
from workflow_lib.structure.geometry import DIST_EDGES
from workflow_lib.seqio.alphabet import GAP_CODE, decode
from workflow_lib.structure.cbeta import virtual_cb
from workflow_lib.structure.pdb_writer import complete_backbone

LOG = logging.getLogger(__name__)

GAPPY_ROW_FRACTION = 0.5
"""In a crop, rows with at least this fraction of gaps in the crop's columns are dropped (RoseTTAFold)."""
BATCH_LENGTH_SLACK = 0.1
"""Proteins share a batch when the longest is at most 10% (and 8 residues) longer than the shortest."""


@dataclass(frozen=True)
class PredictOptions(PredictSettings):
    """How a prediction is run; every field is a ``trackfold predict`` option. The settings that decide the
    prediction, and their defaults, are :class:`~workflow_lib.inference.settings.PredictSettings` (shared with the
    workflow's config section ``predict``); the fields here only say where and how it runs.

    ``device`` is where the caller loads the model (:func:`resolve_device`); :func:`predict_many` runs on the
    device the model's parameters are on. ``fold`` is where the backbone comes from: ``distogram`` (folded from
    the predicted Cβ distogram, :mod:`workflow_lib.inference.fold`, with the pLDDT that distogram expects of it,
    :mod:`workflow_lib.inference.confidence`) or ``network`` (the structure module's frames).
    """

    device: str = "auto"
    chunk_size: int | None = None
    embeddings: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise InputError(f"predict: precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.fold not in FOLD_MODES:
            raise InputError(f"predict: fold must be one of {', '.join(FOLD_MODES)}, got {self.fold!r}")
        if self.crop_pairs not in CROP_PAIRS:
            raise InputError(f"predict: crop_pairs must be one of {', '.join(CROP_PAIRS)}, got {self.crop_pairs!r}")
        if not isinstance(self.template_weight, (int, float)) or not 0.0 <= self.template_weight <= 1.0:
            raise InputError(f"predict: template_weight must be a number in [0, 1], got {self.template_weight!r}")
        if not isinstance(self.template_anchor, (int, float)) or not 0.0 <= self.template_anchor < float("inf"):
            raise InputError(f"predict: template_anchor must be a number >= 0, got {self.template_anchor!r}")
        if not isinstance(self.window, int) or self.window < MIN_WINDOW:
            raise InputError(f"predict: window must be an integer >= {MIN_WINDOW}, got {self.window!r}")
        if not isinstance(self.max_msa, int) or self.max_msa < 1:
            raise InputError(f"predict: max_msa must be a positive integer, got {self.max_msa!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise InputError(f"predict: device must be auto, cpu or cuda, got {self.device!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"predict: batch_size must be a positive integer, got {self.batch_size!r}")
        unknown = sorted(set(self.pair_heads) - set(HEADS_6D))
        if unknown or len(set(self.pair_heads)) != len(self.pair_heads):
            raise InputError(f"predict: pair_heads must be distinct names among {', '.join(HEADS_6D)}, got "
                             f"{list(self.pair_heads)}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise InputError(f"predict: max_tokens must be 0 (no limit) or a positive integer, got {self.max_tokens!r}")
        if self.chunk_size is not None and (not isinstance(self.chunk_size, int) or self.chunk_size < 1):
            raise InputError(f"predict: chunk_size must be None or a positive integer, got {self.chunk_size!r}")


@dataclass
class Prediction:
    """One protein's prediction (numpy, CPU).

    ``sequence`` (L letters), ``residue_index [L]`` int32, ``backbone [L, 5, 3]`` float32 N, CA, C, O, Cβ
    (Å; Cβ NaN for glycine), ``plddt [L]`` float32 on 0-100, ``probs`` head -> float32 ``[L, L, bins]``
    (those of ``dist``, ``omega``, ``theta``, ``phi`` in ``PredictOptions.pair_heads``), ``n_crops``, and when
    asked ``single [L, C_m]`` / ``pair [L, L, C_z]`` float32 embeddings.
    """

    sequence: str
    residue_index: np.ndarray
    backbone: np.ndarray
    plddt: np.ndarray
    probs: dict[str, np.ndarray]
    n_crops: int
    single: np.ndarray | None = None
    pair: np.ndarray | None = field(default=None, repr=False)
    covered: np.ndarray | None = field(default=None, repr=False)


# --- device, determinism, model checks ----------------------------------------------------------------------
def resolve_device(name: str) -> torch.device:
    """``trackfold predict --device``: :func:`~workflow_lib.model.checkpoint.network_device`."""
    return network_device(name, command="predict")


@contextlib.contextmanager
def deterministic(device: torch.device, seed: int) -> Iterator[None]:
    """Seed torch and, on CPU, enforce deterministic algorithms for the duration (restored afterwards)."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    if device.type == "cpu":
        torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def check_feature_widths(config: ModelConfig, where: str = "checkpoint") -> None:
    """The config's input widths must be 0 or the feature file's channel counts (for ``c_coevolution``, at most
    the file's: a network reads the first channels); names the key otherwise."""
    for key, width in (("c_coevolution", C_COEVOLUTION), ("c_template_pair", C_TEMPLATE_PAIR),
                       ("c_template_1d", C_TEMPLATE_1D)):
        value = getattr(config, key)
        if value not in (0, width) and not (key == "c_coevolution" and 0 < value < width):
            raise SchemaError(f"{where}: config key {key}={value} does not match the feature files "
                              f"({width} channels, or 0 for none)")


# --- inputs --------------------------------------------------------------------------------------------------
def select_rows(msa: np.ndarray, max_msa: int, seed: int, *, drop_gappy: bool) -> np.ndarray:
    """Row indices (query first, then file order) given to the network for the columns of ``msa [N, n]``.

    With ``drop_gappy``, rows with at least :data:`GAPPY_ROW_FRACTION` gaps are dropped (the query never).
    Then, beyond ``max_msa`` rows, the query plus ``max_msa - 1`` others drawn with ``default_rng(seed)``.
    """
    others = np.arange(1, msa.shape[0])
    if drop_gappy and others.size:
        gaps = (msa[1:] == GAP_CODE).mean(axis=1)
        others = others[gaps < GAPPY_ROW_FRACTION]
    if others.size > max_msa - 1:
        rng = np.random.default_rng(seed)
        others = np.sort(rng.choice(others, size=max_msa - 1, replace=False))
    return np.concatenate(([0], others)).astype(np.int64)


def model_inputs(features: Mapping[str, np.ndarray], config: ModelConfig, *, columns: np.ndarray | None = None,
                 max_msa: int = DEFAULT_MAX_MSA, seed: int = 0) -> dict[str, np.ndarray]:
    """Unbatched numpy inputs of :class:`ThreeTrackNetwork` for the residue positions ``columns`` (all: None).

    The residue index is shifted to start at 0 in every crop, as in training (``training.make_example``); the
    differences, including the jump between the two segments of a crop, are kept.

    Keys: ``msa [N, n]`` int64, ``residue_index [n]`` and, when the config reads them
    (:func:`~workflow_lib.schemas.features.feature_keys_read`), ``coevolution [n, n, 2]``,
    ``deletion_matrix [N, n]``, ``profile [n, 21]``, ``deletion_mean [n]``, ``templates_pair [T, n, n, 131]``,
    ``templates_1d [T, n, 29]``, ``template_mask [T]`` (float32; templates only when T > 0; the pair and 1D
    maps each only when the config reads them). No other key of ``features`` is read.
    """
    length = features["msa"].shape[1]
    cropped = columns is not None and len(columns) < length
    columns = np.arange(length) if columns is None else np.asarray(columns, dtype=np.int64)
    msa = features["msa"][:, columns]
    rows = select_rows(msa, max_msa, seed, drop_gappy=cropped)
    out = {
        "msa": msa[rows].astype(np.int64),
        "residue_index": (features["residue_index"][columns] - features["residue_index"][columns[0]]).astype(np.int64),
    }
    if config.c_coevolution:
        out["coevolution"] = features["coevolution"][np.ix_(columns, columns)][..., :config.c_coevolution].astype(
            np.float32)
    if config.msa_statistics:
        out["deletion_matrix"] = features["deletion_matrix"][:, columns][rows].astype(np.float32)
        out["profile"] = features["profile"][columns].astype(np.float32)
        out["deletion_mean"] = features["deletion_mean"][columns].astype(np.float32)
    if (config.c_template_pair or config.c_template_1d) and features["template_mask"].shape[0]:
        out["template_mask"] = features["template_mask"].astype(np.float32)
        if config.c_template_pair:
            out["templates_pair"] = template_pair(features, columns, dtype=np.float32)
        if config.c_template_1d:
            out["templates_1d"] = features["template_1d"][:, columns].astype(np.float32)
    return out


def collate(items: Sequence[dict[str, np.ndarray]], device: torch.device) -> dict[str, torch.Tensor]:
    """Pad unbatched inputs to one batch: gaps / zeros in the padding, ``seq_mask`` and ``msa_mask`` mark it.

    Padded residues get residue numbers continuing after the protein's last one.
    """
    n_res = max(item["msa"].shape[1] for item in items)
    n_seq = max(item["msa"].shape[0] for item in items)
    batch = len(items)
    msa = np.full((batch, n_seq, n_res), GAP_CODE, dtype=np.int64)
    msa_mask = np.zeros((batch, n_seq, n_res), dtype=np.float32)
    seq_mask = np.zeros((batch, n_res), dtype=np.float32)
    residue_index = np.zeros((batch, n_res), dtype=np.int64)
    for b, item in enumerate(items):
        rows, cols = item["msa"].shape
        msa[b, :rows, :cols] = item["msa"]
        msa_mask[b, :rows, :cols] = 1.0
        seq_mask[b, :cols] = 1.0
        last = item["residue_index"][-1]
        residue_index[b] = np.concatenate((item["residue_index"], last + 1 + np.arange(n_res - cols)))
    out = {"msa": msa, "residue_index": residue_index}
    if batch > 1 or n_seq != items[0]["msa"].shape[0] or n_res != items[0]["msa"].shape[1]:
        out.update(seq_mask=seq_mask, msa_mask=msa_mask)
    if "coevolution" in items[0]:
        coevolution = np.zeros((batch, n_res, n_res, items[0]["coevolution"].shape[-1]), dtype=np.float32)
        for b, item in enumerate(items):
            cols = item["coevolution"].shape[0]
            coevolution[b, :cols, :cols] = item["coevolution"]
        out["coevolution"] = coevolution
    if "profile" in items[0]:
        deletions = np.zeros((batch, n_seq, n_res), dtype=np.float32)
        profile = np.zeros((batch, n_res, items[0]["profile"].shape[-1]), dtype=np.float32)
        deletion_mean = np.zeros((batch, n_res), dtype=np.float32)
        for b, item in enumerate(items):
            rows, cols = item["deletion_matrix"].shape
            deletions[b, :rows, :cols] = item["deletion_matrix"]
            profile[b, :cols] = item["profile"]
            deletion_mean[b, :cols] = item["deletion_mean"]
        out.update(deletion_matrix=deletions, profile=profile, deletion_mean=deletion_mean)
    if any("template_mask" in item for item in items):
        out.update(_collate_templates(items, n_res))
    return {key: torch.from_numpy(value).to(device) for key, value in out.items()}


def _collate_templates(items: Sequence[dict[str, np.ndarray]], n_res: int) -> dict[str, np.ndarray]:
    """Templates padded to the batch's most templates; the pair and 1D keys the items carry (a config reads
    either or both)."""
    n_templates = max(item["template_mask"].shape[0] if "template_mask" in item else 0 for item in items)
    example = next(item for item in items if "template_mask" in item)
    out = {"template_mask": np.zeros((len(items), n_templates), np.float32)}
    if "templates_pair" in example:
        out["templates_pair"] = np.zeros((len(items), n_templates, n_res, n_res, example["templates_pair"].shape[-1]),
                                         np.float32)
    if "templates_1d" in example:
        out["templates_1d"] = np.zeros((len(items), n_templates, n_res, example["templates_1d"].shape[-1]), np.float32)
    for b, item in enumerate(items):
        if "template_mask" not in item:
            continue
        t = item["template_mask"].shape[0]
        cols = item["msa"].shape[1]
        out["template_mask"][b, :t] = item["template_mask"]
        if "templates_pair" in out:
            out["templates_pair"][b, :t, :cols, :cols] = item["templates_pair"]
        if "templates_1d" in out:
            out["templates_1d"][b, :t, :cols] = item["templates_1d"]
    return out


# --- running the network ----------------------------------------------------------------------------------
def _outputs(out: dict[str, torch.Tensor], b: int, n: int, embeddings: bool,
             heads: Sequence[str] = HEADS_6D) -> dict[str, np.ndarray]:
    """Protein ``b`` of a batched output, its first ``n`` residues, as float32 numpy (the 6D ``heads`` as
    probabilities)."""
    result = {head: torch.softmax(out[f"{head}_logits"][b, :n, :n].float(), dim=-1).cpu().numpy()
              for head in heads}
    result["coords"] = out["coords"][b, :n].float().cpu().numpy()
    result["plddt"] = out["plddt"][b, :n].float().cpu().numpy()
    if embeddings:
        result["single"] = out["single"][b, :n].float().cpu().numpy()
        result["pair"] = out["pair"][b, :n, :n].float().cpu().numpy()
    return result


def run_network(model: ThreeTrackNetwork, items: Sequence[dict[str, np.ndarray]], device: torch.device, *,
                chunk_size: int | None = None, embeddings: bool = False,
                heads: Sequence[str] = HEADS_6D, precision: str = "float32") -> list[dict[str, np.ndarray]]:
    """One batched forward pass over unbatched inputs (:func:`model_inputs`); per-item float32 numpy outputs.

    ``precision`` (:data:`PRECISIONS`): ``bfloat16`` runs the pass under ``torch.autocast``.
    """
    if precision not in PRECISIONS:
        raise InputError(f"predict: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    batch = collate(items, device)
    with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16,
                                                enabled=precision == "bfloat16"):
        out = model(batch, chunk_size=chunk_size)
    return [_outputs(out, b, item["msa"].shape[1], embeddings, heads) for b, item in enumerate(items)]


def _finish(features: Mapping[str, np.ndarray], backbone_3: np.ndarray, plddt: np.ndarray,
            probs: Mapping[str, np.ndarray], n_crops: int, single: np.ndarray | None,
            pair: np.ndarray | None, covered: np.ndarray | None = None) -> Prediction:
    sequence = decode(features["msa"][0]).replace("-", "X")
    backbone = complete_backbone(sequence, backbone_3).astype(np.float32)
    return Prediction(
        sequence=sequence, residue_index=features["residue_index"].astype(np.int32), backbone=backbone,
        plddt=(100.0 * np.clip(plddt, 0.0, 1.0)).astype(np.float32),
        probs={head: np.asarray(probs[head], dtype=np.float32) for head in HEADS_6D if head in probs},
        n_crops=n_crops,
        single=None if single is None else single.astype(np.float32),
        pair=None if pair is None else pair.astype(np.float32), covered=covered)


def _predict_cropped(model: ThreeTrackNetwork, features: Mapping[str, np.ndarray], options: PredictOptions,
                     device: torch.device, crops: Sequence[Crop]) -> Prediction:
    """Run the crops and stitch (:mod:`workflow_lib.inference.stitch`); crop outputs are folded in as they come.

    Coordinates, pLDDT and the single embedding come from the contiguous crops only, so when neither 6D maps
    nor the pair embedding are asked for (``pair_heads`` empty, no ``embeddings``) only those run: ``n - 1``
    network calls for ``n`` segments instead of ``n (n - 1) / 2``, with the same backbone and pLDDT.

    The crops share forward passes within ``batch_size`` and ``max_tokens`` (:func:`crop_passes`), as proteins
    do: on a GPU one 128-residue crop leaves the device mostly idle. Padding is masked, so a batched crop gives
    its unbatched outputs to float rounding.
    """
    length = features["msa"].shape[1]
    pair_keys = tuple(options.pair_heads) + (("pair",) if options.embeddings else ())
    if not pair_keys:
        crops = [crop for crop in crops if crop.contiguous]
    pair_mean = PairMean(length)
    chained: list[np.ndarray] = []
    chained_coords: list[np.ndarray] = []
    chained_1d: list[list[np.ndarray]] = [[], []]
    for group in crop_passes([len(crop.indices) for crop in crops], options):
        inputs = [model_inputs(features, model.config, columns=crops[i].indices, max_msa=options.max_msa,
                               seed=options.seed) for i in group]
        results = run_network(model, inputs, device, chunk_size=options.chunk_size, precision=options.precision,
                              embeddings=options.embeddings, heads=options.pair_heads)
        for crop, result in zip((crops[i] for i in group), results):
            _add_crop(crop, result, pair_keys, pair_mean, chained, chained_coords, chained_1d, options.embeddings)
    backbone_3, means = stitch_backbone(length, chained, chained_coords,
                                        chained_1d if options.embeddings else chained_1d[:1])
    stitched, covered = {}, None
    if pair_keys:
        stitched = pair_mean.mean(partial=True)
        if not pair_mean.covered.all():
            covered = pair_mean.covered
            for head in options.pair_heads:          # pairs no crop held: the no-contact class (last bin)
                stitched[head][~covered, -1] = 1.0
    return _finish(features, backbone_3, means[0], stitched, len(crops),
                   means[1] if options.embeddings else None, stitched.get("pair"), covered)


def template_contacts(features: Mapping[str, np.ndarray], cutoff: float = TEMPLATE_CONTACT) -> np.ndarray:
    """Bool ``[L, L]``: residue pairs some template of the feature file places with Cβ–Cβ under ``cutoff`` Å (the
    template distogram's one-hot bins ending at or below it)."""
    length = features["msa"].shape[1]
    mask = np.asarray(features["template_mask"]) > 0
    if not mask.any():
        return np.zeros((length, length), dtype=bool)
    close = np.flatnonzero(DIST_EDGES[1:] <= cutoff)
    out = np.zeros((length, length), dtype=bool)
    for t in np.flatnonzero(mask):
        bins, placed = template_distance_bins(features, int(t))
        out |= placed & np.isin(bins, close)
    return out


def plan_crops(features: Mapping[str, np.ndarray], options: PredictOptions,
               min_contacts: int | None = None) -> list[Crop]:
    """The crops of one protein longer than the window under ``options.crop_pairs`` (:data:`CROP_PAIRS`);
    ``min_contacts``: template contacts that make two segments a crop (default :data:`SEGMENT_CONTACTS`)."""
    length = features["msa"].shape[1]
    if options.crop_pairs == "all" or length <= options.window:
        return crop_plan(length, options.window)
    if options.crop_pairs == "neighbours":
        n_segments = len(segment_starts(length, options.window))
        return crop_plan(length, options.window, np.zeros((n_segments, n_segments), dtype=bool))
    pairs = contact_segment_pairs(length, options.window, template_contacts(features),
                                  SEGMENT_CONTACTS if min_contacts is None else min_contacts)
    return crop_plan(length, options.window, pairs)


def crop_passes(sizes: Sequence[int], options: PredictOptions) -> list[list[int]]:
    """Crops (``sizes``: residues of each, in crop-plan order) grouped into forward passes of at most
    ``options.batch_size`` crops and ``options.max_tokens`` padded residues (0: no limit), in order."""
    groups: list[list[int]] = []
    for i, size in enumerate(sizes):
        if groups and len(groups[-1]) < options.batch_size and (
                not options.max_tokens
                or (len(groups[-1]) + 1) * max(size, *(sizes[j] for j in groups[-1])) <= options.max_tokens):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _add_crop(crop: Crop, result: dict[str, np.ndarray], pair_keys: Sequence[str], pair_mean: PairMean,
              chained: list[np.ndarray], chained_coords: list[np.ndarray], chained_1d: list[list[np.ndarray]],
              embeddings: bool) -> None:
    """Fold one crop's outputs into the running stitch."""
    if pair_keys:
        pair_mean.add(crop.indices, {key: result[key] for key in pair_keys})
    if crop.contiguous:
        chained.append(crop.indices)
        chained_coords.append(result["coords"])
        chained_1d[0].append(result["plddt"])
        if embeddings:
            chained_1d[1].append(result["single"])


def predict_features(model: ThreeTrackNetwork, features: Mapping[str, np.ndarray],
                     options: PredictOptions = PredictOptions(), *,
                     calibration: PlddtCalibration | None = None) -> Prediction:
    """Predict one protein (crop-and-stitch when ``L > options.window``); ``calibration``: :func:`predict_group`."""
    return next(iter(predict_many(model, [("protein", features)], options, calibration=calibration)))[1]


def plan_batches(lengths: Sequence[int], options: PredictOptions) -> list[list[int]]:
    """The forward passes of :func:`predict_many`: lists of indices into ``lengths`` (query lengths).

    Proteins that fit one window, sorted by length (ties by index), share a pass with their neighbours while the
    pass holds at most ``options.batch_size`` proteins, at most ``options.max_tokens`` padded residues (pass
    size × its longest length; 0: no limit) and its longest protein is at most 10% (and 8 residues) longer than
    its shortest. Proteins longer than the window follow, one per entry, in input order (cropped and stitched).
    """
    fitting = sorted((int(length), i) for i, length in enumerate(lengths) if length <= options.window)
    groups: list[list[int]] = []
    shortest = 0
    for length, index in fitting:
        if groups and len(groups[-1]) < options.batch_size \
                and length <= max(shortest * (1 + BATCH_LENGTH_SLACK), shortest + 8) \
                and (not options.max_tokens or (len(groups[-1]) + 1) * length <= options.max_tokens):
            groups[-1].append(index)
        else:
            groups.append([index])
            shortest = length
    groups += [[i] for i, length in enumerate(lengths) if length > options.window]
    return groups


def predict_group(model: ThreeTrackNetwork, items: Sequence[tuple[str, Mapping[str, np.ndarray]]],
                  options: PredictOptions = PredictOptions(), *,
                  calibration: PlddtCalibration | None = None) -> list[tuple[str, Prediction]]:
    """One entry of :func:`plan_batches`: proteins that fit the window in one forward pass, or one protein
    longer than the window, cropped and stitched.

    ``calibration`` (the checkpoint's, :meth:`PlddtCalibration.from_extra`) maps the folded backbone's expected
    lDDT to its pLDDT with ``fold: distogram``; None keeps the expected lDDT itself."""
    if options.fold == "distogram":
        heads = tuple(options.pair_heads) + (() if "dist" in options.pair_heads else ("dist",))
        predictions = predict_group(model, items, dataclasses.replace(options, fold="network", pair_heads=heads))
        return [(name, fold_prediction(prediction, keep_dist="dist" in options.pair_heads, seed=options.seed,
                                       calibration=calibration,
                                       restraints=restrained_distogram(prediction.probs["dist"], features,
                                                                       options.template_weight),
                                       anchors=fold_anchors(features, options.template_anchor)))
                for (name, prediction), (_, features) in zip(predictions, items)]
    device = next(model.parameters()).device
    check_feature_widths(model.config)
    model.eval()
    lengths = [features["msa"].shape[1] for _, features in items]
    with deterministic(device, options.seed):
        if len(items) == 1 and lengths[0] > options.window:
            name, features = items[0]
            crops = plan_crops(features, options)
            LOG.info("%s: L=%d > window %d, %d crops", name, lengths[0], options.window, len(crops))
            return [(name, _predict_cropped(model, features, options, device, crops))]
        if max(lengths) > options.window:
            raise InputError(f"predict: a batch of {len(items)} proteins holds one longer than the window "
                             f"({max(lengths)} > {options.window}); such proteins run alone")
        inputs = [model_inputs(features, model.config, max_msa=options.max_msa, seed=options.seed)
                  for _, features in items]
        outputs = run_network(model, inputs, device, chunk_size=options.chunk_size, precision=options.precision,
                              embeddings=options.embeddings, heads=options.pair_heads)
        return [(name, _finish(features, result["coords"].astype(np.float64), result["plddt"], result, 1,
                               result.get("single"), result.get("pair")))
                for (name, features), result in zip(items, outputs)]


def fold_prediction(prediction: Prediction, *, keep_dist: bool, seed: int,
                    calibration: PlddtCalibration | None = None, fold_options: FoldOptions | None = None,
                    restraints: np.ndarray | None = None, anchors: CaAnchors | None = None) -> Prediction:
    """The prediction with its backbone folded from its distogram and its pLDDT the lDDT that backbone expects
    under the distogram (:func:`~workflow_lib.inference.confidence.expected_lddt`; the network's pLDDT head
    scored the structure module's backbone, and on held-out chains does not follow the folded one's accuracy:
    benchmarks/RESULTS.md, "pLDDT against the real lDDT: the network's head and the distogram's expected lDDT"),
    through ``calibration`` when given; ``dist`` dropped unless kept. The fold's mirror-image choice reads the
    ω / θ / φ distributions when ``pair_heads`` kept them, else the helix rule
    (:func:`~workflow_lib.inference.fold.prefer_mirror`). ``fold_options``: the fold's settings (default
    :class:`~workflow_lib.inference.fold.FoldOptions`), with ``seed``; pairs outside ``prediction.covered`` are
    left unrestrained. ``restraints``: the distogram the fold restrains to, when not the network's own (the
    template's distances mixed in, :func:`~workflow_lib.inference.template_restraints.restrained_distogram`); the
    pLDDT is the network's distogram's either way. ``anchors``: a template's Cα anchors
    (:func:`~workflow_lib.inference.template_restraints.fold_anchors`), which also decide the hand."""
    orientations = ({head: prediction.probs[head] for head in ("omega", "theta", "phi")}
                    if {"omega", "theta", "phi"} <= set(prediction.probs) else None)   # they choose the hand
    fold_options = FoldOptions(seed=seed) if fold_options is None else dataclasses.replace(fold_options, seed=seed)
    target = prediction.probs["dist"] if restraints is None else restraints
    backbone_3, _ = fold_from_distogram(target, fold_options, orientations=orientations,
                                        covered=prediction.covered, anchors=anchors)
    prediction.backbone = complete_backbone(prediction.sequence, backbone_3).astype(np.float32)
    cb = virtual_cb(backbone_3[:, 0], backbone_3[:, 1], backbone_3[:, 2])
    expected = expected_lddt(prediction.probs["dist"], cb)
    prediction.plddt = (100.0 * (expected if calibration is None else calibration(expected))).astype(np.float32)
    if not keep_dist:
        prediction.probs = {head: value for head, value in prediction.probs.items() if head != "dist"}
    return prediction


def predict_many(model: ThreeTrackNetwork, items: Sequence[tuple[str, Mapping[str, np.ndarray]]],
                 options: PredictOptions = PredictOptions(), *,
                 calibration: PlddtCalibration | None = None) -> Iterator[tuple[str, Prediction]]:
    """Predict named proteins; yields ``(name, Prediction)`` pass by pass (:func:`plan_batches`: batches of
    similar length first, then the proteins longer than the window)."""
    for group in plan_batches([features["msa"].shape[1] for _, features in items], options):
        yield from predict_group(model, [items[i] for i in group], options, calibration=calibration)
