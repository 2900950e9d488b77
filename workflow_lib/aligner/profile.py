"""Profile HMMs: the :class:`Profile` type and its construction from one sequence or from an MSA.

Profile HMMs with match, insert and delete states as in HHsearch (Söding 2005, Bioinformatics 21:951), with
PSI-BLAST's pseudocount rule (Altschul et al. 1997, Nucleic Acids Res. 25:3389):

- one sequence: the emissions of column ``i`` are row ``x_i`` of the substitution probabilities g(a, x)
  (:func:`~workflow_lib.aligner.substitution.substitution_probabilities`);
- an MSA: observed frequencies q_obs from cluster-based sequence weights, mixed with the expected
  substitution probabilities ``Σ_a q_obs(a)·g(a, x)`` by the PSI-BLAST rule
  ``p = (α·q_obs + β·g) / (α + β)`` with ``α = Neff_i − 1`` (the column's number of effective sequences
  minus the query) and ``β = 10`` (PSI-BLAST's constant), scaled by HH-suite's overall admixture ``a``:
  ``p = (1 − τ)·q_obs + τ·g`` with ``τ = a / (1 + ((Neff_i − 1)/b)^c)``, HH-suite's "diversity-dependent"
  admixture with ``b = β, c = 1``. ``a = 1`` is the PSI-BLAST rule exactly (how ``hhalign`` is run in the
  comparison tests, and HH-suite's default for substitution-matrix pseudocounts); the default :data:`ADMIX_A`
  ``= 0.9`` is the overall admixture HH-suite uses with its context-specific pseudocounts, so a
  one-sequence profile keeps 10% of its own residue instead of being the pure substitution matrix
  (chosen on Pfam sequences disjoint from the benchmark's queries).
- context-specific pseudocounts (optional, ``context=``): ``g_i`` predicted from the columns around ``i`` by a
  :class:`~workflow_lib.aligner.context.ContextModel` instead of ``Σ_a q_obs(a)·g(a, x)``, same admixture.
- transitions: weighted match/insert/delete transition counts of the MSA, then HH-suite's transition
  pseudocounts (:func:`add_transition_pseudocounts`, priors from HMMER via HH-suite).

Transitions are stored as linear probabilities ``[L + 1, 7]`` in the order of
:data:`~workflow_lib.aligner.transitions.TRANSITIONS`; row ``i`` holds the transitions out of column ``i``
(row 0 is the begin state), as in ``.hhm`` files. After pseudocounts, the gap rows carry HH-suite's gap-penalty
factors (``p**0.6``), so they need not sum to 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workflow_lib.aligner.context import ContextModel, one_hot_columns
from workflow_lib.aligner.device import compiled_available
from workflow_lib.aligner.identity_compiled import cluster_labels_compiled
from workflow_lib.aligner.substitution import check_background, substitution_probabilities
from workflow_lib.aligner.transitions import DD, DM, II, IM, MD, MI, MM
from workflow_lib.seqio.alphabet import GAP_CODE, N_AMINO, X_CODE, decode, encode

PSIBLAST_BETA = 10.0
"""β of the PSI-BLAST pseudocount rule (Altschul et al. 1997, Nucleic Acids Res. 25:3389)."""
ADMIX_A = 0.9
"""Overall pseudocount admixture ``a``: at most this fraction of a column's emissions comes from the pseudocounts.
0.9 is HH-suite's default for its context-specific pseudocounts (``-pc_hhm_contxt_a``; its substitution-matrix
pseudocounts default to 1.0). 1.0 turns a one-sequence profile into the pure substitution
matrix; 0.9 finds more remote homologs on Pfam (chosen on Pfam sequences disjoint
from the benchmark's queries)."""

CLUSTER_IDENTITY = 0.8
"""Sequences join a cluster when they share more than this fraction of identical residues with a member
(80%: near-identical rows count as one correlated occurrence in the sequence weights)."""

# HH-suite 3 defaults for transition pseudocounts (hhalign -h all: -gapb -gapd -gape -gapf -gapg -gaph -gapi);
# the priors 0.0286 (M->I, M->D) and 0.75 (I->I, D->D) are HMMER's, as HH-suite's source says.
GAP_B, GAP_D, GAP_E, GAP_F, GAP_G, GAP_H, GAP_I = 1.0, 0.15, 1.0, 0.6, 0.6, 0.6, 0.6
_FLT_MIN = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True, eq=False)
class Profile:
    """A profile HMM over L match columns (arrays are read-only).

    - ``sequence``: uint8 ``[L]`` residue codes of the query / seed sequence (X where unknown);
    - ``emissions``: float32 ``[L, 20]`` match-state emission probabilities (rows sum to 1);
    - ``transitions``: float32 ``[L + 1, 7]`` linear transition probabilities in the order of
      :data:`~workflow_lib.aligner.transitions.TRANSITIONS`, row 0 = begin;
    - ``column_neff``: float32 ``[L + 1, 3]`` Neff of the M, I and D states per column (row 0 = begin);
    - ``neff``: the profile's overall number of effective sequences (mean column Neff);
    - ``background``: float32 ``[20]`` the null model f(a);
    - ``has_pseudocounts``: whether emissions and transitions include pseudocounts (``hhmake`` writes
      profiles without them; :func:`add_pseudocounts` adds them once);
    - ``ss_pred`` / ``ss_conf``: optional predicted secondary structure (carried, not scored).
    """

    name: str
    sequence: np.ndarray
    emissions: np.ndarray
    transitions: np.ndarray
    column_neff: np.ndarray
    neff: float
    background: np.ndarray
    has_pseudocounts: bool
    description: str = ""
    consensus: str | None = None
    ss_pred: str | None = None
    ss_conf: str | None = None

    def __post_init__(self) -> None:
        length = len(self.sequence)
        if length == 0:
            raise ValueError(f"profile {self.name!r} has no columns")
        checks = (("sequence", np.uint8, (length,)), ("emissions", np.float32, (length, N_AMINO)),
                  ("transitions", np.float32, (length + 1, 7)), ("column_neff", np.float32, (length + 1, 3)),
                  ("background", np.float32, (N_AMINO,)))
        for field_name, dtype, shape in checks:
            value = getattr(self, field_name)
            if not isinstance(value, np.ndarray) or value.dtype != dtype or value.shape != shape:
                got = (getattr(value, "dtype", type(value)), getattr(value, "shape", None))
                raise ValueError(f"profile {self.name!r}: {field_name} must be {np.dtype(dtype)} {shape}, got {got}")
            if field_name != "sequence" and not np.all(np.isfinite(value)):
                raise ValueError(f"profile {self.name!r}: {field_name} has non-finite values")
            value.setflags(write=False)
        if self.emissions.min() < 0 or self.transitions.min() < 0:
            raise ValueError(f"profile {self.name!r}: probabilities must be non-negative")

    @property
    def length(self) -> int:
        return int(self.sequence.shape[0])

    @property
    def query(self) -> str:
        return decode(self.sequence)


