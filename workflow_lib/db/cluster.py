"""Cluster a sequence database in linear time (Linclust-style), for the profile database.

HHblits (Remmert et al. 2012, Nat. Methods 9:173) searches Uniclust30, a database of clusters at 30% identity (each a
profile built from its members' alignment), not of single sequences. Uniclust is made with MMseqs2, whose
Linclust clusters in time linear in the database size; this module follows Linclust's plan:

1. **Minimisers.** Every window of :data:`KMER_LENGTH` residues in a reduced alphabet (:data:`REDUCED_GROUPS`,
   Murphy et al.'s 10 groups, so that conservative substitutions keep a k-mer) is hashed; each sequence keeps
   its :data:`KMERS_PER_SEQUENCE` windows with the smallest hashes (windows with X are skipped). Sequences that
   share a kept k-mer are likely to share a region.
2. **Centres.** The sequences that keep one k-mer form a group; its *centre* is the longest (ties: the
   earliest in the database). Every other member gets a candidate edge to the centre; a sequence keeps the
   :data:`MAX_CENTRES` centres it shares the most k-mers with. Edges: at most ``N · m``, never ``N²``.
3. **Alignment.** Each candidate is aligned to its centre (local sequence–profile Viterbi with the centre's
   single-sequence profile, :func:`~workflow_lib.aligner.align_targets`, members of one centre together) and
   accepted if the alignment has at least ``identity`` identical residues per aligned column and covers at
   least ``coverage`` of both sequences (MMseqs2's ``--cov-mode 0``, as Uniclust uses: multi-domain proteins do
   not join single-domain clusters). Pairs of more than :data:`MAX_PAIR_CELLS` DP cells are not aligned.
4. **Greedy assignment.** Sequences in order of decreasing length (ties: database order): one not yet
   assigned becomes a representative and takes every accepted, unassigned member of its edges. A member whose
   centre became someone else's member stays free and later founds or joins another cluster.

Cost: one sort of ``N · m`` hashes and at most ``N · MAX_CENTRES`` pairwise alignments (spread over ``cpus``
processes). Like Linclust, it misses pairs that share no kept k-mer, which at 30% identity are many: the
clusters are an under-merged (conservative) Uniclust30; what matters downstream is that a cluster never mixes
unrelated sequences.

Each accepted member's alignment to its representative is kept as an A3M row (:func:`cluster_rows`), from
which :mod:`workflow_lib.db.profiles` builds the cluster's profile.
"""

from __future__ import annotations

import logging
import multiprocessing
from dataclasses import dataclass

import numpy as np

from workflow_lib.aligner import align_targets, profile_from_sequence
from workflow_lib.aligner.lanes import resolve_cpus
from workflow_lib.errors import InputError
from workflow_lib.aligner.render import hit_row
from workflow_lib.seqio.alphabet import N_AMINO, decode, encode

REDUCED_GROUPS = ("LVIM", "C", "A", "G", "ST", "P", "FYW", "EDNQ", "KR", "H")
"""Murphy, Wallqvist & Levy (2000) 10-letter alphabet."""
KMER_LENGTH = 7
KMERS_PER_SEQUENCE = 20
MAX_CENTRES = 3
DEFAULT_IDENTITY = 0.3
DEFAULT_COVERAGE = 0.8
MINIMIZER_BLOCK = 4_000_000
"""Residues whose k-mers are hashed at once (about 100 MB of temporaries)."""
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
LOG = logging.getLogger(__name__)


def reduced_codes() -> np.ndarray:
    """uint8 ``[N_AMINO + 1]``: residue code → reduced letter, 255 for X and anything else."""
    table = np.full(256, 255, dtype=np.uint8)
    for group, letters in enumerate(REDUCED_GROUPS):
        for code in encode(letters):
            table[code] = group
    return table


_REDUCED = reduced_codes()


@dataclass(frozen=True)
class Clustering:
    """``representative[k]``: the index of sequence k's representative (itself for a representative);
    ``rows[k]``: sequence k's A3M row against its representative (its own sequence for a representative), which
    holds the member's aligned segment from 0-based residue ``starts[k]`` on; ``edges``: candidate edges found
    (for the manifest)."""

    representative: np.ndarray
    rows: list[str]
    starts: np.ndarray
    edges: int

    @property
    def n_clusters(self) -> int:
        return int(np.sum(self.representative == np.arange(self.representative.size)))


