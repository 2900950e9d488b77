"""What a structure costs and what it is worth: inference settings side by side on held-out chains with known
structures, with and without templates, per length bin.

    python benchmarks/predict_cost.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB
        --structures pdb_chains_promod3/backbone.npz --chains CHAINS.parquet [--every 2]
        [--settings all/float32/64/4,contacts/bfloat16/64/2] [--checkpoint models/trackfold_small_v4.pt]
        [--proteome UP000000625_83333.fasta.gz] [--results-md benchmarks/RESULTS.md]

A setting is ``crop_pairs/precision/max_msa/starts[/model]``: ``predict.crop_pairs`` (every pair of half-window segments,
the neighbouring ones plus those a template puts in contact, or the neighbouring ones alone;
:mod:`workflow_lib.inference.stitch`; ``contacts:K`` counts a pair of segments in contact from K template
contacts instead of the default ``SEGMENT_CONTACTS``),
``predict.precision``, ``predict.max_msa``, the fold's independent minimisations (``starts``, or
``starts:iterations`` for fewer minimisation steps, the polish a quarter of them; ``4g``: the first start from
the distogram's distance geometry) and the checkpoint
(a ``--model NAME=PATH``; default ``--checkpoint``). The first setting is the reference. Each chain is predicted as a proteome run predicts it (``fold: distogram``, window
128, no 6D maps kept, the checkpoint's pLDDT calibration, the template restraints of
``predict.template_weight`` and the anchors of ``predict.template_anchor``) twice: from its MSA alone, and with its usable template
hits (never the chain itself, none above 90% identity; chains without one are counted in the first regime only).
Settings that share the network's part share its pass; the network's and the fold's CPU seconds
(``time.process_time``, one torch thread) are reported apart. Accuracy: lDDT-Cα and TM-score of the folded
backbone against the chain's PDB backbone over its whole length, and the Pearson r of per-chain mean pLDDT with
the true lDDT-Cα.

With ``--proteome``, each setting's CPU per chain is fitted as ``a + b L + c L²`` over the chains (per regime)
and summed over the proteome's lengths: the projected CPU seconds per protein of that proteome.

Chains: the validation chains of a training run's ``chains.parquet`` (at most 30% identical to any training
chain) with an A3M under ``--a3m-dir`` and a hits table in ``--hits-dir``, by length, every ``--every``-th.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_window import add_chain_arguments, chains_to_run, usable_hits  # noqa: E402
from search_bench.report import publish  # noqa: E402
from workflow_lib.features.build import build_features  # noqa: E402
from workflow_lib.inference.confidence import PlddtCalibration  # noqa: E402
from workflow_lib.inference.fold import FoldOptions  # noqa: E402
import workflow_lib.inference.predict as predict_module  # noqa: E402
from workflow_lib.inference.predict import PredictOptions, fold_prediction, plan_crops, predict_group  # noqa: E402,E501
from workflow_lib.inference.settings import SEGMENT_CONTACTS  # noqa: E402
from workflow_lib.inference.template_restraints import fold_anchors, restrained_distogram  # noqa: E402
from workflow_lib.model.checkpoint import load_checkpoint  # noqa: E402
from workflow_lib.structure.backbones import read_backbone_archive  # noqa: E402
from workflow_lib.structure.metrics import lddt_ca, tm_score  # noqa: E402
from workflow_lib.templates.database import load_template_db  # noqa: E402
from workflow_lib.workflow.config import FeatureConfig  # noqa: E402

SECTION = "## Structure prediction: inference settings, cost against accuracy (validation chains)"
BINS = ((0, 128), (129, 256), (257, 384), (385, 100_000))


@dataclasses.dataclass(frozen=True)
class Setting:
    crop_pairs: str
    precision: str
    max_msa: int
    starts: str
    model: str = ""

    @classmethod
    def parse(cls, text: str) -> Setting:
        crop_pairs, precision, max_msa, starts, *model = text.split("/")
        return cls(crop_pairs, precision, int(max_msa), starts, model[0] if model else "")

    def fold_options(self) -> FoldOptions:
        starts, _, iterations = self.starts.partition(":")
        geometry = starts.endswith("g")
        starts = starts.rstrip("g")
        if not iterations:
            return FoldOptions(starts=int(starts), geometry_start=geometry)
        return FoldOptions(starts=int(starts), iterations=int(iterations), polish=int(iterations) // 4,
                           geometry_start=geometry)

    def __str__(self) -> str:
        return f"{self.crop_pairs}/{self.precision}/{self.max_msa}/{self.starts}" + (
            f"/{self.model}" if self.model else "")


def predict(model, calibration, name, features, setting: Setting, cache: dict) -> dict:
    """One setting on one chain: the network's pass (shared through ``cache`` by the settings that run the same
    crops) and the fold, timed apart."""
    crop_pairs, _, min_contacts = setting.crop_pairs.partition(":")
    options = PredictOptions(fold="network", pair_heads=("dist",), crop_pairs=crop_pairs,
                             precision=setting.precision, max_msa=setting.max_msa)
    plan = plan_crops(features, options, int(min_contacts) if min_contacts else SEGMENT_CONTACTS)
    key = (setting.model, setting.precision, setting.max_msa,
           tuple((int(c.indices[0]), int(c.indices[-1])) for c in plan))
    if key not in cache:
        predict_module.SEGMENT_CONTACTS = int(min_contacts) if min_contacts else SEGMENT_CONTACTS
        start = time.process_time()
        ((_, raw),) = predict_group(model, [(name, features)], options)
        cache[key] = (raw, time.process_time() - start)
        predict_module.SEGMENT_CONTACTS = SEGMENT_CONTACTS
    raw, network_seconds = cache[key]
    start = time.process_time()
    restraints = restrained_distogram(raw.probs["dist"], features, PredictOptions().template_weight)
    folded = fold_prediction(dataclasses.replace(raw), keep_dist=False, seed=0, calibration=calibration,
                             fold_options=setting.fold_options(), restraints=restraints,
                             anchors=fold_anchors(features, PredictOptions().template_anchor))
    return {"prediction": folded, "network_s": network_seconds, "fold_s": time.process_time() - start,
            "crops": raw.n_crops}


def pearson(x: list[float], y: list[float]) -> float:
    return float(np.corrcoef(x, y)[0, 1]) if len(x) > 2 else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_chain_arguments(parser)
    parser.add_argument("--every", type=int, default=1, help="every N-th validation chain by length")
    parser.add_argument("--min-length", type=int, default=0)
    parser.add_argument("--settings", default="all/float32/64/4,contacts/float32/64/4,contacts:24/float32/64/4,"
                                              "neighbours/float32/64/4,contacts/float32/64/2,neighbours/float32/64/2,"
                                              "contacts/float32/32/2")
    parser.add_argument("--max-templates", type=int, default=FeatureConfig().max_templates)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models" / "trackfold_small_v4.pt")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                        help="a checkpoint that settings name as their fifth field (repeatable)")
    parser.add_argument("--proteome", type=Path, help="FASTA whose lengths the CPU per protein is projected onto")
    parser.add_argument("--regimes", default="no template,templates",
                        help="comma-separated regimes to run (default: %(default)s)")
    parser.add_argument("--results-md", type=Path)
    parser.add_argument("--section", default=SECTION, help="the RESULTS.md section to write (default: %(default)s)")
    args = parser.parse_args()
    settings = [Setting.parse(text) for text in args.settings.split(",")]
    torch.set_num_threads(1)
    models = {}
    for name, path in [("", args.checkpoint)] + [tuple(text.split("=", 1)) for text in args.model]:
        model, extra = load_checkpoint(path)
        models[name] = (model, PlddtCalibration.from_extra(extra))
    unknown = sorted({setting.model for setting in settings} - set(models))
    if unknown:
        parser.error(f"settings name checkpoints not given with --model: {unknown}")
    database = load_template_db(args.templates)
    chains = chains_to_run(args.chains, args.a3m_dir, args.hits_dir, args.min_length, 0, args.every)
    natives = {entry.chain.name: entry.chain for entry in
               read_backbone_archive(args.structures, names={name for name, *_ in chains})}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, length, a3m, hits in chains:
            native = natives[name]
            true_ca = native.coords[:, 1].astype(np.float64)
            present = np.isfinite(true_ca).all(axis=1)
            with_templates = build_features(a3m, templates=database,
                                            template_hits=usable_hits(hits, name, Path(scratch)),
                                            max_templates=args.max_templates)
            alone = {key: (value[:0] if key.startswith("template_") else value)
                     for key, value in with_templates.items()}          # the same features, T = 0
            regimes = [("no template", alone)]
            if with_templates["template_mask"].size:
                regimes.append(("templates", with_templates))
            regimes = [(regime, features) for regime, features in regimes if regime in args.regimes.split(",")]
            for regime, features in regimes:
                cache: dict = {}
                for setting in settings:
                    out = predict(*models[setting.model], name, features, setting, cache)
                    ca = out["prediction"].backbone[:, 1].astype(np.float64)
                    rows.append({"chain": name, "length": length, "regime": regime, "setting": str(setting),
                                 "crops": out["crops"], "network_s": out["network_s"], "fold_s": out["fold_s"],
                                 "lddt": float(lddt_ca(ca, true_ca, present).score),
                                 "tm": tm_score(ca, true_ca, present),
                                 "plddt": float(out["prediction"].plddt.mean()) / 100.0})
                    print(" ".join(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
                                   for key, value in rows[-1].items()), flush=True)
    publish(render(rows, settings, args), args.results_md, args.section)
    return 0


def proteome_lengths(path: Path) -> np.ndarray:
    from workflow_lib.seqio.fasta import read_fasta

    return np.array([len(record.sequence) for record in read_fasta(path)], dtype=np.float64)


def projected(group: list[dict], lengths: np.ndarray) -> float:
    """Mean CPU seconds per protein of ``lengths`` from ``a + b L + c L²`` fitted to the group's chains."""
    length = np.array([r["length"] for r in group], dtype=np.float64)
    cost = np.array([r["network_s"] + r["fold_s"] for r in group])
    design = np.stack([np.ones_like(length), length, length ** 2], axis=1)
    coefficients, *_ = np.linalg.lstsq(design, cost, rcond=None)
    return float(np.mean(np.stack([np.ones_like(lengths), lengths, lengths ** 2], axis=1) @ coefficients))


