"""The summary of an evaluation table: ``count`` and the mean over targets of every numeric column, as written to
``evaluation.json``, shown at the head of ``evaluation.html`` and printed by ``trackfold evaluate``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from workflow_lib.schemas.evaluation import EVALUATION


def summary_means(table: pd.DataFrame) -> dict:
    """``count`` and the mean of every numeric :data:`EVALUATION` column (NaN skipped; None when all NaN)."""
    out: dict = {"count": int(len(table))}
    for field in EVALUATION.schema:
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            values = pd.to_numeric(table[field.name], errors="coerce").to_numpy(dtype=np.float64)
            finite = values[np.isfinite(values)]
            out[field.name] = float(finite.mean()) if finite.size else None
    return out
