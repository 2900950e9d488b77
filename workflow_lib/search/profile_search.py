"""Searching a profile database (HHblits-style): query profile against cluster profiles, clusters expanded.

HHblits (Remmert et al. 2012, Nat. Methods 9:173: prefilter, then HMM-HMM Viterbi against the database's
cluster profiles, accepted clusters contribute their member sequences to the query MSA); the HMM-HMM Viterbi of
HHsearch (Söding 2005, Bioinformatics 21:951). Per query profile and iteration (:func:`search_profile_query`):

1. **Prefilter** on the representatives' sequences (the k-mer index of each shard): the sequence search's
   gapless prefilter (:func:`~workflow_lib.search.gapless.gapless_prefilter`) with the sensitive or the fast
   seeds (``sensitive``, as the sequence search's setting) and the sensitive gapless pass; the
   ``max_candidates`` best gapless scores of the whole database go on (as HHblits passes a fixed number).
2. **Null model**: ``decoys`` column-shuffled cluster profiles of the database
   (:func:`~workflow_lib.templates.calibration.decoy_profiles`, spread evenly over the first shard), scored like
   the candidates; a Gumbel with the length term of :mod:`workflow_lib.templates.calibration` is fitted to
   their scores, per query profile (the fit the template search uses).
3. **Profile–profile Viterbi** scores of the candidates (:func:`~workflow_lib.aligner.hmm_compiled.hmm_scores`,
   compiled, no traceback); ``E = N_clusters · P(S ≥ s)``; clusters with ``E ≤ max_evalue`` are aligned again
   with traceback (:func:`~workflow_lib.aligner.align_profiles`, same score).
4. **Expansion**: every member of a reported cluster becomes a hit row with the cluster's E-value and score; its
   alignment to the query is its A3M row against the representative composed with the query–representative
   alignment (:func:`compose_member`). Query columns the representative has no column for are deletions; member
   residues that fall outside the query's columns are insertions.

The rows have the sequence search's columns (:data:`~workflow_lib.search.engine.HIT_COLUMNS`), so the
iterative MSA assembly (:func:`~workflow_lib.search.iterative.iterations`) runs on them unchanged
(:func:`build_profile_msas`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.aligner import Profile
from workflow_lib.aligner.hmm_compiled import hmm_scores
from workflow_lib.aligner.lanes import align_profiles
from workflow_lib.aligner.scores import SCALE, pair_scores
from workflow_lib.aligner.substitution import DEFAULT_BACKGROUND
from workflow_lib.db.kmer_index import index_is_spaced
from workflow_lib.db.profiles import ProfileShard, load_profile_shard, read_profile_manifest
from workflow_lib.errors import InputError
from workflow_lib.search.engine import HIT_COLUMNS, shard_seed_budget
from workflow_lib.search.gapless import gapless_prefilter
from workflow_lib.search.iterative import MsaResult, run_iterations
from workflow_lib.search.seeds import profile_scores_bits
from workflow_lib.search.settings import (FIRST_ITERATION_PREFILTER, SENSITIVE_PREFILTER, MsaSettings,
                                          default_kmer_threshold)
from workflow_lib.seqio.alphabet import encode
from workflow_lib.aligner.calibration import decoy_profiles, fit_gumbel

DEFAULT_MAX_CANDIDATES = 300
DEFAULT_DECOYS = 100
DEFAULT_MAX_EVALUE = 10.0


@dataclass(frozen=True)
class ProfileSearchSettings:
    """Thresholds of one profile-database search pass (module docstring)."""

    max_candidates: int = DEFAULT_MAX_CANDIDATES
    decoys: int = DEFAULT_DECOYS
    max_evalue: float = DEFAULT_MAX_EVALUE
    seed: int = 0
    sensitive: bool = True
    """The sensitive prefilter's seeds (``kmer_slack``, ``diagonals_per_target``); False: the fast prefilter's
    (``--no-sensitive``), fewer seeds at a third of the cost. The gapless pass is the sensitive one either way,
    as the candidates are the best ``max_candidates`` scores."""

    @property
    def prefilter(self) -> dict:
        seeds = SENSITIVE_PREFILTER if self.sensitive else FIRST_ITERATION_PREFILTER
        return {**seeds, "gapless_offset": SENSITIVE_PREFILTER["gapless_offset"]}

    def __post_init__(self) -> None:
        if self.max_candidates < 1 or self.decoys < 20 or not self.max_evalue > 0:
            raise InputError("profile search needs max_candidates >= 1, decoys >= 20 and max_evalue > 0, got "
                             f"{self.max_candidates}, {self.decoys}, {self.max_evalue}")


class ProfileDatabase:
    """A profile database (``trackfold db cluster``), its shards loaded once."""

    def __init__(self, db_dir: str | Path) -> None:
        self.path = Path(db_dir)
        self.manifest = read_profile_manifest(self.path)
        self.shards: list[ProfileShard] = [load_profile_shard(self.path, k, self.manifest)
                                           for k in range(len(self.manifest["shards"]))]
        self._decoys: list[Profile] | None = None
        self._decoy_scores: list = []
        self._decoy_count = 0

    @property
    def clusters(self) -> int:
        return int(self.manifest["clusters"])

    @property
    def name(self) -> str:
        return self.path.name

    def decoys(self, count: int, seed: int) -> list[Profile]:
        """``count`` shuffled cluster profiles (the same for every query)."""
        if self._decoys is None or self._decoy_count != count:
            first = self.shards[0]
            picks = np.unique(np.linspace(0, len(first) - 1, num=min(len(first), count)).astype(np.int64))
            self._decoys = decoy_profiles([first.profile(int(k)) for k in picks], count, seed=seed)
            self._decoy_scores = [pair_scores(d, DEFAULT_BACKGROUND) for d in self._decoys]
            self._decoy_count = count
        return self._decoys

    def decoy_scores(self, count: int, seed: int) -> list:
        """The profile–profile tables of :meth:`decoys` against the default background."""
        self.decoys(count, seed)
        return self._decoy_scores


def prefilter_candidates(query: Profile, database: ProfileDatabase, max_candidates: int,
                         prefilter: dict = SENSITIVE_PREFILTER) -> list[tuple[int, int, float]]:
    """``(shard, cluster, gapless bits)`` of the ``max_candidates`` best-scoring representatives (``prefilter``:
    ``kmer_slack``, ``diagonals_per_target``, ``gapless_offset`` and ``seed_budget`` as
    :data:`SENSITIVE_PREFILTER`; the budget counts the representatives' residues)."""
    scores = profile_scores_bits(query.emissions, query.background)
    found = []
    residues = [int(shard.arrays["offsets"][-1]) for shard in database.shards]
    total = sum(residues)
    for number, shard in enumerate(database.shards):
        index = shard.index
        threshold = default_kmer_threshold(int(index["k"]), prefilter["kmer_slack"], spaced=index_is_spaced(index))
        passed = gapless_prefilter(scores, index, shard.arrays["residues"], shard.arrays["offsets"],
                                   kmer_threshold=threshold, diagonals_per_target=prefilter["diagonals_per_target"],
                                   offset_bits=prefilter["gapless_offset"],
                                   max_seeds=shard_seed_budget(prefilter.get("seed_budget", 0.0), query.length,
                                                               residues[number], total))
        found.extend((number, int(k), float(s)) for k, s in zip(passed.sequence, passed.score))
    found.sort(key=lambda item: (-item[2], item[0], item[1]))
    return found[:max_candidates]


def parse_row(row: str) -> tuple[list[str], list[str]]:
    """An A3M row → (per match column: the residue or ``-``; per match column: the lower-case residues inserted
    before it), plus the insertions after the last column as a final entry of the second list."""
    columns: list[str] = []
    inserts: list[str] = [""]
    for char in row:
        if char.islower():
            inserts[-1] += char
        else:
            columns.append(char)
            inserts.append("")
    return columns, inserts


def compose_member(pairs: np.ndarray, row: str, query_codes: np.ndarray) -> tuple | None:
    """One member's hit fields from the query–representative match pairs (``[K, 2]``, 0-based, increasing) and the
    member's A3M row against the representative: ``(states, qstart, qend, tstart, tend, tseq, identity,
    aligned)`` with 1-based inclusive ranges, or None when the member has no residue in an aligned column.

    Between two aligned pairs, the query columns without a representative column are ``D`` steps and the
    member's residues in representative columns (or insertions) without a query column are ``I`` steps."""
    columns, inserts = parse_row(row)
    residue_before = np.cumsum([len(inserts[0])] + [(c != "-") + len(inserts[k + 1]) for k, c in enumerate(columns)])
    steps: list[str] = []
    chars: list[str] = []
    for n, (i, j) in enumerate(pairs.tolist()):
        if n > 0:
            pi, pj = pairs[n - 1].tolist()
            steps.extend("D" * (i - pi - 1))
            chars.extend("" for _ in range(i - pi - 1))
            between = inserts[pj + 1] + "".join((columns[c] if columns[c] != "-" else "") + inserts[c + 1]
                                                for c in range(pj + 1, j))
            steps.extend("I" * len(between))
            chars.extend(between.upper())
        steps.append("D" if columns[j] == "-" else "M")
        chars.append("" if columns[j] == "-" else columns[j])
    matches = [n for n, state in enumerate(steps) if state == "M"]
    if not matches:
        return None
    first, last = matches[0], matches[-1]
    match_pairs = [pair for pair in pairs.tolist() if columns[pair[1]] != "-"]
    (q_first, j_first), (q_last, _) = match_pairs[0], match_pairs[-1]
    tseq = "".join(chars[first:last + 1])
    member = encode(tseq.replace("-", ""))
    identical = sum(int(encode(columns[j])[0] == query_codes[i]) for i, j in match_pairs)
    tstart = int(residue_before[j_first]) + 1
    return ("".join(steps[first:last + 1]), q_first + 1, q_last + 1, tstart, tstart + member.size - 1, tseq,
            identical / len(match_pairs), len(match_pairs))


def search_profile_query(name: str, query: Profile, database: ProfileDatabase,
                         settings: ProfileSearchSettings = ProfileSearchSettings(), *,
                         iteration: int = 1) -> pd.DataFrame:
    """Steps 1–4 of the module docstring for one query profile: hit rows (:data:`HIT_COLUMNS`), best first."""
    candidates = prefilter_candidates(query, database, settings.max_candidates, settings.prefilter)
    if not candidates:
        return pd.DataFrame(columns=list(HIT_COLUMNS))
    decoys = database.decoys(settings.decoys, settings.seed)
    default_background = np.allclose(query.background, DEFAULT_BACKGROUND)
    decoy_tables = database.decoy_scores(settings.decoys, settings.seed) if default_background else decoys
    null = fit_gumbel(hmm_scores(query, decoy_tables) / SCALE, np.array([d.length for d in decoys]))
    profiles = [database.shards[s].profile(k) for s, k, _ in candidates]
    tables = [database.shards[s].scores(k) for s, k, _ in candidates] if default_background else profiles
    bits = hmm_scores(query, tables) / SCALE
    lengths = np.array([p.length for p in profiles], dtype=np.float64)
    evalues = database.clusters * null.pvalue(bits, lengths)
    reported = [n for n in np.argsort(evalues, kind="stable") if evalues[n] <= settings.max_evalue]
    if not reported:
        return pd.DataFrame(columns=list(HIT_COLUMNS))
    hits = align_profiles(query, [profiles[n] for n in reported], correlation=False)
    rows = []
    for n, hit in zip(reported, hits):
        shard_number, cluster, _ = candidates[n]
        shard = database.shards[shard_number]
        start, stop = shard.member_span(cluster)
        pairs = hit.pairs
        if pairs.shape[0] == 0:
            continue
        members = shard.members.iloc[start:stop]
        for member_id, row, offset, length in zip(members["id"], members["row"], members["start"],
                                                  members["length"]):
            composed = compose_member(pairs, row, query.sequence)
            if composed is None:
                continue
            states, qstart, qend, tstart, tend, tseq, identity, aligned = composed
            rows.append((name, member_id, float(evalues[n]), float(bits[n]), qstart, qend, int(tstart + offset),
                         int(tend + offset), query.length, int(length), identity, aligned, states, iteration,
                         database.name, tseq))
    frame = pd.DataFrame(rows, columns=list(HIT_COLUMNS))
    return frame.sort_values(["evalue", "bitscore", "target"], ascending=[True, False, True],
                             kind="mergesort").reset_index(drop=True)


def build_profile_msas(records, db_dir: str | Path, settings: MsaSettings | None = None,
                       search_settings: ProfileSearchSettings | None = None, *,
                       on_iteration: Callable[[int, int], None] | None = None) -> list[MsaResult]:
    """Iterative MSAs against a profile database: :func:`~workflow_lib.search.iterative.run_iterations` with
    :func:`search_profile_query` as the search step (one :class:`MsaResult` per record, in order)."""
    settings = settings or MsaSettings()
    search_settings = search_settings or ProfileSearchSettings()
    database = ProfileDatabase(db_dir)

    def search(names: list[str], profiles: list[Profile], iteration: int) -> tuple[pd.DataFrame, dict[str, float]]:
        frames, seconds = [], {}
        for name, profile in zip(names, profiles):
            started = time.perf_counter()
            frames.append(search_profile_query(name, profile, database, search_settings, iteration=iteration))
            seconds[name] = time.perf_counter() - started
        frames = [f for f in frames if not f.empty]
        hits = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(HIT_COLUMNS))
        return hits, seconds

    return run_iterations(records, search, settings, on_iteration=on_iteration)