def _frozen_float(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32)


def encode_query(sequence: str | np.ndarray) -> np.ndarray:
    """A residue string or code array as uint8 codes; gaps are rejected (a profile's query has none)."""
    codes = encode(sequence) if isinstance(sequence, str) else np.asarray(sequence, dtype=np.uint8)
    if codes.ndim != 1 or codes.size == 0:
        raise ValueError("a query sequence must be a non-empty 1-D sequence")
    if np.any(codes >= GAP_CODE):
        raise ValueError("a query sequence may not contain gaps")
    return codes


def profile_from_sequence(sequence: str | np.ndarray, *, name: str = "query", background: np.ndarray | None = None,
                          description: str = "", context: ContextModel | None = None) -> Profile:
    """A profile of one sequence: emissions = ``(1 − a)·onehot + a·g`` (the residue's substitution probabilities
    mixed with the residue itself; X: background), ``a`` = :data:`ADMIX_A`.

    Equivalent to :func:`profile_from_alignment` on a one-row alignment (Neff = 1, so α = 0 and τ = a);
    transitions are the pseudocount priors. ``context``: context-specific pseudocounts instead of ``g``.
    """
    codes = encode_query(sequence)
    length = codes.size
    f = check_background(background).astype(np.float32)
    counts = one_hot_columns(codes, f).astype(np.float32)
    transitions = np.zeros((length + 1, 7), dtype=np.float32)
    transitions[:, [MM, IM, DM]] = 1.0
    column_neff = np.zeros((length + 1, 3), dtype=np.float32)
    column_neff[:, 0] = 1.0
    raw = Profile(name, codes.copy(), counts, transitions, column_neff, 1.0, f, False, description)
    return add_pseudocounts(raw, context=context)


