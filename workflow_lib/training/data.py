"""Training data: usable chains of structure files, identity clusters and a homology-aware split.

``trackfold train-data`` (:mod:`workflow_lib.training.cli`): every protein chain of the structure files with
``min_length ≤ L ≤ max_length``, at most 5% unknown residues and N, CA, C on at least 80% of its residues;
identical sequences kept once. Chains are clustered by single linkage over pairwise sequence identity and whole
clusters go to the validation split, so no validation chain is more than ``identity`` (30%) identical to a
training chain. **Identity** of two chains = identical residues in the best local alignment (trackfold's own
Viterbi, :func:`workflow_lib.aligner.align_queries`, the chain's single-sequence profile against the other
chain) divided by the length of the *shorter* chain (the CD-HIT convention; an asymmetric pair counts when
either direction exceeds the threshold). The table (:data:`TRAINING_CHAINS`) lists each chain's structure file
and chain id; a query-only A3M per chain is written for ``trackfold features`` (replace it with a real MSA to
train on alignments).

Structure sources are PDB/mmCIF files or backbone archives (:mod:`workflow_lib.structure.backbones`, e.g. the
20,000 chains of ProMod3's structure database; a chain of an archive is named and found by ``XXXX_C``).
``names`` restricts the chains to a list (for example those that have an MSA). For thousands of chains the
all-against-all clustering costs O(n²) alignments; :func:`split_against_validation` (``--val-chains N``) costs
O(n · N) instead: N validation chains drawn at random, none more than ``identity`` identical to another, and
every other chain more than ``identity`` identical to a validation chain left out of training (counted in
``split.json``), so the guarantee is the same; training chains are then not clustered among themselves (each
its own cluster).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError
from workflow_lib.schemas.io import write_table
from workflow_lib.schemas.training import TRAINING_CHAINS
from workflow_lib.seqio.alphabet import encode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.structure.backbones import is_backbone_archive, read_backbone_archive
from workflow_lib.structure.parse import Chain, read_structure
from workflow_lib.training.settings import CHAIN_MAX_LENGTH, CHAIN_MIN_LENGTH, SPLIT_IDENTITY, VAL_FRACTION


@dataclass(frozen=True)
class ChainRecord:
    """A chain selected for training."""

    name: str
    structure: str
    chain: str
    sequence: str


def chain_ok(chain: Chain, *, min_length: int, max_length: int, max_unknown: float = 0.05,
             min_backbone: float = 0.8) -> str:
    """Why ``chain`` is not usable for training (``""`` when it is)."""
    length = len(chain)
    if length < min_length:
        return f"shorter than {min_length}"
    if length > max_length:
        return f"longer than {max_length}"
    if chain.sequence.count("X") > max_unknown * length:
        return "too many unknown residues"
    if chain.mask[:, :3].all(axis=1).mean() < min_backbone:
        return "too many residues without N, CA, C"
    return ""


def read_chains(path: str | Path, names: set[str] | None = None) -> Iterator[Chain]:
    """The chains of a structure file or of a backbone archive (only those named in ``names`` when given)."""
    if is_backbone_archive(path):
        yield from (entry.chain for entry in read_backbone_archive(path, names=names))
        return
    for chain in read_structure(path):
        if names is None or chain.name.replace(".", "_") in names:
            yield chain


def chain_key(structure: str | Path, chain: Chain) -> str:
    """How a training table row finds its chain in its structure: the name in an archive, else the chain id."""
    return chain.name if is_backbone_archive(structure) else chain.chain_id


def collect_chains(paths: Iterable[str | Path], *, min_length: int = CHAIN_MIN_LENGTH,
                   max_length: int = CHAIN_MAX_LENGTH,
                   names: set[str] | None = None) -> tuple[list[ChainRecord], dict[str, int]]:
    """Usable chains of the structure files (module docstring), identical sequences once; and skip counts."""
    records: list[ChainRecord] = []
    seen: set[str] = set()
    skipped: dict[str, int] = {}
    for path in sorted(str(p) for p in paths):
        for chain in read_chains(path, names):
            reason = chain_ok(chain, min_length=min_length, max_length=max_length)
            if not reason and chain.sequence in seen:
                reason = "identical sequence already taken"
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            seen.add(chain.sequence)
            name = chain.name.replace(".", "_")
            records.append(ChainRecord(name, path, chain_key(path, chain), chain.sequence))
    names = [r.name for r in records]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"two structure files give the same chain name(s) {dup[:5]}")
    return records, skipped


def cross_identities(queries: Sequence[str], targets: Sequence[str], *, cpus: int = 1) -> np.ndarray:
    """float64 ``[len(queries), len(targets)]``: identity (module docstring) of each query against each target,
    the query's single-sequence profile aligned to the target sequence (0 where nothing aligns)."""
    from workflow_lib.aligner import align_queries, profile_from_sequence

    out = np.zeros((len(queries), len(targets)), dtype=np.float64)
    if not len(queries) or not len(targets):
        return out
    codes = [encode(s) for s in targets]
    hits = align_queries([profile_from_sequence(s) for s in queries], codes, backtrace=True, cpus=cpus)
    for qi, row in enumerate(hits):
        query = encode(queries[qi])
        for tj, hit in enumerate(row):
            if hit is not None and hit.aligned_columns:
                same = int(np.sum(query[hit.pairs[:, 0]] == codes[tj][hit.pairs[:, 1]]))
                out[qi, tj] = same / min(len(queries[qi]), len(targets[tj]))
    return out


