"""Figures and the HTML page of ``trackfold evaluate``.

Three PNGs next to ``evaluation.html`` (also embedded in it, so the page is self-contained):

- ``evaluation_lddt.png``: histograms of the per-target and per-residue lDDT-Cα;
- ``evaluation_calibration.png``: pLDDT calibration over all targets -- matched residues binned by pLDDT
  (10-point bins), the mean true lDDT-Cα (×100) per bin against the bin's mean pLDDT, the diagonal being
  perfect calibration;
- ``evaluation_contacts.png``: long-range P@L/5 of the model's distogram against the co-evolution baseline,
  one point per target.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.evaluate.summary import summary_means
from workflow_lib.report.plots import no_data, plt, save_figure
from workflow_lib.seqio.atomic import write_text_atomic

FIGURES = ("evaluation_lddt.png", "evaluation_calibration.png", "evaluation_contacts.png")
CALIBRATION_EDGES = np.linspace(0.0, 100.0, 11)
TABLE_COLUMNS = (("name", "target"), ("length", "L"), ("aligned", "aligned"), ("lddt_ca", "lDDT-Cα"),
                 ("tm_score", "TM-score"), ("tm_score_fixed", "TM (fixed)"), ("rmsd", "RMSD Å"),
                 ("mean_plddt", "mean pLDDT"), ("plddt_lddt_pearson", "r(pLDDT, lDDT)"), ("plddt_mae", "MAE"),
                 ("random_p_long", "random P"), ("p_l5_long", "P@L/5 long"), ("p_l_long", "P@L long"),
                 ("coevo_p_l5_long", "coevo P@L/5"), ("coevo_p_l_long", "coevo P@L"), ("msa_depth", "MSA depth"),
                 ("msa_neff", "Neff"), ("tmalign_status", "TM-align"))


def calibration_bins(plddt: np.ndarray, lddt: np.ndarray) -> pd.DataFrame:
    """Per pLDDT bin: ``low``, ``high``, ``count``, ``mean_plddt`` and ``mean_lddt`` (×100) of the residues
    where both are finite; empty bins are left out."""
    plddt, lddt = np.asarray(plddt, dtype=np.float64), np.asarray(lddt, dtype=np.float64)
    use = np.isfinite(plddt) & np.isfinite(lddt)
    plddt, lddt = plddt[use], lddt[use]
    which = np.clip(np.digitize(plddt, CALIBRATION_EDGES[1:-1]), 0, len(CALIBRATION_EDGES) - 2)
    rows = []
    for b in range(len(CALIBRATION_EDGES) - 1):
        inside = which == b
        if inside.any():
            rows.append({"low": CALIBRATION_EDGES[b], "high": CALIBRATION_EDGES[b + 1], "count": int(inside.sum()),
                         "mean_plddt": float(plddt[inside].mean()), "mean_lddt": float(100 * lddt[inside].mean())})
    return pd.DataFrame(rows, columns=["low", "high", "count", "mean_plddt", "mean_lddt"])


def plot_lddt(table: pd.DataFrame, residues: pd.DataFrame, path: str | Path) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    bins = np.linspace(0, 1, 21)
    for axis, values, title in ((axes[0], table["lddt_ca"], "per target"),
                                (axes[1], residues["lddt_ca"], "per residue (matched)")):
        values = pd.to_numeric(values, errors="coerce").dropna().to_numpy()
        if values.size == 0:
            no_data(axis, "no lDDT-Cα")
            continue
        axis.hist(values, bins=bins, color="#4a7ab5", edgecolor="white")
        axis.set_xlabel("lDDT-Cα")
        axis.set_ylabel("count")
        axis.set_title(f"lDDT-Cα {title} (n={values.size}, mean {values.mean():.3f})", fontsize=9)
    save_figure(figure, path)


def plot_calibration(residues: pd.DataFrame, path: str | Path) -> None:
    figure, axis = plt.subplots(figsize=(4.4, 4.2))
    plddt = pd.to_numeric(residues["plddt"], errors="coerce").to_numpy(dtype=np.float64)
    lddt = pd.to_numeric(residues["lddt_ca"], errors="coerce").to_numpy(dtype=np.float64)
    bins = calibration_bins(plddt, lddt)
    if bins.empty:
        no_data(axis, "no residue with both pLDDT and lDDT-Cα")
    else:
        use = np.isfinite(plddt) & np.isfinite(lddt)
        axis.scatter(plddt[use], 100 * lddt[use], s=4, color="0.7", label="residues")
        axis.plot([0, 100], [0, 100], color="0.3", linestyle="--", linewidth=1, label="perfect calibration")
        axis.plot(bins["mean_plddt"], bins["mean_lddt"], marker="o", color="#d1495b", label="binned mean")
        axis.set_xlim(0, 100)
        axis.set_ylim(0, 100)
        axis.set_xlabel("predicted pLDDT")
        axis.set_ylabel("true lDDT-Cα × 100")
        axis.legend(fontsize=7, loc="upper left")
        axis.set_title(f"pLDDT calibration ({int(use.sum())} residues)", fontsize=9)
    save_figure(figure, path)


def plot_contacts(table: pd.DataFrame, path: str | Path) -> None:
    figure, axis = plt.subplots(figsize=(4.4, 4.2))
    model = pd.to_numeric(table["p_l5_long"], errors="coerce").to_numpy(dtype=np.float64)
    coevo = pd.to_numeric(table["coevo_p_l5_long"], errors="coerce").to_numpy(dtype=np.float64)
    use = np.isfinite(model) & np.isfinite(coevo)
    if not use.any():
        no_data(axis, "needs targets with both a .pred.npz and an A3M")
    else:
        axis.scatter(coevo[use], model[use], s=18, color="#2e8540")
        axis.plot([0, 1], [0, 1], color="0.3", linestyle="--", linewidth=1)
        axis.set_xlim(-0.02, 1.02)
        axis.set_ylim(-0.02, 1.02)
        axis.set_xlabel("co-evolution (APC covariance) P@L/5 long")
        axis.set_ylabel("model distogram P@L/5 long")
        axis.set_title(f"long-range contacts ({int(use.sum())} targets)", fontsize=9)
    save_figure(figure, path)


def _cell(value) -> str:
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (float, np.floating)):
        return "" if math.isnan(value) else f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return html.escape(str(value))


def render_html(table: pd.DataFrame, means: dict, images: dict[str, bytes]) -> str:
    """The page: the per-target table with a mean row, then the figures (embedded PNGs with a link each)."""
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in TABLE_COLUMNS)
    body = []
    for row in table.itertuples(index=False):
        body.append("<tr>" + "".join(f"<td>{_cell(getattr(row, column))}</td>" for column, _ in TABLE_COLUMNS)
                    + "</tr>")
    mean_cells = [f"mean of {means['count']}"] + [_cell(means.get(column)) if column in means else ""
                                                   for column, _ in TABLE_COLUMNS[1:]]
    body.append("<tr class='mean'>" + "".join(f"<td>{c}</td>" for c in mean_cells) + "</tr>")
    figures = "".join(
        f"<figure><a href='{name}'><img alt='{name}' src='data:image/png;base64,"
        f"{base64.b64encode(data).decode('ascii')}'></a><figcaption>{name}</figcaption></figure>"
        for name, data in images.items())
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>trackfold evaluation</title><style>"
            "body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:12px}"
            "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right} td:first-child{text-align:left}"
            "tr.mean{font-weight:bold;background:#f2f2f2} figure{display:inline-block;margin:1em}"
            "img{max-width:520px}</style></head><body>\n"
            f"<h1>Evaluation of {means['count']} predicted structure(s)</h1>\n"
            "<p>lDDT-Cα and TM-score over prediction residues matched to observed native residues; TM-scores "
            "normalised by the native's observed length; contact precision over long-range pairs "
            "(|i−j| ≥ 24, Cβ &lt; 8 Å; random P = the fraction of such pairs in contact); co-evolution = APC "
            "covariance norm of the target's A3M. Means skip empty cells.</p>\n"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>\n"
            + figures + "\n</body></html>\n")


def write_report(out_dir: str | Path, table: pd.DataFrame, residues: pd.DataFrame) -> None:
    """Write the three figures and ``evaluation.html`` into ``out_dir`` (each atomically)."""
    out_dir = Path(out_dir)
    plot_lddt(table, residues, out_dir / FIGURES[0])
    plot_calibration(residues, out_dir / FIGURES[1])
    plot_contacts(table, out_dir / FIGURES[2])
    images = {name: (out_dir / name).read_bytes() for name in FIGURES}
    write_text_atomic(out_dir / "evaluation.html", render_html(table, summary_means(table), images))