def render(rows: list[dict], settings: list[Setting], args: argparse.Namespace) -> str:
    names = [str(s) for s in settings]
    reference = names[0]

    def select(**where) -> list[dict]:
        return [r for r in rows if all(r[k] == v for k, v in where.items())]

    lines = ["| regime | residues | chains | setting | crops | network CPU s | fold CPU s | CPU s per chain | "
             "CPU vs first | lDDT-Cα | TM | pLDDT r |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for regime in ("no template", "templates"):
        for low, high in BINS + ((0, 100_000),):
            span = "all" if (low, high) == (0, 100_000) else (f"{low}-{high}" if high < 100_000 else f"> {low - 1}")
            base = [r for r in select(regime=regime, setting=reference) if low <= r["length"] <= high]
            if not base:
                continue
            base_cost = np.mean([r["network_s"] + r["fold_s"] for r in base])
            for name in names:
                group = [r for r in select(regime=regime, setting=name) if low <= r["length"] <= high]
                cost = np.mean([r["network_s"] + r["fold_s"] for r in group])
                lines.append(
                    f"| {regime} | {span} | {len(group)} | `{name}` | {np.mean([r['crops'] for r in group]):.1f} | "
                    f"{np.mean([r['network_s'] for r in group]):.2f} | {np.mean([r['fold_s'] for r in group]):.2f} | "
                    f"{cost:.2f} | {base_cost / cost:.2f}x | {np.mean([r['lddt'] for r in group]):.3f} | "
                    f"{np.mean([r['tm'] for r in group]):.3f} | "
                    f"{pearson([r['plddt'] for r in group], [r['lddt'] for r in group]):.2f} |")
    if args.proteome:
        lengths = proteome_lengths(args.proteome)
        lines += ["", f"Projected onto the {lengths.size:,} proteins of `{args.proteome.name}` (CPU s per protein, "
                  "fitted a + b L + c L² per setting and regime):", "",
                  "| setting | no template | templates |", "|---|---|---|"]
        for name in names:
            cells = [f"{projected(select(regime=regime, setting=name), lengths):.2f}" if select(regime=regime,
                     setting=name) else "-" for regime in ("no template", "templates")]
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    command = (f"`python benchmarks/predict_cost.py --a3m-dir MSAS --hits-dir HITS --templates TEMPLATE_DB "
               f"--structures STRUCTURES --chains CHAINS.parquet --every {args.every} --settings "
               f"{','.join(names)} --checkpoint {args.checkpoint.name}"
               + "".join(f" --model {text.split('=', 1)[0]}={Path(text.split('=', 1)[1]).name}" for text in args.model)
               + (f" --regimes '{args.regimes}'" if args.regimes != "no template,templates" else "")
               + (f" --min-length {args.min_length}" if args.min_length else "")
               + (" --proteome PROTEOME" if args.proteome else "") + "`")
    return "\n".join([
        f"{command}, written {datetime.now():%Y-%m-%d %H:%M}: {len({r['chain'] for r in rows})} validation chains, "
        f"each from its MSA alone and with up to {args.max_templates} usable template hits; settings are "
        f"`crop_pairs/precision/max_msa/fold starts[/checkpoint]`, the first is the reference. One torch thread, "
        f"{platform.machine()}, torch {torch.__version__}; CPU seconds per chain (network and fold apart).",
        "", *lines, ""])


if __name__ == "__main__":
    raise SystemExit(main())
