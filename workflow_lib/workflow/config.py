"""The workflow configuration as frozen dataclasses: it flows one way, YAML → schema → dataclass → library.

``config/schema.yaml`` validates the whole file and fills defaults; :meth:`WorkflowConfig.from_dict` then turns
the validated config into one typed object, a dataclass per section (``CFG.search``, ``CFG.templates``,
``CFG.report``, ...), built once in ``rules/common.smk`` and read by every rule file. Each section rejects
unknown keys and wrong types with an :class:`~workflow_lib.errors.InputError` naming the key, so library
functions take typed keyword arguments and never read YAML.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from workflow_lib.aligner.device import compiled_available as compiled_kernels
from workflow_lib.db.build import DEFAULT_DUPLICATE_IDS, DEFAULT_ON_BAD_RECORD, DEFAULT_SHARDS
from workflow_lib.db.chunks import ChunkSettings
from workflow_lib.db.cluster import DEFAULT_COVERAGE, DEFAULT_IDENTITY
from workflow_lib.errors import InputError
from workflow_lib.inference.settings import (
    CROP_PAIRS,
    DEFAULT_MODEL,
    FOLD_MODES,
    HEADS_6D,
    PRECISIONS,
    PredictSettings,
)
from workflow_lib.report.settings import PLOT_PROTEINS
from workflow_lib.schemas.features import C_COEVOLUTION
from workflow_lib.search.settings import SETTING_NAMES, WORKFLOW_MAX_EVALUE, Settings, cli_options, setting_error
from workflow_lib.structure.geometry import DIST_BINS
from workflow_lib.templates.build import DEFAULT_MIN_LENGTH as TEMPLATE_MIN_LENGTH
from workflow_lib.templates.calibration import DEFAULT_DECOYS, MIN_DECOYS
from workflow_lib.templates.search import DEFAULT_MAX_HITS, DEFAULT_MIN_ALIGNED
from workflow_lib.training.settings import (
    CHAIN_MAX_LENGTH,
    CHAIN_MIN_LENGTH,
    PACK_MAX_ROWS,
    SPLIT_IDENTITY,
    VAL_FRACTION,
    TrainSettings,
)
from workflow_lib.workflow.paths import TrainPaths, WorkflowPaths

T = TypeVar("T", bound="StageConfig")

TEMPLATE_DISTANCE_BYTES = 40
"""Bytes per residue pair while a predict job makes a template's Cβ distance classes from its atoms (the pair
vectors, float64 [L, L, 3], and the distances), for :meth:`PredictConfig.memory_mb`."""


class StageConfig:
    """Mixin: ``from_dict`` with unknown-key and type checks, for frozen dataclasses of plain fields."""

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any] | None, *, where: str = "") -> T:
        data = dict(data or {})
        where = where or cls.__name__
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise InputError(f"unknown key(s) {unknown} in {where}; known keys: {sorted(fields)}")
        hints = typing.get_type_hints(cls)
        values = {}
        for name, value in data.items():
            values[name] = _check_type(value, hints[name], f"{where}.{name}")
        try:
            return cls(**values)
        except TypeError as error:
            raise InputError(f"{where}: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


MOVED_KEYS = {
    ("search", "device"): "search_profiles and search_shard",
    ("predict", "device"): "predict",
    ("train", "device"): "train_model and train_predict",
}
"""Configuration keys that became job resources: where a job runs is the profile's business, not the science's."""


def check_moved_keys(config: Mapping[str, Any], *, where: str = "config") -> None:
    """Raise an :class:`InputError` naming each moved key of ``config`` and what to write instead (called before
    schema validation, whose message would only say that the key is not allowed)."""
    for (section, key), rules in MOVED_KEYS.items():
        if isinstance(config.get(section), Mapping) and key in config[section]:
            first = rules.split()[0]
            raise InputError(
                f"{where}: '{section}.{key}' is no longer a configuration key: a job runs on a GPU when it is "
                f"given one, e.g. `--set-resources {first}:gpu=1` on the command line or under set-resources "
                f"in a profile (rules {rules}); remove '{section}.{key}' from the config")


def _check_type(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _check_type(value, option, where)
            except InputError:
                continue
        raise InputError(f"{where}: {value!r} is not of type {hint}")
    if hint is type(None):
        if value is None:
            return None
        raise InputError(f"{where}: expected null, got {value!r}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return tuple(_check_type(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool):
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if not isinstance(value, hint):
        raise InputError(f"{where}: expected {hint.__name__}, got {type(value).__name__} {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class DatabaseConfig(StageConfig):
    """One sequence database: its FASTA files, how it is sharded, and whether it is also clustered into a profile
    database (``profiles``; :mod:`workflow_lib.db.profiles`). Defaults: those of ``trackfold db build`` and
    ``trackfold db cluster`` (:mod:`workflow_lib.db.build`, :mod:`workflow_lib.db.cluster`)."""

    fasta: tuple[str, ...]
    shards: int = DEFAULT_SHARDS
    duplicate_ids: str = DEFAULT_DUPLICATE_IDS
    on_bad_record: str = DEFAULT_ON_BAD_RECORD
    profiles: bool = False
    profile_identity: float = DEFAULT_IDENTITY
    profile_coverage: float = DEFAULT_COVERAGE

    def __post_init__(self) -> None:
        if not 0 < self.profile_identity <= 1 or not 0 < self.profile_coverage <= 1:
            raise InputError("database 'profile_identity' and 'profile_coverage' must lie in (0, 1], got "
                             f"{self.profile_identity} and {self.profile_coverage}")
        if not self.fasta:
            raise InputError("database 'fasta' must list at least one file")
        if self.shards < 1:
            raise InputError(f"database 'shards' must be at least 1, got {self.shards}")
        if self.duplicate_ids not in ("rename", "error"):
            raise InputError(f"database 'duplicate_ids' must be 'rename' or 'error', got {self.duplicate_ids!r}")
        if self.on_bad_record not in ("skip", "error"):
            raise InputError(f"database 'on_bad_record' must be 'skip' or 'error', got {self.on_bad_record!r}")


@dataclasses.dataclass(frozen=True)
class ChunkConfig(StageConfig, ChunkSettings):
    """Config section ``chunks``: :class:`~workflow_lib.db.chunks.ChunkSettings` read from the config."""


@dataclasses.dataclass(frozen=True)
class SearchConfig(StageConfig, Settings):
    """The MSA stage (config section ``search``; rules/search.smk): :class:`~workflow_lib.search.settings.Settings`
    (the same keys, the product's defaults: context pseudocounts, the sensitive prefilter) plus which database
    and precomputed MSAs; only ``max_evalue`` has the workflow's own default
    (:data:`~workflow_lib.search.settings.WORKFLOW_MAX_EVALUE`). ``sensitive: false`` with ``pseudocounts:
    substitution`` is the fast setting."""

    max_evalue: float = WORKFLOW_MAX_EVALUE
    database: str | None = None
    precomputed_msas: str | None = None

    def __post_init__(self) -> None:
        try:
            super().__post_init__()
        except ValueError as error:
            raise InputError(setting_error(error, "search.")) from None

    def settings(self) -> Settings:
        """The search's :class:`~workflow_lib.search.settings.Settings` (this section without the workflow keys)."""
        return Settings(**{name: getattr(self, name) for name in SETTING_NAMES})

    def cli_options(self) -> str:
        """The settings as the search jobs' options (:func:`workflow_lib.search.settings.cli_options`)."""
        return cli_options(self.settings())


@dataclasses.dataclass(frozen=True)
class TemplateConfig(StageConfig):
    """The template database and the template search (config section ``templates``; no structures = off).
    Defaults: those of ``trackfold templates build`` and ``templates search`` (:mod:`workflow_lib.templates`)."""

    name: str = "templates"
    structures: tuple[str, ...] = ()
    msa_dir: str | None = None
    search_msas: bool = True
    min_length: int = TEMPLATE_MIN_LENGTH
    max_hits: int = DEFAULT_MAX_HITS
    min_aligned: int = DEFAULT_MIN_ALIGNED
    decoys: int = DEFAULT_DECOYS

    def __post_init__(self) -> None:
        for key in ("min_length", "max_hits", "min_aligned"):
            if getattr(self, key) < 1:
                raise InputError(f"templates.{key} must be at least 1, got {getattr(self, key)}")
        if self.decoys < MIN_DECOYS:
            raise InputError(f"templates.decoys must be at least {MIN_DECOYS}, got {self.decoys}")

    @property
    def enabled(self) -> bool:
        return bool(self.structures)


@dataclasses.dataclass(frozen=True)
class FeatureConfig(StageConfig):
    """Per-protein feature files (config section ``features``)."""

    max_seqs: int = 1024
    max_stats_seqs: int = 16384
    max_templates: int = 2

    def __post_init__(self) -> None:
        if self.max_seqs < 1 or self.max_stats_seqs < self.max_seqs:
            raise InputError(f"features: need 1 <= max_seqs <= max_stats_seqs, got {self.max_seqs} and "
                             f"{self.max_stats_seqs}")
        if self.max_templates < 0:
            raise InputError(f"features.max_templates must be at least 0, got {self.max_templates}")


@dataclasses.dataclass(frozen=True)
class ReportConfig(StageConfig):
    """The per-proteome summary and report figures (config section ``report``; rules/report.smk): ``plot_proteins``
    proteins drawn one by one (``trackfold summarize --plot-proteins``), first those of ``proteins`` (``--protein``,
    FASTA or safe IDs), then others spread over the pLDDT range."""

    proteins: tuple[str, ...] = ()
    plot_proteins: int = PLOT_PROTEINS

    def __post_init__(self) -> None:
        if self.plot_proteins < 0:
            raise InputError(f"report.plot_proteins must be at least 0, got {self.plot_proteins}")


@dataclasses.dataclass(frozen=True)
class PredictConfig(StageConfig, PredictSettings):
    """Structure prediction (config section ``predict``; see workflow_lib.inference.predict): the settings and
    defaults of :class:`~workflow_lib.inference.settings.PredictSettings`, which ``trackfold predict`` shares, and
    the checkpoint."""

    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        if self.fold not in FOLD_MODES:
            raise InputError(f"predict.fold must be network or distogram, got {self.fold!r}")
        if self.precision not in PRECISIONS:
            raise InputError(f"predict.precision must be float32 or bfloat16, got {self.precision!r}")
        if self.crop_pairs not in CROP_PAIRS:
            raise InputError(f"predict.crop_pairs must be all, contacts or neighbours, got {self.crop_pairs!r}")
        if not isinstance(self.template_weight, (int, float)) or not 0.0 <= self.template_weight <= 1.0:
            raise InputError(f"predict.template_weight must be a number in [0, 1], got {self.template_weight!r}")
        if not isinstance(self.template_anchor, (int, float)) or not 0.0 <= self.template_anchor < float("inf"):
            raise InputError(f"predict.template_anchor must be a number >= 0, got {self.template_anchor!r}")
        unknown = sorted(set(self.pair_heads) - set(HEADS_6D))
        if unknown:
            raise InputError(f"predict.pair_heads: {unknown} are not among dist, omega, theta, phi")
        if self.batch_size < 1:
            raise InputError(f"predict.batch_size must be at least 1, got {self.batch_size}")
        if self.max_tokens < 0:
            raise InputError(f"predict.max_tokens must be at least 0, got {self.max_tokens}")
        if not self.model:
            raise InputError("predict.model must name a checkpoint file")
        if self.window < 16:
            raise InputError(f"predict.window must be at least 16, got {self.window}")
        if self.max_msa < 1:
            raise InputError(f"predict.max_msa must be at least 1, got {self.max_msa}")

    @property
    def pair_heads_option(self) -> str:
        """``trackfold predict --pair-heads``: the heads, comma-separated, or ``none``."""
        return ",".join(self.pair_heads) or "none"

    def network_calls(self, length: int) -> int:
        """Forward passes of one protein at most: 1 within the window, else one per pair of half-window segments
        (as :func:`workflow_lib.inference.stitch.crop_plan`; with ``crop_pairs: contacts`` the pairs a template
        puts in contact are not known before the features, so all count), or only the contiguous pairs with
        ``crop_pairs: neighbours`` or when no pair output is needed (``fold: network`` and no ``pair_heads``)."""
        if length <= self.window:
            return 1
        segment = self.window // 2
        segments = -(-(length - segment) // segment) + 1
        if self.crop_pairs == "neighbours" or (self.fold == "network" and not self.pair_heads):
            return segments - 1
        return segments * (segments - 1) // 2

    def memory_mb(self, longest: int, templates: int = 0) -> int:
        """The memory a predict job asks for, from its longest protein: 3 GB for the process and one window's
        pass, plus the other proteins of a batch (about 10 KB per residue pair each), plus three copies of the kept
        6D maps of a protein longer than the window (float32 [L, L, bins]: sums, mean, file buffer; 130 bins for
        all four maps), plus twice the feature file's float32 co-evolution [L, L, 3] (read, then decompressed) and,
        with ``templates``, the template's Cβ distance classes of every pair (about 40 bytes a pair while they are
        made; the file keeps only the templates' atoms, and the network's template maps are a window's) and, when
        folding from the distogram, its restraints (the placed pairs' template bins and the mixed copy, float32
        [L, L, 37] each); folding from the distogram adds its potential (float64 [L, L, 37], twice) and the
        distogram itself. The jobs' peak memory against these terms: benchmarks/RESULTS.md, "Features: the
        templates' atoms in the file", "Three-track inference (CPU)" and "Proteome end to end: E. coli against
        UniProt-2014, per stage"."""
        window = min(longest, self.window)
        batch = self.batch_size
        if self.max_tokens:
            batch = min(batch, max(self.max_tokens // max(window, 1), 1))
        batched = (batch - 1) * window * window * 10_000 / 1e6
        bins = sum({"dist": 37, "omega": 37, "theta": 37, "phi": 19}[head] for head in self.pair_heads)
        stitched = 3 * longest * longest * bins * 4 / 1e6 if longest > self.window else 0.0
        per_pair = 2 * C_COEVOLUTION * 4
        if templates:
            per_pair += TEMPLATE_DISTANCE_BYTES + (2 * DIST_BINS * 4 if self.fold == "distogram" else 0)
        features = longest * longest * per_pair / 1e6
        fold = 3 * longest * longest * 37 * 8 / 1e6 if self.fold == "distogram" else 0.0
        return int(3000 + batched + stitched + features + fold)

    def runtime_min(self, lengths: Sequence[int]) -> int:
        """The minutes a predict job asks for: 10, plus 2 per forward pass of its proteins of a 300-residue window
        on a CPU core (a GPU takes a fraction of that), scaled by the square of the window (the pair track's cost
        grows faster, so this stays on the safe side for smaller windows), plus for folding from the distogram
        0.05 per protein of 200 residues with the compiled terms (0.25 with the torch terms, without numba),
        growing with L². The passes and the fold measured: benchmarks/RESULTS.md, "Three-track inference (CPU)"
        and "Structure prediction: the fold's compiled energy"."""
        per_protein = 0.05 if compiled_kernels() else 0.25
        fold = sum(per_protein * (int(length) / 200) ** 2 for length in lengths) if self.fold == "distogram" else 0.0
        per_call = 2.0 * (self.window / 300) ** 2
        return int(10 + per_call * sum(self.network_calls(int(length)) for length in lengths) + fold)


@dataclasses.dataclass(frozen=True)
class TrainWorkflowConfig(StageConfig, TrainSettings):
    """The training workflow (config section ``train``; rules/train.smk): structures → chains and an identity
    split → MSAs (our search, or precomputed) → features → ``trackfold train`` → predictions and evaluation of
    the held-out chains → a model card. Training settings mirror :class:`workflow_lib.training.config.TrainConfig`
    (same names and defaults); ``threads``, ``mem_mb`` and ``runtime`` are the training job's resources."""

    name: str = "model"
    structures: tuple[str, ...] = ()
    structures_archive: str | None = None
    min_length: int = CHAIN_MIN_LENGTH
    max_length: int = CHAIN_MAX_LENGTH
    identity: float = SPLIT_IDENTITY
    val_fraction: float = VAL_FRACTION
    split_seed: int = 0
    chain_names: str | None = None
    val_chains: int | None = None
    val_names: str | None = None
    data_threads: int = 1
    database: str | None = None
    msa_dir: tuple[str, ...] = ()
    msa_batches: int = 8
    msa_threads: int = 1
    pack: bool = False
    pack_max_rows: int = PACK_MAX_ROWS
    templates: bool = False
    preset: str = "small"
    overrides: Any = None
    max_train_chains: int | None = None
    time_limit_min: float | None = None
    threads: int = 1
    mem_mb: int = 8000
    runtime: int = 1440

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, where: str = "") -> TrainWorkflowConfig:
        """As :meth:`StageConfig.from_dict`; ``msa_dir`` may be one string or a list (null: none)."""
        data = dict(data or {})
        if isinstance(data.get("msa_dir"), str):
            data["msa_dir"] = [data["msa_dir"]]
        elif "msa_dir" in data and data["msa_dir"] is None:
            data["msa_dir"] = []
        return super().from_dict(data, where=where or "config 'train'")

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.name):
            raise InputError(f"train.name must be a file-name-safe word, got {self.name!r}")
        if not 1 <= self.min_length <= self.max_length:
            raise InputError(f"train: need 1 <= min_length <= max_length, got {self.min_length}, {self.max_length}")
        if not 0 < self.identity <= 1 or not 0 < self.val_fraction < 1:
            raise InputError("train: identity must be in (0, 1] and val_fraction in (0, 1)")
        for key in ("data_threads", "msa_batches", "msa_threads", "pack_max_rows", "steps", "crop_size",
                    "batch_size", "max_msa_rows", "checkpoint_every", "val_every", "val_max_chains", "val_crop",
                    "redraw_every", "threads", "mem_mb", "runtime"):
            if getattr(self, key) < 1:
                raise InputError(f"train.{key} must be at least 1, got {getattr(self, key)}")
        if self.val_chains is not None and self.val_chains < 1:
            raise InputError(f"train.val_chains must be at least 1, got {self.val_chains}")
        if self.templates and not self.pack:
            raise InputError("train.templates needs train.pack: true (template hits reach training through the pack)")
        if self.val_chains is not None and self.val_names:
            raise InputError("train: set val_chains (draw validation chains) or val_names (a fixed file of them), "
                             "not both")
        if self.max_train_chains is not None and self.max_train_chains < 1:
            raise InputError(f"train.max_train_chains must be at least 1, got {self.max_train_chains}")
        if self.time_limit_min is not None and not self.time_limit_min > 0:
            raise InputError(f"train.time_limit_min must be positive, got {self.time_limit_min}")
        if self.overrides is not None and not isinstance(self.overrides, Mapping):
            raise InputError(f"train.overrides must be a mapping of model config keys, got {self.overrides!r}")
        if not self.lr > 0 or self.warmup_steps < 0 or not self.clip_norm > 0 or not 0 <= self.min_lr_fraction <= 1:
            raise InputError("train: need lr > 0, warmup_steps >= 0, clip_norm > 0, 0 <= min_lr_fraction <= 1")

    def root(self, results: str) -> str:
        """The run's output folder."""
        return WorkflowPaths(results).train_root(self.name)

    def targets(self, results: str) -> list[str]:
        """The final outputs of the run: model card, evaluation table, checkpoint."""
        paths = TrainPaths(self.root(results))
        return [paths.model_card(), paths.evaluation_file("evaluation.parquet"), paths.run_file("model.pt")]

    def batch_names(self) -> list[str]:
        """MSA batch labels ``000``, ``001``, ...: chain ``i`` of chains.parquet is in batch ``i mod msa_batches``."""
        return [f"{b:03d}" for b in range(self.msa_batches)]

    def structure_files(self) -> list[str]:
        """``structures`` with globs expanded (sorted); a pattern matching nothing is an error unless an archive
        is configured too."""
        import glob

        if not self.structures and not self.structures_archive:
            raise InputError("train: give structures (files or globs) or structures_archive (a .tar.gz)")
        files: list[str] = []
        for pattern in self.structures:
            matched = sorted(glob.glob(pattern))
            if not matched and not self.structures_archive:
                raise InputError(f"config 'train.structures': {pattern!r} matches no file")
            files += matched
        return files

    def data_options(self) -> str:
        """Chain filters and split settings as ``trackfold train-data`` options."""
        import shlex

        options = (f"--min-length {self.min_length} --max-length {self.max_length} --identity {self.identity} "
                   f"--val-fraction {self.val_fraction} --seed {self.split_seed}")
        if self.chain_names:
            options += f" --names {shlex.quote(self.chain_names)}"
        if self.val_chains:
            options += f" --val-chains {self.val_chains}"
        if self.val_names:
            options += f" --val-names {shlex.quote(self.val_names)}"
        return options

    def precomputed_option(self) -> str:
        """``--precomputed DIR...`` for ``trackfold train-batch`` (empty without ``msa_dir``)."""
        import shlex

        return ("--precomputed " + " ".join(shlex.quote(d) for d in self.msa_dir)) if self.msa_dir else ""

    def train_options(self) -> str:
        """The training settings as ``trackfold train`` options (model overrides as ``--set KEY=JSON``)."""
        import json
        import shlex

        options = [f"--preset {self.preset}"]
        for key, value in sorted(dict(self.overrides or {}).items()):
            options.append("--set " + shlex.quote(f"{key}={json.dumps(value)}"))
        for key in ("steps", "crop_size", "batch_size", "max_msa_rows", "max_templates", "template_dropout",
                    "self_template_rate", "neff_sampling", "lr",
                    "warmup_steps", "min_lr_fraction", "weight_decay",
                    "clip_norm", "checkpoint_every", "val_every", "val_max_chains", "val_crop", "redraw_every",
                    "seed", "precision", "max_train_chains", "time_limit_min", "init_blocks"):
            value = getattr(self, key)
            if value is not None and value != "":
                options.append(f"--{key.replace('_', '-')} {shlex.quote(str(value))}")
        return " ".join(options)


SECTIONS: dict[str, type[StageConfig]] = {
    "search": SearchConfig,
    "chunks": ChunkConfig,
    "templates": TemplateConfig,
    "features": FeatureConfig,
    "report": ReportConfig,
    "predict": PredictConfig,
}
"""The config sections with one settings object each (``databases`` has one per database, ``train`` is optional)."""

TOP_LEVEL_KEYS = ("results", "proteomes", "databases", *SECTIONS, "train")


@dataclasses.dataclass(frozen=True)
class WorkflowConfig:
    """The whole configuration, typed: :meth:`from_dict` of the schema-validated config, built once in
    ``rules/common.smk`` (``CFG``) and read by every rule file (``CFG.search``, ``CFG.templates``, ``CFG.report``,
    ...). ``train`` is None when the config has no ``train`` section (the proteome workflow)."""

    proteomes: dict[str, str]
    databases: dict[str, DatabaseConfig]
    results: str = "results"
    search: SearchConfig = dataclasses.field(default_factory=SearchConfig)
    chunks: ChunkConfig = dataclasses.field(default_factory=ChunkConfig)
    templates: TemplateConfig = dataclasses.field(default_factory=TemplateConfig)
    features: FeatureConfig = dataclasses.field(default_factory=FeatureConfig)
    report: ReportConfig = dataclasses.field(default_factory=ReportConfig)
    predict: PredictConfig = dataclasses.field(default_factory=PredictConfig)
    train: TrainWorkflowConfig | None = None

    def __post_init__(self) -> None:
        if not self.proteomes:
            raise InputError("config 'proteomes' must name at least one proteome")
        if not self.databases:
            raise InputError("config 'databases' must name at least one database")
        if self.search_database not in self.databases:
            raise InputError(f"config 'search.database' is '{self.search_database}', which is not one of the "
                             f"databases {sorted(self.databases)}")
        if self.profile_search and self.search.precomputed_msas:
            raise InputError("config 'search.precomputed_msas' works with the sharded sequence search only; the "
                             f"search database '{self.search_database}' has 'profiles: true'")

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], *, where: str = "config") -> WorkflowConfig:
        """The typed configuration of ``config`` (a mapping as Snakemake's ``config``, after schema validation
        filled in the defaults; a key left out gets the same default here). Unknown keys, moved keys and wrong
        types raise an :class:`~workflow_lib.errors.InputError` naming the key, e.g. ``config 'report'.proteins:
        expected a list``."""
        if not isinstance(config, Mapping):
            raise InputError(f"{where}: expected a mapping of sections, got {type(config).__name__}")
        check_moved_keys(config, where=where)
        unknown = sorted(set(config) - set(TOP_LEVEL_KEYS))
        if unknown:
            raise InputError(f"unknown key(s) {unknown} in {where}; known keys: {sorted(TOP_LEVEL_KEYS)}")
        results = _check_type(config.get("results", "results"), str, f"{where} 'results'")
        proteomes = {name: _check_type(path, str, f"{where} 'proteomes.{name}'")
                     for name, path in _mapping(config.get("proteomes"), f"{where} 'proteomes'").items()}
        databases = {name: DatabaseConfig.from_dict(_mapping(settings, f"{where} 'databases.{name}'"),
                                                    where=f"{where} 'databases.{name}'")
                     for name, settings in _mapping(config.get("databases"), f"{where} 'databases'").items()}
        sections = {name: kind.from_dict(_mapping(config.get(name), f"{where} '{name}'"), where=f"{where} '{name}'")
                    for name, kind in SECTIONS.items()}
        train = _mapping(config.get("train"), f"{where} 'train'")
        return cls(proteomes=proteomes, databases=databases, results=results, **sections,
                   train=TrainWorkflowConfig.from_dict(train, where=f"{where} 'train'") if train else None)

    @property
    def search_database(self) -> str:
        """The database the MSA stage searches: ``search.database``, else the first one configured."""
        return self.search.database or next(iter(self.databases))

    @property
    def profile_search(self) -> bool:
        """True when the MSA stage searches the search database's profile database (rule msa_profiles) instead
        of its shards."""
        return self.databases[self.search_database].profiles


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """A config section as a mapping (an absent or null section is empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a mapping of keys, got {type(value).__name__} {value!r}")
    return value