def add_pseudocounts(profile: Profile, *, beta: float = PSIBLAST_BETA, admix: float = ADMIX_A, gap_b: float = GAP_B,
                     gap_d: float = GAP_D, gap_e: float = GAP_E, gap_f: float = GAP_F, gap_g: float = GAP_G,
                     gap_h: float = GAP_H, gap_i: float = GAP_I, context: ContextModel | None = None) -> Profile:
    """Emission pseudocounts by the PSI-BLAST α/β rule (scaled by ``admix``) and HH-suite's transition pseudocounts.

    Emissions: ``p_i = (1 − τ_i)·f_i + τ_i·g_i`` with ``g_i(x) = Σ_a f_i(a)·g(a, x)`` and
    ``τ_i = admix · β / (α_i + β)``, ``α_i = max(Neff_M[i] − 1, 0)``; ``admix = 1`` is the PSI-BLAST rule
    ``(α_i·f_i + β·g_i) / (α_i + β)``. With a ``context`` model, ``g_i`` is its prediction from the observed
    columns around ``i`` instead (context-specific pseudocounts, :mod:`workflow_lib.aligner.context`).
    Raises ValueError when the profile has pseudocounts already.
    """
    if profile.has_pseudocounts:
        raise ValueError(f"profile {profile.name!r} already has pseudocounts")
    if beta <= 0:
        raise ValueError("beta must be positive")
    if not 0 < admix <= 1:
        raise ValueError(f"admix must be in (0, 1], got {admix}")
    substitution = substitution_probabilities(profile.background)
    observed = profile.emissions.astype(np.float64)
    expected = context.predict(observed) if context is not None else observed @ substitution
    alpha = np.maximum(profile.column_neff[1:, 0].astype(np.float64) - 1.0, 0.0)[:, None]
    tau = admix * beta / (alpha + beta)
    emissions = (1.0 - tau) * observed + tau * expected
    emissions /= emissions.sum(axis=1, keepdims=True)
    transitions = add_transition_pseudocounts(profile.transitions, profile.column_neff, gap_b=gap_b, gap_d=gap_d,
                                              gap_e=gap_e, gap_f=gap_f, gap_g=gap_g, gap_h=gap_h, gap_i=gap_i)
    return replace(profile, emissions=_frozen_float(emissions), transitions=_frozen_float(transitions),
                   has_pseudocounts=True)


