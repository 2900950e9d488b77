"""The search's settings: one home for every setting, its default, the named presets and the checks.

Three frozen dataclasses, from the user's view down to the engine's:

- :class:`Settings`: what a user chooses (the ``trackfold search`` / ``msa`` options and the workflow's
  ``search`` section have the same names). Its defaults are the product's: context-specific pseudocounts and the
  sensitive prefilter (against hhblits and jackhmmer: benchmarks/RESULTS.md, "Homology search: the whole Pfam
  benchmark"). :data:`PRESETS` names it ``default`` and the cheaper ``fast`` one.
- :class:`MsaSettings` (:attr:`Settings.msa`): iterations, inclusion, filters and pseudocounts of the
  iterative MSA assembly (:mod:`workflow_lib.search.iterative`).
- :class:`SearchSettings` (:attr:`Settings.search`): the thresholds of the search passes
  (:mod:`workflow_lib.search.engine`), with ``auto`` values resolved.

Every value is checked once, by the dataclass that holds it, with a ``ValueError`` that names the setting;
:func:`settings_from_args` and the workflow config (:meth:`workflow_lib.workflow.config.SearchConfig.settings`)
turn that into the option's or the config key's name. :func:`add_settings_arguments` declares the command-line
options with :class:`Settings`' defaults and :func:`cli_options` writes a :class:`Settings` back as those
options (what the workflow's rules pass to the search jobs).

The workflow's config reads this module when Snakemake starts; it needs NumPy-level modules only, but importing
it runs :mod:`workflow_lib.search`'s ``__init__`` (the search API, with pandas and pyarrow: about 0.1 s).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
from dataclasses import dataclass

import numpy as np

from workflow_lib.search.evalue import CALIBRATIONS
from workflow_lib.search.gapped import (BAND_GATE_BITS, BAND_OFFSET_BITS, BAND_SURE_PASS_BITS, BAND_WIDTH,
                                        GAP_EXTEND_BITS, GAP_OPEN_BITS, GAPPED_MAX_EVALUE)

PSEUDOCOUNTS = ("substitution", "context")
"""Emission pseudocounts a search can use (:attr:`MsaSettings.pseudocounts`)."""

KMER_BITS_PER_EXTRA_RESIDUE = 1.5
"""Default seed threshold: a query window seeds a database k-mer when its profile score is at least
``1.5 · (k - 1)`` bits (:func:`default_kmer_threshold`): 3 bits for 3-mers, 4.5 for 4-mers. 4-mers at 4.5 bits
lose no more of the homologs an exhaustive Viterbi finds than 3-mers at 3 bits, and count far fewer seeds, which
is what the prefilter's cost grows with (benchmarks/RESULTS.md, "Prefilter: reduction and homologs lost")."""
SPACED_EXTRA_BITS = 0.5
"""A spaced shape's seeds (:mod:`~workflow_lib.db.kmer_index`) start this many bits higher: 5.0 bits for
the default ``1010011``. Its seeds of one alignment at different offsets are less correlated than overlapping
contiguous ones, so at this threshold it keeps the Pfam benchmark's scores with fewer seeds than contiguous
4-mers at 4.5 bits, and a proteome ``search_shard`` job costs less (benchmarks/RESULTS.md, "Prefilter: seed
shape and the banded stage"); a higher threshold passes as many labelled homologs in the first round but loses
pairs in the iterated search."""
DIAGONALS_PER_TARGET = 4
"""Diagonals scored exactly per target by the fast prefilter: the ones with the highest summed seed scores."""
SENSITIVE_KMER_SLACK = 0.5
"""The sensitive seed threshold is this many bits below the fast one (2.5 bits for 3-mers, 4 for 4-mers)."""
SEED_BUDGET = 32_000.0
"""The seed budget of iteration 1 of the default (sensitive) search: at most this many seeds per query column over
the whole database (:attr:`SearchSettings.seed_budget`). Against UniProt-2014 the 5.0-bit threshold counts
many times that; the budget keeps the strongest, as a higher threshold would (benchmarks/RESULTS.md, "Homology
search: E. coli against UniProt-2014 (cost, depth, Neff)"). Small databases never reach it: the benchmarks on
Pfam, CATH and SCOP search exactly as without a budget."""
FAST_SEED_BUDGET = 16_000.0
"""The fast setting's seed budget (``--no-sensitive``, every iteration): half of :data:`SEED_BUDGET`, for less
CPU against a large database at the cost of slightly shallower MSAs, the rows lost being in the deepest ones
(benchmarks/RESULTS.md, "Homology search: the seed budget against UniProt-2014"). Small databases never reach
it."""
FIRST_ITERATION_PREFILTER = {"kmer_slack": 0.0, "diagonals_per_target": DIAGONALS_PER_TARGET,
                             "gapless_offset": BAND_SURE_PASS_BITS, "seed_budget": SEED_BUDGET}
