"""A checkpoint on the fixed test split, whole chains, in regimes, beside the simplest baselines.

Chains: the names of ``--test-chains`` (``config/pdb_chains/test_chains.txt``, drawn by
``benchmarks/test_split.py``: at most 30% identical to every training and validation chain, both directions),
each with an A3M under ``--a3m-dir`` and template hits under ``--hits-dir`` (``trackfold templates search``
against the template database of the whole backbone archive), natives from ``--archive``.

Per chain, through the product's predict path (``trackfold predict``'s defaults: window 128, fold from the
distogram, calibrated pLDDT), whole chains, one CPU thread:

- **no template**: features without templates;
- **templates**: the chain's usable hits (never itself; none more than 90% identical over the *query's length*,
  identical residues / L, so a short perfect fragment counts as what it covers), up to ``--max-templates``
  (the workflow's default), only where the chain has one;
- **template copy** (baseline): the best usable hit's aligned Cα placed on the query residues, nothing
  elsewhere (an unplaced residue scores 0 in lDDT-Cα and TM-score);
- **ProMod3** (baseline, with ``--promod3`` where Debian's ``promod3`` is installed): SWISS-MODEL's modelling
  engine (``promod build-model``) from the same top usable hit: its backbone (N, CA, C, O) and the template
  search's alignment, residues without template coverage left out (scored 0), as a homology modeller would;
- **couplings alone** (baseline, contacts only): long-range top-L/5 precision of the APC covariance (the
  feature file's channel 0) and of the direct couplings (:mod:`workflow_lib.features.couplings`).

Scores: lDDT-Cα and TM-score (residue i to residue i) against the native, long-range (|i − j| ≥ 24) top-L/5
contact precision of the predicted distogram (P(Cβ < 8 Å)), mean pLDDT. Regimes in the report: no template
over all chains and by Neff (1, 2-10, 10-50, > 50); templates by the best usable template's identity over the
query's length (< 30%, 30-50%, 50-90%); the Pearson r of mean pLDDT with lDDT-Cα over every prediction.
Each chain's result is cached in ``--work`` (stamped with the checkpoint's weights), so a killed run resumes.
After a change that touches only the templates regime (the fold's use of templates, the template features), ``--reuse
EARLIER_WORK`` keeps the earlier run's other columns and predicts the templates regime again, checking on a sample
that the no-template predictions are unchanged.

    python benchmarks/test_split_eval.py --test-chains config/pdb_chains/test_chains.txt \\
        --archive ARCHIVE --a3m-dir A3MS --hits-dir HITS --templates TEMPLATE_DB --work WORK \\
        [--model models/trackfold_small_v4.pt] [--results-md benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch
from Bio.Data.PDBData import protein_letters_1to3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_bench.report import publish  # noqa: E402
from workflow_lib.evaluate.contacts import contact_probability, long_range_precision, native_contacts  # noqa: E402
from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.features.couplings import coupling_features  # noqa: E402
from workflow_lib.features.msa_features import DEFAULT_MAX_STATS_SEQS, sampling_order, sequence_weights  # noqa: E402
from workflow_lib.features.templates import hit_columns, read_hits  # noqa: E402
from workflow_lib.inference.confidence import PlddtCalibration  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, predict_group  # noqa: E402
from workflow_lib.inference.settings import PredictSettings, default_model_path  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.schemas.io import write_table  # noqa: E402
from workflow_lib.schemas.templates import TEMPLATE_HITS  # noqa: E402
from workflow_lib.seqio.atomic import write_text_atomic  # noqa: E402
from workflow_lib.seqio.msa import read_a3m  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.cbeta import virtual_cb  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.templates.search import QUERY_ONLY, TEMPLATE_ONLY  # noqa: E402
from workflow_lib.workflow.config import FeatureConfig  # noqa: E402

SECTION = "## The test split: {checkpoint}"
MAX_QUERY_IDENTITY = 0.9
PRECISION = PredictSettings().precision  # the network's precision in every prediction (--precision)
NEFF_BINS = ((0.0, 1.5, "1"), (1.5, 10.0, "2-10"), (10.0, 50.0, "10-50"), (50.0, np.inf, "> 50"))
IDENTITY_BINS = ((0.0, 0.3, "< 30%"), (0.3, 0.5, "30-50%"), (0.5, MAX_QUERY_IDENTITY + 1e-9, "50-90%"))


def predict_options() -> PredictOptions:
    """The product's predict defaults with the distogram kept (for contact precision) at ``--precision``."""
    return PredictOptions(pair_heads=("dist",), precision=PRECISION)


