"""The report's HTML pages, as AlphaFold DB's entry pages and ColabFold's figures show a prediction:

- ``{proteome}/report/index.html``: the proteome's figures on top, then every protein in a table that sorts,
  filters and pages in the browser (the rows are embedded as JSON; only one page of rows is drawn, so 100,000
  proteins stay responsive);
- ``{proteome}/report/proteins/{safe_id}.html``: the model in 3D coloured by pLDDT with the top template
  superposed, the pLDDT trace, the MSA coverage coloured by identity, the predicted contact map beside the
  template's contacts, the template alignment, the MSA numbers, the template hits and links to every file.

The pages work offline: the viewer (3Dmol.js) and the pages' own script and stylesheet are copied to
``report/assets`` (:mod:`.vendor`), the coordinates and figures are inline, and links are relative, so the
results folder can be copied to a laptop, served, or opened from a cluster's file share. Everything shown is
read from the summary table and the stage files: a stage that did not run says so instead of showing a number.
"""

from __future__ import annotations

import html
import json
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import quote
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.report.collect import a3m_path, hits_path, read_plddt, read_stage_table, residues_path
from workflow_lib.report.figures import alignment_html, distance_map_svg, msa_coverage_svg
from workflow_lib.report.progress import track
from workflow_lib.report.protein_view import (TemplateDatabases, predicted_contacts, read_prediction,
                                              superposed_template_pdb, template_contacts, viewer_html)
from workflow_lib.report.vendor import copy_assets
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.templates.search import positive_pairs

PLDDT_BANDS = ((90.0, "#0053d6", "very high (> 90)"), (70.0, "#65cbf3", "confident (70-90)"),
               (50.0, "#ffdb13", "low (50-70)"), (0.0, "#ff7d45", "very low (< 50)"))
"""AlphaFold DB's pLDDT colours, highest band first."""

HIT_COLUMNS = ("rank", "template", "evalue", "significance", "identity", "aligned_cols", "qstart", "qend",
               "tstart", "tend")
ASSETS = "assets"
"""Folder of the viewer, script and stylesheet, next to index.html."""


def _page(title: str, body: str, assets: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<link rel=\"stylesheet\" href=\"{assets}/report.css\"></head>\n<body>\n{body}\n</body></html>\n")


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




def _legend() -> str:
    return ("<p class=\"legend\">pLDDT:" + "".join(
        f"<span class=\"swatch\" style=\"background:{colour}\"></span>{html.escape(label)}"
        for _, colour, label in PLDDT_BANDS) + "</p>")


def _query_sequence(alignment) -> str:
    return "".join(letter for letter in alignment.rows[0] if not letter.islower()).replace("-", "")


def _structure_section(results: Path, proteome: str, safe_id: str, alignment, template, assets: str) -> list[str]:
    """The 3D view (from the PDB file) with the template superposed, and the contact maps (from the .pred.npz)."""
    structures = results / proteome / "structures"
    pdb_file, pred_file = structures / f"{safe_id}.pdb", structures / f"{safe_id}.pred.npz"
    prediction = read_prediction(pred_file) if pred_file.exists() else None
    body = []
    if pdb_file.exists():
        template_pdb = None
        if template is not None and prediction is not None:
            template_pdb = superposed_template_pdb(template, prediction["backbone"][:, 1])
        body.append(viewer_html(pdb_file.read_text(), template_pdb, template.name if template_pdb else None,
                                assets))
        body.append(_legend())
    else:
        body.append("<p class=\"missing\">no model file (PDB) in this run: no 3D view</p>")
    figures = []
    if alignment is not None:
        figures.append("<div><h3>MSA coverage</h3>" + msa_coverage_svg(alignment) + "</div>")
    if prediction is not None:
        upper, upper_label = predicted_contacts(prediction)
        lower = template_contacts(template, len(upper)) if template is not None else None
        lower_label = (f"contacts of {template.name} (aligned residues)" if template is not None
                       else "no template")
        figures.append("<div><h3>Contact map</h3>" + distance_map_svg(upper, lower, upper_label=upper_label,
                                                                     lower_label=lower_label) + "</div>")
    if figures:
        body.append("<div class=\"figures\">" + "".join(figures) + "</div>")
    return body


