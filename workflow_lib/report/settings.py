"""The report's settings shared by ``trackfold summarize`` and the workflow's config section ``report``
(:class:`~workflow_lib.workflow.config.ReportConfig`): one default each. Free of plotting imports, so reading the
workflow's configuration does not import matplotlib."""

from __future__ import annotations

PLOT_PROTEINS = 6
"""Proteins drawn one by one in the per-protein plots (MSA coverage, pLDDT per residue), the ones asked for by
name included (``trackfold summarize --plot-proteins``, ``report.plot_proteins``;
:func:`workflow_lib.report.plots.select_proteins`)."""
