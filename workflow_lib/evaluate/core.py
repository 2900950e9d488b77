"""Evaluation of predicted structures against experimental ones (``trackfold evaluate``).

One target = a predicted model (PDB, optionally its ``.pred.npz``), the native structure (PDB/mmCIF, ``.gz``
allowed) and optionally the A3M the prediction was made from. Residues as backbone frames and Cβ–Cβ distances
as in trRosetta and RoseTTAFold (Yang et al. 2020, PNAS 117:1496; Baek et al. 2021, Science 373:871); pLDDT,
the network's own estimate of its per-residue lDDT-Cα, as in AlphaFold 2 (Jumper et al. 2021, Nature 596:583,
supplement section 1.9.6). Per target:

1. **Residues.** The prediction's sequence (its PDB; the npz ``aatype`` must agree) is matched to the native
   chain's *observed* residues (those with a Cα) by :func:`~workflow_lib.evaluate.align.match_residues`;
   ``aligned`` counts the matched pairs, ``seq_identity`` the identical fraction (below 50% the native is
   taken for another protein: an error). Only matched residues are scored.
2. **lDDT-Cα** (:func:`workflow_lib.structure.metrics.lddt_ca`, 15 Å inclusion radius on the native, pooled
   over pairs) of the matched Cα, per residue and global; ``rmsd_all`` is the Kabsch RMSD over all matched Cα.
3. **TM-score / RMSD**, normalised by the native's observed length: ``tm_score_fixed`` with the matching as
   the residue correspondence (:func:`workflow_lib.structure.metrics.tm_score`, the TM-score program's
   question, always computed); ``tm_score``, ``rmsd`` and ``tm_aligned`` from TM-align's sequence-independent
   alignment (:mod:`workflow_lib.evaluate.tmalign`; NaN and ``tmalign_status`` without the program).
4. **pLDDT calibration**: the npz ``plddt`` (else the model's Cα B-factors), 0–100 (a model whose values all
   lie in [0, 1] is read as 0–1 and scaled by 100), against the true per-residue lDDT-Cα: Pearson r and mean
   absolute error of pLDDT/100 over matched residues with a scored lDDT.
5. **Contacts** (:mod:`workflow_lib.evaluate.contacts`): precision of the top L/5 and L long-range pairs
   (|i − j| ≥ 24, Cβ < 8 Å) by the predicted distogram (needs the npz) and by APC co-evolution of the A3M
   (the baseline; ``coevo_*`` = covariance norm, ``coevo_mi_*`` = mutual information), with the A3M's depth
   and Neff. All four precisions are NaN when the matched native residues have no long-range contact.

Outputs of :func:`evaluate_targets` (each written atomically): ``evaluation.parquet`` (:data:`EVALUATION`),
``evaluation_residues.parquet`` (:data:`EVALUATION_RESIDUES`), ``evaluation.json`` (``count`` and the mean
over targets of every numeric column, NaN left out, null when no target has a value:
:func:`~workflow_lib.evaluate.summary.summary_means`), ``evaluation.html``
with the PNG figures (:mod:`workflow_lib.evaluate.report`).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workflow_lib.errors import InputError, SchemaError, TrackfoldError
from workflow_lib.evaluate.align import match_residues
from workflow_lib.evaluate.contacts import (
    LONG_RANGE,
    coevolution_baseline,
    contact_probability,
    long_range_precision,
    native_contacts,
)
from workflow_lib.evaluate.summary import summary_means
from workflow_lib.evaluate.tmalign import TmResult, run_tmalign
from workflow_lib.schemas.evaluation import EVALUATION, EVALUATION_RESIDUES
from workflow_lib.schemas.io import read_npz, write_table
from workflow_lib.seqio.alphabet import decode
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.structure.geometry import DIST_BINS
from workflow_lib.structure.metrics import kabsch_rmsd, lddt_ca, tm_score
from workflow_lib.structure.backbones import is_backbone_archive, read_backbone_archive
from workflow_lib.structure.parse import Chain, entry_name, read_structure

LOG = logging.getLogger(__name__)


TARGET_COLUMNS = ("name", "pred", "native", "native_chain", "pred_npz", "a3m")
"""Columns of a targets table (``native_chain``, ``pred_npz``, ``a3m`` may be empty)."""
MIN_CALIBRATION_RESIDUES = 3
MIN_IDENTITY = 0.5
"""Below this identity over aligned pairs the native is taken for another protein (an InputError)."""


@dataclass(frozen=True)
class PredictedModel:
    """What evaluation reads from a prediction: sequence, Cα ``[L, 3]``, pLDDT ``[L]`` (0–100, NaN: none) and
    the distance-bin probabilities ``[L, L, 37]`` (None without a ``.pred.npz``)."""

    sequence: str
    ca: np.ndarray
    plddt: np.ndarray
    dist: np.ndarray | None


@dataclass(frozen=True)
class NativeChain:
    """The observed residues (with a Cα) of the native chain."""

    chain_id: str
    sequence: str
    ca: np.ndarray
    cb: np.ndarray
    residue_numbers: tuple[str, ...]


def _percent(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size and finite.min() >= 0.0 and finite.max() <= 1.0:
        return values * 100.0
    return values


def read_prediction(pred_pdb: str | Path, pred_npz: str | Path | None = None) -> PredictedModel:
    """The predicted model of ``pred_pdb`` (one chain), with pLDDT and distogram from ``pred_npz`` when given."""
    chains = read_structure(pred_pdb)
    if len(chains) != 1:
        raise InputError(f"a predicted model must hold one protein chain, found {len(chains)} "
                         f"({', '.join(repr(c.chain_id) for c in chains)})", path=pred_pdb)
    model = chains[0]
    plddt, dist = _percent(model.bfactors), None
    if pred_npz:
        from workflow_lib.schemas.prediction import PREDICTION

        try:
            arrays = read_npz(pred_npz, PREDICTION)
        except SchemaError as error:
            raise InputError(f"unreadable prediction arrays: {error}", path=pred_npz) from None
        npz_sequence = decode(arrays["aatype"].astype(np.uint8))
        if npz_sequence != model.sequence:
            raise InputError(f"aatype ({len(npz_sequence)} residues) differs from the sequence of {pred_pdb} "
                             f"({len(model.sequence)} residues)", path=pred_npz)
        plddt = _percent(arrays["plddt"])
        if "dist" in arrays:  # written unless trackfold predict ran with --pair-heads without dist
            if arrays["dist"].shape[-1] != DIST_BINS:
                raise InputError(f"dist has {arrays['dist'].shape[-1]} bins, expected {DIST_BINS}", path=pred_npz)
            dist = arrays["dist"].astype(np.float32)
    return PredictedModel(model.sequence, model.ca.astype(np.float64), plddt, dist)


def read_native(native: str | Path, chain_id: str | None = None) -> NativeChain:
    """Observed residues of ``chain_id`` (None or blank: the first protein chain) of the native structure.

    ``native`` may be a backbone archive (:mod:`workflow_lib.structure.backbones`); ``chain_id`` then names the
    chain (``XXXX_C``) and is required."""
    if is_backbone_archive(native):
        if chain_id is None or not str(chain_id).strip():
            raise InputError("a backbone archive as the native needs the chain's name (XXXX_C)", path=native)
        found = [entry.chain for entry in read_backbone_archive(native, names={str(chain_id).strip()})]
        if not found:
            raise InputError(f"no chain {chain_id!r} in the archive", path=native, record=str(chain_id))
        chain: Chain = found[0]
    elif chain_id is not None and str(chain_id).strip():
        chains = [c for c in read_structure(native) if c.chain_id == str(chain_id).strip()]
        if not chains:
            available = ", ".join(repr(c.chain_id) for c in read_structure(native))
            raise InputError(f"no protein chain {chain_id!r}; the file has {available}", path=native,
                             record=str(chain_id))
        chain = chains[0]
    else:
        chain = read_structure(native)[0]
    observed = np.flatnonzero(np.isfinite(chain.ca).all(axis=1))
    if observed.size == 0:
        raise InputError("the native chain has no residue with a Cα", path=native, record=chain.chain_id)
    return NativeChain(chain.chain_id, "".join(chain.sequence[i] for i in observed),
                       chain.ca[observed].astype(np.float64), chain.cb_filled()[observed].astype(np.float64),
                       tuple(chain.residue_numbers[i] for i in observed))


def _calibration(plddt: np.ndarray, lddt: np.ndarray) -> tuple[float, float]:
    """Pearson r and MAE of pLDDT/100 against lDDT over residues where both are finite."""
    use = np.isfinite(plddt) & np.isfinite(lddt)
    if use.sum() < MIN_CALIBRATION_RESIDUES:
        return math.nan, math.nan
    x, y = plddt[use] / 100.0, lddt[use]
    mae = float(np.mean(np.abs(x - y)))
    if np.std(x) == 0 or np.std(y) == 0:
        return math.nan, mae
    return float(np.corrcoef(x, y)[0, 1]), mae


def evaluate_target(pred_pdb: str | Path, native: str | Path, *, native_chain: str | None = None,
                    pred_npz: str | Path | None = None, a3m: str | Path | None = None, name: str | None = None,
                    tmalign: bool = True) -> tuple[dict, pd.DataFrame]:
    """Metrics of one prediction (module docstring): the :data:`EVALUATION` row and its residue table.

    Raises :class:`~workflow_lib.errors.InputError` naming the file for an unreadable file, a missing native
    chain, a ``.pred.npz`` that does not belong to the model, or no residue matched (identity < 50%).
    """
    name = name or entry_name(pred_pdb)
    model = read_prediction(pred_pdb, pred_npz or None)
    target = read_native(native, native_chain)
    length = len(model.sequence)
    match = match_residues(model.sequence, target.sequence)
    if match.aligned == 0 or match.identity < MIN_IDENTITY:
        raise InputError(f"no residue of the prediction {pred_pdb} matches the native chain "
                         f"({match.aligned} aligned, {match.identical} identical): not the same protein?",
                         path=native, record=target.chain_id)
    pred_ca, true_ca = model.ca[match.first], target.ca[match.second]

    lddt = lddt_ca(pred_ca, true_ca)
    per_residue = np.full(length, np.nan)
    per_residue[match.first] = lddt.per_residue
    both = np.isfinite(pred_ca).all(axis=1) & np.isfinite(true_ca).all(axis=1)
    rmsd_all = kabsch_rmsd(pred_ca, true_ca) if both.sum() >= 3 else math.nan
    pearson, mae = _calibration(model.plddt, per_residue)

    tm_fixed = tm_score(pred_ca, true_ca, length=len(target.sequence)) if both.any() else math.nan
    if tmalign:
        usable = np.isfinite(pred_ca).all(axis=1)
        tm = run_tmalign(pred_ca[usable], true_ca[usable],
                         "".join(model.sequence[i] for i in match.first[usable]),
                         "".join(target.sequence[j] for j in match.second[usable]), len(target.sequence))
    else:
        tm = TmResult(math.nan, math.nan, math.nan, math.nan, "disabled")

    cb = np.full((length, 3), np.nan)
    cb[match.first] = target.cb[match.second]
    contact, valid = native_contacts(cb)
    separation = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
    long_pairs = np.triu(valid & (separation >= LONG_RANGE), 1)
    long_contacts = int((contact & long_pairs).sum())
    random_precision = long_contacts / int(long_pairs.sum()) if long_pairs.any() else math.nan
    p_l5 = p_l = math.nan
    if long_contacts == 0:  # precision would be 0 whatever the scores: not a measurement of the model
        LOG.warning("%s: no long-range native contact among matched residues; contact precisions are NaN", name)
    if model.dist is not None and long_contacts:
        p_l5, p_l = long_range_precision(contact_probability(model.dist), contact, valid)
    coevo = {"coevo_p_l5_long": math.nan, "coevo_p_l_long": math.nan, "coevo_mi_p_l5_long": math.nan,
             "coevo_mi_p_l_long": math.nan, "msa_depth": None, "msa_neff": math.nan}
    if a3m:  # depth and Neff are reported even when there is no contact to rank
        baseline = coevolution_baseline(a3m, model.sequence)
        coevo_valid = valid & baseline.mapped[:, None] & baseline.mapped[None, :]
        if long_contacts:
            coevo["coevo_p_l5_long"], coevo["coevo_p_l_long"] = long_range_precision(
                baseline.covariance, contact, coevo_valid)
            coevo["coevo_mi_p_l5_long"], coevo["coevo_mi_p_l_long"] = long_range_precision(
                baseline.mutual_information, contact, coevo_valid)
        coevo.update(msa_depth=baseline.depth, msa_neff=baseline.neff)

    row = {"name": name, "pred": str(pred_pdb), "native": str(native), "native_chain": target.chain_id,
           "length": length, "native_length": len(target.sequence), "aligned": match.aligned,
           "seq_identity": match.identity, "lddt_ca": float(lddt.score), "tm_score": tm.tm_score,
           "tm_score_fixed": tm_fixed, "rmsd": tm.rmsd, "tm_aligned": tm.aligned, "rmsd_all": rmsd_all,
           "tmalign_status": tm.status,
           "mean_plddt": float(np.nanmean(model.plddt)) if np.isfinite(model.plddt).any() else math.nan,
           "plddt_lddt_pearson": pearson, "plddt_mae": mae, "long_contacts": long_contacts,
           "random_p_long": random_precision,
           "p_l5_long": p_l5, "p_l_long": p_l, **coevo}
    partner = match.mapping(length)
    residues = pd.DataFrame({
        "name": name,
        "index": np.arange(length, dtype=np.int32),
        "aa": list(model.sequence),
        "native_residue": [target.residue_numbers[j] if j >= 0 else "" for j in partner],
        "native_aa": [target.sequence[j] if j >= 0 else "" for j in partner],
        "plddt": model.plddt.astype(np.float32),
        "lddt_ca": per_residue.astype(np.float32),
    })
    return row, residues


def read_targets(path: str | Path) -> pd.DataFrame:
    """A targets TSV (header line; :data:`TARGET_COLUMNS`, the last three optional), validated."""
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, comment=None)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InputError(f"not a readable targets TSV: {error}", path=path) from None
    return check_targets(table, where=path)


def check_targets(targets: pd.DataFrame, *, where: str | Path | None = None) -> pd.DataFrame:
    """``targets`` with every :data:`TARGET_COLUMNS` column as strings ("" for absent optional values)."""
    missing = [c for c in ("name", "pred", "native") if c not in targets.columns]
    if missing:
        raise InputError(f"targets table lacks column(s) {missing}; expected {list(TARGET_COLUMNS)}", path=where)
    if len(targets) == 0:
        raise InputError("targets table has no rows", path=where)
    table = targets.copy()
    for column in TARGET_COLUMNS:
        if column not in table.columns:
            table[column] = ""
        table[column] = [("" if value is None or (isinstance(value, float) and math.isnan(value))
                          else str(value).strip()) for value in table[column]]
    for index, row in table.iterrows():
        for column in ("name", "pred", "native"):
            if not row[column]:
                raise InputError(f"empty {column!r}", path=where, record=row["name"] or f"row {index + 1}")
    duplicated = sorted(set(table["name"][table["name"].duplicated()]))
    if duplicated:
        raise InputError(f"duplicate target names {duplicated[:5]}", path=where)
    return table[list(TARGET_COLUMNS)].reset_index(drop=True)


def evaluate_targets(targets: pd.DataFrame, out_dir: str | Path, *, tmalign: bool = True) -> pd.DataFrame:
    """Evaluate every target (:data:`TARGET_COLUMNS`) and write the outputs (module docstring) to ``out_dir``.

    Returns the :data:`EVALUATION` table. A bad target stops the run with an :class:`InputError` naming it.
    """
    from workflow_lib.evaluate.report import write_report   # imported here: it loads matplotlib

    targets = check_targets(targets)
    out_dir = Path(out_dir)
    rows, residue_tables = [], []
    for target in targets.itertuples(index=False):
        try:
            row, residues = evaluate_target(target.pred, target.native, native_chain=target.native_chain or None,
                                            pred_npz=target.pred_npz or None, a3m=target.a3m or None,
                                            name=target.name, tmalign=tmalign)
        except InputError as error:
            if error.record is not None:
                raise
            raise InputError(error.problem, path=error.path, record=target.name) from error
        except TrackfoldError as error:
            raise InputError(str(error), record=target.name) from error
        LOG.info("%s: aligned %d/%d, lDDT-Cα %.3f, TM-score %.3f, P@L/5 long %.2f (co-evolution %.2f)",
                 row["name"], row["aligned"], row["length"], row["lddt_ca"], row["tm_score"], row["p_l5_long"],
                 row["coevo_p_l5_long"])
        rows.append(row)
        residue_tables.append(residues)
    table = pd.DataFrame(rows, columns=[f.name for f in EVALUATION.schema])
    table["msa_depth"] = table["msa_depth"].astype("Int32")
    residues = pd.concat(residue_tables, ignore_index=True)
    write_table(out_dir / "evaluation.parquet", table, EVALUATION)
    write_table(out_dir / "evaluation_residues.parquet", residues, EVALUATION_RESIDUES)
    write_text_atomic(out_dir / "evaluation.json", json.dumps(summary_means(table), indent=2) + "\n")
    write_report(out_dir, table, residues)
    return table
