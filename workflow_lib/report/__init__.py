"""Per-proteome summaries, the HTML report, plots for ``snakemake --report``, and progress logging for long jobs.

- :mod:`.collect`: gather whatever stage outputs exist (chunk plan, MSA statistics, template hits, per-residue
  confidence, ``benchmark:`` files) into the ``summary`` and ``runtime`` tables
  (:mod:`workflow_lib.schemas.report`); a stage that is not configured leaves its columns null;
- :mod:`.pages`: the HTML report: a sortable, filterable proteome index and one page per protein (3D view,
  figures, template alignment, files), working offline;
- :mod:`.protein_view`, :mod:`.figures`: what a protein page draws (the model and its superposed template, MSA
  coverage, contact maps, alignment text), fast enough for 100,000 pages;
- :mod:`.vendor`: the shipped 3D viewer (3Dmol.js from npm) and the report's own script and stylesheet;
- :mod:`.plots`: matplotlib PNGs (MSA coverage, pLDDT per residue, pLDDT/Neff distributions, Neff vs pLDDT,
  runtime per stage);
- :mod:`.progress`: items done / total, rate and ETA, logged at a bounded rate;
- :mod:`.settings`: the report's defaults, shared by ``trackfold summarize`` and the config section ``report``;
- :mod:`.cli`: ``trackfold summarize``.
"""