def identity_links(sequences: Sequence[str], threshold: float, *, cpus: int = 1) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, identity)``, ``i < j``, whose identity (module docstring) exceeds ``threshold`` in either
    direction (the higher one is reported)."""
    matrix = cross_identities(sequences, sequences, cpus=cpus)
    both = np.maximum(matrix, matrix.T)
    return [(int(i), int(j), float(both[i, j])) for i, j in np.argwhere(np.triu(both > threshold, k=1))]


def single_linkage(n: int, links: Iterable[tuple[int, int, float]]) -> np.ndarray:
    """Cluster labels 0..C−1 (in order of first member) of the connected components of ``links``."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in links:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots: dict[int, int] = {}
    return np.array([roots.setdefault(find(k), len(roots)) for k in range(n)], dtype=np.int32)


def split_by_identity(records: Sequence[ChainRecord], *, identity: float = SPLIT_IDENTITY,
                      val_fraction: float = VAL_FRACTION,
                      seed: int = 0, cpus: int = 1) -> pd.DataFrame:
    """The :data:`TRAINING_CHAINS` table: clusters at ``identity`` and whole clusters drawn for validation
    (in a seeded random order, until ``val_fraction`` of the chains is reached; clusters larger than 5% of the
    chains always stay in training)."""
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"val_fraction must be in (0, 1), got {val_fraction}")
    labels = single_linkage(len(records), identity_links([r.sequence for r in records], identity, cpus=cpus))
    sizes = np.bincount(labels)
    rng = np.random.default_rng(seed)
    wanted = val_fraction * len(records)
    val_clusters: set[int] = set()
    taken = 0
    for cluster in rng.permutation(len(sizes)):
        if taken >= wanted:
            break
        if sizes[cluster] > max(1, 0.05 * len(records)):
            continue
        val_clusters.add(int(cluster))
        taken += int(sizes[cluster])
    return pd.DataFrame({
        "name": [r.name for r in records],
        "structure": [r.structure for r in records],
        "chain": [r.chain for r in records],
        "sequence": [r.sequence for r in records],
        "length": [len(r.sequence) for r in records],
        "cluster": labels,
        "split": ["validation" if int(c) in val_clusters else "train" for c in labels],
    })


