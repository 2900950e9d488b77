"""Evaluation of predicted structures against experimental ones: lDDT-Cα, TM-score and RMSD
(TM-align), pLDDT calibration, long-range contact precision of the distogram and of the co-evolution baseline.

- :mod:`.align` — :func:`match_residues` (global alignment of prediction and observed native residues).
- :mod:`.contacts` — :func:`native_contacts`, :func:`contact_probability`, :func:`contact_precision`,
  :func:`long_range_precision`, :func:`coevolution_baseline`.
- :mod:`.tmalign` — :func:`run_tmalign`, :func:`parse_tmalign`.
- :mod:`.core` — :func:`evaluate_target`, :func:`evaluate_targets` (tables:
  :mod:`workflow_lib.schemas.evaluation`).
- :mod:`.summary` — :func:`summary_means` (``evaluation.json``).
- :mod:`.report` — figures and ``evaluation.html``.
- :mod:`.cli` — ``trackfold evaluate``.
"""

from workflow_lib.evaluate.align import ResidueMatch, match_residues
from workflow_lib.evaluate.core import TARGET_COLUMNS, evaluate_target, evaluate_targets, read_targets
from workflow_lib.evaluate.summary import summary_means

__all__ = ["TARGET_COLUMNS", "ResidueMatch", "evaluate_target",
           "evaluate_targets", "match_residues", "read_targets", "summary_means"]
