"""Input, parameter and target functions of ``rules/templates.smk`` and ``rules/features.smk``.

They live here, not in the rule files, because Snakemake's lint wants no functions next to rules (and
``rules/common.smk`` belongs to the workflow frame). One :class:`StageInputs` is made per run from the validated
configuration; its bound methods are what the rules use as input and params functions.
"""

from __future__ import annotations

import glob
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

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
