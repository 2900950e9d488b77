"""Arrays the prefilter derives from one shard and keeps across the queries searched against it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ShardCache:
    """The prefilter's per-shard layouts, per query-length class (``pad``, a power of two above the query's
    length or window count, so that queries of similar length share one):

    - ``bin_base``: the dense seed count's bin base of every index entry (one int64 per entry;
      :func:`~workflow_lib.search.diagonals.entry_bin_base`);
    - ``seed_blocks``: the compiled blocked count's block layout
      (:func:`~workflow_lib.search.prefilter_compiled.seed_blocks`);
    - ``padded``: the shard's residues with padding between sequences
      (:func:`~workflow_lib.search.gapless.padded_residues`, one byte per residue and padding; at least
      ``layout_pad``, so a batch search builds it once, for its longest query).

    Each kind keeps its newest :data:`LIMITS` pads, the oldest dropped. One cache belongs to one shard and its
    index: the search creates it with the loaded shard (:func:`~workflow_lib.search.engine.search_shard`) and
    passes it down; a function given none builds what it needs for the call.
    """

    LIMITS = {"bin_base": 4, "seed_blocks": 4, "padded": 2}

    def __init__(self, layout_pad: int = 0) -> None:
        self._entries: dict[str, dict[int, Any]] = {kind: {} for kind in self.LIMITS}
        self.layout_pad = int(layout_pad)
        """The smallest padding of the ``padded`` layout: a search that knows its longest query sets it, so one
        layout (padded for that query) serves every query instead of one per length class (each a fresh
        allocation the size of the shard plus its padding)."""

    @classmethod
    def of(cls, cache: ShardCache | None) -> ShardCache:
        """``cache``, or a new (empty) one."""
        return cache if cache is not None else cls()

    def get(self, kind: str, pad: int, build: Callable[[], Any]) -> Any:
        """The ``kind`` layout for ``pad``: the kept one, else ``build()`` (kept, the oldest of the kind dropped
        beyond its limit)."""
        entries = self._entries[kind]
        value = entries.get(pad)
        if value is None:
            while len(entries) >= self.LIMITS[kind]:
                del entries[next(iter(entries))]
            value = entries[pad] = build()
        return value

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._entries.values())