def split_against_validation(records: Sequence[ChainRecord], *, val_chains: int | None = None,
                             val_names: set[str] | None = None, identity: float = SPLIT_IDENTITY, seed: int = 0,
                             cpus: int = 1) -> tuple[pd.DataFrame, dict[str, float | int]]:
    """The :data:`TRAINING_CHAINS` table for large chain sets (module docstring) and what it measured.

    ``val_chains`` chains in a seeded random order, or the chains named in ``val_names`` (a fixed validation
    set, so that a growing training set keeps it), are validation candidates; a candidate more than
    ``identity`` identical to an earlier kept one is dropped (greedy), every other chain more than ``identity``
    identical to a kept validation chain is left out (identity in either direction: each chain's profile against
    the other sequence, the higher one counts). Returns the table (kept chains only) and
    ``{"excluded": n, "validation_candidates_dropped": n, "max_cross_identity": highest
    validation-to-training identity}``.
    """
    if val_names is not None:
        candidates = [k for k, record in enumerate(records) if record.name in val_names]
        if not 0 < len(candidates) < len(records):
            raise InputError(f"the validation names match {len(candidates)} of the {len(records)} usable chains")
    else:
        if val_chains is None or not 0 < val_chains < len(records):
            raise InputError(f"--val-chains must be between 1 and {len(records) - 1}, got {val_chains}")
        order = np.random.default_rng(seed).permutation(len(records))
        candidates = [int(k) for k in order[:val_chains]]
    sequences = [r.sequence for r in records]
    among = cross_identities([sequences[k] for k in candidates], [sequences[k] for k in candidates], cpus=cpus)
    kept: list[int] = []
    for a in range(len(candidates)):
        if all(max(among[a, b], among[b, a]) <= identity for b in kept):
            kept.append(a)
    validation = [candidates[a] for a in kept]
    taken = set(validation)
    others = [k for k in range(len(records)) if k not in taken]
    val_sequences, other_sequences = [sequences[k] for k in validation], [sequences[k] for k in others]
    cross = np.maximum(cross_identities(val_sequences, other_sequences, cpus=cpus),    # either direction
                       cross_identities(other_sequences, val_sequences, cpus=cpus).T)
    too_close = cross.max(axis=0) > identity if len(validation) else np.zeros(len(others), dtype=bool)
    train = [k for k, close in zip(others, too_close) if not close]
    chosen = validation + train
    split = ["validation"] * len(validation) + ["train"] * len(train)
    remaining = cross[:, ~too_close] if len(validation) else cross
    table = pd.DataFrame({
        "name": [records[k].name for k in chosen],
        "structure": [records[k].structure for k in chosen],
        "chain": [records[k].chain for k in chosen],
        "sequence": [records[k].sequence for k in chosen],
        "length": [len(records[k].sequence) for k in chosen],
        "cluster": np.arange(len(chosen), dtype=np.int32),
        "split": split,
    })
    measured = {"excluded": int(too_close.sum()),
                "validation_candidates_dropped": len(candidates) - len(validation),
                "max_cross_identity": float(remaining.max()) if remaining.size else 0.0}
    return table, measured


def draw_test_split(candidates: Sequence[ChainRecord], held: Sequence[str], *, size: int, identity: float = 0.3,
                    seed: int = 0, batch: int = 200, cpus: int = 1) -> tuple[list[ChainRecord], dict[str, float | int]]:
    """A test set nothing is chosen on: ``size`` chains drawn at random from ``candidates``, each at most
    ``identity`` identical (module docstring: identical residues over the shorter chain, so over the query's
    whole length at least) to every sequence of ``held`` (the training and validation chains) and to every
    test chain drawn before it, with the identity measured in both directions (each chain's profile against
    the other sequence). Candidates are examined in a seeded random order, ``batch`` at a time, until ``size``
    are kept. Returns the kept records (in draw order) and ``{"examined": n, "too_close_to_held": n,
    "too_close_to_test": n, "max_identity_to_held": highest identity of a kept chain, "max_identity_within":
    highest identity between two kept chains}``.
    """
    if size < 1:
        raise InputError(f"the test split needs at least one chain, got size {size}")
    order = np.random.default_rng(seed).permutation(len(candidates))
    kept: list[ChainRecord] = []
    counts = {"examined": 0, "too_close_to_held": 0, "too_close_to_test": 0}
    highest_held = 0.0
    for start in range(0, len(order), batch):
        if len(kept) >= size:
            break
        chunk = [candidates[int(k)] for k in order[start:start + batch]]
        sequences = [r.sequence for r in chunk]
        to_held = np.maximum(cross_identities(sequences, held, cpus=cpus),
                             cross_identities(list(held), sequences, cpus=cpus).T).max(axis=1, initial=0.0)
        for record, closest in zip(chunk, to_held):
            if len(kept) >= size:
                break
            counts["examined"] += 1
            if closest > identity:
                counts["too_close_to_held"] += 1
                continue
            if kept:
                pair = np.maximum(cross_identities([record.sequence], [r.sequence for r in kept], cpus=cpus)[0],
                                  cross_identities([r.sequence for r in kept], [record.sequence], cpus=cpus)[:, 0])
                if pair.max() > identity:
                    counts["too_close_to_test"] += 1
                    continue
            kept.append(record)
            highest_held = max(highest_held, float(closest))
    if len(kept) < size:
        raise InputError(f"only {len(kept)} of the {len(candidates)} candidates are at most {identity:.0%} "
                         f"identical to the held chains and to each other; {size} were asked for")
    within = cross_identities([r.sequence for r in kept], [r.sequence for r in kept], cpus=cpus)
    within = np.maximum(within, within.T)
    np.fill_diagonal(within, 0.0)
    return kept, {**counts, "max_identity_to_held": highest_held, "max_identity_within": float(within.max())}