"""Iteration 1 of the default (sensitive) iterated search, and the profile database's fast prefilter: the fast
prefilter's seeds and pass at :data:`SEED_BUDGET`."""
FAST_PREFILTER = {**FIRST_ITERATION_PREFILTER, "seed_budget": FAST_SEED_BUDGET}
"""The fast prefilter (``--no-sensitive``)."""
SENSITIVE_PREFILTER = {"kmer_slack": SENSITIVE_KMER_SLACK, "diagonals_per_target": 8, "gapless_offset": 0.0,
                       "seed_budget": 2 * SEED_BUDGET}
"""The sensitive prefilter (``--sensitive``, ``search.sensitive``, the default): more seeds (threshold 0.5 bits
lower), 8 diagonals scored per target and the gapless pass at ``log2(Lq · Lt)`` bits instead of HHblits'
``2.5 + log2(Lq · Lt)``, with twice the seed budget (the lower threshold counts more seeds). Each of the three
recovers homologs the fast prefilter drops before the Viterbi (benchmarks/RESULTS.md, "Prefilter: seed shape and
the banded stage"). An iterated search uses it from iteration 2 on (iteration 1 keeps
:data:`FIRST_ITERATION_PREFILTER`, :attr:`SearchSettings.first_iteration_prefilter`). 8 diagonals rather than
16 or 4: 16 found no more pairs for more CPU, 4 lost pairs (benchmarks/RESULTS.md, "Homology search: settings
measured and not taken")."""
TWO_HIT_RULES = ("auto", "always", "never")
"""When a diagonal of the gapless prefilter needs two seeds instead of one (:attr:`SearchSettings.two_hit`)."""
CONTEXT_PREFILTER_COMPOSITION = 0.5
"""The prefilter's composition weight (:func:`workflow_lib.search.seeds.prefilter_background`) for
context-specific profiles: chosen on the whole Pfam benchmark among 0.3, 0.5, 0.75 and 1; Gonnet profiles,
which lose pairs with it, use 0 (benchmarks/RESULTS.md, "Homology search: settings measured and not taken")."""
WORKFLOW_MAX_EVALUE = 1.0
"""The workflow's ``search.max_evalue``: its per-shard hits tables keep hits up to this E-value, where the
command line reports up to :attr:`Settings.max_evalue` (10). Only the tables differ: the MSAs include hits at
the inclusion E-value (1e-3)."""


def default_kmer_threshold(k: int, slack: float = 0.0, *, spaced: bool = False) -> float:
    """The seed threshold (bits) for an index of weight ``k``: :data:`KMER_BITS_PER_EXTRA_RESIDUE` per residue
    after the first, plus :data:`SPACED_EXTRA_BITS` for a spaced shape, less ``slack``
    (:data:`SENSITIVE_KMER_SLACK` for the sensitive prefilter)."""
    return KMER_BITS_PER_EXTRA_RESIDUE * (k - 1) + (SPACED_EXTRA_BITS if spaced else 0.0) - slack


