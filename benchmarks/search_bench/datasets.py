"""The two labelled sets of the side-by-side search benchmark and how a tool's hits are scored on them.

- **Pfam pairs** (shared/data/pfam_homology_pairs_dctdomain, DCTdomain "pfam-max50"): 1,867 UniProt sequences
  and 10,450 labelled pairs (``hom-pfam``, ``hom-clan``, ``hom-mixed`` = homologous; ``nonhom``). Every
  sequence is searched against all 1,867. A pair's score is the best (smallest) E-value of the two directions
  that were searched (a subsample of queries searches one direction for some pairs; pairs with neither member
  among the queries are left out); no hit = +inf.
- **CATH** (shared/data/cath_prottucker_eat, ProtTucker/EAT test300 ∪ val200, CATH v4.3 S100 labels): the
  labelled domains are searched against a database of the same set; per query, true = same CATH label at the
  chosen level, false = different, the self hit and unlabelled targets are ignored; ROC1 per query.
  *Caveat measured on the data:* each of the 499 labelled domains is the only member of its superfamily in the
  set (EAT's queries are meant to be searched against a 69k lookup set that the snapshot lacks), so ROC1 at the
  superfamily level is undefined; the harness reports the topology (C.A.T) level and says so.

Calibration ("E-values that mean what they say"): on Pfam, for every *directed* non-homologous pair (q, t)
with q searched, count E(q→t) ≤ x; ``false hits per query`` = count × N_db / n_directed_pairs, i.e. the count
extrapolated to a database of N_db unrelated sequences (a calibrated tool gives ≈ x). On CATH every non-self
labelled target of another superfamily is a false target, so the plain count per query is reported (≈ x·(N−1)/N).
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.seqio.fasta import iter_fasta

from . import metrics

CATH_LEVELS = {"class": 1, "architecture": 2, "topology": 3, "superfamily": 4}
HOMOLOGOUS_LABELS = ("hom-pfam", "hom-clan", "hom-mixed")
NONHOMOLOGOUS_LABEL = "nonhom"


@dataclass(frozen=True)
class Dataset:
    """Queries and database (id, sequence) lists plus the labels a benchmark needs."""

    name: str
    queries: list[tuple[str, str]]
    database: list[tuple[str, str]]
    pairs: pd.DataFrame | None = None           # Pfam: columns a, b, label
    labels: dict[str, str] = field(default_factory=dict)   # CATH: domain -> C.A.T.H
    note: str = ""

    @property
    def query_ids(self) -> list[str]:
        return [name for name, _ in self.queries]


def stable_subsample(ids: list[str], count: int | None, *, salt: str) -> list[str]:
    """``count`` IDs chosen deterministically (smallest SHA-1 of salt + ID), returned in input order."""
    if count is None or count >= len(ids):
        return list(ids)
    if count <= 0:
        raise InputError(f"--subsample must be positive, got {count}")
    ranked = sorted(ids, key=lambda name: hashlib.sha1(f"{salt}:{name}".encode()).hexdigest())
    chosen = set(ranked[:count])
    return [name for name in ids if name in chosen]


def _unique_records(paths: list[Path]) -> list[tuple[str, str]]:
    records: dict[str, str] = {}
    for path in paths:
        for record in iter_fasta(path, allow_duplicates=True):
            previous = records.setdefault(record.id, record.sequence)
            if previous != record.sequence:
                raise InputError("ID reused with another sequence", path=path, record=record.id)
    return list(records.items())


def load_pfam(shared: Path, subsample: int | None = None) -> Dataset:
    """Pfam-max50 pairs: all 1,867 sequences as database, all (or a deterministic subsample) as queries."""
    folder = shared / "pfam_homology_pairs_dctdomain"
    database = _unique_records([folder / "pfam_max50.fasta.gz"])
    known = {name for name, _ in database}
    pair_path = folder / "pfam_max50.pair.gz"
    rows = []
    with gzip.open(pair_path, "rt") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 3:
                raise InputError(f"line {number}: expected 'prot1 prot2 label'", path=pair_path)
            a, b, label = fields
            if label not in HOMOLOGOUS_LABELS and label != NONHOMOLOGOUS_LABEL:
                raise InputError(f"line {number}: unknown label {label!r}", path=pair_path)
            for name in (a, b):
                if name not in known:
                    raise InputError(f"line {number}: {name} is not in the FASTA", path=pair_path)
            rows.append((a, b, label))
    pairs = pd.DataFrame(rows, columns=["a", "b", "label"])
    chosen = stable_subsample([name for name, _ in database], subsample, salt="pfam")
    chosen_set = set(chosen)
    queries = [(name, seq) for name, seq in database if name in chosen_set]
    return Dataset("pfam", queries, database, pairs=pairs,
                   note=f"{len(queries)} of {len(database)} sequences as queries, database {len(database)}")


def load_cath(shared: Path, subsample: int | None = None) -> Dataset:
    """CATH domains of ProtTucker test300 ∪ val200 (test219 ⊂ test300) with S100 labels."""
    folder = shared / "cath_prottucker_eat"
    database = _unique_records(sorted(folder.glob("*.fasta")))
    wanted = {name for name, _ in database}
    labels: dict[str, str] = {}
    label_path = folder / "cath_v430_S100_domain_superfamily_labels.txt.gz"
    with gzip.open(label_path, "rt") as handle:
        for line in handle:
            domain, _, label = line.strip().partition(",")
            if domain in wanted:
                labels[domain] = label
    labelled = [name for name, _ in database if name in labels]
    chosen = set(stable_subsample(labelled, subsample, salt="cath"))
    queries = [(name, seq) for name, seq in database if name in chosen]
    return Dataset("cath", queries, database, labels=labels,
                   note=f"{len(queries)} labelled queries, database {len(database)} domains "
                        f"({len(labelled)} labelled)")


# ---------------------------------------------------------------- scoring

def best_evalues(hits: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(query, target) → smallest E-value among the given hit rows."""
    if hits.empty:
        return {}
    best = hits.groupby(["query", "target"], sort=False)["evalue"].min()
    return {key: float(value) for key, value in best.items()}


