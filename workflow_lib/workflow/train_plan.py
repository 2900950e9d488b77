"""What ``rules/train.smk`` needs, computed once (``rules/common.smk``) from the typed configuration.

The training workflow's DAG is static (as for proteome chunks, so ``snakemake -n`` lists every job): chain ``i``
of ``chains.parquet`` is in MSA batch ``i mod train.msa_batches``. Everything the rules read (output root,
batches, structure arguments, the database manifest, per-batch flags, the warm-start checkpoint and the
settings shown on the model card) is a field of one :class:`TrainPlan`; file names come from
:class:`~workflow_lib.workflow.paths.TrainPaths`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workflow_lib.errors import InputError
from workflow_lib.workflow.config import FeatureConfig, TrainWorkflowConfig, WorkflowConfig
from workflow_lib.workflow.paths import TrainPaths, WorkflowPaths

STRUCTURE_PATTERNS = ("*.pdb*", "*.cif*", "*.ent*")
"""Files of an extracted structure archive that ``trackfold train-data`` reads."""


@dataclass(frozen=True)
class TrainPlan:
    """The training run's paths and options (``enabled`` is false when the config has no ``train`` section)."""

    settings: TrainWorkflowConfig
    enabled: bool
    root: str
    batches: list[str]
    database: str
    structures: list[str]
    extracted: list[str]
    structure_args: str
    manifest: list[str]
    msa_stats: list[str]
    feature_flags: list[str]
    init: list[str]
    pack: list[str]
    template_db: list[str] = field(default_factory=list)
    template_flags: list[str] = field(default_factory=list)
    card_settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, config: WorkflowConfig, *, model_path: Callable[[str], str],
              configfiles: Sequence[str] = ()) -> TrainPlan:
        """The plan of config section ``train`` (``config.train``; without it the plan is not ``enabled`` and
        holds the defaults' paths); ``model_path`` resolves a checkpoint path as ``predict.model`` is resolved
        (working directory, else the workflow's ``models/``). ``train.templates`` searches the chains against the
        run's template database (config section ``templates``), which must have structures then."""
        enabled = config.train is not None
        settings = config.train if config.train is not None else TrainWorkflowConfig()
        results, databases = config.results, config.databases
        root = settings.root(results)
        paths = TrainPaths(root)
        batches = settings.batch_names()
        database = settings.database or config.search_database
        template_manifest = (WorkflowPaths(results).template_manifest(config.templates.name)
                             if config.templates.enabled else None)
        if enabled and not settings.msa_dir and database not in databases:
            raise InputError(f"config 'train.database' is '{database}', which is not one of the databases "
                             f"{sorted(databases)}")
        structures = settings.structure_files() if enabled else []
        extracted = [paths.structures()] if settings.structures_archive else []
        manifest = [] if settings.msa_dir else [WorkflowPaths(results).db_manifest(database)]
        from workflow_lib.structure.backbones import companion_files

        companions = [str(path) for name in structures if name.lower().endswith(".npz")
                       for path in companion_files(name)]
        if enabled and settings.templates and template_manifest is None:
            raise InputError("train.templates needs a template database: a `templates` section with structures "
                             "(for PDB chains, the same backbone archive)")
        use_templates = enabled and settings.templates
        names_file = [name for name in (settings.chain_names, settings.val_names) if enabled and name]
        plan = cls(
            settings=settings, enabled=enabled, root=root, batches=batches, database=database,
            structures=structures + companions + names_file, extracted=extracted,
            structure_args=structure_arguments(structures, extracted), manifest=manifest,
            msa_stats=[paths.msa_stats(b) for b in batches],
            feature_flags=[paths.feature_flag(b) for b in batches],
            init=[model_path(settings.init_model)] if settings.init_model else [],
            pack=[paths.pack()] if settings.pack else [],
            template_db=[template_manifest] if use_templates else [],
            template_flags=[paths.template_flag(b) for b in batches] if use_templates else [])
        plan.card_settings.update(card_settings(settings, config.features, configfiles))
        if not settings.msa_dir and database in databases:
            plan.card_settings.update(database=database, database_fasta=list(databases[database].fasta),
                                      database_manifest=manifest[0], search=config.search.to_dict())
        return plan

    @property
    def paths(self) -> TrainPaths:
        """The run's file names."""
        return TrainPaths(self.root)

    @property
    def feature_split(self) -> str:
        """The chains that get feature files: with a pack, training reads the pack and only the validation chains
        (predicted and evaluated after training) need them."""
        return "validation" if self.settings.pack else "all"

    @property
    def model_inputs(self) -> list[str]:
        """What ``trackfold train`` reads: the pack, or every batch's feature files."""
        return self.pack or self.feature_flags

    def train_data_option(self) -> str:
        """``trackfold train``'s data options: ``--pack PACK``, or ``--chains`` and ``--features-dir``."""
        if self.settings.pack:
            return f"--pack {shlex.quote(self.pack[0])}"
        return (f"--chains {shlex.quote(self.paths.chains())} "
                f"--features-dir {shlex.quote(self.paths.features_dir())}")

    def batch_template_flag(self, wildcards) -> list[str]:
        """Input function: the batch's template search flag (rule train_templates), which its feature job waits
        for; none without ``train.templates``."""
        return [self.paths.template_flag(wildcards.batch)] if self.template_db else []

    def feature_template_step(self, trackfold: str, wildcards) -> str:
        """Params function (with ``trackfold`` bound): the feature job's first command with ``train.templates``,
        the batch's usable hits (``trackfold train-hits``: the pack's exclusions), so held-out chains are predicted
        with the templates training allows; empty otherwise."""
        if not self.template_db:
            return ""
        return (f"{trackfold} train-hits --chains {shlex.quote(self.paths.chains())} "
                f"--hits {shlex.quote(self.paths.template_hits())} "
                f"--a3m-list {shlex.quote(self.paths.feature_inputs(wildcards.batch))} "
                f"--out-dir {shlex.quote(self.paths.usable_hits())} && ")

    @property
    def template_db_dir(self) -> str:
        """The template database directory (empty without ``train.templates``)."""
        return self.template_db[0].rsplit("/", 1)[0] if self.template_db else ""

    def msa_dirs_option(self) -> str:
        """Every MSA batch's folder, for ``trackfold train-pack --msa-dir``."""
        return " ".join(shlex.quote(path.rsplit("/", 1)[0]) for path in self.msa_stats)

    def feature_template_options(self, max_templates: int) -> str:
        """``trackfold features``' template options with ``train.templates`` (the usable hits), else empty."""
        if not self.template_db:
            return ""
        return (f"--templates {shlex.quote(self.template_db_dir)} "
                f"--template-hits {shlex.quote(self.paths.usable_hits())} --max-templates {max_templates}")

    def pack_template_option(self) -> str:
        """``trackfold train-pack``'s template options (empty without ``train.templates``)."""
        if not self.template_db:
            return ""
        return (f"--template-hits {shlex.quote(self.paths.template_hits())} "
                f"--templates {shlex.quote(self.template_db_dir)}")

    def targets(self, results: str) -> list[str]:
        """The run's final outputs (``rule all`` asks for them when the config has ``train``)."""
        return self.settings.targets(results)


def structure_arguments(files: Sequence[str], extracted: Sequence[str]) -> str:
    """``trackfold train-data``'s structure arguments: the listed files and, through ``find`` at run time, every
    structure file of the extracted archive (its contents are known only once the archive is unpacked)."""
    names = " -o ".join(f"-name '{pattern}'" for pattern in STRUCTURE_PATTERNS)
    return " ".join(shlex.quote(f) for f in files) + "".join(
        f" $(find {shlex.quote(d)} -type f \\( {names} \\) | LC_ALL=C sort)" for d in extracted)


def card_settings(settings: TrainWorkflowConfig, features: FeatureConfig,
                  configfiles: Sequence[str]) -> dict[str, Any]:
    """What the model card shows about the configuration."""
    return {
        "name": settings.name, "structures": list(settings.structures),
        "structures_archive": settings.structures_archive, "msa_dir": list(settings.msa_dir),
        "preset": settings.preset, "overrides": dict(settings.overrides or {}), "threads": settings.threads,
        "time_limit_min": settings.time_limit_min, "features": features.to_dict(),
        "train": {**settings.to_dict(), "overrides": dict(settings.overrides or {})},
        "configfiles": [str(c) for c in configfiles],
    }