def check_prefilter_values(*, kmer_threshold: float | None = None, diagonals_per_target: int | None = None,
                           gapless_offset: float | None = None, band_gate: float | None = None,
                           band_offset: float | None = None, prefilter_composition: float | None = None,
                           seed_budget: float | None = None) -> None:
    """Raise ``ValueError`` naming the setting for a non-finite threshold, fewer than one diagonal per target, a
    composition weight outside [0, 1] or a negative seed budget (``None``: not given, nothing to check)."""
    if seed_budget is not None and not (np.isfinite(seed_budget) and seed_budget >= 0):
        raise ValueError(f"seed_budget must be a number of seeds >= 0 (0: no budget), got {seed_budget}")
    for key, value in (("kmer_threshold", kmer_threshold), ("gapless_offset", gapless_offset),
                       ("band_gate", band_gate), ("band_offset", band_offset)):
        if value is not None and not np.isfinite(value):
            raise ValueError(f"{key} must be a finite number of bits, got {value}")
    if diagonals_per_target is not None and diagonals_per_target < 1:
        raise ValueError(f"diagonals_per_target must be at least 1, got {diagonals_per_target}")
    if prefilter_composition is not None and not 0.0 <= prefilter_composition <= 1.0:
        raise ValueError(f"prefilter_composition must be a weight in [0, 1], got {prefilter_composition}")


def check_two_hit(value: str) -> None:
    """Raise ``ValueError`` naming ``two_hit`` unless ``value`` is one of :data:`TWO_HIT_RULES`."""
    if value not in TWO_HIT_RULES:
        raise ValueError(f"two_hit must be one of {', '.join(TWO_HIT_RULES)}, got {value!r}")


