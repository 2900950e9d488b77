"""A search's hits: :class:`Hits`, the ranked hits table (:data:`~workflow_lib.schemas.search.HITS`) with what a
user asks of it (the included hits, the merge of sharded searches, Parquet and BLAST tabular output).

Every number of a hit depends only on the query, the target and the whole database's totals (the E-values use
the manifest's sequence count, :class:`~workflow_lib.search.engine.DatabaseTotals`), never on the shard the
target sits in; so the hits of every shard merged and ranked (:meth:`Hits.merge`) are the hits of the whole
database, E-values included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.schemas.search import HITS
from workflow_lib.search.engine import HIT_COLUMNS, DatabaseTotals, rank_hits
from workflow_lib.search.settings import MsaSettings
from workflow_lib.seqio.atomic import write_text_atomic


def m8_lines(hits: pd.DataFrame) -> list[str]:
    """BLAST tabular (outfmt 6) rows: query, target, %id, length, mismatches, gap opens, ranges, E, bits."""
    lines = []
    for hit in hits.itertuples(index=False):
        states = hit.alignment
        length = len(states)
        mismatches = int(round(hit.aligned_cols * (1.0 - hit.identity)))
        gap_opens = sum(1 for k, s in enumerate(states) if s != "M" and (k == 0 or states[k - 1] != s))
        lines.append(f"{hit.query}\t{hit.target}\t{100.0 * hit.identity:.1f}\t{length}\t{mismatches}\t"
                     f"{gap_opens}\t{hit.qstart}\t{hit.qend}\t{hit.tstart}\t{hit.tend}\t{hit.evalue:.2e}\t"
                     f"{hit.bitscore:.1f}")
    return lines


class Hits:
    """Ranked hits (one row per query × target × iteration; columns of
    :data:`~workflow_lib.search.engine.HIT_COLUMNS`).

    ``inclusion_evalue``: the E-value at or below which a hit is :attr:`included` in an MSA (default:
    :class:`~workflow_lib.search.settings.MsaSettings`'). ``totals``: the database searched (its whole-database
    numbers), when known.
    """

    def __init__(self, frame: pd.DataFrame | None = None, *, totals: DatabaseTotals | None = None,
                 inclusion_evalue: float = MsaSettings.inclusion_evalue) -> None:
        self._frame = pd.DataFrame(columns=list(HIT_COLUMNS)) if frame is None else frame.reset_index(drop=True)
        self.totals = totals
        self.inclusion_evalue = inclusion_evalue

    def __len__(self) -> int:
        return len(self._frame)

    def __iter__(self) -> Iterator:
        """The rows as named tuples, in rank order."""
        return self._frame.itertuples(index=False)

    def __repr__(self) -> str:
        queries = self._frame["query"].nunique() if len(self._frame) else 0
        return f"Hits({len(self)} hits of {queries} queries)"

    @property
    def queries(self) -> list[str]:
        """The queries with hits, in rank order."""
        return list(dict.fromkeys(self._frame["query"]))

    @property
    def included(self) -> Hits:
        """The hits at or below the inclusion E-value."""
        return Hits(self._frame[self._frame["evalue"] <= self.inclusion_evalue], totals=self.totals,
                    inclusion_evalue=self.inclusion_evalue)

    def query(self, name: str) -> Hits:
        """One query's hits."""
        return Hits(self._frame[self._frame["query"] == name], totals=self.totals,
                    inclusion_evalue=self.inclusion_evalue)

    def to_frame(self) -> pd.DataFrame:
        """The hits table (a copy)."""
        return self._frame.copy()

    @classmethod
    def from_frames(cls, frames: Iterable[pd.DataFrame], *, query_order: list[str] | None = None,
                    totals: DatabaseTotals | None = None,
                    inclusion_evalue: float = MsaSettings.inclusion_evalue) -> Hits:
        """The hits of ``frames`` (of one iteration) together, ranked (:func:`~workflow_lib.search.engine.rank_hits`:
        by query in ``query_order``, then E-value)."""
        frames = [frame for frame in frames if not frame.empty]
        merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
        return cls(rank_hits(merged, query_order), totals=totals, inclusion_evalue=inclusion_evalue)

    @classmethod
    def merge(cls, parts: Iterable[Hits], *, query_order: list[str] | None = None) -> Hits:
        """The hits of searches of the shards of one database (same queries and iteration), as one search of the
        whole database: concatenated and ranked. The E-values are already the whole database's; parts from
        different databases (different totals) raise ``ValueError``."""
        parts = list(parts)
        totals = {part.totals for part in parts if part.totals is not None}
        if len(totals) > 1:
            raise ValueError(f"cannot merge hits of different databases: {sorted(t.name for t in totals)}")
        inclusion = parts[0].inclusion_evalue if parts else MsaSettings.inclusion_evalue
        return cls.from_frames([part._frame for part in parts], query_order=query_order,
                               totals=next(iter(totals), None), inclusion_evalue=inclusion)

    @classmethod
    def from_iterations(cls, results: list, *, query_order: list[str] | None = None) -> Hits:
        """Every iteration's hits of :class:`~workflow_lib.search.iterative.MsaResult` ``results``: ranked within
        each iteration, iteration 1 first (the table ``trackfold search`` writes)."""
        frames = [it.hits for result in results for it in result.iterations if not it.hits.empty]
        hits = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
        hits = hits.sort_values("iteration", kind="mergesort")
        if not hits.empty:
            hits = pd.concat([rank_hits(group, query_order) for _, group in hits.groupby("iteration")])
        return cls(hits)

    @classmethod
    def read_parquet(cls, path: str | Path) -> Hits:
        """A hits table written by :meth:`write_parquet` (checked against its schema)."""
        return cls(read_frame(path, HITS))

    def write_parquet(self, path: str | Path) -> None:
        """The table as Parquet (:data:`~workflow_lib.schemas.search.HITS`), written atomically."""
        write_table(path, self._frame, HITS)

    def m8_lines(self) -> list[str]:
        """The hits as BLAST tabular (outfmt 6) rows (:func:`m8_lines`)."""
        return m8_lines(self._frame)

    def write_m8(self, path: str | Path) -> None:
        """The hits as BLAST tabular (outfmt 6), written atomically."""
        write_text_atomic(path, "".join(line + "\n" for line in self.m8_lines()))