def add_transition_pseudocounts(transitions: np.ndarray, column_neff: np.ndarray, *, gap_b: float = GAP_B,
                                gap_d: float = GAP_D, gap_e: float = GAP_E, gap_f: float = GAP_F,
                                gap_g: float = GAP_G, gap_h: float = GAP_H, gap_i: float = GAP_I) -> np.ndarray:
    """HH-suite 3's ``HMM::AddTransitionPseudocounts`` on linear probabilities ``[L + 1, 7]`` → ``[L + 1, 7]``.

    Per column: ``p ∝ w·t + gap_b·prior`` with ``w = Neff_M − 1`` (M rows), ``Neff_I`` (I rows), ``Neff_D``
    (D rows); priors M->I = M->D = ``gap_d``·0.0286, I->I = D->D = ``gap_e``·0.75. The gap-open and
    gap-extend rows are then raised to the powers ``gap_f`` (M->D), ``gap_g`` (M->I), ``gap_h`` (D->D),
    ``gap_i`` (I->I), i.e. their log-probabilities are scaled, as HH-suite does. The begin row has no
    M->I/M->D, the last column no M->I, M->D, D->D.
    """
    t = np.asarray(transitions, dtype=np.float64)
    neff = np.asarray(column_neff, dtype=np.float64)
    length = t.shape[0] - 1
    p_md = p_mi = gap_d * 0.0286
    p_mm = 1.0 - p_md - p_mi
    p_ii = p_dd = gap_e * 0.75
    p_im = p_dm = 1.0 - p_ii
    out = np.empty_like(t)
    weight_m = np.maximum(neff[:, 0] - 1.0, 0.0)
    m0 = weight_m * t[:, MM] + gap_b * p_mm
    m1 = weight_m * t[:, MD] + gap_b * p_md
    m2 = weight_m * t[:, MI] + gap_b * p_mi
    m1[[0, length]] = 0.0
    m2[[0, length]] = 0.0
    total = m0 + m1 + m2 + _FLT_MIN
    out[:, MM] = m0 / total
    out[:, MD] = (m1 / total) ** gap_f
    out[:, MI] = (m2 / total) ** gap_g
    i0 = neff[:, 1] * t[:, IM] + gap_b * p_im
    i1 = neff[:, 1] * t[:, II] + gap_b * p_ii
    total = i0 + i1 + _FLT_MIN
    out[:, IM] = i0 / total
    out[:, II] = (i1 / total) ** gap_i
    d0 = neff[:, 2] * t[:, DM] + gap_b * p_dm
    d1 = neff[:, 2] * t[:, DD] + gap_b * p_dd
    d1[length] = 0.0
    total = d0 + d1 + _FLT_MIN
    out[:, DM] = d0 / total
    out[:, DD] = (d1 / total) ** gap_h
    return out


def cluster_sequences(matches: np.ndarray, identity: float = CLUSTER_IDENTITY) -> np.ndarray:
    """Single-linkage clusters of MSA rows: int64 ``[N]`` cluster labels (0..C-1, in order of first member).

    ``matches``: uint8 ``[N, L]``. Two rows are linked when, over the columns where both have a residue,
    more than ``identity`` of those residues are identical, so a sequence joins a cluster when it is that
    similar to at least one sequence in the cluster.
    O(N²·L) byte comparisons, done one row against all earlier rows at a time.
    """
    matches = np.asarray(matches)
    if matches.ndim != 2:
        raise ValueError("matches must be [N, L]")
    count = matches.shape[0]
    if compiled_available():
        return _rank_labels(cluster_labels_compiled(matches, GAP_CODE, identity))
    residue = matches < GAP_CODE
    labels = np.arange(count)
    for row in range(1, count):
        both = residue[:row] & residue[row]
        shared = both.sum(axis=1)
        same = ((matches[:row] == matches[row]) & both).sum(axis=1)
        linked = np.flatnonzero((shared > 0) & (same > identity * shared))
        if linked.size:
            merged = np.unique(labels[linked])
            target = merged.min()
            labels[np.isin(labels, merged)] = target
            labels[row] = target
    return _rank_labels(labels)


def _rank_labels(labels: np.ndarray) -> np.ndarray:
    """Cluster labels renumbered 0, 1, … in the order of each cluster's first row."""
    count = labels.size
    _, dense = np.unique(labels, return_inverse=True)
    order = np.full(dense.max() + 1, count)
    np.minimum.at(order, dense, np.arange(count))
    rank = np.argsort(np.argsort(order))
    return rank[dense]