def read_names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def query_identity(hits, database, query_codes: np.ndarray) -> tuple[list, np.ndarray]:
    """Each hit's :class:`TemplateColumns` and its identity over the query's length (identical residues / L)."""
    columns = [hit_columns(row, database, query_codes) for _, row in hits.iterrows()]
    return columns, np.array([c.identical.sum() / len(query_codes) for c in columns], dtype=np.float64)


def promod3_model(row, database, query: str, work: Path) -> np.ndarray | None:
    """Cα ``[L, 3]`` of ProMod3's model from one hit (NaN where it built nothing), or None when it failed.

    The template file holds the hit's template residues ``tstart..tend`` that have N, CA, C and O; the
    alignment is the hit's, over the whole query (residues outside it aligned to gaps), with template residues
    without coordinates dropped (their query residues then face a gap)."""
    structure = database.structure(database.index(str(row["template"])))
    has_backbone = structure.atom_mask[:, :4].all(axis=1)
    present = [int(structure.residue_map[p]) >= 0 and bool(has_backbone[structure.residue_map[p]])
               for p in range(len(structure.sequence))]
    target, template, atoms = [], [], []
    i, j = int(row["qstart"]) - 1, int(row["tstart"]) - 1
    target += list(query[:i])
    template += ["-"] * i
    for letter in str(row["alignment"]):
        take_query = letter == "M" or letter in QUERY_ONLY
        take_template = (letter == "M" or letter in TEMPLATE_ONLY) and present[j]
        if take_query or take_template:
            target.append(query[i] if take_query else "-")
            template.append(structure.sequence[j] if take_template else "-")
        if take_template:
            atoms.append(j)
        i += take_query
        j += letter == "M" or letter in TEMPLATE_ONLY
    target += list(query[i:])
    template += ["-"] * (len(query) - i)
    if not atoms:
        return None
    lines = []
    for position in atoms:
        coords = structure.coords[structure.residue_map[position]]
        name = protein_letters_1to3.get(structure.sequence[position], "UNK").upper()
        for k, atom in enumerate(("N", "CA", "C", "O")):
            x, y, z = coords[k]
            lines.append(f"ATOM  {len(lines) + 1:5d}  {atom:<3s} {name} A{position + 1:4d}    "
                         f"{x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00           {atom[0]}")
    work.mkdir(parents=True, exist_ok=True)
    (work / "tpl.pdb").write_text("\n".join(lines) + "\nEND\n")
    (work / "aln.fasta").write_text(f">target\n{''.join(target)}\n>template\n{''.join(template)}\n")
    environment = dict(os.environ, PATH="/usr/bin:/bin")   # ProMod3 runs on Debian's Python and its OST
    result = subprocess.run(["promod", "build-model", "-f", "aln.fasta", "-p", "tpl.pdb", "-o", "model.pdb"],
                            cwd=work, capture_output=True, text=True, env=environment, timeout=900)
    model = work / "model.pdb"
    if result.returncode != 0 or not model.exists():
        return None
    ca = np.full((len(query), 3), np.nan)
    for line in model.read_text().splitlines():
        if line.startswith("ATOM") and line[12:16].strip() == "CA":
            number = int(line[22:26]) - 1
            if 0 <= number < len(query):
                ca[number] = [float(line[30:38]), float(line[38:46]), float(line[46:54])]
    return ca


def scores(ca: np.ndarray, probability: np.ndarray | None, native) -> dict:
    true_ca = native["ca"]
    present = np.isfinite(true_ca).all(axis=1)
    out = {"lddt": float(lddt_ca(ca, true_ca, present).score), "tm": float(tm_score(ca, true_ca, present))}
    if probability is not None:
        out["p_l5"] = long_range_precision(probability, native["contact"], native["valid"])[0]
    return out