def minimizers(residues: np.ndarray, offsets: np.ndarray, *, k: int = KMER_LENGTH,
               per_sequence: int = KMERS_PER_SEQUENCE) -> tuple[np.ndarray, np.ndarray]:
    """``(sequence index, hash)`` of every sequence's ``per_sequence`` smallest-hash reduced k-mers (distinct
    hashes; fewer for a short sequence), sorted by sequence then hash."""
    residues = np.asarray(residues, dtype=np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    reduced = _REDUCED[residues].astype(np.uint64)
    n_windows = residues.size - k + 1
    if n_windows <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    code = np.zeros(n_windows, dtype=np.uint64)
    bad = np.zeros(n_windows, dtype=bool)
    for t in range(k):
        part = reduced[t:t + n_windows]
        bad |= part == 255
        code = code * np.uint64(len(REDUCED_GROUPS)) + np.where(part == 255, 0, part).astype(np.uint64)
    owner = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)[:n_windows]
    start = np.arange(n_windows, dtype=np.int64)
    inside = start + k <= offsets[owner + 1]
    keep = inside & ~bad
    with np.errstate(over="ignore"):
        hashes = (code[keep] + np.uint64(1)) * _HASH_MULTIPLIER
    hashes ^= hashes >> np.uint64(29)
    owner = owner[keep]
    order = np.lexsort((hashes, owner))
    owner, hashes = owner[order], hashes[order]
    distinct = np.ones(owner.size, dtype=bool)
    distinct[1:] = (owner[1:] != owner[:-1]) | (hashes[1:] != hashes[:-1])
    owner, hashes = owner[distinct], hashes[distinct]
    first = np.searchsorted(owner, owner, side="left")
    rank = np.arange(owner.size) - first
    chosen = rank < per_sequence
    return owner[chosen], hashes[chosen]


def candidate_edges(owner: np.ndarray, hashes: np.ndarray, lengths: np.ndarray, *,
                    max_centres: int = MAX_CENTRES) -> tuple[np.ndarray, np.ndarray]:
    """``(member, centre)`` pairs (step 2 of the module docstring), sorted by centre then member."""
    if owner.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # groups by hash; within a group the longest (then earliest) sequence first
    order = np.lexsort((owner, -lengths[owner], hashes))
    owner, hashes = owner[order], hashes[order]
    group_start = np.ones(owner.size, dtype=bool)
    group_start[1:] = hashes[1:] != hashes[:-1]
    centre = owner[np.maximum.accumulate(np.where(group_start, np.arange(owner.size), 0))]
    member_mask = owner != centre
    member, centre = owner[member_mask], centre[member_mask]
    if member.size == 0:
        return member, centre
    # count shared k-mers per (member, centre), keep each member's best max_centres
    pair = np.stack([member, centre], axis=1)
    unique, counts = np.unique(pair, axis=0, return_counts=True)
    order = np.lexsort((unique[:, 1], -counts, unique[:, 0]))
    unique = unique[order]
    first = np.searchsorted(unique[:, 0], unique[:, 0], side="left")
    kept = unique[(np.arange(len(unique)) - first) < max_centres]
    order = np.lexsort((kept[:, 0], kept[:, 1]))
    return kept[order, 0], kept[order, 1]


def accepted(hit, member: np.ndarray, centre: np.ndarray, *, identity: float, coverage: float) -> bool:
    """Whether one member–centre alignment (centre = the profile's sequence) meets the identity and two-sided
    coverage thresholds; X never counts as identical."""
    if hit.aligned_columns == 0:
        return False
    if (hit.query_end - hit.query_start) < coverage * centre.size:
        return False
    if (hit.target_end - hit.target_start) < coverage * member.size:
        return False
    a, b = centre[hit.pairs[:, 0]], member[hit.pairs[:, 1]]
    same = int(np.sum((a == b) & (a < N_AMINO)))
    return same >= identity * hit.aligned_columns


MAX_PAIR_CELLS = 25_000_000
"""Candidate pairs with more DP cells (centre × member length) are not aligned and stay in separate clusters: a
traced alignment keeps one byte per cell (two 35,000-residue titins would need 1.2 GB), and such giants are
rare (conservative, like every missed pair)."""
TASK_CENTRES = 2000
"""Centres (with their candidate members) per alignment task handed to a worker process."""
_TASK: dict = {}