def observed_frequencies(matches: np.ndarray, labels: np.ndarray, background: np.ndarray) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """q_obs and the number of clusters per column (the cluster-weighted observed frequencies).

    ``q_obs_i(a) = (1 / N_clusters,i) · Σ_n count_n,i(a) / size(C_i(n))``, where ``C_i(n)`` is the part of
    n's cluster that has a residue (not X, not a gap) in column i. Returns float64 ``[L, 20]`` (columns
    without any residue get ``background``) and float64 ``[L]`` cluster counts.
    """
    matches = np.asarray(matches)
    n_rows, length = matches.shape
    known = matches < N_AMINO
    n_clusters = int(labels.max()) + 1
    members = np.zeros((n_clusters, length), dtype=np.float64)
    np.add.at(members, labels, known.astype(np.float64))
    size = members[labels]  # [N, L]
    weight = np.where(known, 1.0 / np.maximum(size, 1.0), 0.0)
    columns = np.broadcast_to(np.arange(length), (n_rows, length))
    index = (columns * N_AMINO + np.where(known, matches, 0))[known]
    frequencies = np.bincount(index, weights=weight[known], minlength=length * N_AMINO).reshape(length, N_AMINO)
    clusters_per_column = (members > 0).sum(axis=0).astype(np.float64)
    empty = clusters_per_column == 0
    frequencies[~empty] /= clusters_per_column[~empty, None]
    frequencies[empty] = background
    return frequencies, clusters_per_column


