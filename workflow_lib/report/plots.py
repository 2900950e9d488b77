"""Report figures (matplotlib, PNG): what a user would rather look at than read.

- :func:`plot_msa_coverage`: ColabFold's MSA plot: one row per MSA sequence, sorted by identity to the query,
  coloured by that identity where the sequence covers the query column, white where it has a gap; the black
  line is the number of sequences covering each column;
- :func:`plot_plddt_per_residue`: pLDDT along the chain of selected proteins, over AlphaFold's confidence bands;
- :func:`plot_distributions`: mean pLDDT and Neff across the proteome;
- :func:`plot_neff_vs_plddt`: does a deeper MSA give a more confident model;
- :func:`plot_runtime`: wall time per rule from the ``benchmark:`` files.

A figure whose data is absent (its stage is not part of the run) says so in its panel instead of failing, so
the report always has every figure. Every writer goes through :func:`workflow_lib.seqio.atomic.atomic_path`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from workflow_lib.report.figures import coverage_matrix  # noqa: E402
from workflow_lib.report.settings import PLOT_PROTEINS  # noqa: E402
from workflow_lib.seqio.atomic import atomic_path  # noqa: E402
from workflow_lib.seqio.msa import Alignment  # noqa: E402

PLDDT_BANDS = ((90, 100, "#0053d6", "very high (>90)"), (70, 90, "#65cbf3", "confident (70-90)"),
               (50, 70, "#ffdb13", "low (50-70)"), (0, 50, "#ff7d45", "very low (<50)"))
_DPI = 110


def save_figure(figure: plt.Figure, path: str | Path) -> None:
    """Write ``figure`` as a PNG, atomically and with the same bytes on every run, and close it."""
    with atomic_path(path, suffix=".png") as tmp:
        figure.savefig(tmp, dpi=_DPI, bbox_inches="tight", format="png",
                       metadata={"Software": None})  # no version string: identical bytes on every run
    plt.close(figure)


def no_data(axis: plt.Axes, text: str) -> None:
    """Turn ``axis`` into a centred note (a panel with nothing to plot)."""
    axis.text(0.5, 0.5, text, ha="center", va="center", transform=axis.transAxes, fontsize=10, color="0.35",
              wrap=True)
    axis.set_xticks([])
    axis.set_yticks([])


def _coverage_panel(axis: plt.Axes, alignment: Alignment, title: str) -> matplotlib.image.AxesImage:
    values, depth = coverage_matrix(alignment)
    image = axis.imshow(values, aspect="auto", interpolation="nearest", cmap="rainbow_r", vmin=0, vmax=1,
                        extent=(0.5, alignment.length + 0.5, values.shape[0] - 0.5, -0.5))
    axis.plot(np.arange(1, alignment.length + 1), depth, color="black", linewidth=1)
    axis.set_xlim(0.5, alignment.length + 0.5)
    axis.set_ylim(values.shape[0] - 0.5, -0.5)
    axis.invert_yaxis()
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("position")
    axis.set_ylabel("sequences")
    return image


def plot_msa_coverage(alignments: Mapping[str, Alignment], path: str | Path) -> None:
    """A grid of ColabFold-style coverage panels, one per protein (name → alignment)."""
    count = len(alignments)
    columns = min(3, max(count, 1))
    rows = max(1, -(-count // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    image = None
    for axis, (name, alignment) in zip(axes.flat, alignments.items()):
        image = _coverage_panel(axis, alignment, f"{name} (N={alignment.depth}, L={alignment.length})")
    for axis in list(axes.flat)[count:]:
        axis.axis("off")
    if image is None:
        no_data(axes[0, 0], "no MSAs: the MSA stage is not part of this run")
    else:
        figure.colorbar(image, ax=axes, shrink=0.8, label="sequence identity to query")
    figure.suptitle("MSA coverage (sorted by identity; black: sequences per column)", fontsize=11)
    save_figure(figure, path)


def plot_plddt_per_residue(plddt: Mapping[str, np.ndarray], path: str | Path) -> None:
    """pLDDT along the chain for each protein (name → per-residue values)."""
    figure, axis = plt.subplots(figsize=(8, 3.6))
    for low, high, colour, label in PLDDT_BANDS:
        axis.axhspan(low, high, color=colour, alpha=0.15, linewidth=0, label=label)
    for name, values in plddt.items():
        axis.plot(np.arange(1, len(values) + 1), values, linewidth=1.2, label=name)
    if not plddt:
        no_data(axis, "no predictions: the inference stage is not part of this run")
    else:
        axis.set_ylim(0, 100)
        axis.set_xlabel("residue")
        axis.set_ylabel("pLDDT")
        axis.legend(fontsize=7, ncol=2, loc="lower left", framealpha=0.8)
    axis.set_title("Predicted lDDT per residue")
    save_figure(figure, path)


def log_axis(axis) -> None:
    """A logarithmic x axis labelled 1, 2, 5, 10, 20, 50, ... in plain numbers (no minor-tick labels)."""
    axis.set_xscale("log")
    axis.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.xaxis.set_minor_formatter(NullFormatter())


def _histogram(axis, values: pd.Series, bins: np.ndarray, color: str, label: str, missing: str) -> bool:
    """One panel of :func:`plot_distributions`; False (and a note on the panel) when there are no values."""
    if not len(values):
        no_data(axis, missing)
        return False
    axis.hist(values, bins=bins, color=color, edgecolor="white")
    axis.set_xlabel(label)
    axis.set_ylabel("proteins")
    return True


def plot_distributions(summary: pd.DataFrame, path: str | Path) -> None:
    """Histograms of mean pLDDT, of MSA Neff and of the top template's probability across the proteome's
    proteins (the template panel says how many have a template at probability ≥ 0.5)."""
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 3.4))
    plddt = summary["mean_plddt"].dropna().astype(float)
    _histogram(left, plddt, np.linspace(0, 100, 21), "#0053d6", "mean pLDDT", "no pLDDT: inference not in this run")
    left.set_title(f"mean pLDDT ({len(plddt)} proteins)", fontsize=10)
    neff = summary["msa_neff"].dropna().astype(float)
    upper = max(float(neff.max()), 2.0) if len(neff) else 2.0
    if _histogram(middle, neff, np.geomspace(1, upper * 1.01, 21), "#2a9d8f", "Neff",
                  "no Neff: the MSA stage is not in this run"):
        log_axis(middle)
    middle.set_title(f"MSA Neff ({len(neff)} proteins)", fontsize=10)
    probability = summary["top_template_probability"].dropna().astype(float)
    covered = int((probability >= 0.5).sum())
    right.set_title(f"templates: {covered} of {len(probability)} searched proteins at ≥ 0.5"
                    if len(probability) else "templates", fontsize=10)
    _histogram(right, probability, np.linspace(0, 1, 21), "#e76f51", "top template probability (exp(-E-value))",
               "no template search in this run")
    save_figure(figure, path)


def plot_neff_vs_plddt(summary: pd.DataFrame, path: str | Path) -> None:
    """Scatter of MSA Neff (log) against mean pLDDT, one point per protein."""
    figure, axis = plt.subplots(figsize=(5, 4))
    both = summary[["msa_neff", "mean_plddt"]].dropna().astype(float)
    if len(both):
        axis.scatter(both["msa_neff"], both["mean_plddt"], s=14, alpha=0.7, color="#264653")
        log_axis(axis)
        axis.set_ylim(0, 100)
        axis.set_xlabel("MSA Neff")
        axis.set_ylabel("mean pLDDT")
    else:
        no_data(axis, "needs both the MSA and the inference stage")
    axis.set_title(f"Neff vs pLDDT ({len(both)} proteins)", fontsize=10)
    save_figure(figure, path)


def plot_runtime(runtime: pd.DataFrame, path: str | Path) -> None:
    """Total wall time per rule (bars, coloured by stage), with the number of jobs."""
    figure, axis = plt.subplots(figsize=(7, 0.5 + 0.35 * max(len(set(runtime["rule"])), 2)))
    if len(runtime):
        totals = runtime.groupby("rule", sort=True).agg(seconds=("seconds", "sum"), jobs=("seconds", "size"),
                                                        stage=("stage", "first"))
        stages = sorted(set(totals["stage"]))
        colours = dict(zip(stages, plt.get_cmap("tab10").colors))
        positions = np.arange(len(totals))
        axis.barh(positions, totals["seconds"], color=[colours[s] for s in totals["stage"]])
        axis.set_yticks(positions, [f"{rule} ({jobs} jobs)" for rule, jobs in zip(totals.index, totals["jobs"])],
                        fontsize=8)
        axis.set_xlabel("wall time, s (sum over jobs)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s]) for s in stages]
        axis.legend(handles, stages, fontsize=7, loc="lower right")
    else:
        no_data(axis, "no benchmark files")
    axis.set_title("Runtime per rule (benchmark files)", fontsize=10)
    save_figure(figure, path)


def select_proteins(summary: pd.DataFrame, count: int = PLOT_PROTEINS, wanted: Sequence[str] = ()) -> list[str]:
    """Safe IDs of the ``count`` proteins to plot one by one: the ``wanted`` ones (FASTA or safe IDs) first, then
    proteins spread evenly over the range of mean pLDDT (else of Neff, else FASTA order), then FASTA order."""
    planned = summary[summary["chunk"] >= 0]
    by_name = dict(zip(planned["protein"], planned["safe_id"])) | dict(zip(planned["safe_id"], planned["safe_id"]))
    chosen = [by_name[w] for w in wanted if w in by_name]
    for key in ("mean_plddt", "msa_neff"):
        if planned[key].notna().any():
            ranked = planned[planned[key].notna()].sort_values([key, "safe_id"], kind="stable")["safe_id"].tolist()
            break
    else:
        ranked = planned["safe_id"].tolist()
    remaining = [s for s in ranked if s not in chosen]
    need = max(count - len(chosen), 0)
    if need and remaining:
        picks = np.unique(np.linspace(0, len(remaining) - 1, min(need, len(remaining))).round().astype(int))
        chosen += [remaining[i] for i in picks]
    # Fewer ranked proteins than asked for: fill up in FASTA order.
    chosen += [s for s in planned["safe_id"] if s not in chosen][:max(count - len(chosen), 0)]
    return chosen