@dataclass(frozen=True)
class SearchSettings:
    """Thresholds of the search passes (defaults: the sensitive prefilter, which iteration 1 of an iterated search
    replaces with :data:`FIRST_ITERATION_PREFILTER`, reversed-protein calibration, HHblits' reporting). Checked here."""

    kmer_threshold: float | None = None
    """None: :func:`default_kmer_threshold` for the k and shape of the database's index, less ``kmer_slack``."""
    kmer_slack: float = SENSITIVE_PREFILTER["kmer_slack"]
    diagonals_per_target: int = SENSITIVE_PREFILTER["diagonals_per_target"]
    gapless_offset: float = SENSITIVE_PREFILTER["gapless_offset"]
    """Stage 1: a gapless score above ``this + log2(Lq · Lt)`` bits passes directly (HHblits' is 2.5)."""
    band_gate: float = BAND_GATE_BITS
    """Stage 1b: gapless scores above ``this + log2(Lq · Lt)`` (and not passing directly) get a banded score;
    at or above ``gapless_offset`` the stage is off."""
    band_offset: float = BAND_OFFSET_BITS
    """Stage 1b: pass when the banded score is above ``this + log2(Lq · Lt)`` bits."""
    band_width: int = BAND_WIDTH
    seed_budget: float = SENSITIVE_PREFILTER["seed_budget"]
    """Stage 1: at most this many seeds per query column over the whole database (0: no budget). A shard's share
    is its part of the database's residues; when the seeds at the threshold exceed it, only the strongest (query
    window, k-mer) pairs seed (:func:`~workflow_lib.search.gapless.strongest_seeds`), as a higher threshold for
    that query would. The work of seed counting grows with the database; the budget stops that growth."""
    two_hit: str = "auto"
    """Stage 1: ``always``, a diagonal is scored only when it holds at least two seeds (BLAST's two-hit rule,
    Altschul et al. 1997); ``never``, one seed is enough; ``auto``, two when the query's seeds on the shard
    exceed its :attr:`seed_budget`. A database that large seeds most of its targets by chance, each on a
    diagonal of one seed, and scoring those diagonals was the largest share of the search; a homolog's diagonal
    holds several. Small databases never reach the budget, so they search with one seed, as before."""
    prefilter_composition: float = CONTEXT_PREFILTER_COMPOSITION
    """Stages 1–2 score the profile against ``f^(1 − w) · c^w``, ``c`` its mean emissions
    (:func:`~workflow_lib.search.seeds.prefilter_background`)."""
    gap_open: float = GAP_OPEN_BITS
    gap_extend: float = GAP_EXTEND_BITS
    gapped_max_evalue: float = GAPPED_MAX_EVALUE
    max_evalue: float = 10.0
    calibration_samples: int | None = None
    """Sequences per calibration (None: :func:`~workflow_lib.search.evalue.calibration_samples` of ``calibration``)."""
    calibration: str = "reversed"
    """E-value calibration against ``random`` (i.i.d.) or ``reversed`` (reversed real proteins) sequences
    (:mod:`workflow_lib.search.evalue`)."""
    first_iteration_prefilter: tuple[tuple[str, float], ...] = tuple(FIRST_ITERATION_PREFILTER.items())
    """Prefilter values that replace the ones above in iteration 1 of a search of several iterations
    (:meth:`for_iteration`)."""

    def __post_init__(self) -> None:
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}, got {self.calibration!r}")
        if not self.max_evalue > 0:
            raise ValueError(f"max_evalue must be positive, got {self.max_evalue}")
        check_two_hit(self.two_hit)
        check_prefilter_values(kmer_threshold=self.kmer_threshold, diagonals_per_target=self.diagonals_per_target,
                               gapless_offset=self.gapless_offset, band_gate=self.band_gate,
                               band_offset=self.band_offset, prefilter_composition=self.prefilter_composition,
                               seed_budget=self.seed_budget)

    def defers(self, iteration: int, iterations: int) -> bool:
        """Whether iteration ``iteration`` of ``iterations`` searches with :attr:`first_iteration_prefilter`."""
        return bool(self.first_iteration_prefilter) and iteration == 1 and iterations > 1

    def for_iteration(self, iteration: int, iterations: int) -> SearchSettings:
        """The settings iteration ``iteration`` (1-based) of a search of ``iterations`` searches with."""
        if not self.defers(iteration, iterations):
            return self
        return dataclasses.replace(self, **dict(self.first_iteration_prefilter), first_iteration_prefilter=())

    def seed_threshold(self, k: int, spaced: bool = False) -> float:
        """The seed threshold (bits) on an index of weight ``k`` (``spaced``: its shape has gaps): the one
        given, else the default for that index."""
        if self.kmer_threshold is not None:
            return self.kmer_threshold
        return default_kmer_threshold(k, self.kmer_slack, spaced=spaced)


@dataclass(frozen=True)
class MsaSettings:
    """Iterative MSA assembly (:mod:`workflow_lib.search.iterative`; defaults: HHblits as RoseTTAFold runs it,
    context-specific pseudocounts). Checked here."""

    iterations: int = 3
    inclusion_evalue: float = 1e-3
    max_identity: float = 0.90
    min_coverage: float = 0.50
    profile_min_coverage: float = 0.0
    stop_rules: tuple[tuple[int, float], ...] = ((2000, 0.75), (5000, 0.50))
    max_sequences: int = 10000
    pseudocounts: str = "context"
    """Emission pseudocounts of the searched profiles: ``substitution`` (the Gonnet matrix) or ``context``
    (context-specific, :mod:`workflow_lib.aligner.context`)."""
    context_model: str | None = None
    """With ``context``: the model's npz (None: the shipped one)."""

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {self.iterations}")
        if not self.inclusion_evalue > 0:
            raise ValueError(f"inclusion_evalue must be positive, got {self.inclusion_evalue}")
        if not 0.0 < self.max_identity <= 1.0 or not 0.0 <= self.min_coverage <= 1.0:
            raise ValueError("max_identity must be in (0, 1] and min_coverage in [0, 1]")
        if not 0.0 <= self.profile_min_coverage <= self.min_coverage:
            raise ValueError(f"profile_min_coverage must be in [0, min_coverage = {self.min_coverage}], "
                             f"got {self.profile_min_coverage}")
        if self.pseudocounts not in PSEUDOCOUNTS:
            raise ValueError(f"pseudocounts must be one of {', '.join(PSEUDOCOUNTS)}, got {self.pseudocounts!r}")
        if self.context_model is not None and self.pseudocounts != "context":
            raise ValueError("context_model needs pseudocounts context")

    def context(self):
        """The context model the profiles use (loaded once per path), or None for substitution pseudocounts."""
        from workflow_lib.aligner.context import load_context_model
        return load_context_model(self.context_model) if self.pseudocounts == "context" else None


