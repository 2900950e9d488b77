"""Per-proteome summaries, plots for ``snakemake --report``, and progress logging for long jobs.

- :mod:`.collect`: gather whatever stage outputs exist (chunk plan, MSA statistics, template hits, per-residue
  confidence, ``benchmark:`` files) into the ``summary`` and ``runtime`` tables (:mod:`workflow_lib.schemas.report`); a stage that is not configured leaves its columns null;
- :mod:`.plots`: matplotlib PNGs (MSA coverage, pLDDT per residue, pLDDT/Neff distributions, Neff vs pLDDT,
  runtime per stage);
- :mod:`.progress`: items done / total, rate and ETA, logged at a bounded rate;
- :mod:`.cli`: ``trackfold summarize``.
"""
