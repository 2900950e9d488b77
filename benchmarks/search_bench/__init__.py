"""Helpers of ``benchmarks/search.py``: the side-by-side homology-search benchmark.

``metrics`` (ROC AUC, sensitivity at a false-positive rate, ROC1, calibration counts; pure functions),
``datasets`` (the Pfam-pair and CATH sets and how hits are scored on them), ``tools`` (running jackhmmer,
hhblits, mmseqs2 and ``trackfold search`` with timing; reading their hits), ``report`` (Markdown and plot),
``scaling`` (how cost grows with database size and queries per job).
"""