@dataclass(frozen=True)
class Settings:
    """A search's settings as a user chooses them: the ``trackfold search`` / ``msa`` options and the workflow's
    ``search`` keys (same names). The defaults are the product's; ``None`` (and ``auto``) picks the value that
    goes with the others: the prefilter knobs follow ``sensitive``, ``calibration`` (``auto``: ``reversed``
    with context pseudocounts, else ``random``) and ``prefilter_composition`` (``None``:
    :data:`CONTEXT_PREFILTER_COMPOSITION` with context pseudocounts, else 0) follow ``pseudocounts``.
    Constructing one checks every value (``ValueError`` naming the setting)."""

    iterations: int = 3
    inclusion_evalue: float = 1e-3
    max_evalue: float = 10.0
    max_identity: float = 0.9
    min_coverage: float = 0.5
    profile_min_coverage: float = 0.0
    sensitive: bool = True
    kmer_threshold: float | None = None
    diagonals_per_target: int | None = None
    gapless_offset: float | None = None
    band_gate: float | None = None
    band_offset: float | None = None
    seed_budget: float | None = None
    two_hit: str = "auto"
    max_sequences: int = 10000
    pseudocounts: str = "context"
    context_model: str | None = None
    calibration: str = "auto"
    prefilter_composition: float | None = None

    def __post_init__(self) -> None:
        if not self.max_evalue > 0:   # the passes report up to max(max_evalue, inclusion_evalue): check it here
            raise ValueError(f"max_evalue must be positive, got {self.max_evalue}")
        self.msa, self.search   # noqa: B018 (each builds and checks its values)

    @property
    def msa(self) -> MsaSettings:
        """The MSA assembly's settings."""
        return MsaSettings(iterations=self.iterations, inclusion_evalue=self.inclusion_evalue,
                           max_identity=self.max_identity, min_coverage=self.min_coverage,
                           profile_min_coverage=self.profile_min_coverage, max_sequences=self.max_sequences,
                           pseudocounts=self.pseudocounts, context_model=self.context_model)

    @property
    def search(self) -> SearchSettings:
        """The search passes' thresholds: the sensitive or the fast prefilter with any knob given overriding it.

        The sensitive prefilter searches from iteration 2 on, and in a search of one iteration; iteration 1 of an
        iterated search keeps the fast prefilter's values for the knobs not given
        (:attr:`SearchSettings.first_iteration_prefilter`). Iteration 1 searches with the query sequence alone,
        and only its hits at the inclusion E-value (1e-3) shape what follows; the homologs the sensitive
        prefilter adds are weak ones. On the Pfam benchmark the deferred sensitive search finds the same pairs
        for less CPU than the sensitive prefilter in every iteration (benchmarks/RESULTS.md, "Homology search:
        settings measured and not taken"). A query that converges in iteration 1 is searched again with the
        sensitive prefilter (:func:`~workflow_lib.search.iterative.msa_step`), so every query's last search is a
        sensitive one. Reports up to ``max(max_evalue, inclusion_evalue)``."""
        base = SENSITIVE_PREFILTER if self.sensitive else FAST_PREFILTER
        given = {"kmer_threshold": self.kmer_threshold, "diagonals_per_target": self.diagonals_per_target,
                 "gapless_offset": self.gapless_offset, "band_gate": self.band_gate, "band_offset": self.band_offset,
                 "seed_budget": self.seed_budget}
        first = tuple((key, FIRST_ITERATION_PREFILTER[key]) for key in SENSITIVE_PREFILTER
                      if self.sensitive and FIRST_ITERATION_PREFILTER[key] != SENSITIVE_PREFILTER[key]
                      and given.get(key) is None)
        context = self.pseudocounts == "context"
        composition = self.prefilter_composition
        if composition is None:
            composition = CONTEXT_PREFILTER_COMPOSITION if context else 0.0
        calibration = self.calibration
        if calibration == "auto":
            calibration = "reversed" if context else "random"
        return SearchSettings(**{**base, **{key: value for key, value in given.items() if value is not None}},
                              two_hit=self.two_hit, first_iteration_prefilter=first,
                              max_evalue=max(self.max_evalue, self.inclusion_evalue), calibration=calibration,
                              prefilter_composition=composition)

    def replace(self, **changes) -> Settings:
        """A copy with ``changes`` (checked)."""
        return dataclasses.replace(self, **changes)