def evaluate_chain(name: str, a3m: Path, hits_path: Path, native: dict, model, calibration, database,
                   max_templates: int, promod3: bool) -> dict:
    features = build_features(a3m)
    query = features["msa"][0]
    row = {"chain": name, "length": int(len(query)), "neff": float(features["neff"]),
           "depth": int(features["num_alignments"])}
    options = predict_options()
    began = time.process_time()
    ((_, bare),) = predict_group(model, [(name, features)], options, calibration=calibration)
    row["none"] = {**scores(bare.backbone[:, 1].astype(np.float64), contact_probability(bare.probs["dist"]),
                            native),
                   "plddt": float(bare.plddt.mean()), "cpu_s": time.process_time() - began}
    alignment = read_a3m(a3m)
    rows = np.arange(alignment.depth)
    if alignment.depth > DEFAULT_MAX_STATS_SEQS:
        rows = np.sort(sampling_order(alignment)[:DEFAULT_MAX_STATS_SEQS])
    codes = np.asarray(alignment.matches)[rows]
    couplings = coupling_features(codes, sequence_weights(codes))[..., 0]
    row["contacts"] = {
        "apc_cov": long_range_precision(features["coevolution"][..., 0], native["contact"], native["valid"])[0],
        "couplings": long_range_precision(couplings, native["contact"], native["valid"])[0]}
    row.update(template_regime(name, a3m, hits_path, native, model, calibration, database, max_templates, promod3,
                               query))
    return row