def max_cross_identity(table: pd.DataFrame, *, cpus: int = 1) -> float:
    """Highest identity (module docstring) between a validation chain and a training chain (0 if none)."""
    val = table[table["split"] == "validation"]["sequence"].tolist()
    train = table[table["split"] == "train"]["sequence"].tolist()
    if not val or not train:
        return 0.0
    return float(max(cross_identities(val, train, cpus=cpus).max(), cross_identities(train, val, cpus=cpus).max()))


def prepare_training_data(structures: Sequence[str | Path], out_dir: str | Path, *,
                          min_length: int = CHAIN_MIN_LENGTH, max_length: int = CHAIN_MAX_LENGTH,
                          identity: float = SPLIT_IDENTITY, val_fraction: float = VAL_FRACTION, seed: int = 0,
                          cpus: int = 1, names: set[str] | None = None, val_chains: int | None = None,
                          val_names: set[str] | None = None) -> pd.DataFrame:
    """Write ``out_dir/chains.parquet`` (:data:`TRAINING_CHAINS`), ``out_dir/a3m/{name}.a3m`` (query only)
    and ``out_dir/split.json`` (counts, settings, measured maximum cross-split identity).

    ``names``: only these chains; ``val_chains`` or ``val_names``: :func:`split_against_validation` instead of
    clustering."""
    out_dir = Path(out_dir)
    records, skipped = collect_chains(structures, min_length=min_length, max_length=max_length, names=names)
    if len(records) < 2:
        raise InputError(f"only {len(records)} usable chain(s) in {len(structures)} structure file(s)")
    measured: dict[str, float | int] = {}
    if val_chains or val_names:
        table, measured = split_against_validation(records, val_chains=val_chains, val_names=val_names,
                                                   identity=identity, seed=seed, cpus=cpus)
    else:
        table = split_by_identity(records, identity=identity, val_fraction=val_fraction, seed=seed, cpus=cpus)
    write_table(out_dir / "chains.parquet", table, TRAINING_CHAINS)
    for name, sequence in zip(table["name"], table["sequence"]):
        write_text_atomic(out_dir / "a3m" / f"{name}.a3m", f">{name}\n{sequence}\n")
    summary = {
        "structures": len(structures), "chains": len(table), "skipped": skipped,
        "clusters": int(table["cluster"].nunique()),
        "train_chains": int((table["split"] == "train").sum()),
        "validation_chains": int((table["split"] == "validation").sum()),
        "validation_clusters": int(table[table["split"] == "validation"]["cluster"].nunique()),
        "identity_threshold": identity, "min_length": min_length, "max_length": max_length, "seed": seed,
        "split_method": "against validation" if val_chains or val_names else "single-linkage clusters",
        "excluded_near_validation": int(measured.get("excluded", 0)),
        "validation_candidates_dropped": int(measured.get("validation_candidates_dropped", 0)),
        "max_cross_identity": (float(measured["max_cross_identity"]) if measured
                               else max_cross_identity(table, cpus=cpus)),
    }
    write_text_atomic(out_dir / "split.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return table
