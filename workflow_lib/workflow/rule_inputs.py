"""Input, parameter and target functions of the stages whose inputs depend on the configuration and the plan.

:class:`StageInputs` serves ``rules/templates.smk``, ``rules/features.smk`` and ``rules/predict.smk``;
:class:`ReportInputs` serves ``rules/report.smk``. One of each is made per run in ``rules/common.smk`` from the
typed configuration (:class:`~workflow_lib.workflow.config.WorkflowConfig`; ``rules/common.smk`` also holds the
simple input functions); their bound methods are what the rules use as input and params functions, so no rule
carries a lambda. Paths come from :class:`~workflow_lib.workflow.paths.WorkflowPaths`.
"""

from __future__ import annotations

import glob
import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd

from workflow_lib.db.chunks import chunk_name
from workflow_lib.errors import InputError
from workflow_lib.structure.backbones import companion_files, is_backbone_archive
from workflow_lib.workflow.config import FeatureConfig, TemplateConfig
from workflow_lib.workflow.paths import STAGE_FOLDERS, WorkflowPaths


def expand_structures(patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Configured structure files and glob patterns -> files (sorted per pattern); InputError when a pattern
    matches nothing."""
    files = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise InputError(f"config 'templates.structures': no file matches {pattern!r}")
        files += matches
    return files


class StageInputs:
    """Paths and options of the per-chunk template, feature and inference rules for one configuration.

    Each of those stages runs one job per chunk of the proteome plan (``chunk`` wildcard: four digits) that
    writes a file per protein (``templates/{protein}.hits.parquet``, ``features/{protein}.npz``,
    ``structures/{protein}.*``) and, last, the chunk's statistics table ``{stage}/chunk_NNNN.stats.parquet``,
    the job's declared output: as for the MSA stage, a chunk is complete when its table exists, so a killed job
    is rerun whole and 100,000 proteins are a few thousand jobs, not several hundred thousand.

    ``msa_stats(proteome, chunk_name)`` is the MSA stage's chunk table (``rules/common.smk`` passes
    :meth:`WorkflowPaths.chunk_stats` of stage ``msa``); without it the chunk's A3Ms at the documented location
    ``{results}/{proteome}/msa/{protein}.a3m`` are the inputs (hand-placed A3Ms).
    """

    def __init__(self, results: str, templates: TemplateConfig, features: FeatureConfig,
                 plans: Mapping[str, pd.DataFrame], *, msa_stats: Callable[[str, str], str] | None = None) -> None:
        self.results = results
        self.paths = WorkflowPaths(results)
        self.templates = templates
        self.features = features
        self.plans = plans
        self._msa_stats = msa_stats
        self.structures = expand_structures(templates.structures)
        # a backbone archive is read with its sequence and DSSP files: inputs of the template rules too
        self.structure_companions = [str(p) for s in self.structures if is_backbone_archive(s)
                                     for p in companion_files(s)]
        self.db_dir = self.paths.template_db_dir(templates.name)
        self.db_manifest = self.paths.template_manifest(templates.name)
        if templates.msa_dir:
            self.msas = sorted(glob.glob(str(Path(templates.msa_dir) / "*.a3m")))
            self.msa_option = f"--msa-dir {shlex.quote(templates.msa_dir)}"
        elif templates.search_msas:
            # rule template_msas: the template chains searched against the sequence database
            self.msas = [self.paths.template_msa_stats(templates.name)]
            self.msa_option = f"--msa-dir {shlex.quote(self.paths.template_msa_dir(templates.name))}"
        else:
            self.msas, self.msa_option = [], ""
        self._members: dict[str, dict[str, list[str]]] = {}
        self._lengths: dict[str, dict[str, list[int]]] = {}
        for proteome, plan in plans.items():
            members: dict[str, list[str]] = {}
            chunk_lengths: dict[str, list[int]] = {}
            lengths = plan["length"] if "length" in plan else [0] * len(plan)
            for safe_id, chunk, length in zip(plan["safe_id"], plan["chunk"], lengths):
                if chunk >= 0:
                    name = chunk_name(int(chunk))
                    members.setdefault(name, []).append(str(safe_id))
                    chunk_lengths.setdefault(name, []).append(int(length))
            self._members[proteome] = {name: sorted(ids) for name, ids in sorted(members.items())}
            self._lengths[proteome] = chunk_lengths

    # --- the plan -------------------------------------------------------------------------------------------
    def chunks(self, proteome: str) -> list[str]:
        """Chunk names (``chunk_NNNN``) of a proteome that hold proteins."""
        return list(self._members[proteome])

    def chunk_proteins(self, proteome: str, chunk: str) -> list[str]:
        """Safe IDs of the proteins of chunk ``chunk_NNNN``, sorted."""
        proteins = self._members[proteome].get(chunk)
        if proteins is None:
            raise InputError(f"proteome '{proteome}' has no chunk '{chunk}'")
        return proteins

    def lengths(self, proteome: str, chunk: str) -> list[int]:
        """Lengths of the proteins of a chunk (zeros when the plan has no lengths)."""
        return self._lengths[proteome].get(chunk, [])

    def longest(self, proteome: str, chunk: str) -> int:
        """Length of the longest protein of a chunk (0 when the plan has no lengths)."""
        return max(self.lengths(proteome, chunk), default=0)

    def _files(self, wildcards, stage: str, suffix: str) -> list[str]:
        chunk = f"chunk_{wildcards.chunk}"
        folder = self.paths.stage_dir(stage, wildcards.proteome)
        return [f"{folder}/{p}{suffix}" for p in self.chunk_proteins(wildcards.proteome, chunk)]

    def stats_path(self, stage: str, proteome: str, chunk: str) -> str:
        """A per-chunk stage's declared output: ``{results}/{proteome}/{folder}/chunk_NNNN.stats.parquet``
        (:meth:`WorkflowPaths.chunk_stats`; ``stage`` is msa, templates, features or predict)."""
        return self.paths.chunk_stats(stage, proteome, chunk)

    # --- inputs and options of the rules -------------------------------------------------------------------
    def plan(self, wildcards) -> str:
        """The proteome's chunk table: the per-chunk commands read their proteins from it (``--chunk-plan``)."""
        return self.paths.chunk_table(wildcards.proteome)

    def msa_dir(self, wildcards) -> str:
        """The folder of the proteome's A3Ms, quoted for the shell."""
        return shlex.quote(self.paths.stage_dir("msa", wildcards.proteome))

    def features_dir(self, wildcards) -> str:
        """The folder of the proteome's feature files, quoted for the shell (rule predict)."""
        return shlex.quote(self.paths.stage_dir("features", wildcards.proteome))

    def msa_done(self, wildcards) -> str | list[str]:
        """The MSA stage's chunk table (the chunk's A3Ms are complete then), or the A3Ms themselves."""
        if self._msa_stats is not None:
            return str(self._msa_stats(wildcards.proteome, f"chunk_{wildcards.chunk}"))
        return self._files(wildcards, "msa", ".a3m")

    @staticmethod
    def db_dir_of(wildcards, input) -> str:  # noqa: A002 (Snakemake's argument name)
        return str(Path(input.db).parent)

    @staticmethod
    def chains_fasta(wildcards, output) -> str:
        """The template chains' FASTA, written next to rule template_msas' statistics table."""
        return str(Path(output.stats).parent / "chains.fasta")

    def feature_inputs(self, wildcards) -> dict[str, str | list[str]]:
        inputs: dict[str, str | list[str]] = {"msa": self.msa_done(wildcards)}
        if self.templates.enabled:
            inputs["hits"] = self.stats_path("templates", wildcards.proteome, f"chunk_{wildcards.chunk}")
            inputs["db"] = self.db_manifest
        return inputs

    def feature_template_options(self, wildcards, input) -> str:  # noqa: A002
        if not self.templates.enabled:
            return ""
        return (f"--templates {shlex.quote(str(Path(input.db).parent))} "
                f"--template-hits {shlex.quote(str(Path(input.hits).parent))} "
                f"--max-templates {self.features.max_templates}")

    # --- targets -------------------------------------------------------------------------------------------
    def template_targets(self, proteome: str) -> list[str]:
        """The template search's chunk tables (none when no template structures are configured)."""
        if not self.templates.enabled:
            return []
        return [self.stats_path("templates", proteome, c) for c in self.chunks(proteome)]

    def feature_targets(self, proteome: str) -> list[str]:
        return [self.stats_path("features", proteome, c) for c in self.chunks(proteome)]

    def structure_targets(self, proteome: str) -> list[str]:
        return [self.stats_path("predict", proteome, c) for c in self.chunks(proteome)]