def protein_page(results: Path, proteome: str, row: pd.Series, page_dir: Path,
                 templates: TemplateDatabases | None = None, assets: str = f"../{ASSETS}") -> str:
    """The HTML page of one protein (a row of the summary table) whose file sits in ``page_dir``."""
    templates = templates or TemplateDatabases()
    safe_id = str(row["safe_id"])
    root = results / proteome
    structures = root / "structures"
    a3m_file = a3m_path(results, proteome, safe_id)
    alignment = read_a3m(a3m_file) if a3m_file.exists() else None
    hits_file = hits_path(results, proteome, safe_id)
    hits = read_stage_table(hits_file, HIT_COLUMNS) if hits_file.exists() else None
    template = templates.top_template(hits) if hits is not None else None
    title = f"{row['protein']} ({proteome})"
    body = [f"<p><a href=\"../index.html\">{html.escape(proteome)}: all proteins</a></p>",
            f"<h1>{html.escape(str(row['protein']))}</h1>",
            f"<p>{int(row['length'])} residues; chunk {int(row['chunk'])}; file name "
            f"<code>{html.escape(safe_id)}</code></p>"]

    body.append("<h2>Predicted structure</h2>")
    residues = residues_path(results, proteome, safe_id)
    if not residues.exists():
        body.append("<p class=\"missing\">no prediction in this run</p>")
    else:
        plddt = read_plddt(residues)
        body.append(f"<p>mean pLDDT {_number(row.get('mean_plddt'), '.1f')}; residues with pLDDT &gt; 70: "
                    f"{_number(row.get('fraction_plddt_over_70'), '.0%')}</p>")
        body.extend(_structure_section(results, proteome, safe_id, alignment, template, assets))
        body.append("<h3>pLDDT per residue</h3>" + plddt_svg(plddt))
    if not residues.exists() and alignment is not None:
        body.append("<div class=\"figures\"><div><h3>MSA coverage</h3>" + msa_coverage_svg(alignment)
                    + "</div></div>")

    body.append("<h2>Multiple sequence alignment</h2>")
    body.append(_table(["depth", "Neff", "coverage", "iterations"],
                       [[_number(row.get("msa_depth"), "d"), _number(row.get("msa_neff"), ".1f"),
                         _number(row.get("msa_coverage"), ".2f"), _number(row.get("msa_iterations"), "d")]], left=0))

    body.append("<h2>Template hits</h2>")
    if hits is None:
        body.append("<p class=\"missing\">no template search in this run</p>")
    elif len(hits) == 0:
        body.append("<p>searched; no template hit</p>")
    else:
        ordered = hits.sort_values(["rank", "evalue"], kind="stable")
        body.append(_table(
            ["rank", "template", "E-value", "probability", "identity", "aligned", "query", "template range"],
            [[str(int(h["rank"])), html.escape(str(h["template"])), f"{h['evalue']:.2g}",
              f"{h['significance']:.2f}", f"{h['identity']:.2f}", str(int(h["aligned_cols"])),
              f"{int(h['qstart'])}-{int(h['qend'])}", f"{int(h['tstart'])}-{int(h['tend'])}"]
             for _, h in ordered.iterrows()], left=0))
        if template is not None and alignment is not None:
            hit = template.hit
            body.append(f"<h3>Alignment with {html.escape(template.name)}</h3>"
                        f"<p>identical <code>|</code>, similar <code>+</code> (positive substitution score)</p>")
            body.append(alignment_html(_query_sequence(alignment), template.structure.sequence,
                                       str(hit["alignment"]), int(hit["qstart"]) - 1, int(hit["tstart"]) - 1,
                                       template_name=template.name, positive=positive_pairs()))
        elif template is None:
            body.append("<p class=\"missing\">the template database of these hits is not at hand: no "
                        "alignment or superposition</p>")

    body.append("<h2>Files</h2><ul>")
    for path, label in ((a3m_file, "MSA (A3M)"),
                        (structures / f"{safe_id}.pdb", "model (PDB, pLDDT in B-factors)"),
                        (structures / f"{safe_id}.cif", "model (mmCIF, ModelCIF pLDDT)"),
                        (structures / f"{safe_id}.confidence.json", "per-residue confidence (JSON)"),
                        (structures / f"{safe_id}.pred.npz", "6D distance and orientation probabilities (npz)"),
                        (hits_file, "template hits (Parquet)")):
        body.append(f"<li>{_link(path, page_dir, label)}</li>")
    body.append("</ul>")
    return _page(title, "\n".join(body), assets)


INDEX_COLUMNS = (
    {"key": "protein", "label": "protein", "type": "link", "href": "page"},
    {"key": "length", "label": "length", "type": "number"},
    {"key": "msa_depth", "label": "MSA depth", "type": "number"},
    {"key": "msa_neff", "label": "Neff", "type": "number", "digits": 1},
    {"key": "top_template", "label": "top template", "type": "text"},
    {"key": "top_template_probability", "label": "probability", "type": "number", "digits": 2},
    {"key": "mean_plddt", "label": "mean pLDDT", "type": "number", "digits": 1, "bands": True},
    {"key": "fraction_plddt_over_70", "label": "pLDDT > 70", "type": "number", "percent": True, "bands": True},
    {"key": "note", "label": "note", "type": "text"},
    {"key": "page", "label": "page", "type": "text", "hidden": True},
)
"""The index table's columns (the page's script reads this description with the rows)."""
OVERVIEW_FIGURES = (("distributions.png", "mean pLDDT, MSA Neff and template probability across the proteome"),
                    ("neff_vs_plddt.png", "MSA Neff against mean pLDDT"))