def pfam_pair_scores(dataset: Dataset, hits: pd.DataFrame) -> pd.DataFrame:
    """Labelled pairs with at least one searched member, each with the best E-value of the searched directions."""
    searched = set(dataset.query_ids)
    best = best_evalues(hits)
    rows = []
    for a, b, label in dataset.pairs.itertuples(index=False):
        directions = [(q, t) for q, t in ((a, b), (b, a)) if q in searched]
        if not directions:
            continue
        evalue = min(best.get(key, np.inf) for key in directions)
        rows.append((a, b, label, label != NONHOMOLOGOUS_LABEL, evalue, len(directions)))
    return pd.DataFrame(rows, columns=["a", "b", "label", "homologous", "evalue", "directions"])


def pfam_metrics(dataset: Dataset, hits: pd.DataFrame,
                 thresholds: tuple[float, ...] = metrics.CALIBRATION_THRESHOLDS) -> dict:
    scores = pfam_pair_scores(dataset, hits)
    pos = scores.loc[scores.homologous, "evalue"].to_numpy()
    neg = scores.loc[~scores.homologous, "evalue"].to_numpy()
    # calibration: every directed non-homologous pair (q searched)
    searched = set(dataset.query_ids)
    best = best_evalues(hits)
    directed = []
    for a, b, label in dataset.pairs.itertuples(index=False):
        if label != NONHOMOLOGOUS_LABEL:
            continue
        for q, t in ((a, b), (b, a)):
            if q in searched:
                directed.append(best.get((q, t), np.inf))
    counts = metrics.calibration_counts(directed, thresholds)
    n_db = len(dataset.database)
    per_query = counts * n_db / max(len(directed), 1)
    return {
        "pairs_positive": int(pos.size), "pairs_negative": int(neg.size),
        "roc_auc": metrics.roc_auc(pos, neg),
        "sens_at_1pct_fpr": metrics.sensitivity_at_fpr(pos, neg, 0.01),
        "positives_found": int(np.isfinite(pos).sum()),
        "calibration_directed_pairs": len(directed),
        "database_sequences": n_db,
        "calibration_counts": counts.tolist(),
        "calibration_per_query": per_query.tolist(),
        "roc_points": roc_curve(pos, neg),
    }


