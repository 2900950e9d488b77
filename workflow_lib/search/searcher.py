"""A configured search of one database, shaped like pyhmmer's pipeline: :class:`Searcher`.

>>> from workflow_lib.search import FAST, Searcher
>>> searcher = Searcher("results/db/sprot", settings=FAST, cpus=4)      # doctest: +SKIP
>>> hits = searcher.search(read_fasta("queries.fasta"))                   # doctest: +SKIP
>>> hits.included.write_m8("hits.m8")                                     # doctest: +SKIP
>>> msas = searcher.iterate(read_fasta("queries.fasta"))                  # doctest: +SKIP

:meth:`Searcher.search` is one search pass (:mod:`workflow_lib.search.engine`), :meth:`Searcher.iterate` the
iterative MSA assembly (:func:`workflow_lib.search.iterative.build_msas`); both with one
:class:`~workflow_lib.search.settings.Settings`. :meth:`Searcher.search_shard` searches one shard, as the
workflow's jobs do; :meth:`~workflow_lib.search.hits.Hits.merge` of every shard's hits is the whole database's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from workflow_lib.aligner import Profile
from workflow_lib.db.build import load_kmer_index, load_shard, read_manifest
from workflow_lib.search.engine import DatabaseTotals, QueryResult, SearchQuery, make_queries, search_shard
from workflow_lib.search.hits import Hits
from workflow_lib.search.iterative import MsaResult, QueryState, build_msas
from workflow_lib.search.settings import Settings
from workflow_lib.seqio.fasta import Record


class Searcher:
    """Searches of the database at ``database`` (a ``trackfold db build`` directory) with ``settings`` (default:
    the product's), ``cpus`` processes (``0``/None: all cores) and the Viterbi stages on ``device`` (``numpy``,
    a torch device, or None for CUDA when available; the hits are the same)."""

    def __init__(self, database: str | Path, *, settings: Settings | None = None, cpus: int | None = 1,
                 device: str | None = "numpy") -> None:
        self.database = Path(database)
        self.settings = settings if settings is not None else Settings()
        self.cpus = cpus
        self.device = device
        self.totals = DatabaseTotals.from_manifest(self.database)
        self.shards = int(read_manifest(self.database).n_shards)

    def __repr__(self) -> str:
        return f"Searcher({str(self.database)!r}, shards={self.shards}, cpus={self.cpus}, device={self.device!r})"

    def queries(self, queries: Iterable[Record | tuple[str, str] | SearchQuery], *,
                iteration: int | None = None) -> list[SearchQuery]:
        """Calibrated query profiles: a :class:`~workflow_lib.search.engine.SearchQuery` as it is, a record or a
        ``(name, sequence)`` pair as its single-sequence profile (with the settings' pseudocounts)."""
        queries = list(queries)
        if all(isinstance(query, SearchQuery) for query in queries):
            return queries
        context = self.settings.msa.context()
        names: list[str] = []
        profiles: list[Profile] = []
        prepared: dict[int, SearchQuery] = {}
        for k, query in enumerate(queries):
            if isinstance(query, SearchQuery):
                prepared[k] = query
                continue
            name, sequence = (query.id, query.sequence) if isinstance(query, Record) else query
            names.append(name)
            profiles.append(QueryState(name, "", sequence).profile(context))
        made = iter(make_queries(names, profiles, self.totals, self._pass_settings(iteration), device=self.device,
                                 cpus=self.cpus))
        return [prepared[k] if k in prepared else next(made) for k in range(len(queries))]

    def _pass_settings(self, iteration: int | None):
        """A pass's thresholds: iteration ``iteration`` of an iterated search, or (None) a search of one pass."""
        if iteration is None:
            return self.settings.search.for_iteration(1, 1)
        return self.settings.search.for_iteration(iteration, self.settings.iterations)

    def search(self, queries: Iterable[Record | tuple[str, str] | SearchQuery], *, shards: list[int] | None = None,
               iteration: int | None = None) -> Hits:
        """One search pass of ``queries`` (see :meth:`queries`) against every shard (or the listed ones): the
        ranked hits. ``iteration``: the pass is that iteration of an iterated search (its prefilter, its label;
        iteration 1 of several with the sensitive settings uses the fast prefilter); None: a search of one pass
        (labelled 1)."""
        queries = self.queries(queries, iteration=iteration)
        parts = [self.search_shard(queries, shard, iteration=iteration)[0]
                 for shard in (range(self.shards) if shards is None else shards)]
        return Hits.merge(parts, query_order=[query.name for query in queries])

    def search_shard(self, queries: list[SearchQuery], shard: int, *,
                     iteration: int | None = None) -> tuple[Hits, list[QueryResult]]:
        """Calibrated ``queries`` against shard ``shard``: the ranked hits and each query's
        :class:`~workflow_lib.search.engine.QueryResult` (prefilter counts, seconds)."""
        results = search_shard(queries, load_shard(self.database, shard), load_kmer_index(self.database, shard),
                               self.totals, self._pass_settings(iteration), iteration=iteration or 1, cpus=self.cpus,
                               device=self.device)
        hits = Hits.from_frames([result.hits for result in results], query_order=[query.name for query in queries],
                                totals=self.totals, inclusion_evalue=self.settings.inclusion_evalue)
        return hits, results

    def iterate(self, records: list[Record], *,
                on_iteration: Callable[[int, int], None] | None = None) -> list[MsaResult]:
        """Iterative MSAs of ``records`` (:func:`~workflow_lib.search.iterative.build_msas`): one
        :class:`~workflow_lib.search.iterative.MsaResult` per record, in order; ``on_iteration(iteration,
        queries searched)`` after each iteration."""
        return build_msas(records, self.database, self.settings.search, self.settings.msa, cpus=self.cpus,
                          on_iteration=on_iteration, device=self.device)