def _cell(value):
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or pd.isna(value):
        return None
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return round(float(value), 4)
    return str(value)


def index_rows(summary: pd.DataFrame) -> list[list]:
    """The summary as the index table's rows (JSON-ready, in :data:`INDEX_COLUMNS` order)."""
    rows = []
    for _, row in summary.iterrows():
        skipped = int(row["chunk"]) < 0
        values = []
        for column in INDEX_COLUMNS:
            key = column["key"]
            if key == "page":
                values.append(None if skipped else quote(f"proteins/{row['safe_id']}.html"))
            elif key == "note":
                values.append(f"skipped: {row['note']}" if skipped else (_cell(row.get("note")) or None))
            else:
                values.append(_cell(row.get(key)))
        rows.append(values)
    return rows


def index_page(proteome: str, summary: pd.DataFrame, summary_href: str = "../summary.tsv",
               figures: Iterable[tuple[str, str]] = ()) -> str:
    """The proteome's figures, then every protein of the summary in a sortable, filterable, paged table (the
    rows embedded as JSON; ``assets/table.js`` draws one page at a time)."""
    predicted = int(summary["mean_plddt"].notna().sum()) if "mean_plddt" in summary else 0
    confident = int((summary["mean_plddt"] > 70).sum()) if "mean_plddt" in summary else 0
    payload = json.dumps({"columns": list(INDEX_COLUMNS), "rows": index_rows(summary)},
                         separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    overview = "".join(f"<img src=\"{html.escape(name)}\" alt=\"{html.escape(alt)}\" title=\"{html.escape(alt)}\">"
                       for name, alt in figures)
    body = (f"<h1>{html.escape(proteome)}</h1><p>{len(summary)} proteins, {predicted} predicted, {confident} with "
            f"mean pLDDT &gt; 70. The table as a file: <a href=\"{html.escape(summary_href)}\">summary.tsv</a> "
            f"(and summary.parquet).</p>\n"
            + (f"<div class=\"overview\">{overview}</div>\n" if overview else "")
            + _legend()
            + "<div id=\"protein-table\" data-status=\"loading\"><noscript>The table needs JavaScript; "
              "summary.tsv holds the same rows.</noscript></div>\n"
            + f"<script type=\"application/json\" id=\"proteins\">{payload}</script>\n"
            + f"<script src=\"{ASSETS}/table.js\"></script>")
    return _page(f"{proteome}: proteins", body, ASSETS)


_TEMPLATES: list[TemplateDatabases] = []
"""The template databases of the process writing pages (one per worker, opened by :func:`_open_templates`)."""


def _open_templates() -> None:
    _TEMPLATES[:] = [TemplateDatabases()]


def _write_page(job: tuple[Path, str, Path, pd.Series]) -> None:
    results, proteome, page_dir, row = job
    write_text_atomic(page_dir / f"{row['safe_id']}.html", protein_page(results, proteome, row, page_dir,
                                                                        _TEMPLATES[0]))


def write_pages(results: str | Path, proteome: str, summary: pd.DataFrame, out_dir: str | Path, *,
                cpus: int = 1) -> int:
    """Write ``out_dir/assets`` (viewer, script, stylesheet), ``out_dir/proteins/{safe_id}.html`` for every
    protein in a chunk and ``out_dir/index.html`` (each atomically; the index last). ``cpus`` processes write
    the protein pages (each page is independent; the pages are the same whatever the count). Returns the
    number of protein pages."""
    if not isinstance(cpus, int) or cpus < 1:
        raise InputError(f"report: cpus must be a positive integer, got {cpus!r}")
    results, out_dir = Path(results), Path(out_dir)
    copy_assets(out_dir)
    page_dir = out_dir / "proteins"
    page_dir.mkdir(parents=True, exist_ok=True)
    planned = summary[summary["chunk"] >= 0]
    rows = [row for _, row in planned.iterrows()]
    if cpus > 1 and len(rows) > 1:
        context = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(min(cpus, len(rows)), mp_context=context, initializer=_open_templates) as pool:
            written = pool.map(_write_page, [(results, proteome, page_dir, row) for row in rows],
                               chunksize=max(1, min(32, len(rows) // (4 * cpus))))
            for _ in track(written, "protein pages", total=len(rows), unit="pages"):
                pass
    else:
        _open_templates()
        for row in track(rows, "protein pages", unit="pages"):
            _write_page((results, proteome, page_dir, row))
    summary_href = quote(Path(os.path.relpath(results / proteome / "summary.tsv", out_dir)).as_posix())
    figures = [(name, alt) for name, alt in OVERVIEW_FIGURES if (out_dir / name).exists()]
    write_text_atomic(out_dir / "index.html", index_page(proteome, summary, summary_href, figures))
    return len(planned)