PRESETS = {
    "default": Settings(),
    "fast": Settings(sensitive=False, pseudocounts="substitution"),
    "sensitive": Settings(sensitive=True, pseudocounts="substitution"),
    "context": Settings(sensitive=False, pseudocounts="context"),
}
"""Named settings (the search benchmark's trackfold variants, benchmarks/search_bench/tools.py). ``default``: the
product's (context pseudocounts, the sensitive prefilter). ``fast`` (``--no-sensitive --pseudocounts
substitution``; the library's defaults before the sensitive search became the default): less CPU, fewer
homologs (benchmarks/RESULTS.md, "Homology search: the whole Pfam benchmark" and "Homology search: proteome
scale (E. coli through Snakemake)"). ``sensitive``
(``--sensitive --pseudocounts substitution``) and ``context`` (``--no-sensitive --pseudocounts context``): one
of the default's two choices each."""
DEFAULT = PRESETS["default"]
FAST = PRESETS["fast"]

SETTING_NAMES = tuple(field.name for field in dataclasses.fields(Settings))


def setting_error(error: ValueError, style: str) -> str:
    """``error``'s message with the settings it names written as command-line options (``style="--"``:
    ``--min-coverage``) or config keys (``style="search."``: ``search.min_coverage``)."""
    pattern = r"\b(" + "|".join(sorted(SETTING_NAMES, key=len, reverse=True)) + r")\b"
    if style == "--":
        return re.sub(pattern, lambda match: "--" + match.group(1).replace("_", "-"), str(error))
    return re.sub(pattern, lambda match: style + match.group(1), str(error))


# ----------------------------------------------------------------------------------------------- command line