# The summary (rules/report.smk).
# Input and parameter functions of ``rules/report.smk`` (kept out of the rule file, as Snakemake's lint asks).
#
# The summary picks up whichever stages the run has: a stage is in the run when some rule (other than the
# summary's) makes its files, the stages it reads from are in the run, the template stage also has structures
# (``TemplateConfig.enabled``), and the default target (``rule all``) asks for the stage's files or for a later
# stage's (a stage whose rules exist but which the run leaves out, e.g. inference without a checkpoint, is not
# waited for). Adding a stage's rules and targets needs no change here.

_UPSTREAM = {"msa": (), "templates": ("msa",), "features": ("msa",), "predict": ("features",)}
_DOWNSTREAM = {"msa": ("templates", "features", "predict"), "templates": ("features", "predict"),
               "features": ("predict",), "predict": ()}


class ReportInputs:
    """Built once per run in rules/common.smk from the plan of every proteome and the workflow's rules."""

    def __init__(self, results: str, plans: Mapping[str, pd.DataFrame], rules: Callable[[], Iterable],
                 targets: Callable[[], Iterable[str]] | None = None, *, templates_enabled: bool = True,
                 proteins: Iterable[str] = ()) -> None:
        self.results = results
        self.paths = WorkflowPaths(results)
        self._targets = targets
        self.plans = plans
        self._rules = rules
        self.templates_enabled = templates_enabled
        self.wanted = list(proteins)

    def _producible(self, path: str) -> bool:
        return any(r.name != "summary" and r.is_producer(path) for r in self._rules())

    def inputs(self, wildcards) -> dict[str, str | list[str]]:
        """The chunk plan and chunk FASTAs, plus the chunk tables of every stage in the run (each written after
        its chunk's per-protein files, which the summary reads)."""
        proteome = wildcards.proteome
        plan = self.plans[proteome]
        planned = [str(s) for s in plan.loc[plan["chunk"] >= 0, "safe_id"]]
        chunks = sorted({int(c) for c in plan["chunk"] if c >= 0})
        inputs: dict[str, str | list[str]] = {
            "chunks": self.paths.chunk_table(proteome),
            "chunk_fastas": [self.paths.chunk_fasta(proteome, chunk_name(c)) for c in chunks],
        }
        if not planned:
            return inputs
        candidates = {stage: [self.paths.chunk_stats(stage, proteome, chunk_name(c)) for c in chunks]
                      for stage in STAGE_FOLDERS}
        targets = set(map(str, self._targets())) if self._targets is not None else None
        targeted = {stage: targets is None or bool(targets.intersection(paths))
                    for stage, paths in candidates.items()}
        for stage, paths in candidates.items():
            wanted = targeted[stage] or any(targeted[d] for d in _DOWNSTREAM[stage])
            in_run = wanted and self._producible(paths[0]) and all(u in inputs for u in _UPSTREAM[stage])
            if stage == "templates":
                in_run = in_run and self.templates_enabled
            if in_run:
                inputs[stage] = paths
        return inputs

    @staticmethod
    def require_option(wildcards, input) -> str:  # noqa: A002 (Snakemake's argument name)
        stages = [s for s in ("msa", "templates", "predict") if s in input.keys()]
        return f"--require {','.join(stages)}" if stages else ""

    def protein_options(self, wildcards) -> str:
        return " ".join(f"--protein {shlex.quote(p)}" for p in self.wanted)

    @staticmethod
    def results_dir(wildcards, input) -> str:  # noqa: A002
        """results/ from the chunk table's path (results/{proteome}/chunks/chunks.parquet)."""
        return str(Path(input.chunks).parents[2])

    @staticmethod
    def plots_dir(wildcards, output) -> str:
        return str(Path(output.msa_coverage).parent)
