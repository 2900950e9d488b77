"""Input, parameter and target functions of the stages whose inputs depend on the configuration and the plan.

:class:`StageInputs` serves ``rules/templates.smk`` and ``rules/features.smk``; :class:`ReportInputs` serves
``rules/report.smk``. One of each is made per run from the validated configuration (``rules/common.smk`` holds
the simple input functions); their bound methods are what the rules use as input and params functions, so no
rule carries a lambda.
"""

from __future__ import annotations

import glob
import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd

from workflow_lib.db.chunks import chunk_name
from workflow_lib.errors import InputError
from workflow_lib.workflow.config import FeatureConfig, TemplateConfig


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
    """Paths and options of the template and feature rules for one configuration.

    ``a3m_path(proteome, protein)`` and ``msa_done(wildcards)`` are the MSA stage's helpers from
    ``rules/common.smk``; without them the documented A3M location ``{results}/{proteome}/msa/{protein}.a3m``
    is used directly (hand-placed A3Ms, explicit targets).
    """

    def __init__(self, results: str, templates: TemplateConfig, features: FeatureConfig,
                 plans: Mapping[str, pd.DataFrame], *, a3m_path: Callable[[str, str], str] | None = None,
                 msa_done: Callable[[object], str] | None = None) -> None:
        self.results = results
        self.templates = templates
        self.features = features
        self.plans = plans
        self._a3m_path = a3m_path
        self._msa_done = msa_done
        self.structures = expand_structures(templates.structures)
        self.db_dir = f"{results}/templates/{templates.name}"
        self.db_manifest = f"{self.db_dir}/manifest.json"
        if templates.msa_dir:
            self.msas = sorted(glob.glob(str(Path(templates.msa_dir) / "*.a3m")))
            self.msa_option = f"--msa-dir {shlex.quote(templates.msa_dir)}"
        elif templates.search_msas:
            # rule template_msas: the template chains searched against the sequence database
            self.msas = [f"{self.db_dir}_msas/msa_stats.parquet"]
            self.msa_option = f"--msa-dir {shlex.quote(self.db_dir + '_msas')}"
        else:
            self.msas, self.msa_option = [], ""

    def a3m(self, wildcards) -> str:
        if self._a3m_path is not None:
            return str(self._a3m_path(wildcards.proteome, wildcards.protein))
        return f"{self.results}/{wildcards.proteome}/msa/{wildcards.protein}.a3m"

    def msa_done(self, wildcards) -> str:
        return str(self._msa_done(wildcards)) if self._msa_done is not None else self.a3m(wildcards)

    @staticmethod
    def db_dir_of(wildcards, input) -> str:  # noqa: A002 (Snakemake's argument name)
        return str(Path(input.db).parent)

    @staticmethod
    def chains_fasta(wildcards, output) -> str:
        """The template chains' FASTA, written next to rule template_msas' statistics table."""
        return str(Path(output.stats).parent / "chains.fasta")

    def hits_path(self, proteome: str, protein: str) -> str:
        return f"{self.results}/{proteome}/templates/{protein}.hits.parquet"

    def feature_inputs(self, wildcards) -> dict[str, str]:
        inputs = {"msa": self.msa_done(wildcards)}
        if self.templates.enabled:
            inputs["hits"] = self.hits_path(wildcards.proteome, wildcards.protein)
            inputs["db"] = self.db_manifest
        return inputs

    def feature_template_options(self, wildcards, input) -> str:  # noqa: A002
        if not self.templates.enabled:
            return ""
        return (f"--templates {shlex.quote(str(Path(input.db).parent))} "
                f"--template-hits {shlex.quote(str(input.hits))} --max-templates {self.features.max_templates}")

    def proteins(self, proteome: str) -> list[str]:
        """Safe IDs of the proteins in a chunk (skipped proteins have no outputs)."""
        plan = self.plans[proteome]
        return sorted(plan.loc[plan["chunk"] >= 0, "safe_id"])

    def template_targets(self, proteome: str) -> list[str]:
        """Every template-hits table of a proteome (none when no template structures are configured)."""
        if not self.templates.enabled:
            return []
        return [self.hits_path(proteome, protein) for protein in self.proteins(proteome)]

    def feature_targets(self, proteome: str) -> list[str]:
        return [f"{self.results}/{proteome}/features/{protein}.npz" for protein in self.proteins(proteome)]


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
    """Built once per run in rules/report.smk from the plan of every proteome and the workflow's rules."""

    def __init__(self, results: str, plans: Mapping[str, pd.DataFrame], rules: Callable[[], Iterable],
                 targets: Callable[[], Iterable[str]] | None = None, *, templates_enabled: bool = True,
                 proteins: Iterable[str] = ()) -> None:
        self.results = results
        self._targets = targets
        self.plans = plans
        self._rules = rules
        self.templates_enabled = templates_enabled
        self.wanted = list(proteins)

    def _producible(self, path: str) -> bool:
        return any(r.name != "summary" and r.is_producer(path) for r in self._rules())

    def inputs(self, wildcards) -> dict[str, str | list[str]]:
        """The chunk plan and chunk FASTAs, plus the per-protein files of every stage in the run."""
        proteome = wildcards.proteome
        plan = self.plans[proteome]
        planned = [str(s) for s in plan.loc[plan["chunk"] >= 0, "safe_id"]]
        chunks = sorted({int(c) for c in plan["chunk"] if c >= 0})
        root = f"{self.results}/{proteome}"
        inputs: dict[str, str | list[str]] = {
            "chunks": f"{root}/chunks/chunks.parquet",
            "chunk_fastas": [f"{root}/chunks/{chunk_name(c)}.fasta" for c in chunks],
        }
        if not planned:
            return inputs
        candidates = {
            "msa": [f"{root}/msa/{chunk_name(c)}.stats.parquet" for c in chunks],
            "templates": [f"{root}/templates/{s}.hits.parquet" for s in planned],
            "features": [f"{root}/features/{s}.npz" for s in planned],
            "predict": [f"{root}/structures/{s}.residues.parquet" for s in planned],
        }
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
