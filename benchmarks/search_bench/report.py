"""Markdown tables and the PNG plot of the side-by-side search benchmark."""

from __future__ import annotations

import math
from pathlib import Path

from workflow_lib.seqio.atomic import atomic_path, write_text_atomic

from .metrics import CALIBRATION_THRESHOLDS


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _mib(kib: int | None) -> str:
    return "–" if not kib else f"{kib / 1024:.0f}"


def main_table(tools: list[dict], subset_note: str | None = None) -> str:
    """One row per tool: Pfam ROC AUC, sens@1% FPR, CATH mean ROC1, time per query, peak memory."""
    lines = ["| tool | queries (Pfam / CATH) | Pfam ROC AUC | Pfam sens. at 1% FPR | CATH mean ROC1 (topology) | Pfam s/query (wall) "
             "| Pfam CPU s/query | CATH s/query (wall) | CATH CPU s/query | peak RSS MiB (Pfam / CATH) "
             "| DB build s (Pfam) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for tool in tools:
        if tool.get("status") != "ok":
            lines.append(f"| {tool['label']} | – | {tool.get('status')} | | | | | | | | |")
            continue
        pfam, cath = tool.get("pfam") or {}, tool.get("cath") or {}
        pfam_run, cath_run = tool.get("pfam_run") or {}, tool.get("cath_run") or {}

        def per_query(run: dict, key: str) -> str:
            if not run:
                return "–"
            return f"{run['search'][key] / max(run['n_queries'], 1):.2f}"

        counts = f"{pfam_run.get('n_queries', '–')} / {cath_run.get('n_queries', '–')}"
        lines.append(
            f"| {tool['label']} | {counts} | {_fmt(pfam.get('roc_auc'))} | {_fmt(pfam.get('sens_at_1pct_fpr'))} | "
            f"{_fmt(cath.get('mean_roc1'))} | {per_query(pfam_run, 'wall_s')} | {per_query(pfam_run, 'cpu_s')} | "
            f"{per_query(cath_run, 'wall_s')} | {per_query(cath_run, 'cpu_s')} | "
            f"{_mib(pfam_run.get('search', {}).get('peak_rss_kib'))} / "
            f"{_mib(cath_run.get('search', {}).get('peak_rss_kib'))} | "
            f"{_fmt(pfam_run['build']['wall_s'], 0) if pfam_run and pfam_run['build']['commands'] else '–'} |")
    if subset_note:
        lines.append("")
        lines.append(subset_note)
    return "\n".join(lines)


def calibration_table(tools: list[dict], dataset: str) -> str:
    header = " | ".join(f"E ≤ {x:g}" for x in CALIBRATION_THRESHOLDS)
    lines = [f"| tool | {header} |", "|---" * (len(CALIBRATION_THRESHOLDS) + 1) + "|",
             "| expected (calibrated) | " + " | ".join(f"{x:g}" for x in CALIBRATION_THRESHOLDS) + " |"]
    for tool in tools:
        result = tool.get(dataset)
        if tool.get("status") != "ok" or not result:
            lines.append(f"| {tool['label']} | " + " | ".join("–" for _ in CALIBRATION_THRESHOLDS) + " |")
            continue
        # the raw number of false hits in brackets: the per-query values of a small set rest on few events
        values = " | ".join(f"{v:.3g} ({int(n)})" for v, n in zip(result["calibration_per_query"],
                                                                 result["calibration_counts"]))
        lines.append(f"| {tool['label']} | {values} |")
    return "\n".join(lines)


def plot(tools: list[dict], destination: Path) -> None:
    """Pfam ROC (log FPR), Pfam calibration, CATH calibration; one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    roc_axis, pfam_axis, cath_axis = axes
    for tool in tools:
        if tool.get("status") != "ok":
            continue
        pfam, cath = tool.get("pfam"), tool.get("cath")
        if pfam:
            fpr, tpr = pfam["roc_points"]
            line, = roc_axis.step(fpr, tpr, where="post", label=tool["label"])
            roc_axis.plot(fpr[-1:], tpr[-1:], "o", color=line.get_color(), ms=4)   # last reported pair
            pfam_axis.loglog(CALIBRATION_THRESHOLDS, [max(v, 1e-4) for v in pfam["calibration_per_query"]],
                             "o-", label=tool["label"])
        if cath:
            cath_axis.loglog(CALIBRATION_THRESHOLDS, [max(v, 1e-4) for v in cath["calibration_per_query"]],
                             "o-", label=tool["label"])
    roc_axis.set_xlim(-0.0005, 0.02)
    roc_axis.axvline(0.01, color="grey", lw=0.5, ls=":")
    roc_axis.set_xlabel("false positive rate (non-homologous pairs)")
    roc_axis.set_ylabel("sensitivity (homologous pairs)")
    roc_axis.set_title("Pfam pairs: ROC by E-value (dot: weakest reported pair)")
    for axis, title in ((pfam_axis, "Pfam non-homologous pairs\n(per query, scaled to the database)"),
                        (cath_axis, "CATH different-superfamily hits\n(per query)")):
        axis.loglog(CALIBRATION_THRESHOLDS, CALIBRATION_THRESHOLDS, "k--", lw=0.8, label="calibrated (y = x)")
        axis.set_xlabel("E-value threshold x")
        axis.set_ylabel("false hits with E ≤ x per query (0 drawn at 1e-4)")
        axis.set_title(title)
        axis.set_ylim(1e-4, 100)
    for axis in axes:
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    figure.tight_layout()
    with atomic_path(destination) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)


def replace_section(text: str, heading: str, body: str) -> str:
    """Replace the ``## heading`` section of a Markdown text (up to the next ``## ``) or append it."""
    block = f"{heading}\n\n{body.strip()}\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        return text.rstrip() + "\n\n" + block
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + block + ("\n" + tail if tail else "")


def write_section(results: Path, heading: str, body: str) -> None:
    """Replace (or append) the ``heading`` section of the Markdown file ``results``, atomically."""
    existing = results.read_text() if results.exists() else "# Benchmarks\n"
    write_text_atomic(results, replace_section(existing, heading, body))


def publish(body: str, results: Path | None, heading: str) -> None:
    """Print a section's body and, when ``results`` is given, write it there under ``heading``."""
    print(body)
    if results is not None:
        write_section(results, heading, body)