def roc_curve(pos: np.ndarray, neg: np.ndarray) -> tuple[list[float], list[float]]:
    """(FPR, TPR) points at every distinct finite E-value threshold, from (0, 0); for the plot."""
    thresholds = np.unique(np.concatenate([pos[np.isfinite(pos)], neg[np.isfinite(neg)]]))
    fpr = np.searchsorted(np.sort(neg), thresholds, side="right") / max(neg.size, 1)
    tpr = np.searchsorted(np.sort(pos), thresholds, side="right") / max(pos.size, 1)
    return [0.0, *fpr.tolist()], [0.0, *tpr.tolist()]


def cath_key(label: str, level: str) -> str:
    depth = CATH_LEVELS[level]
    return ".".join(label.split(".")[:depth])


def cath_metrics(dataset: Dataset, hits: pd.DataFrame, level: str = "topology",
                 thresholds: tuple[float, ...] = metrics.CALIBRATION_THRESHOLDS) -> dict:
    """Mean ROC1 at ``level`` over queries with ≥ 1 true target; calibration on different-superfamily hits."""
    if level not in CATH_LEVELS:
        raise InputError(f"unknown CATH level {level!r} (one of {', '.join(CATH_LEVELS)})")
    labels = dataset.labels
    best = best_evalues(hits)
    targets = [name for name, _ in dataset.database if name in labels]
    roc1_values = []
    superfamily_positive_queries = 0
    false_hits: list[float] = []
    for query in dataset.query_ids:
        q_label = labels[query]
        true, false = [], []
        for target in targets:
            if target == query:
                continue
            evalue = best.get((query, target), np.inf)
            if cath_key(labels[target], level) == cath_key(q_label, level):
                true.append(evalue)
            else:
                false.append(evalue)
            if labels[target] != q_label:
                false_hits.append(evalue)
        if any(labels[t] == q_label for t in targets if t != query):
            superfamily_positive_queries += 1
        if true:
            roc1_values.append(metrics.roc1(true, false))
    counts = metrics.calibration_counts(false_hits, thresholds)
    n_queries = len(dataset.query_ids)
    return {
        "level": level,
        "queries_with_true_targets": len(roc1_values),
        "queries_with_superfamily_partner": superfamily_positive_queries,
        "mean_roc1": float(np.mean(roc1_values)) if roc1_values else float("nan"),
        "calibration_counts": counts.tolist(),
        "calibration_per_query": (counts / max(n_queries, 1)).tolist(),
    }


# ---------------------------------------------------------------- SCOP on UniProt

SCOP_LEVELS = {"family": 4, "superfamily": 3, "fold": 2}


def scop_segment(sequence: str, segment: str, *, path: Path, record: str) -> str:
    """The 1-based inclusive ``start-end`` segment of ``sequence``; InputError naming the record otherwise."""
    start, dash, end = segment.partition("-")
    if not dash or not start.isdigit() or not end.isdigit():
        raise InputError(f"region {segment!r} is not START-END", path=path, record=record)
    first, last = int(start), int(end)
    if not 1 <= first <= last <= len(sequence):
        raise InputError(f"region {segment!r} lies outside the sequence (length {len(sequence)})",
                         path=path, record=record)
    return sequence[first - 1:last]


def scop_domains(record_id: str, description: str, sequence: str, *, path: Path) -> list[tuple[str, str, str]]:
    """``(domain name, SCOP family, domain sequence)`` of one header ``FAMILY… |E… |DOMAIN… |REGION… |REGION…``:
    one domain per family field, cut to its region in this sequence. A sequence with one domain keeps its ID; the
    domains of a multi-domain sequence (976 of the 6,370) are named ``ID-d1``, ``ID-d2``, … in header order."""
    fields = description.split("|")
    if len(fields) != 5:
        raise InputError("header is not 'FAMILY |E-VALUE |DOMAIN |REGION |REGION'", path=path, record=record_id)
    families, regions = fields[0].split(), fields[4].split()
    if not families or len(families) != len(regions) or any(f.count(".") != 3 for f in families):
        raise InputError(f"header has families {fields[0].strip()!r} for regions {fields[4].strip()!r}",
                         path=path, record=record_id)
    if len(families) == 1:
        return [(record_id, families[0], scop_segment(sequence, regions[0], path=path, record=record_id))]
    return [(f"{record_id}-d{k}", family, scop_segment(sequence, region, path=path, record=record_id))
            for k, (family, region) in enumerate(zip(families, regions), start=1)]


