"""A chunk's calibrated query profiles in one npz, built once per chunk and iteration for every shard job.

HHblits (Remmert et al. 2012, Nat. Methods 9:173): each iteration searches the database with the current query profile;
the E-values need that profile's Gumbel calibration (:mod:`workflow_lib.search.evalue`), which costs about as much
Viterbi as ~130 search targets. A shard job that built and calibrated its own queries repeated that work once per shard
(with 16 shards, more than the search's own Viterbi); the workflow's ``search_profiles`` rule does it once and the
``search_shard`` jobs read the result. The calibration depends only on the profile and the whole-database totals, so the
hits are identical either way (tested).

Layout (schema :data:`SEARCH_QUERIES`): the profiles of Q queries concatenated over their columns (R in all);
per-column arrays with one begin row per profile have R + Q rows; ``protein`` is each query's index in the
chunk FASTA, whose records are checked against the stored sequences when the file is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workflow_lib.aligner import Profile
from workflow_lib.aligner.profile import encode_query
from workflow_lib.errors import InputError
from workflow_lib.schemas.io import read_npz, write_npz
from workflow_lib.schemas.search import SEARCH_QUERIES
from workflow_lib.search.engine import SearchQuery
from workflow_lib.search.evalue import Calibration
from workflow_lib.seqio.fasta import Record


def write_search_queries(path: str | Path, queries: list[SearchQuery], records: list[Record]) -> None:
    """Write ``queries`` (each named after one of ``records``, the chunk FASTA) atomically."""
    position = {record.id: k for k, record in enumerate(records)}
    profiles = [q.profile for q in queries]
    arrays = {
        "protein": np.array([position[q.name] for q in queries], dtype=np.int32),
        "length": np.array([p.length for p in profiles], dtype=np.int32),
        "sequence": _concat([p.sequence for p in profiles], (0,), np.uint8),
        "emissions": _concat([p.emissions for p in profiles], (0, 20), np.float32),
        "transitions": _concat([p.transitions for p in profiles], (0, 7), np.float32),
        "column_neff": _concat([p.column_neff for p in profiles], (0, 3), np.float32),
        "neff": np.array([p.neff for p in profiles], dtype=np.float64),
        "background": _concat([p.background[None, :] for p in profiles], (0, 20), np.float32),
        "has_pseudocounts": np.array([p.has_pseudocounts for p in profiles], dtype=bool),
        "mu": np.array([q.calibration.mu for q in queries], dtype=np.float64),
        "lam": np.array([q.calibration.lam for q in queries], dtype=np.float64),
        "slope": np.array([q.calibration.slope for q in queries], dtype=np.float64),
        "reference_length": np.array([q.calibration.reference_length for q in queries], dtype=np.float64),
    }
    write_npz(path, arrays, SEARCH_QUERIES)


def read_search_queries(path: str | Path, records: list[Record]) -> list[SearchQuery]:
    """The queries written by :func:`write_search_queries` for the chunk FASTA ``records`` (checked: every
    stored profile must be the one of the record it names)."""
    arrays = read_npz(path, SEARCH_QUERIES)
    lengths = arrays["length"].astype(np.int64)
    if int(lengths.sum()) != arrays["sequence"].size or arrays["transitions"].shape[0] != lengths.sum() + lengths.size:
        raise InputError("profile lengths do not add up to the stored columns", path=path)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    queries = []
    for k, protein in enumerate(arrays["protein"].tolist()):
        if not 0 <= protein < len(records):
            raise InputError(f"query {k} names protein {protein}, but the FASTA has {len(records)}", path=path)
        record = records[protein]
        columns = slice(int(starts[k]), int(starts[k + 1]))
        rows = slice(int(starts[k]) + k, int(starts[k + 1]) + k + 1)
        sequence = arrays["sequence"][columns]
        if not np.array_equal(sequence, encode_query(record.sequence)):
            raise InputError("stored profile is not the one of this protein's sequence (stale file?)",
                             path=path, record=record.id)
        profile = Profile(record.id, sequence.copy(), arrays["emissions"][columns].copy(),
                          arrays["transitions"][rows].copy(), arrays["column_neff"][rows].copy(),
                          float(arrays["neff"][k]), arrays["background"][k].copy(),
                          bool(arrays["has_pseudocounts"][k]), description=record.description)
        try:
            calibration = Calibration(float(arrays["mu"][k]), float(arrays["lam"][k]), float(arrays["slope"][k]),
                                      float(arrays["reference_length"][k]))
        except ValueError as error:
            raise InputError(str(error), path=path, record=record.id) from None
        queries.append(SearchQuery(record.id, profile, calibration))
    return queries


def _concat(parts: list[np.ndarray], empty_shape: tuple[int, ...], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(empty_shape, dtype=dtype)
