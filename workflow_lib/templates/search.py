"""HMM-HMM template search: the query profile against every template profile (HHsearch's template search with
its HMM-HMM Viterbi, Söding 2005, Bioinformatics 21:951).

:func:`search_templates`, per query profile (from its A3M, :func:`~workflow_lib.aligner.profile_from_alignment`):

1. **Candidates**: against a database of more than :data:`PREFILTER_MIN_TEMPLATES` templates, the prefilter's
   (below); otherwise every template.
2. **Null model**: the query against ``n_decoys`` shuffled templates (:mod:`workflow_lib.templates.calibration`;
   made once per loaded database, :meth:`~workflow_lib.templates.database.TemplateDatabase.decoys`), a Gumbel
   with a length term fitted to their scores.
3. **Scores**: the best local profile–profile Viterbi score of every candidate, without traceback
   (:func:`~workflow_lib.aligner.hmm_compiled.hmm_scores`, compiled; secondary-structure score off as documented
   in :mod:`workflow_lib.aligner.viterbi_hmm`), the same score as the decoys'; ``E = N · P(S ≥ s)`` with ``N``
   the number of templates in the database. HH-suite3 (Steinegger et al. 2019, BMC Bioinformatics 20:473) and
   the profile-database search (:mod:`workflow_lib.search.profile_search`) work the same way: score many
   profiles, trace the few that are reported.
4. **Traceback**: the candidates in the order of the table (ascending E-value, then descending bit score, then
   template ID) are aligned with traceback (:func:`~workflow_lib.aligner.align_profiles`, ``correlation=False``,
   the same Viterbi score) in batches — first the best ``max_hits + TRACE_MARGIN``, then batches twice as
   large while fewer than ``max_hits`` have at least ``min_aligned`` aligned columns — and the
   first ``max_hits`` that do are the :data:`~workflow_lib.schemas.templates.TEMPLATE_HITS` table. As the order
   is known before any traceback, the table is the one that tracing every candidate would give.

``bitscore`` is that Viterbi score in bits and the E-values come from it. HHsearch adds its correlation score
(``0.1 · Σ_{d=1..4} Σ_k s_k s_{k+d}`` along the alignment;
:func:`~workflow_lib.aligner.viterbi_hmm.correlation_score`) to the score it calibrates. It needs the alignment,
so calibrating it would need a traceback of every decoy and every candidate; it is left out of both the null
and the hits, which therefore share one score definition.

**Prefilter** (HHblits, Remmert et al. 2012, Nat. Methods 9:173, runs its prefilter before Viterbi on every
database, PDB70 included): only the candidates of the sequence search's gapless prefilter
(:func:`~workflow_lib.search.gapless.gapless_prefilter`: the query profile's k-mer seeds against the templates'
profile sequences, the best diagonals of each template scored exactly) reach the Viterbi stage, at the
*sensitive* search setting's thresholds (0.5 bits of seed slack, 8 diagonals per template, pass above
0 + log2(Lq · Lt) bits) and at most ``max_candidates`` of them, best gapless score first
(:data:`DEFAULT_MAX_CANDIDATES`; benchmarks/RESULTS.md, "Template search: prefilter against a full scan of
19,887 PDB chains"). E-values still count every template of the database (``db_size``), so they keep their
meaning. ``prefilter=False`` (or ``trackfold templates search --no-prefilter``) scans every template.

Columns computed from the alignment:

- ``identity``: aligned pairs with the same residue / aligned columns (query residue vs template profile
  sequence residue; X never counts as identical);
- ``similarity``: aligned pairs whose substitution log-odds ``log(g(a, b) / f(b))`` is positive (BLAST's
  "positives"; g the Gonnet-derived substitution probabilities of the aligner, f its background), / aligned
  columns;
- ``alignment``: the Viterbi state string (``M`` both advance; ``I``, ``D`` the query only; ``J``, ``G`` the
  template only), from which :func:`aligned_pairs` rebuilds the column pairs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from workflow_lib.aligner.hmm_compiled import hmm_scores
from workflow_lib.aligner.lanes import align_profiles
from workflow_lib.aligner.profile import Profile
from workflow_lib.aligner.scores import SCALE, Hit
from workflow_lib.aligner.substitution import DEFAULT_BACKGROUND, substitution_probabilities
from workflow_lib.db.kmer_index import index_is_spaced
from workflow_lib.errors import InputError
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.templates import TEMPLATE_HITS
from workflow_lib.search.gapless import gapless_prefilter
from workflow_lib.search.seeds import profile_scores_bits
from workflow_lib.search.settings import SENSITIVE_PREFILTER, default_kmer_threshold
from workflow_lib.seqio.alphabet import N_AMINO
from workflow_lib.templates.calibration import DEFAULT_DECOYS, NullModel, fit_decoys
from workflow_lib.templates.database import TemplateDatabase

DEFAULT_MAX_HITS = 10
DEFAULT_MIN_ALIGNED = 10
PREFILTER_MIN_TEMPLATES = 1000
"""Template databases up to this size are scanned by Viterbi in full; larger ones are prefiltered."""
DEFAULT_MAX_CANDIDATES = 300
"""Prefilter candidates (best gapless scores) passed to the Viterbi stage per query: against PDB chains this
many kept every hit of a full scan, fewer lost hits and more cost time for none gained (benchmarks/RESULTS.md,
"Template search: prefilter against a full scan of 19,887 PDB chains")."""
TRACE_MARGIN = 5
"""The first traceback batch is the best ``max_hits + TRACE_MARGIN`` candidates (module docstring): the best
candidates by E-value nearly always pass ``min_aligned``; later batches double, so a query whose best candidates
align too few columns still fills its table."""
QUERY_ONLY = frozenset("ID")
TEMPLATE_ONLY = frozenset("JG")


def positive_pairs() -> np.ndarray:
    """bool ``[20, 20]``: the substitution log-odds of (a, b) is positive (symmetric)."""
    g = substitution_probabilities(DEFAULT_BACKGROUND)
    log_odds = np.log(g / DEFAULT_BACKGROUND[None, :])
    return (log_odds + log_odds.T) / 2 > 0


_POSITIVE = positive_pairs()


def aligned_pairs(states: str, qstart: int, tstart: int) -> np.ndarray:
    """int32 ``[K, 2]`` (query column, template position), 0-based, of the ``M`` steps of a state string
    that starts at 0-based ``qstart``/``tstart``; ValueError on an unknown letter."""
    pairs = []
    i, j = qstart, tstart
    for letter in states:
        if letter == "M":
            pairs.append((i, j))
            i += 1
            j += 1
        elif letter in QUERY_ONLY:
            i += 1
        elif letter in TEMPLATE_ONLY:
            j += 1
        else:
            raise ValueError(f"unknown alignment state {letter!r}")
    return np.array(pairs, dtype=np.int32).reshape(-1, 2)


def pair_scores(query_codes: np.ndarray, template_codes: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """bool ``[K]`` identical and bool ``[K]`` positive per aligned pair (X or gaps: neither)."""
    a = np.asarray(query_codes)[pairs[:, 0]].astype(np.intp)
    b = np.asarray(template_codes)[pairs[:, 1]].astype(np.intp)
    known = (a < N_AMINO) & (b < N_AMINO)
    identical = known & (a == b)
    positive = np.zeros(a.shape, dtype=bool)
    positive[known] = _POSITIVE[a[known], b[known]]
    return identical, positive


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with exactly the columns and dtypes it has after a write/read round trip."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table.select(TEMPLATE_HITS.schema.names).cast(TEMPLATE_HITS.schema).to_pandas()


def _empty() -> pd.DataFrame:
    return TEMPLATE_HITS.schema.empty_table().to_pandas()


def search_templates(query: Profile, database: TemplateDatabase, *, query_name: str | None = None,
                     max_hits: int = DEFAULT_MAX_HITS, min_aligned: int = DEFAULT_MIN_ALIGNED,
                     n_decoys: int = DEFAULT_DECOYS, seed: int = 0, cpus: int | None = 1,
                     prefilter: bool | None = None, max_candidates: int = DEFAULT_MAX_CANDIDATES
                     ) -> tuple[pd.DataFrame, NullModel]:
    """The hits table (schema :data:`TEMPLATE_HITS`, best first) and the fitted null model of ``query``
    (steps 1–4 of the module docstring).

    ``prefilter``: None = when the database holds more than :data:`PREFILTER_MIN_TEMPLATES` templates.
    ``cpus``: processes for the traceback alignments (the score-only stage runs in this process)."""
    if max_candidates < 1:
        raise InputError(f"max_candidates must be at least 1, got {max_candidates}")
    if max_hits < 1 or min_aligned < 1:
        raise InputError(f"max_hits and min_aligned must be at least 1, got {max_hits} and {min_aligned}")
    templates = database.profiles
    null = fit_decoys(query, database.decoys(n_decoys, seed))
    use_prefilter = len(templates) > PREFILTER_MIN_TEMPLATES if prefilter is None else prefilter
    candidates = (prefilter_candidates(query, database, max_candidates) if use_prefilter
                  else np.arange(len(templates)))
    chosen = [templates[k] for k in candidates]
    if not chosen:
        return _typed(_empty()), null
    bits = hmm_scores(query, chosen) / SCALE
    pvalues = null.pvalue(bits, np.array([t.length for t in chosen], dtype=np.float64))
    evalues = len(templates) * pvalues
    order = np.lexsort((np.array([t.name for t in chosen]), -bits, evalues))
    rows: list[dict] = []
    done, batch = 0, max_hits + TRACE_MARGIN
    while len(rows) < max_hits and done < order.size:
        picks = order[done:done + batch]
        done, batch = done + picks.size, 2 * batch
        for n, hit in zip(picks, align_profiles(query, [chosen[n] for n in picks], cpus=cpus, correlation=False)):
            if hit.aligned_columns < min_aligned:
                continue
            rows.append(_hit_row(query, query_name, chosen[n], hit, float(bits[n]), float(pvalues[n]),
                                 float(evalues[n]), database, null))
            if len(rows) == max_hits:
                break
    if not rows:
        return _typed(_empty()), null
    frame = pd.DataFrame(rows)
    frame["rank"] = np.arange(1, len(frame) + 1)
    return _typed(frame), null


def _hit_row(query: Profile, query_name: str | None, template: Profile, hit: Hit, bitscore: float, pvalue: float,
             evalue: float, database: TemplateDatabase, null: NullModel) -> dict:
    """One row of :data:`TEMPLATE_HITS` (rank filled in by the caller)."""
    identical, positive = pair_scores(query.sequence, template.sequence, hit.pairs)
    return {
        "query": query_name or query.name, "template": template.name, "rank": 0, "evalue": evalue,
        "pvalue": pvalue, "significance": float(np.exp(-evalue)), "bitscore": bitscore,
        "identity": float(identical.mean()), "similarity": float(positive.mean()),
        "aligned_cols": hit.aligned_columns, "qstart": hit.query_start + 1, "qend": hit.query_end,
        "tstart": hit.target_start + 1, "tend": hit.target_end, "qlen": query.length, "tlen": template.length,
        "alignment": hit.states, "template_db": str(database.path), "db_size": len(database),
        "null_lambda": null.lam, "null_mu": null.mu,
    }


def prefilter_candidates(query: Profile, database: TemplateDatabase,
                         max_candidates: int = DEFAULT_MAX_CANDIDATES) -> np.ndarray:
    """Indices of the templates that pass the gapless prefilter (module docstring): the ``max_candidates`` best
    gapless scores, returned in database order."""
    index, residues, offsets = database.prefilter_arrays
    scores = profile_scores_bits(query.emissions, query.background)
    threshold = default_kmer_threshold(int(index["k"]), SENSITIVE_PREFILTER["kmer_slack"],
                                       spaced=index_is_spaced(index))
    passed = gapless_prefilter(scores, index, residues, offsets, kmer_threshold=threshold,
                               diagonals_per_target=SENSITIVE_PREFILTER["diagonals_per_target"],
                               offset_bits=SENSITIVE_PREFILTER["gapless_offset"])
    order = np.lexsort((passed.sequence, -passed.score))[:max_candidates]
    return np.sort(passed.sequence[order]).astype(np.int64)


def write_hits(path: str | Path, hits: pd.DataFrame) -> None:
    """Write a template-hits table (validated against :data:`TEMPLATE_HITS`), atomically."""
    write_table(path, hits, TEMPLATE_HITS)