def load_scop(shared: Path, subsample: int | None = None) -> Dataset:
    """MMseqs2's SCOP-on-UniProt benchmark cut to its SCOP 1.75 domains (:func:`scop_domains`): every domain is
    in the database, the queries are the domains with a superfamily partner (or a deterministic subsample)."""
    path = shared / "scop_uniprot_mmseqs2" / "query.fasta.gz"
    database, labels = [], {}
    for record in iter_fasta(path):
        for name, family, domain in scop_domains(record.id, record.description, record.sequence, path=path):
            database.append((name, domain))
            labels[name] = family
    by_superfamily: dict[str, int] = {}
    for family in labels.values():
        key = scop_key(family, "superfamily")
        by_superfamily[key] = by_superfamily.get(key, 0) + 1
    partnered = [name for name, _ in database if by_superfamily[scop_key(labels[name], "superfamily")] > 1]
    chosen = set(stable_subsample(partnered, subsample, salt="scop"))
    queries = [(name, seq) for name, seq in database if name in chosen]
    return Dataset("scop", queries, database, labels=labels,
                   note=f"{len(queries)} queries of the {len(partnered):,} domains with a superfamily partner, "
                        f"database {len(database):,} SCOP domains cut from 6,370 UniProt sequences")


def scop_key(family: str, level: str) -> str:
    return ".".join(family.split(".")[:SCOP_LEVELS[level]])


def scop_metrics(dataset: Dataset, hits: pd.DataFrame,
                 thresholds: tuple[float, ...] = metrics.CALIBRATION_THRESHOLDS) -> dict:
    """Mean ROC1 per query at the family, superfamily and fold level (MMseqs2's SCOP benchmark): true = same
    family / superfamily / fold, false = another fold, other targets (same fold, another superfamily or
    family) ignored, the self hit left out; the mean is over queries with at least one true target. Calibration:
    hits to another fold with E ≤ x per query."""
    labels = dataset.labels
    best = best_evalues(hits)
    names = [name for name, _ in dataset.database]
    folds = np.array([scop_key(labels[t], "fold") for t in names])
    result: dict = {}
    per_level: dict[str, list[float]] = {level: [] for level in SCOP_LEVELS}
    false_hits: list[float] = []
    for query in dataset.query_ids:
        evalues = np.array([best.get((query, t), np.inf) for t in names])
        evalues[names.index(query)] = np.nan
        other_fold = folds != scop_key(labels[query], "fold")
        false = evalues[other_fold]
        false_hits.extend(false.tolist())
        for level in SCOP_LEVELS:
            key = scop_key(labels[query], level)
            true_mask = np.array([scop_key(labels[t], level) == key for t in names])
            true = evalues[true_mask & ~np.isnan(evalues)]
            if true.size:
                per_level[level].append(metrics.roc1(true, false))
    for level, values in per_level.items():
        result[f"roc1_{level}"] = float(np.mean(values)) if values else float("nan")
        result[f"queries_{level}"] = len(values)
    counts = metrics.calibration_counts(false_hits, thresholds)
    result["calibration_counts"] = counts.tolist()
    result["calibration_per_query"] = (counts / max(len(dataset.query_ids), 1)).tolist()
    result["mean_roc1"] = result["roc1_superfamily"]
    return result


def load(name: str, shared: Path, subsample: int | None = None) -> Dataset:
    """The set ``name`` (``pfam``, ``cath`` or ``scop``) from ``shared``; ``InputError`` for another name."""
    loaders = {"pfam": load_pfam, "cath": load_cath, "scop": load_scop}
    if name not in loaders:
        raise InputError(f"unknown dataset {name!r} ({', '.join(loaders)})")
    return loaders[name](shared, subsample)