def template_regime(name: str, a3m: Path, hits_path: Path, native: dict, model, calibration, database,
                    max_templates: int, promod3: bool, query: np.ndarray) -> dict:
    """The chain's template regime and its baselines (the row's keys ``best_identity``, ``copy``, ``promod3``,
    ``templates``; none without a usable hit)."""
    row: dict = {}
    options = predict_options()
    hits = read_hits(hits_path)
    hits = hits[hits["template"] != name]
    if len(hits):
        columns, identity = query_identity(hits, database, query)
        keep = identity <= MAX_QUERY_IDENTITY
        hits, columns, identity = hits[keep].copy(), [c for c, k in zip(columns, keep) if k], identity[keep]
    if len(hits):
        best = int(np.argmax(identity[:max_templates]))  # the best of the hits the network is given
        row["best_identity"] = float(identity[:max_templates].max())
        copy_ca = columns[0].coords[:, 1].astype(np.float64)     # the top hit's coordinates, as a modeller takes
        row["copy"] = scores(copy_ca, None, native)
        row["copy"]["identity"] = float(identity[0])
        if promod3:
            with tempfile.TemporaryDirectory() as scratch:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                promod_ca = promod3_model(hits.iloc[0], database, decode_query(query), Path(scratch))
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if promod_ca is not None:
                row["promod3"] = {**scores(promod_ca, None, native),
                                  "cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime}
        hits["rank"] = np.arange(1, len(hits) + 1)
        with tempfile.TemporaryDirectory() as scratch:
            table = Path(scratch) / f"{name}.hits.parquet"
            write_table(table, hits, TEMPLATE_HITS)
            templated = build_features(a3m, templates=database, template_hits=table, max_templates=max_templates)
        began = time.process_time()
        ((_, with_templates),) = predict_group(model, [(name, templated)], options, calibration=calibration)
        row["templates"] = {**scores(with_templates.backbone[:, 1].astype(np.float64),
                                     contact_probability(with_templates.probs["dist"]), native),
                            "plddt": float(with_templates.plddt.mean()), "cpu_s": time.process_time() - began,
                            "best_of_given": best}
    return row


def reused_row(name: str, position: int, a3m: Path, hits: Path, native: dict, model, calibration, database,
               args: argparse.Namespace) -> dict:
    """The chain's row of the ``--reuse`` run with its templates regime predicted again (``--reuse``'s help)."""
    earlier = args.reuse / f"{name}.json"
    if not earlier.exists():
        raise SystemExit(f"test_split_eval: {earlier} missing: --reuse needs every chain of the earlier run")
    row = json.loads(earlier.read_text())["row"]
    features = build_features(a3m)
    if position % args.verify_every == 0:
        ((_, bare),) = predict_group(model, [(name, features)], predict_options(),
                                     calibration=calibration)
        again = scores(bare.backbone[:, 1].astype(np.float64), contact_probability(bare.probs["dist"]), native)
        if abs(again["lddt"] - row["none"]["lddt"]) > 1e-9 or abs(again["tm"] - row["none"]["tm"]) > 1e-9:
            raise SystemExit(f"test_split_eval: {name}'s no-template prediction differs from {earlier} "
                             f"(lDDT-Ca {again['lddt']:.6f} against {row['none']['lddt']:.6f}): not the same "
                             f"weights and no-template path, so --reuse does not apply")
    if "templates" in row:
        regime = template_regime(name, a3m, hits, native, model, calibration, database, args.max_templates, False,
                                 features["msa"][0])
        row["templates"] = regime["templates"]
    return row


def decode_query(codes: np.ndarray) -> str:
    from workflow_lib.seqio.alphabet import decode

    return decode(np.asarray(codes, dtype=np.int8))


def mean(rows: list[dict], key: str, field: str) -> float:
    values = [r[key][field] for r in rows if key in r and np.isfinite(r[key][field])]
    return float(np.mean(values)) if values else float("nan")


def report(rows: list[dict], name: str, args: argparse.Namespace) -> str:
    lines = ["| regime | chains | lDDT-Cα | TM-score | top-L/5 long | mean pLDDT | template copy lDDT-Cα / TM | "
             "ProMod3 lDDT-Cα / TM |",
             "|---|---|---|---|---|---|---|---|"]

    def line(label: str, chosen: list[dict], key: str) -> None:
        if not chosen:
            return
        copy = (f"{mean(chosen, 'copy', 'lddt'):.3f} / {mean(chosen, 'copy', 'tm'):.3f}"
                if key == "templates" else "-")
        modelled = [r for r in chosen if "promod3" in r]
        promod = (f"{mean(modelled, 'promod3', 'lddt'):.3f} / {mean(modelled, 'promod3', 'tm'):.3f} "
                  f"({len(modelled)})" if key == "templates" and modelled else "-")
        lines.append(f"| {label} | {len(chosen)} | {mean(chosen, key, 'lddt'):.3f} | {mean(chosen, key, 'tm'):.3f} | "
                     f"{mean(chosen, key, 'p_l5'):.3f} | {mean(chosen, key, 'plddt'):.1f} | {copy} | {promod} |")

    line("no template, all", rows, "none")
    for low, high, label in NEFF_BINS:
        line(f"no template, Neff {label}", [r for r in rows if low <= r["neff"] < high], "none")
    templated = [r for r in rows if "templates" in r]
    line("templates, every chain with a usable hit", templated, "templates")
    for low, high, label in IDENTITY_BINS:
        line(f"templates, best {label}", [r for r in templated if low <= r["best_identity"] < high], "templates")
    pooled = [(r[k]["plddt"], r[k]["lddt"]) for r in rows for k in ("none", "templates") if k in r]
    plddt, lddt = np.array(pooled).T
    contacts = " | ".join(f"{method} {mean(rows, 'contacts', method):.3f}" for method in ("apc_cov", "couplings"))
    long_rows = [r for r in rows if r["neff"] > 50]
    deep = (" | ".join(f"{method} {mean(long_rows, 'contacts', method):.3f}" for method in ("apc_cov", "couplings"))
            if long_rows else "-")
    cpu = np.median([r["none"]["cpu_s"] for r in rows])
    return "\n".join([
        f"`python benchmarks/test_split_eval.py --test-chains config/pdb_chains/test_chains.txt --archive ARCHIVE "
        f"--a3m-dir A3MS --hits-dir HITS --templates TEMPLATE_DB --work WORK --model {name}`, written "
        f"{datetime.now():%Y-%m-%d %H:%M}: {len(rows)} of the {args.listed} test chains (the list is in random "
        f"order), {min(r['length'] for r in rows)}-"
        f"{max(r['length'] for r in rows)} residues, whole chains, MSAs against UniProt-2014 + the Swiss-Prot "
        f"subsets (fast setting, 2 iterations), templates from the 19,939-chain PDB database (never the chain "
        f"itself, none above {MAX_QUERY_IDENTITY:.0%} identity over the query's length, up to "
        f"{args.max_templates}); `trackfold predict`'s defaults. Template regimes by the best given template's "
        f"identity over the query's length; the template copy places the top usable hit's Cα.",
        "",
        *lines,
        "",
        f"- pLDDT against lDDT-Cα over all {len(pooled)} predictions: Pearson r {np.corrcoef(plddt, lddt)[0, 1]:.2f}.",
        f"- Contacts from the alignment alone (long-range top-L/5, all chains): {contacts}; Neff > 50 "
        f"({len(long_rows)} chains): {deep}.",
        f"- Median CPU seconds of one no-template prediction (network and fold, one thread): {cpu:.1f}.",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test-chains", type=Path, default=ROOT / "config" / "pdb_chains" / "test_chains.txt")
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--a3m-dir", type=Path, required=True)
    parser.add_argument("--hits-dir", type=Path, required=True)
    parser.add_argument("--templates", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=default_model_path())
    parser.add_argument("--max-templates", type=int, default=FeatureConfig().max_templates)
    parser.add_argument("--limit", type=int, default=0, help="only the first N chains of the list (0: all)")
    parser.add_argument("--shard", default="0/1", help="K/N: predict only every N-th chain from the K-th (0-based), "
                                                       "so N processes share the list; the report covers every "
                                                       "cached chain")
    parser.add_argument("--report-only", action="store_true", help="report the cached chains, predict nothing")
    parser.add_argument("--promod3", action="store_true", help="also ProMod3's model from the top usable hit")
    parser.add_argument("--reuse", type=Path,
                        help="the work directory of an earlier run of the same weights whose templates regime is "
                             "to be predicted again (a change to the fold or the templates): its no-template "
                             "regime, baselines and contacts are kept, every --verify-every-th chain's no-template "
                             "prediction is recomputed and must match")
    parser.add_argument("--verify-every", type=int, default=40)
    parser.add_argument("--precision", default=PredictSettings().precision,
                        help="the network's precision (trackfold predict --precision; default the product's)")
    parser.add_argument("--results-md", type=Path)
    args = parser.parse_args()
    global PRECISION
    PRECISION = args.precision
    torch.set_num_threads(1)
    from workflow_lib.templates.database import load_template_db

    model, extra = load_checkpoint(args.model)
    model.eval()
    calibration = PlddtCalibration.from_extra(extra)
    stamp = (hashlib.blake2b(args.model.read_bytes(), digest_size=16).hexdigest()
             + f" {args.max_templates} promod3={args.promod3}"
             + ("" if args.precision == PredictSettings().precision else f" precision={args.precision}"))
    names = read_names(args.test_chains)
    args.listed = len(names)
    if args.limit:
        names = names[:args.limit]
    shard, shards = (int(part) for part in args.shard.split("/"))
    mine = set(names[shard::shards])
    args.work.mkdir(parents=True, exist_ok=True)
    database = natives = None
    rows = []
    for name in names:
        cache = args.work / f"{name}.json"
        if cache.exists():
            cached = json.loads(cache.read_text())
            if cached.get("stamp") == stamp:
                rows.append(cached["row"])
                continue
        a3m, hits = args.a3m_dir / f"{name}.a3m", args.hits_dir / f"{name}.hits.parquet"
        if args.report_only or name not in mine or not a3m.exists() or not hits.exists():
            continue
        if database is None:
            database = load_template_db(args.templates)
            natives = {}
            for entry in read_backbone_archive(args.archive, names=set(names)):
                coords = entry.chain.coords
                cb = virtual_cb(coords[:, 0], coords[:, 1], coords[:, 2])
                contact, valid = native_contacts(cb)
                natives[entry.chain.name.replace(".", "_")] = {"ca": coords[:, 1].astype(np.float64),
                                                               "contact": contact, "valid": valid}
        if args.reuse is not None:
            row = reused_row(name, names.index(name), a3m, hits, natives[name], model, calibration, database, args)
        else:
            row = evaluate_chain(name, a3m, hits, natives[name], model, calibration, database, args.max_templates,
                                 args.promod3 and shutil.which("promod") is not None)
        write_text_atomic(cache, json.dumps({"stamp": stamp, "row": row}) + "\n")
        rows.append(row)
        print(json.dumps({"chain": name, "length": row["length"], "neff": round(row["neff"], 1),
                          "none": round(row["none"]["lddt"], 3),
                          "templates": round(row["templates"]["lddt"], 3) if "templates" in row else None}),
              flush=True)
    if not rows:
        raise SystemExit("test_split_eval: no chain has an A3M and template hits yet")
    publish(report(rows, args.model.name, args), args.results_md, SECTION.format(checkpoint=args.model.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