def _fork_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _align_task(groups: list[np.ndarray]) -> dict[int, list[tuple[int, str, int]]]:
    """Align the candidate members of each centre group to their centre (step 3); the accepted ones with their
    A3M rows and start residues. Reads the clustering's arrays from :data:`_TASK` (inherited by fork)."""
    sequences, members, centres = _TASK["sequences"], _TASK["members"], _TASK["centres"]
    links: dict[int, list[tuple[int, str, int]]] = {}
    for block in groups:
        centre = int(centres[block[0]])
        centre_codes = sequences[centre]
        block = [k for k in block if centre_codes.size * sequences[int(members[k])].size <= MAX_PAIR_CELLS]
        if not block:
            continue
        profile = profile_from_sequence(centre_codes, name=str(centre))
        hits = align_targets(profile, [sequences[int(members[k])] for k in block], backtrace=True, cpus=1)
        for m, hit in zip(members[block], hits):
            member = sequences[int(m)]
            if accepted(hit, member, centre_codes, identity=_TASK["identity"], coverage=_TASK["coverage"]):
                row = hit_row(hit.states, hit.query_start + 1, hit.query_end,
                              decode(member[hit.target_start:hit.target_end]), centre_codes.size)
                links.setdefault(centre, []).append((int(m), row, hit.target_start))
    return links


def cluster_sequences(sequences: list[np.ndarray], *, identity: float = DEFAULT_IDENTITY,
                      coverage: float = DEFAULT_COVERAGE, k: int = KMER_LENGTH,
                      per_sequence: int = KMERS_PER_SEQUENCE, max_centres: int = MAX_CENTRES,
                      cpus: int | None = 1) -> Clustering:
    """Cluster encoded sequences (uint8 codes) as the module docstring describes; ``cpus`` processes align the
    candidate edges (the result does not depend on it)."""
    if not 0.0 < identity <= 1.0 or not 0.0 < coverage <= 1.0:
        raise InputError(f"identity and coverage must lie in (0, 1], got {identity} and {coverage}")
    n = len(sequences)
    lengths = np.array([s.size for s in sequences], dtype=np.int64)
    owners, hash_parts = [], []
    first = 0
    while first < n:   # blocks of about MINIMIZER_BLOCK residues: memory stays bounded at any database size
        last = int(np.searchsorted(np.cumsum(lengths[first:]), MINIMIZER_BLOCK)) + first + 1
        last = min(max(last, first + 1), n)
        block = sequences[first:last]
        offsets = np.concatenate([[0], np.cumsum(lengths[first:last])]).astype(np.int64)
        owner, hashes = minimizers(np.concatenate(block), offsets, k=k, per_sequence=per_sequence)
        owners.append(owner + first)
        hash_parts.append(hashes)
        first = last
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    hashes = np.concatenate(hash_parts) if hash_parts else np.zeros(0, np.uint64)
    members, centres = candidate_edges(owner, hashes, lengths, max_centres=max_centres)
    LOG.info("%d sequences: %d k-mers kept, %d candidate edges to align", n, owner.size, members.size)
    rows: list[str | None] = [None] * n
    boundaries = np.flatnonzero(np.diff(centres)) + 1 if centres.size else np.zeros(0, np.int64)
    groups = [block for block in np.split(np.arange(centres.size), boundaries) if block.size]
    tasks = [groups[k:k + TASK_CENTRES] for k in range(0, len(groups), TASK_CENTRES)]
    _TASK.update(sequences=sequences, members=members, centres=centres, identity=identity, coverage=coverage)
    links: dict[int, list[tuple[int, str, int]]] = {}
    workers = min(resolve_cpus(cpus), max(len(tasks), 1))
    pool = _fork_context().Pool(workers) if workers > 1 else None
    try:
        results = pool.imap(_align_task, tasks) if pool is not None else map(_align_task, tasks)
        done = 0
        for number, found in enumerate(results, start=1):
            links.update(found)
            done += sum(block.size for block in tasks[number - 1])
            if number % max(len(tasks) // 10, 1) == 0:
                LOG.info("aligned %d of %d candidate edges", done, members.size)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
        _TASK.clear()
    order = np.lexsort((np.arange(n), -lengths))
    representative = np.full(n, -1, dtype=np.int64)
    starts = np.zeros(n, dtype=np.int64)
    for index in order:
        index = int(index)
        if representative[index] != -1:
            continue
        representative[index] = index
        rows[index] = decode(sequences[index])
        for member, row, start in links.get(index, ()):
            if representative[member] == -1:
                representative[member] = index
                rows[member] = row
                starts[member] = start
    return Clustering(representative, rows, starts, int(members.size))

