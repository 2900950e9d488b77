"""Where a workflow run stands: per proteome and stage, the chunks and proteins done, the CPU spent and an
estimate of the CPU and the time left (``trackfold status``).

Read from the files the workflow writes, never from Snakemake's own state, so it works while a run is going,
after a kill, and on a cluster's shared results folder:

- the chunk plan ``results/{proteome}/chunks/chunks.parquet`` (the proteins and their lengths);
- each per-chunk stage's declared output ``results/{proteome}/{folder}/chunk_NNNN.stats.parquet``
  (:meth:`~workflow_lib.workflow.paths.WorkflowPaths.chunk_stats`), written last, so it marks a chunk done;
- the per-protein receipts ``{protein}.{stage}.done.json`` of the template, feature and inference stages
  (:mod:`workflow_lib.seqio.receipts`): the proteins finished inside chunks that are not, with their seconds;
- the finished jobs' ``benchmark:`` files (and, with the ``logs`` folder, the exact CPU each job's command logged,
  :func:`~workflow_lib.report.collect.runtime_table`). The search stage's jobs (one per chunk, iteration and
  shard) count as they finish, so a chunk in the middle of its search shows the CPU it has taken.

The estimate is per stage: its CPU per residue in the chunks it has finished (else in the proteins it has
finished, from their receipts), times the residues still to do, less what the stage has already spent on them.
Inference grows faster than the residues on long proteins, so the estimate of a stage that has finished only
short proteins is low; a stage with nothing finished has no estimate (nor one that is not part of the run).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path


from workflow_lib.errors import InputError
from workflow_lib.report.collect import job_chunk, runtime_table
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import read_frame
from workflow_lib.workflow.paths import STAGE_FOLDERS, WorkflowPaths

STAGE_ORDER = ("msa", "templates", "features", "predict")
"""The per-chunk stages, in the order a chunk goes through them."""
RECEIPT_STAGES = {"templates": "templates", "features": "features", "predict": "predict"}
"""Stage → the ``stage`` its per-protein receipts name (``{protein}.{stage}.done.json``); the search has none
(its jobs are per shard)."""


@dataclass(frozen=True)
class StageStatus:
    """One stage of one proteome; CPU in seconds, ``None`` where there is nothing to estimate from."""

    stage: str
    chunks: int
    chunks_done: int
    proteins: int
    proteins_done: int
    jobs_done: int
    cpu_spent: float
    cpu_per_residue: float | None
    cpu_left: float | None


@dataclass(frozen=True)
class ProteomeStatus:
    proteome: str
    proteins: int
    residues: int
    chunks: int
    stages: tuple[StageStatus, ...]
    summary: bool
    report: bool
    searching: tuple[tuple[int, int, int], ...] = ()
    """Chunks whose search has started but not finished: (chunk, iterations merged, shard jobs of the next
    iteration finished)."""

    @property
    def cpu_left(self) -> float:
        """CPU seconds left in the stages that have an estimate."""
        return sum(s.cpu_left for s in self.stages if s.cpu_left is not None)

    @property
    def finished(self) -> bool:
        return self.summary and all(s.chunks_done == s.chunks for s in self.stages if s.chunks_done)


def proteomes_of(results: str | Path) -> list[str]:
    """The proteomes under ``results`` that have a chunk plan, by name."""
    return sorted(path.parent.parent.name for path in Path(results).glob("*/chunks/chunks.parquet"))


def _receipt_seconds(folder: Path, stage: str, names: Iterable[str]) -> dict[str, float]:
    """``{protein: seconds}`` of the proteins of ``names`` whose receipt for ``stage`` is in ``folder`` (the
    seconds its job logged for it; a receipt that cannot be read counts as not there: the job redoes it)."""
    found = {}
    for name in names:
        try:
            record = json.loads((folder / f"{name}.{stage}.done.json").read_text(encoding="utf-8"))
            found[name] = float(record["row"]["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def proteome_status(results: str | Path, proteome: str, *, logs: str | Path | None = None) -> ProteomeStatus:
    """The :class:`ProteomeStatus` of ``proteome`` from the files under ``results`` (module docstring)."""
    results = Path(results)
    paths = WorkflowPaths(str(results))
    plan_path = Path(paths.chunk_table(proteome))
    if not plan_path.exists():
        raise InputError(f"no chunk table for proteome '{proteome}' under {results} (expected {plan_path}); "
                         f"proteomes found: {', '.join(proteomes_of(results)) or 'none'}")
    plan = read_frame(plan_path, CHUNKS)
    planned = plan[plan["chunk"] >= 0]
    chunk_ids = sorted(int(c) for c in set(planned["chunk"]))
    chunk_residues = planned.groupby("chunk")["length"].sum().astype(float).to_dict()
    others = [name for name in proteomes_of(results) if name != proteome]
    jobs = runtime_table(Path(paths.benchmark_dir()), proteome, other_proteomes=others,
                         logs=None if logs is None else Path(logs))
    jobs = jobs.assign(chunk=[job_chunk(job, proteome) for job in jobs["job"]])

    stages = []
    msa_done: set[int] = set()
    for stage in STAGE_ORDER:
        done = [c for c in chunk_ids
                if Path(paths.chunk_stats(stage, proteome, f"chunk_{c:04d}")).exists()]
        open_proteins = planned[~planned["chunk"].isin(done)]
        stage_jobs = jobs[(jobs["stage"] == stage) & (jobs["chunk"] >= 0)]
        cpu_jobs = stage_jobs["cpu_seconds"].where(stage_jobs["cpu_seconds"].notna(), stage_jobs["seconds"])
        cpu_done = float(cpu_jobs[stage_jobs["chunk"].isin(done)].sum())
        cpu_open = float(cpu_jobs[~stage_jobs["chunk"].isin(done)].sum())
        residues_done = sum(chunk_residues[c] for c in done)
        receipts: dict[str, float] = {}
        if stage in RECEIPT_STAGES:
            receipts = _receipt_seconds(results / proteome / STAGE_FOLDERS[stage], RECEIPT_STAGES[stage],
                                        open_proteins["safe_id"])
        lengths = dict(zip(open_proteins["safe_id"], open_proteins["length"].astype(float)))
        receipt_residues = sum(lengths[name] for name in receipts)
        rate = None
        if done and residues_done > 0 and cpu_done > 0:
            rate = cpu_done / residues_done
        elif receipts and receipt_residues > 0:
            rate = sum(receipts.values()) / receipt_residues
        if stage in RECEIPT_STAGES:
            # a chunk job's benchmark is written when it ends: inside open chunks the receipts hold what was spent
            spent_open = sum(receipts.values())
            left = None if rate is None else rate * (float(open_proteins["length"].sum()) - receipt_residues)
        else:
            spent_open = cpu_open
            left = None if rate is None else max(0.0, rate * float(open_proteins["length"].sum()) - cpu_open)
        if stage == "msa":
            msa_done = set(done)
        stages.append(StageStatus(
            stage=stage, chunks=len(chunk_ids), chunks_done=len(done), proteins=len(planned),
            proteins_done=int(planned["chunk"].isin(done).sum()) + len(receipts), jobs_done=len(stage_jobs),
            cpu_spent=cpu_done + spent_open, cpu_per_residue=rate, cpu_left=left))
    return ProteomeStatus(
        proteome=proteome, proteins=len(planned), residues=int(planned["length"].sum()), chunks=len(chunk_ids),
        stages=tuple(stages), summary=Path(paths.proteome_file("summary.parquet", proteome)).exists(),
        report=Path(paths.report_file("index.html", proteome)).exists(),
        searching=_searching(paths, proteome, [c for c in chunk_ids if c not in msa_done]))


def _searching(paths: WorkflowPaths, proteome: str, chunks: list[int]) -> tuple[tuple[int, int, int], ...]:
    """(chunk, iterations merged, shard jobs of the next iteration finished) of the chunks whose search has
    started: merged iterations have their ``state.parquet``; a finished shard job its benchmark file
    ``search_shard/{proteome}/{chunk}_{iteration}_{shard}.tsv``."""
    found = []
    for chunk in chunks:
        name = f"chunk_{chunk:04d}"
        merged = 0
        while Path(paths.search_state(proteome, name, merged + 1)).exists():
            merged += 1
        shards = len(list(Path(paths.benchmark_dir(), "search_shard", proteome).glob(
            f"{chunk:04d}_{merged + 1}_*.tsv")))
        if merged or shards:
            found.append((chunk, merged, shards))
    return tuple(found)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.2f}"


def format_status(status: ProteomeStatus, cores: int) -> str:
    """A Markdown table of one proteome's :class:`ProteomeStatus` and the time left on ``cores`` cores."""
    mean_length = status.residues / max(status.proteins, 1)
    lines = [f"{status.proteome}: {status.proteins:,} proteins ({status.residues:,} residues) in {status.chunks} "
             "chunks", "",
             "| stage | chunks done | proteins done | jobs done | CPU h spent | CPU s per protein | CPU h left |",
             "|---|---|---|---|---|---|---|"]
    for s in status.stages:
        per_protein = "-" if s.cpu_per_residue is None else f"{s.cpu_per_residue * mean_length:.2f}"
        if s.cpu_left is None:
            left = "-" if s.proteins_done == s.proteins else "no estimate yet"
        else:
            left = _hours(s.cpu_left)
        lines.append(f"| {s.stage} | {s.chunks_done} / {s.chunks} | {s.proteins_done:,} / {s.proteins:,} | "
                     f"{s.jobs_done:,} | {_hours(s.cpu_spent)} | {per_protein} | {left} |")
    lines.append("")
    unknown = [s.stage for s in status.stages if s.cpu_left is None and s.proteins_done < s.proteins]
    if status.finished and not unknown:
        lines.append("Finished: " + ", ".join(
            name for name, there in (("summary", status.summary), ("report", status.report)) if there) + ".")
    else:
        left = status.cpu_left
        lines.append(f"About {_hours(left)} CPU hours left"
                     + (f" in the stages with an estimate (none yet for {', '.join(unknown)})" if unknown else "")
                     + f": {left / 3600 / max(cores, 1):,.1f} h on {cores} cores at best (a chunk's stages run "
                     "one after another).")
        if status.searching:
            lines.append("Searching: " + "; ".join(
                f"chunk {chunk:04d} ({merged} iteration{'s' if merged != 1 else ''} merged, {shards} shard "
                f"job{'s' if shards != 1 else ''} of iteration {merged + 1} done)"
                for chunk, merged, shards in status.searching) + ".")
        lines.append(f"Summary: {'written' if status.summary else 'not yet'}; "
                     f"report: {'written' if status.report else 'not yet'}.")
    return "\n".join(lines)


def status_records(statuses: Iterable[ProteomeStatus]) -> list[dict]:
    """JSON-able rows, one per proteome and stage."""
    rows = []
    for status in statuses:
        for stage in status.stages:
            rows.append({"proteome": status.proteome, "proteome_proteins": status.proteins,
                         "summary": status.summary, "report": status.report, **asdict(stage)})
    return rows
