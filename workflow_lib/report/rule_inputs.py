"""Input and parameter functions of ``rules/report.smk`` (kept out of the rule file, as Snakemake's lint asks).

The summary picks up whichever stages the run has: a stage is in the run when some rule (other than the
summary's) makes its files, the stages it reads from are in the run, the template stage also has structures
(``TemplateConfig.enabled``), and the default target (``rule all``) asks for the stage's files or for a later
stage's (a stage whose rules exist but which the run leaves out, e.g. inference without a checkpoint, is not
waited for). Adding a stage's rules and targets needs no change here.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd

from workflow_lib.db.chunks import chunk_name

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