def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``search settings`` options, with :class:`Settings`' defaults (:func:`settings_from_args` reads them)."""
    from workflow_lib.db.kmer_index import DEFAULT_SHAPE

    group = parser.add_argument_group("search settings")
    default, search = Settings(), SearchSettings()
    group.add_argument("--iterations", type=int, default=default.iterations,
                       help="search iterations (default %(default)s)")
    group.add_argument("--inclusion-evalue", type=float, default=default.inclusion_evalue,
                       help="E-value to include a hit in the MSA (default %(default)s)")
    group.add_argument("--max-evalue", type=float, default=default.max_evalue,
                       help="report hits up to this E-value (default %(default)s)")
    group.add_argument("--max-identity", type=float, default=default.max_identity,
                       help="redundancy filter: maximum pairwise identity (default %(default)s)")
    group.add_argument("--min-coverage", type=float, default=default.min_coverage,
                       help="coverage filter of the output MSA: minimum fraction of query columns "
                            "(default %(default)s)")
    group.add_argument("--profile-min-coverage", type=float, default=default.profile_min_coverage,
                       help="coverage filter of the MSA the next iteration's profile is built from "
                            "(default %(default)s, as HHblits' -cov)")
    sensitive, fast = SENSITIVE_PREFILTER, FAST_PREFILTER
    group.add_argument("--sensitive", action=argparse.BooleanOptionalAction, default=default.sensitive,
                       help=f"sensitive prefilter: seeds {sensitive['kmer_slack']} bits below the fast one, "
                            f"{sensitive['diagonals_per_target']} diagonals per target, gapless pass at "
                            f"{sensitive['gapless_offset']} + log2(Lq*Lt) bits, from iteration 2 on when "
                            f"iterating; --no-sensitive: the fast prefilter, cheaper and less sensitive "
                            f"(benchmarks/RESULTS.md, \"Homology search: the whole Pfam benchmark\"); a value given "
                            f"with the options below holds in every iteration (default: "
                            f"{'sensitive' if default.sensitive else 'no-sensitive'})")
    group.add_argument("--kmer-threshold", type=float, default=default.kmer_threshold,
                       help=f"prefilter seed threshold in bits (default: 1.5 * (k - 1) for the database's k-mers, "
                            f"+ {SPACED_EXTRA_BITS} for a spaced seed shape: {default_kmer_threshold(4, spaced=True)} "
                            f"for the default {DEFAULT_SHAPE}, {default_kmer_threshold(4)} for 4-mers; --sensitive: "
                            f"{sensitive['kmer_slack']} lower from iteration 2 on)")
    group.add_argument("--diagonals-per-target", type=int, default=default.diagonals_per_target,
                       help=f"gapless prefilter: diagonals scored per target (--no-sensitive: "
                            f"{fast['diagonals_per_target']}; --sensitive: {sensitive['diagonals_per_target']} from "
                            f"iteration 2 on)")
    group.add_argument("--gapless-offset", type=float, default=default.gapless_offset,
                       help=f"gapless prefilter: pass directly above this + log2(Lq*Lt) bits (--no-sensitive: "
                            f"{fast['gapless_offset']}; HHblits' single pass is 2.5; --sensitive: "
                            f"{sensitive['gapless_offset']} from iteration 2 on)")
    group.add_argument("--band-gate", type=float, default=default.band_gate,
                       help=f"banded Smith-Waterman stage: targets whose gapless score is above this + "
                            f"log2(Lq*Lt) bits but not above the direct pass are scored in a band of "
                            f"{search.band_width} diagonals around their best one (default {search.band_gate}; "
                            f"at or above --gapless-offset the stage is off)")
    group.add_argument("--band-offset", type=float, default=default.band_offset,
                       help=f"banded stage: pass above this + log2(Lq*Lt) bits (default {search.band_offset})")
    group.add_argument("--seed-budget", type=float, default=default.seed_budget,
                       help=f"gapless prefilter: at most this many seeds per query residue over the whole "
                            f"database; beyond it only the strongest seed, as a higher threshold would (the cost "
                            f"of seeding stops growing with the database; 0: no budget) (--no-sensitive: "
                            f"{fast['seed_budget']:.0f}; --sensitive: {SEED_BUDGET:.0f} in iteration 1, "
                            f"{sensitive['seed_budget']:.0f} from iteration 2 on; small databases never reach it: "
                            f"benchmarks/RESULTS.md, \"Homology search: the seed budget against UniProt-2014\")")
    group.add_argument("--two-hit", choices=TWO_HIT_RULES, default=default.two_hit,
                       help="gapless prefilter: a diagonal is scored only with at least two seeds (always), with "
                            "one (never), or with two when the query's seeds exceed the seed budget, as against "
                            "UniProt-sized databases, where most targets are seeded by chance on diagonals of one "
                            "seed (auto; small databases never reach it) (default %(default)s)")
    group.add_argument("--max-sequences", type=int, default=default.max_sequences,
                       help="cap on MSA sequences after filtering (default %(default)s)")
    group.add_argument("--pseudocounts", choices=PSEUDOCOUNTS, default=default.pseudocounts,
                       help="emission pseudocounts of the searched profiles: the Gonnet substitution matrix, or "
                            "context-specific ones predicted from the 13 columns around each column (more remote "
                            "homologs for more CPU: benchmarks/RESULTS.md, \"Homology search: the whole Pfam "
                            "benchmark\") (default %(default)s)")
    group.add_argument("--context-model", default=default.context_model,
                       help="with --pseudocounts context: the model's .npz (default: the shipped one)")
    group.add_argument("--calibration", choices=("auto",) + CALIBRATIONS, default=default.calibration,
                       help="E-value calibration sequences: i.i.d. random, or windows of reversed real proteins "
                            "(which keep the local structure context-specific pseudocounts reward in every "
                            "protein; their heavier tail is fitted with 0.9 times the i.i.d. λ); auto: reversed "
                            "with --pseudocounts context, else random (default %(default)s)")
    group.add_argument("--prefilter-composition", default="auto",
                       help="weight w in [0, 1] of the profile's own mean composition in the null model the "
                            "prefilter scores against (f^(1-w) * c^w): targets that score by composition alone, "
                            "which the hits' composition-bias correction removes, stop before the Viterbi; auto: "
                            f"{CONTEXT_PREFILTER_COMPOSITION} with --pseudocounts context, else 0 "
                            "(default %(default)s)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The :class:`Settings` of parsed :func:`add_settings_arguments` options; raises ``ValueError`` with the
    options' names (the CLI reports it as an input error)."""
    composition = args.prefilter_composition
    if composition == "auto":
        composition = None
    else:
        try:
            composition = float(composition)
        except ValueError:
            raise ValueError(f"--prefilter-composition must be auto or a weight in [0, 1], got {composition!r}") \
                from None
    try:
        return Settings(**{name: getattr(args, name) for name in SETTING_NAMES if name != "prefilter_composition"},
                        prefilter_composition=composition)
    except ValueError as error:
        raise ValueError(setting_error(error, "--")) from None


def cli_options(settings: Settings) -> str:
    """``settings`` as the options of :func:`add_settings_arguments` (what the workflow's rules pass to the
    search jobs): the MSA values and ``--sensitive``/``--pseudocounts`` always, the others when not ``None``
    or ``auto``. :func:`settings_from_args` reads them back to ``settings``."""
    return (f"--iterations {settings.iterations} --inclusion-evalue {settings.inclusion_evalue} "
            f"--max-evalue {settings.max_evalue} --max-identity {settings.max_identity} "
            f"--min-coverage {settings.min_coverage} --profile-min-coverage {settings.profile_min_coverage} "
            f"--max-sequences {settings.max_sequences}"
            + (" --sensitive" if settings.sensitive else " --no-sensitive")
            + f" --pseudocounts {settings.pseudocounts}"
            + (f" --calibration {settings.calibration}" if settings.calibration != "auto" else "")
            + (f" --two-hit {settings.two_hit}" if settings.two_hit != "auto" else "")
            + "".join(f" --{key.replace('_', '-')} {value}" for key, value in (
                ("kmer_threshold", settings.kmer_threshold), ("diagonals_per_target", settings.diagonals_per_target),
                ("gapless_offset", settings.gapless_offset), ("band_gate", settings.band_gate),
                ("band_offset", settings.band_offset), ("seed_budget", settings.seed_budget),
                ("prefilter_composition", settings.prefilter_composition),
                ("context_model", None if settings.context_model is None else shlex.quote(settings.context_model)))
                if value is not None))
