"""The report's HTML pages: ``{proteome}/report/index.html`` (every protein, one row each, linked) and one page per
protein, ``{proteome}/report/proteins/{safe_id}.html``, with its MSA depth and Neff, its template hits, its pLDDT
along the sequence and links to its files (A3M, PDB, mmCIF, confidence JSON, 6D npz), as ColabFold's and
AlphaFold DB's entry pages show them.

The pages are static, self-contained HTML (inline SVG, no scripts, no external resources) with relative links,
so the results folder can be copied, served or opened from disk (``out_dir`` may be anywhere; links are made
relative to it). Everything shown is read from the summary
table and the stage files: a stage that did not run says so instead of showing a number.
"""

from __future__ import annotations

import html
import os
from urllib.parse import quote
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.report.collect import a3m_path, hits_path, read_plddt, read_stage_table, residues_path
from workflow_lib.report.progress import track
from workflow_lib.seqio.atomic import write_text_atomic

PLDDT_BANDS = ((90.0, "#0053d6", "very high (> 90)"), (70.0, "#65cbf3", "confident (70-90)"),
               (50.0, "#ffdb13", "low (50-70)"), (0.0, "#ff7d45", "very low (< 50)"))
"""AlphaFold DB's pLDDT colours, highest band first."""

HIT_COLUMNS = ("rank", "template", "evalue", "significance", "identity", "aligned_cols", "qstart", "qend",
               "tstart", "tend")

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:72em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#eee}td.l,th.l{text-align:left}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}
.missing{color:#888}"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def _number(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or pd.isna(value):
        return "<span class=\"missing\">-</span>"
    return format(value, fmt)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], left: int = 1) -> str:
    """An HTML table; cells are already escaped HTML; the first ``left`` columns are left-aligned."""
    head = "".join(f"<th class=\"l\">{h}</th>" if i < left else f"<th>{h}</th>" for i, h in enumerate(header))
    body = "\n".join("<tr>" + "".join(f"<td class=\"l\">{c}</td>" if i < left else f"<td>{c}</td>"
                                      for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def plddt_svg(plddt: np.ndarray, width: int = 720, height: int = 160) -> str:
    """pLDDT along the sequence as an inline SVG: coloured bands (:data:`PLDDT_BANDS`) and the per-residue line."""
    pad_left, pad_bottom = 36, 20
    inner_w, inner_h = width - pad_left - 4, height - pad_bottom - 4
    n = max(len(plddt), 1)

    def y(value: float) -> float:
        return 4 + inner_h * (1 - value / 100.0)

    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" "
             f"role=\"img\" aria-label=\"pLDDT per residue\">"]
    upper = 100.0
    for lower, colour, _ in PLDDT_BANDS:
        parts.append(f"<rect x=\"{pad_left}\" y=\"{y(upper):.1f}\" width=\"{inner_w}\" "
                     f"height=\"{y(lower) - y(upper):.1f}\" fill=\"{colour}\" fill-opacity=\"0.18\"/>")
        upper = lower
    for tick in (0, 50, 70, 90, 100):
        parts.append(f"<text x=\"{pad_left - 4}\" y=\"{y(tick) + 4:.1f}\" font-size=\"10\" "
                     f"text-anchor=\"end\">{tick}</text>")
    if len(plddt):
        xs = pad_left + inner_w * (np.arange(len(plddt)) + 0.5) / n
        points = " ".join(f"{x:.1f},{y(float(v)):.1f}" for x, v in zip(xs, plddt))
        parts.append(f"<polyline points=\"{points}\" fill=\"none\" stroke=\"#222\" stroke-width=\"1.2\"/>")
    parts.append(f"<text x=\"{pad_left + inner_w / 2:.0f}\" y=\"{height - 4}\" font-size=\"10\" "
                 f"text-anchor=\"middle\">residue (1-{len(plddt)})</text></svg>")
    return "".join(parts)


def _link(path: Path, page_dir: Path, label: str) -> str:
    if not path.exists():
        return f"<span class=\"missing\">{html.escape(label)} (not written)</span>"
    relative = quote(Path(os.path.relpath(path, page_dir)).as_posix())
    return f"<a href=\"{html.escape(relative)}\">{html.escape(label)}</a>"


def protein_page(results: Path, proteome: str, row: pd.Series, page_dir: Path) -> str:
    """The HTML page of one protein (a row of the summary table) whose file sits in ``page_dir``."""
    safe_id = str(row["safe_id"])
    root = results / proteome
    structures = root / "structures"
    title = f"{row['protein']} ({proteome})"
    body = [f"<p><a href=\"../index.html\">{html.escape(proteome)}: all proteins</a></p>",
            f"<h1>{html.escape(str(row['protein']))}</h1>",
            f"<p>{int(row['length'])} residues; chunk {int(row['chunk'])}; file name "
            f"<code>{html.escape(safe_id)}</code></p>"]

    body.append("<h2>Files</h2><ul>")
    for path, label in ((a3m_path(results, proteome, safe_id), "MSA (A3M)"),
                        (structures / f"{safe_id}.pdb", "model (PDB, pLDDT in B-factors)"),
                        (structures / f"{safe_id}.cif", "model (mmCIF, ModelCIF pLDDT)"),
                        (structures / f"{safe_id}.confidence.json", "per-residue confidence (JSON)"),
                        (structures / f"{safe_id}.pred.npz", "6D distance and orientation probabilities (npz)"),
                        (hits_path(results, proteome, safe_id), "template hits (Parquet)")):
        body.append(f"<li>{_link(path, page_dir, label)}</li>")
    body.append("</ul>")

    body.append("<h2>Multiple sequence alignment</h2>")
    body.append(_table(["depth", "Neff", "coverage", "iterations"],
                       [[_number(row.get("msa_depth"), "d"), _number(row.get("msa_neff"), ".1f"),
                         _number(row.get("msa_coverage"), ".2f"), _number(row.get("msa_iterations"), "d")]], left=0))

    body.append("<h2>Template hits</h2>")
    hits_file = hits_path(results, proteome, safe_id)
    if not hits_file.exists():
        body.append("<p class=\"missing\">no template search in this run</p>")
    else:
        hits = read_stage_table(hits_file, HIT_COLUMNS)
        if len(hits) == 0:
            body.append("<p>searched; no template hit</p>")
        else:
            hits = hits.sort_values(["rank", "evalue"], kind="stable")
            body.append(_table(
                ["rank", "template", "E-value", "probability", "identity", "aligned", "query", "template range"],
                [[str(int(h["rank"])), html.escape(str(h["template"])), f"{h['evalue']:.2g}",
                  f"{h['significance']:.2f}", f"{h['identity']:.2f}", str(int(h["aligned_cols"])),
                  f"{int(h['qstart'])}-{int(h['qend'])}", f"{int(h['tstart'])}-{int(h['tend'])}"]
                 for _, h in hits.iterrows()], left=0))

    body.append("<h2>Predicted structure</h2>")
    residues = residues_path(results, proteome, safe_id)
    if not residues.exists():
        body.append("<p class=\"missing\">no prediction in this run</p>")
    else:
        plddt = read_plddt(residues)
        body.append(f"<p>mean pLDDT {_number(row.get('mean_plddt'), '.1f')}; residues with pLDDT &gt; 70: "
                    f"{_number(row.get('fraction_plddt_over_70'), '.0%')}</p>")
        body.append(plddt_svg(plddt))
        body.append("<p>" + " ".join(f"<span style=\"color:{colour}\">&#9632;</span> {html.escape(label)}"
                                     for _, colour, label in PLDDT_BANDS) + "</p>")
    return _page(title, "\n".join(body))


def index_page(proteome: str, summary: pd.DataFrame, summary_href: str = "../summary.tsv") -> str:
    """Every protein of the summary, one row each, linked to its page (skipped proteins with the reason)."""
    rows = []
    for _, row in summary.iterrows():
        name = html.escape(str(row["protein"]))
        if int(row["chunk"]) < 0:
            rows.append([name, str(int(row["length"])), f"skipped: {html.escape(str(row['note']))}", "", "", "", ""])
            continue
        page = html.escape(quote(f"proteins/{row['safe_id']}.html"))
        template = row.get("top_template")
        rows.append([f"<a href=\"{page}\">{name}</a>", str(int(row["length"])), _number(row.get("msa_depth"), "d"),
                     _number(row.get("msa_neff"), ".1f"),
                     html.escape(str(template)) if isinstance(template, str) else _number(None, ""),
                     _number(row.get("top_template_probability"), ".2f"), _number(row.get("mean_plddt"), ".1f")])
    predicted = summary["mean_plddt"].notna().sum() if "mean_plddt" in summary else 0
    body = (f"<h1>{html.escape(proteome)}</h1><p>{len(summary)} proteins, {predicted} predicted. The table as a "
            f"file: <a href=\"{html.escape(summary_href)}\">summary.tsv</a> (and summary.parquet).</p>\n"
            + _table(["protein", "length", "MSA depth", "Neff", "top template", "probability", "mean pLDDT"], rows))
    return _page(f"{proteome}: proteins", body)


def write_pages(results: str | Path, proteome: str, summary: pd.DataFrame, out_dir: str | Path) -> int:
    """Write ``out_dir/index.html`` and ``out_dir/proteins/{safe_id}.html`` for every protein in a chunk (each
    atomically; the index last). Returns the number of protein pages."""
    results, out_dir = Path(results), Path(out_dir)
    page_dir = out_dir / "proteins"
    page_dir.mkdir(parents=True, exist_ok=True)
    planned = summary[summary["chunk"] >= 0]
    for _, row in track(list(planned.iterrows()), "protein pages", unit="pages"):
        write_text_atomic(page_dir / f"{row['safe_id']}.html", protein_page(results, proteome, row, page_dir))
    summary_href = quote(Path(os.path.relpath(results / proteome / "summary.tsv", out_dir)).as_posix())
    write_text_atomic(out_dir / "index.html", index_page(proteome, summary, summary_href))
    return len(planned)