def column_neff_from_frequencies(frequencies: np.ndarray) -> np.ndarray:
    """Neff of each column as HH-suite defines it: ``exp(−Σ_a f(a)·ln f(a))``, float64 ``[L]`` (1 .. 20)."""
    f = np.asarray(frequencies, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(f > 0, f * np.log(f), 0.0).sum(axis=1)
    return np.exp(entropy)


def transition_counts(matches: np.ndarray, insertions: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """Weighted transition frequencies ``[L + 1, 7]`` (rows normalised per source state) and state weights.

    Only the span of each row between its first and last match residue counts (end gaps of fragments are
    not deletions). After an insert run the next state counts as I->M (Plan 7 has no I->D); inserts after a
    deletion are ignored (no D->I). Also returns the total weight in the M, I and D states per column
    (float64 ``[L + 1, 3]``), from which Neff_I and Neff_D are scaled.
    """
    residue = np.asarray(matches) != GAP_CODE
    n_rows, length = residue.shape
    w = np.asarray(weights, dtype=np.float64)[:, None]
    columns = np.arange(length)
    has_any = residue.any(axis=1)
    first = np.where(has_any, residue.argmax(axis=1), length)
    last = np.where(has_any, length - 1 - residue[:, ::-1].argmax(axis=1), -1)
    counts = np.zeros((length + 1, 7), dtype=np.float64)
    states = np.zeros((length + 1, 3), dtype=np.float64)
    if length > 1:
        inside = (columns[None, :-1] >= first[:, None]) & (columns[None, 1:] <= last[:, None])  # [N, L-1]
        here, after = residue[:, :-1], residue[:, 1:]
        inserted = np.asarray(insertions)[:, 1:length].astype(np.float64)
        has_insert = inserted > 0
        match_here = inside & here
        delete_here = inside & ~here
        rows = slice(1, length)
        counts[rows, MI] = (w * (match_here & has_insert)).sum(axis=0)
        counts[rows, II] = (w * np.where(match_here & has_insert, inserted - 1.0, 0.0)).sum(axis=0)
        counts[rows, IM] = counts[rows, MI]
        counts[rows, MM] = (w * (match_here & ~has_insert & after)).sum(axis=0)
        counts[rows, MD] = (w * (match_here & ~has_insert & ~after)).sum(axis=0)
        counts[rows, DM] = (w * (delete_here & after)).sum(axis=0)
        counts[rows, DD] = (w * (delete_here & ~after)).sum(axis=0)
        states[rows, 0] = (w * match_here).sum(axis=0)
        states[rows, 1] = (w * (match_here & has_insert)).sum(axis=0)
        states[rows, 2] = (w * delete_here).sum(axis=0)
    probabilities = np.zeros_like(counts)
    for source, targets, default in (((MM, MI, MD), (MM, MI, MD), MM), ((IM, II), (IM, II), IM),
                                     ((DM, DD), (DM, DD), DM)):
        total = counts[:, source].sum(axis=1)
        ok = total > 0
        probabilities[np.ix_(ok, targets)] = counts[np.ix_(ok, targets)] / total[ok, None]
        probabilities[~ok, default] = 1.0
    return probabilities, states


def alignment_neff(matches: np.ndarray, *, identity: float = CLUSTER_IDENTITY,
                   background: np.ndarray | None = None) -> float:
    """The :attr:`Profile.neff` that :func:`profile_from_alignment` gives an MSA's ``matches`` (mean column Neff
    of the cluster-weighted q_obs), without building the rest of the profile."""
    labels = cluster_sequences(matches, identity)
    frequencies, _ = observed_frequencies(matches, labels, check_background(background))
    return float(column_neff_from_frequencies(frequencies).mean())


def profile_from_alignment(alignment, *, name: str | None = None, identity: float = CLUSTER_IDENTITY,
                           pseudocounts: bool = True, beta: float = PSIBLAST_BETA, admix: float = ADMIX_A,
                           background: np.ndarray | None = None, context: ContextModel | None = None) -> Profile:
    """A profile of an MSA (:class:`workflow_lib.seqio.msa.Alignment`; row 0 is the query).

    Emissions: q_obs from cluster weights (:func:`cluster_sequences`, :func:`observed_frequencies`), then the
    PSI-BLAST mix scaled by ``admix`` (when ``pseudocounts``, :func:`add_pseudocounts`). Transitions:
    :func:`transition_counts` with per-sequence weights 1/|cluster|, then HH-suite's transition pseudocounts.
    Neff per column: :func:`column_neff_from_frequencies` of q_obs; Neff_I / Neff_D: Neff_M times the fraction
    of weight in the I / D state.
    """
    matches = np.asarray(alignment.matches)
    insertions = np.asarray(alignment.insertions)
    if matches.ndim != 2 or insertions.shape != (matches.shape[0], matches.shape[1] + 1):
        raise ValueError("alignment arrays have inconsistent shapes")
    f = check_background(background)
    labels = cluster_sequences(matches, identity)
    frequencies, _ = observed_frequencies(matches, labels, f)
    neff_m = column_neff_from_frequencies(frequencies)
    cluster_size = np.bincount(labels)[labels].astype(np.float64)
    transitions, state_weight = transition_counts(matches, insertions, 1.0 / cluster_size)
    column_neff = np.zeros((matches.shape[1] + 1, 3), dtype=np.float64)
    column_neff[1:, 0] = neff_m
    column_neff[0, 0] = neff_m.mean()
    in_match = np.maximum(state_weight[:, 0] + state_weight[:, 2], 1e-12)
    column_neff[:, 1] = column_neff[:, 0] * state_weight[:, 1] / in_match
    column_neff[:, 2] = column_neff[:, 0] * state_weight[:, 2] / in_match
    query = matches[0].copy()
    query[query >= GAP_CODE] = X_CODE  # a query deletion (rare in A3M) becomes X in the seed sequence
    raw = Profile(name or alignment.names[0], query, _frozen_float(frequencies), _frozen_float(transitions),
                  _frozen_float(column_neff), float(neff_m.mean()), f.astype(np.float32), False,
                  description=alignment.descriptions[0] if alignment.descriptions else "",
                  ss_pred=alignment.annotation("ss_pred") if hasattr(alignment, "annotation") else None,
                  ss_conf=alignment.annotation("ss_conf") if hasattr(alignment, "annotation") else None)
    return add_pseudocounts(raw, beta=beta, admix=admix, context=context) if pseudocounts else raw
