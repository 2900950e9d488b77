"""Gather a proteome's stage outputs into the ``summary`` and ``runtime`` tables (see :mod:`.schema`).

Inputs, all optional except the chunk plan (``results/{proteome}/chunks/chunks.parquet``):

- MSA statistics ``results/{proteome}/msa/chunk_{chunk}.stats.parquet`` (columns protein, depth, neff,
  coverage, iterations, seconds; ``protein`` may be the FASTA ID or the safe ID);
- template hits ``results/{proteome}/templates/{protein}.hits.parquet`` (``template_hits`` table; rank 1 is
  the top template, its ``significance`` = exp(-E) the probability reported);
- per-residue confidence ``results/{proteome}/structures/{protein}.residues.parquet`` (a ``plddt`` column,
  0-100);
- Snakemake ``benchmark:`` files under ``results/benchmarks/{rule}/``.

A stage whose files are absent leaves its columns null; a stage named in ``require`` must have a file for every
planned protein (else :class:`~workflow_lib.errors.InputError` naming the missing file), so a partial run is
never summarised as if a stage had not run. A file that exists but cannot be read raises
:class:`~workflow_lib.errors.SchemaError` naming it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workflow_lib.db.chunks import chunk_name
from workflow_lib.errors import InputError, SchemaError
from workflow_lib.schemas.catalog import TABLES
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import SCHEMA_KEY, read_frame
from workflow_lib.schemas.report import RUNTIME, STAGES, SUMMARY

LOG = logging.getLogger(__name__)

MSA_STATS_COLUMNS = ("protein", "depth", "neff", "coverage", "iterations", "seconds")
OPTIONAL_STAGES = ("msa", "templates", "predict")

# Rule name (prefix) -> stage of the runtime columns. Unknown rules count as 'other' in the runtime table.
_RULE_STAGES = (
    (("db_", "database"), "database"),
    (("chunk",), "chunks"),
    (("search", "prefilter", "viterbi", "msa", "merge_hits", "hits"), "msa"),
    (("template",), "templates"),
    (("feature",), "features"),
    (("predict", "infer", "fold", "structure"), "predict"),
    (("summar", "report"), "report"),
)
_CHUNK_TOKEN = re.compile(r"(?:^|[/_.-])(?:chunk_)?(\d{4})(?=$|[/_.-])")


def job_chunk(job: str, proteome: str) -> int:
    """The chunk a job's benchmark name ``{proteome}/{chunk}[_…].tsv`` belongs to, or −1 (a proteome-wide job)."""
    token = _CHUNK_TOKEN.search(str(job).removeprefix(f"{proteome}/"))
    return int(token.group(1)) if token else -1


def stage_of_rule(rule: str) -> str:
    """The stage a rule's runtime is counted in: by name prefix, e.g. ``search_shard`` → ``msa``."""
    for prefixes, stage in _RULE_STAGES:
        if rule.startswith(prefixes):
            return stage
    return "other"


def msa_stats_path(results: Path, proteome: str, chunk: int) -> Path:
    return results / proteome / "msa" / f"{chunk_name(chunk)}.stats.parquet"


def a3m_path(results: Path, proteome: str, safe_id: str) -> Path:
    return results / proteome / "msa" / f"{safe_id}.a3m"


def hits_path(results: Path, proteome: str, safe_id: str) -> Path:
    return results / proteome / "templates" / f"{safe_id}.hits.parquet"


def residues_path(results: Path, proteome: str, safe_id: str) -> Path:
    return results / proteome / "structures" / f"{safe_id}.residues.parquet"


def read_stage_table(path: str | Path, required: Iterable[str]) -> pd.DataFrame:
    """Read another stage's Parquet table: through its declared schema when its tag is registered in
    :data:`workflow_lib.schemas.catalog.TABLES`, else checking that the ``required`` columns are present."""
    path = Path(path)
    try:
        tag = (pq.read_schema(path).metadata or {}).get(SCHEMA_KEY, b"").decode()
    except (pa.ArrowInvalid, OSError) as error:
        raise SchemaError(f"{path}: not a readable Parquet file (truncated or corrupted?): {error}") from None
    spec = TABLES.get(tag.split("/")[0]) if tag else None
    if spec is not None and spec.tag.decode() == tag:
        frame = read_frame(path, spec)
    else:
        try:
            frame = pq.read_table(path).to_pandas()
        except (pa.ArrowInvalid, OSError) as error:
            raise SchemaError(f"{path}: not a readable Parquet file (truncated or corrupted?): {error}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise SchemaError(f"{path}: columns {missing} missing (found {list(frame.columns)})")
    return frame


def _template_hits_spec():
    try:
        from workflow_lib.schemas.templates import TEMPLATE_HITS
    except ImportError:  # the template stage is not installed: read by columns
        return None
    return TEMPLATE_HITS


@dataclass(frozen=True)
class StageFiles:
    """Which optional stages were found, and where each protein's file is."""

    msa_stats: dict[int, Path]
    hits: dict[str, Path]
    residues: dict[str, Path]


def find_stage_files(results: Path, proteome: str, plan: pd.DataFrame, *,
                     require: Iterable[str] = ()) -> StageFiles:
    """Locate each planned protein's stage files; raise when a required stage lacks one."""
    require = set(require)
    unknown = require - set(OPTIONAL_STAGES)
    if unknown:
        raise InputError(f"unknown stage(s) {sorted(unknown)}; known: {list(OPTIONAL_STAGES)}")
    planned = plan[plan["chunk"] >= 0]
    found = StageFiles(
        {int(c): msa_stats_path(results, proteome, int(c)) for c in sorted(set(planned["chunk"]))},
        {s: hits_path(results, proteome, s) for s in planned["safe_id"]},
        {s: residues_path(results, proteome, s) for s in planned["safe_id"]},
    )
    for stage, files in (("msa", found.msa_stats), ("templates", found.hits), ("predict", found.residues)):
        missing = [p for p in files.values() if not p.exists()]
        if stage in require and missing:
            raise InputError(f"stage '{stage}' is part of the run but {len(missing)} of {len(files)} files are "
                             f"missing, e.g. {missing[0]}")
        for key in [k for k, p in files.items() if not p.exists()]:
            del files[key]
    return found


def _msa_columns(plan: pd.DataFrame, stats_files: dict[int, Path]) -> pd.DataFrame:
    frames = [read_stage_table(path, MSA_STATS_COLUMNS) for path in stats_files.values()]
    out = pd.DataFrame(index=plan.index)
    if not frames:
        return out
    stats = pd.concat(frames, ignore_index=True)
    if "safe_id" in stats.columns:   # the declared msa_stats table has both IDs
        aligned = stats.set_index("safe_id").reindex(plan["safe_id"].to_numpy())
    else:
        by_id = stats.set_index("protein")
        key = plan["safe_id"].where(plan["safe_id"].isin(by_id.index), plan["protein"])
        aligned = by_id.reindex(key.to_numpy())
    aligned.index = plan.index
    out["msa_depth"] = aligned["depth"].astype("Int32")
    out["msa_neff"] = aligned["neff"].astype("float32")
    out["msa_coverage"] = aligned["coverage"].astype("float32")
    out["msa_iterations"] = aligned["iterations"].astype("Int16")
    out["msa_seconds"] = aligned["seconds"].astype("float32")
    return out


def _template_columns(plan: pd.DataFrame, hit_files: dict[str, Path]) -> pd.DataFrame:
    spec = _template_hits_spec()
    rows = {}
    for safe_id, path in hit_files.items():
        hits = read_frame(path, spec) if spec is not None else read_stage_table(
            path, ("template", "rank", "evalue", "significance"))
        if len(hits) == 0:  # searched, nothing found: probability 0, no template
            rows[safe_id] = (None, 0.0, np.nan)
            continue
        best = hits.sort_values(["rank", "evalue"], kind="stable").iloc[0]
        rows[safe_id] = (str(best["template"]), float(best["significance"]), float(best["evalue"]))
    out = pd.DataFrame(index=plan.index)
    if not rows:
        return out
    picked = [rows.get(s, (None, np.nan, np.nan)) for s in plan["safe_id"]]
    out["top_template"] = pd.Series([p[0] for p in picked], index=plan.index, dtype=object)
    out["top_template_probability"] = pd.Series([p[1] for p in picked], index=plan.index, dtype="float32")
    out["top_template_evalue"] = pd.Series([p[2] for p in picked], index=plan.index, dtype="float64")
    # Proteins not searched stay null; searched without hits have probability 0 and no template.
    searched = plan["safe_id"].isin(list(rows))
    out.loc[~searched, "top_template_probability"] = np.nan
    return out


def read_plddt(path: str | Path) -> np.ndarray:
    """Per-residue pLDDT (0-100) of one prediction's ``residues.parquet``."""
    frame = read_stage_table(path, ("plddt",))
    values = frame["plddt"].to_numpy(dtype=np.float64)
    if values.size and (np.nanmin(values) < 0 or np.nanmax(values) > 100):
        raise SchemaError(f"{path}: pLDDT outside 0-100 (min {np.nanmin(values):.3g}, max {np.nanmax(values):.3g})")
    return values


def _prediction_columns(plan: pd.DataFrame, residue_files: dict[str, Path]) -> pd.DataFrame:
    out = pd.DataFrame(index=plan.index)
    if not residue_files:
        return out
    mean = {}
    high = {}
    for safe_id, path in residue_files.items():
        plddt = read_plddt(path)
        mean[safe_id] = float(plddt.mean()) if plddt.size else np.nan
        high[safe_id] = float((plddt > 70).mean()) if plddt.size else np.nan
    out["mean_plddt"] = plan["safe_id"].map(mean).astype("float32")
    out["fraction_plddt_over_70"] = plan["safe_id"].map(high).astype("float32")
    return out


_RESOURCES = re.compile(r"trackfold resources: command=\S+ cpu_s=([0-9.]+) max_rss_mb=([0-9.]+) wall_s=([0-9.]+)")


def read_log_resources(path: str | Path) -> dict[str, float] | None:
    """CPU seconds and peak RSS (MiB) from the resources lines trackfold commands logged
    (:data:`workflow_lib.cli.RESOURCES_PREFIX`): CPU summed and the largest peak, for rules that run several
    commands into one log; None when the log has none (or does not exist)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    found = _RESOURCES.findall(text)
    if not found:
        return None
    return {"cpu_seconds": sum(float(cpu) for cpu, _, _ in found),
            "max_rss_mb": max(float(rss) for _, rss, _ in found)}


def job_log(logs: Path, rule: str, job: str) -> Path | None:
    """The log of the job whose benchmark file is ``benchmarks/{rule}/{job}`` under the workflow's log layout
    (``logs/{rule}/{proteome}/{chunk}.log`` or ``logs/{rule}/{proteome}/{chunk}/{rest}.log`` for a benchmark
    named ``{proteome}/{chunk}_{rest}.tsv``), or None."""
    relative = Path(job).with_suffix("")
    candidates = [logs / rule / relative.with_suffix(".log")]
    head, _, rest = relative.name.partition("_")
    if rest:
        candidates.append(logs / rule / relative.parent / head / f"{rest}.log")
    return next((path for path in candidates if path.is_file()), None)


def read_benchmark(path: str | Path, log: str | Path | None = None) -> dict[str, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds of one Snakemake ``benchmark:`` TSV (first repeat).

    With the job's ``log``, CPU and peak RSS come from the command's own resources line when it has one (exact;
    the benchmark samples them and can miss a job's last seconds)."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, sep="\t", na_values=["-", "NA"])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise SchemaError(f"{path}: not a Snakemake benchmark file: {error}") from None
    if "s" not in frame.columns or len(frame) == 0:
        raise SchemaError(f"{path}: not a Snakemake benchmark file (no 's' column or no row)")
    row = frame.iloc[0]

    def value(column: str) -> float:
        return float(row[column]) if column in frame.columns and pd.notna(row[column]) else np.nan

    out = {"seconds": value("s"), "max_rss_mb": value("max_rss"), "cpu_seconds": value("cpu_time")}
    own = read_log_resources(log) if log is not None else None
    if own is not None:
        out["cpu_seconds"] = own["cpu_seconds"]
        out["max_rss_mb"] = max(own["max_rss_mb"], out["max_rss_mb"]) if np.isfinite(out["max_rss_mb"]) \
            else own["max_rss_mb"]
    return out


def _belongs(relative: Path, proteome: str, other_proteomes: set[str]) -> bool:
    names = set(relative.parts[:-1]) | {relative.stem}
    if proteome in names:
        return True
    return not (names & other_proteomes) and len(relative.parts) == 1


def runtime_table(benchmarks: Path, proteome: str, *, other_proteomes: Iterable[str] = (),
                  logs: Path | None = None) -> pd.DataFrame:
    """One row per benchmark file of the proteome's jobs (plus shared jobs such as the database build); with the
    workflow's ``logs`` folder, CPU and peak memory from each job's log when it has them (:func:`read_benchmark`)."""
    others = set(other_proteomes) - {proteome}
    rows = []
    if benchmarks.is_dir():
        for path in sorted(benchmarks.glob("*/**/*.tsv")):
            rule = path.relative_to(benchmarks).parts[0]
            relative = path.relative_to(benchmarks / rule)
            if not _belongs(relative, proteome, others):
                continue
            log = job_log(logs, rule, relative.as_posix()) if logs is not None else None
            rows.append({"rule": rule, "stage": stage_of_rule(rule), "job": relative.as_posix(),
                         **read_benchmark(path, log)})
    frame = pd.DataFrame(rows, columns=[f.name for f in RUNTIME.schema])
    return frame.astype({"seconds": "float32", "max_rss_mb": "float32", "cpu_seconds": "float32"})


def _runtime_columns(plan: pd.DataFrame, runtime: pd.DataFrame, proteome: str) -> pd.DataFrame:
    """Per-protein seconds per stage: own jobs in full, chunk jobs and proteome jobs shared by length."""
    planned = plan["chunk"] >= 0
    seconds = pd.DataFrame(np.nan, index=plan.index, columns=list(STAGES), dtype="float64")
    by_safe = {s: i for i, s in zip(plan.index, plan["safe_id"])}
    lengths = plan["length"].astype(np.float64).where(planned, 0.0)
    for row in runtime.itertuples(index=False):
        if row.stage not in STAGES or not np.isfinite(row.seconds):
            continue
        relative = Path(row.job)
        if proteome not in set(relative.parts[:-1]) | {relative.stem}:
            continue
        own = [by_safe[n] for n in (relative.stem, *relative.parts) if n in by_safe]
        if own:
            share = pd.Series(0.0, index=plan.index)
            share[own[0]] = row.seconds
        else:
            chunk = _CHUNK_TOKEN.search(relative.as_posix().removeprefix(f"{proteome}/"))
            members = (plan["chunk"] == int(chunk.group(1))) if chunk and relative.stem != proteome else planned
            weights = lengths.where(members, 0.0)
            if weights.sum() <= 0:
                continue
            share = row.seconds * weights / weights.sum()
        touched = share > 0
        seconds.loc[touched, row.stage] = seconds.loc[touched, row.stage].fillna(0.0) + share[touched]
    return seconds.rename(columns={s: f"seconds_{s}" for s in STAGES})


def build_summary(results: str | Path, proteome: str, *, require: Iterable[str] = (),
                  other_proteomes: Iterable[str] = (), logs: str | Path | None = None
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``summary`` and ``runtime`` tables of ``proteome`` from the files under ``results`` (and the jobs' CPU
    from the workflow's ``logs`` folder when given, :func:`runtime_table`)."""
    results = Path(results)
    plan = read_frame(results / proteome / "chunks" / "chunks.parquet", CHUNKS)
    plan = plan.sort_values("index", kind="stable").reset_index(drop=True)
    files = find_stage_files(results, proteome, plan, require=require)
    runtime = runtime_table(results / "benchmarks", proteome, other_proteomes=other_proteomes,
                            logs=None if logs is None else Path(logs))
    summary = plan[["proteome", "protein", "safe_id", "length", "chunk", "note"]].copy()
    for part in (_msa_columns(plan, files.msa_stats), _template_columns(plan, files.hits),
                 _prediction_columns(plan, files.residues), _runtime_columns(plan, runtime, proteome)):
        for column in part.columns:
            summary[column] = part[column]
    if "msa_seconds" in summary:  # the MSA stage's own search time, only where no benchmark file covers it
        summary["seconds_msa"] = summary["seconds_msa"].fillna(summary.pop("msa_seconds").astype("float64"))
    for field in SUMMARY.schema:
        if field.name not in summary:
            summary[field.name] = pd.Series([None] * len(summary), dtype=object)
    summary = summary[[f.name for f in SUMMARY.schema]]
    LOG.info("%s: %d proteins (%d skipped); stages found: %s", proteome, len(summary),
             int((summary["chunk"] < 0).sum()),
             ", ".join(n for n, f in (("msa", files.msa_stats), ("templates", files.hits),
                                      ("predict", files.residues)) if f) or "none beyond chunks")
    return summary, runtime
