"""Build a template database from structure files (templates as HHsearch searches them, with DSSP states for its
secondary structure score, Söding 2005, Bioinformatics 21:951; trRosetta's 6D geometry, Yang et al. 2020,
PNAS 117:1496).

``build_template_db(structures, out_dir, msa_dir=...)``: every protein chain of the first model of each PDB or
mmCIF file (plain or gzip; :func:`workflow_lib.structure.read_structure`), and every chain of a backbone archive
(``.npz`` with its sequence and DSSP files beside it, :mod:`workflow_lib.structure.backbones`: ProMod3's 19,939
PDB chains, for example), becomes one template with

- **coordinates** N, CA, C, O and the file's CB for every observed residue, with atom masks (the virtual CB is
  built later, where the 6D maps are computed);
- **secondary structure** from a backbone archive's DSSP file, else from ``mkdssp`` (8 states and the H/E/C reduction of
  :mod:`workflow_lib.structure.dssp`). Without mkdssp on PATH every state is ``-`` (unknown) and the manifest
  records ``"dssp": "unknown (mkdssp not found)"``: there is no home-made fallback assignment, so template
  SS features are simply zero then. Chains mkdssp rejects get ``-`` too (counted in the manifest);
- **a profile HMM**: from ``{msa_dir}/{template}.a3m`` when that file exists (an MSA of the chain, e.g. made by
  ``trackfold msa`` from the chain FASTA that ``trackfold templates sequences`` writes), else from the chain's
  sequence alone (:func:`~workflow_lib.aligner.profile_from_sequence`). The A3M's query may be longer than the
  observed chain (SEQRES with unresolved termini or loops): the chain's residues are placed on the A3M query
  by a global alignment (Biopython ``PairwiseAligner``; ≥ 90% of the observed residues must align to identical
  query residues, else :class:`InputError` naming the A3M), and profile positions without an observed
  residue get no coordinates (``residue_map`` −1).

Chains shorter than ``min_length`` observed residues are skipped (listed in the manifest). Two chains with the
same template ID (``{entry}_{chain}``) stop the build with an :class:`InputError` naming both files.

``manifest.json`` is written last (atomically): format version, counts, every input with its SHA-256, the
A3M files used, settings, the mkdssp version and the SHA-256 of ``chains.parquet`` and ``arrays.npz``. A
rebuild with the same inputs, A3Ms, settings and mkdssp is a no-op.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.aligner.profile import Profile, profile_from_alignment, profile_from_sequence
from workflow_lib.db.build import sha256_file
from workflow_lib.errors import InputError, SchemaError, ToolError
from workflow_lib.schemas.io import write_npz, write_table
from workflow_lib.schemas.templates import TEMPLATE_ARRAYS, TEMPLATE_CHAINS
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure.backbones import DSSP_FILE, SEQUENCES_FILE, is_backbone_archive, read_backbone_archive
from workflow_lib.structure.dssp import UNKNOWN_STATE, mkdssp_version, reduce_to_three, secondary_structure
from workflow_lib.structure.parse import Chain, read_structure

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CHAINS_FILE = "chains.parquet"
ARRAYS_FILE = "arrays.npz"
DEFAULT_MIN_LENGTH = 10
MIN_MSA_IDENTITY = 0.9
"""Fraction of a chain's observed residues that must align to identical residues of its A3M query."""
SINGLE_SEQUENCE = "single-sequence"
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class TemplateEntry:
    """One template chain ready to be written: its structure, profile and profile→residue map."""

    chain: Chain
    profile: Profile
    residue_map: np.ndarray  # int32 [P]: profile position -> observed residue index, -1 if unobserved
    profile_source: str
    ss8: str
    ss3: str


def chain_to_msa_query(chain_sequence: str, query: str, *, a3m: str | Path) -> np.ndarray:
    """int32 ``[len(query)]``: for each A3M query position the index of the chain residue placed there, or −1.

    Identical sequences map one to one. Otherwise a global alignment with free end gaps (match 2, mismatch −1,
    gap open −4, extend −0.5) places the observed residues on the query; :class:`InputError` when fewer than
    :data:`MIN_MSA_IDENTITY` of the chain's residues land on identical query residues.
    """
    if chain_sequence == query:
        return np.arange(len(query), dtype=np.int32)
    from Bio.Align import PairwiseAligner

    aligner = PairwiseAligner(mode="global", match_score=2.0, mismatch_score=-1.0, open_gap_score=-4.0,
                              extend_gap_score=-0.5, end_gap_score=0.0)
    alignment = aligner.align(query, chain_sequence)[0]
    mapping = np.full(len(query), -1, dtype=np.int32)
    identical = 0
    for (q0, q1), (c0, c1) in zip(*alignment.aligned):
        for offset in range(q1 - q0):
            mapping[q0 + offset] = c0 + offset
            identical += query[q0 + offset] == chain_sequence[c0 + offset]
    if identical < MIN_MSA_IDENTITY * len(chain_sequence):
        raise InputError(f"the A3M query does not match the chain's observed sequence ({identical} of "
                         f"{len(chain_sequence)} residues identical after alignment; need "
                         f"{MIN_MSA_IDENTITY:.0%})", path=a3m, record=alignment_name(query))
    return mapping


def alignment_name(query: str) -> str:
    return query[:20] + ("..." if len(query) > 20 else "")


def template_profile(chain: Chain, msa_dir: str | Path | None) -> tuple[Profile, np.ndarray, str]:
    """The profile of one chain, its residue map and its provenance (see the module docstring)."""
    a3m = Path(msa_dir) / f"{chain.name}.a3m" if msa_dir is not None else None
    if a3m is not None and a3m.is_file():
        alignment = read_a3m(a3m)
        query = alignment.query
        if len(query) != alignment.length:
            raise InputError("the A3M query has deletions ('-' in row 0); a template MSA needs its query "
                             "in every match column", path=a3m, record=alignment.names[0])
        mapping = chain_to_msa_query(chain.sequence, query, a3m=a3m)
        return profile_from_alignment(alignment, name=chain.name), mapping, f"a3m:{a3m}"
    profile = profile_from_sequence(chain.sequence, name=chain.name)
    return profile, np.arange(len(chain), dtype=np.int32), SINGLE_SEQUENCE


def _secondary_structure(chain: Chain, have_dssp: bool) -> tuple[str, str, bool]:
    unknown = UNKNOWN_STATE * len(chain)
    if not have_dssp:
        return unknown, unknown, False
    try:
        ss = secondary_structure(chain)
    except ToolError as error:
        LOG.warning("mkdssp failed on %s (%s): secondary structure recorded as unknown", chain.name, error)
        return unknown, unknown, False
    return ss.ss8, ss.ss3, True


def template_chains(path: str | Path) -> Iterator[tuple[Chain, str | None]]:
    """The chains of one structure source with their DSSP 8 states when the source carries them: every protein
    chain of a PDB/mmCIF file (states None: mkdssp assigns them), or every chain of a backbone archive
    (:mod:`workflow_lib.structure.backbones`, states from its DSSP file)."""
    if is_backbone_archive(path):
        for entry in read_backbone_archive(path):
            yield entry.chain, entry.ss8
    else:
        for chain in read_structure(path):
            yield chain, None


def _inputs(structures: Sequence[str | Path]) -> list[dict]:
    if not structures:
        raise InputError("no structure files given")
    inputs = []
    for path in structures:
        path = Path(path)
        if not path.is_file():
            raise InputError("structure file does not exist", path=path)
        inputs.append({"path": str(path), "sha256": sha256_file(path)})
        if is_backbone_archive(path):  # its sequences and DSSP states are inputs too
            inputs += [{"path": str(path.parent / name), "sha256": sha256_file(path.parent / name), "of": str(path)}
                       for name in (SEQUENCES_FILE, DSSP_FILE) if (path.parent / name).is_file()]
    return inputs


def _msa_files(msa_dir: str | Path | None) -> list[dict]:
    if msa_dir is None:
        return []
    directory = Path(msa_dir)
    if not directory.is_dir():
        raise InputError("MSA directory does not exist", path=directory)
    return [{"path": str(p), "sha256": sha256_file(p)} for p in sorted(directory.glob("*.a3m"))]


def collect_templates(structures: Sequence[str | Path], *, msa_dir: str | Path | None = None,
                      min_length: int = DEFAULT_MIN_LENGTH, dssp: bool = True
                      ) -> tuple[list[TemplateEntry], list[dict], dict]:
    """Read every structure and build the entries; returns (entries, per-input summaries, counters)."""
    have_dssp = dssp and mkdssp_version() is not None
    entries: list[TemplateEntry] = []
    seen: dict[str, str] = {}
    summaries = []
    counters = {"dssp_failed": 0, "from_a3m": 0, "dssp_from_archive": 0}
    for path in structures:
        kept, skipped = [], []
        for chain, archive_ss8 in template_chains(path):
            if len(chain) < min_length:
                skipped.append({"chain": chain.name, "reason": f"{len(chain)} residues < min_length {min_length}"})
                continue
            if chain.name in seen:
                raise InputError(f"template ID {chain.name} also comes from {seen[chain.name]}; give each "
                                 "structure file a unique name", path=path, record=chain.chain_id)
            seen[chain.name] = str(path)
            profile, mapping, source = template_profile(chain, msa_dir)
            if archive_ss8 is not None:
                ss8, ss3 = archive_ss8, reduce_to_three(archive_ss8)
                counters["dssp_from_archive"] += 1
            else:
                ss8, ss3, assigned = _secondary_structure(chain, have_dssp)
                counters["dssp_failed"] += int(have_dssp and not assigned)
            counters["from_a3m"] += int(source != SINGLE_SEQUENCE)
            entries.append(TemplateEntry(chain, profile, mapping, source, ss8, ss3))
            kept.append(chain.name)
        summaries.append({"path": str(path), "templates": kept, "skipped": skipped})
    if not entries:
        raise InputError(f"no template chain with at least {min_length} residues in the structure files")
    return entries, summaries, counters


def _tables(entries: list[TemplateEntry]) -> tuple[pa.Table, dict[str, np.ndarray]]:
    rows: dict[str, list] = {field.name: [] for field in TEMPLATE_CHAINS.schema}
    coords, masks, maps, emissions, transitions, neffs, backgrounds = [], [], [], [], [], [], []
    profile_offset = coord_offset = 0
    for entry in entries:
        chain, profile = entry.chain, entry.profile
        rows["template"].append(chain.name)
        rows["entry"].append(chain.name[:len(chain.name) - len(chain.chain_id) - 1])
        rows["chain_id"].append(chain.chain_id)
        rows["source"].append(chain.source)
        rows["sequence"].append(profile.query)
        rows["length"].append(profile.length)
        rows["structure_sequence"].append(chain.sequence)
        rows["structure_length"].append(len(chain))
        rows["residue_numbers"].append(" ".join(chain.residue_numbers))
        rows["ss8"].append(entry.ss8)
        rows["ss3"].append(entry.ss3)
        rows["profile_source"].append(entry.profile_source)
        rows["neff"].append(profile.neff)
        rows["profile_offset"].append(profile_offset)
        rows["coord_offset"].append(coord_offset)
        xyz = np.concatenate([chain.coords, chain.cb[:, None, :]], axis=1).astype(np.float32)
        coords.append(xyz)
        masks.append(np.isfinite(xyz).all(axis=-1))
        maps.append(entry.residue_map.astype(np.int32))
        emissions.append(profile.emissions)
        transitions.append(profile.transitions)
        neffs.append(profile.column_neff)
        backgrounds.append(profile.background)
        profile_offset += profile.length
        coord_offset += len(chain)
    table = pa.table({name: pa.array(values, TEMPLATE_CHAINS.schema.field(name).type)
                      for name, values in rows.items()})
    arrays = {"coords": np.concatenate(coords), "atom_mask": np.concatenate(masks),
              "residue_map": np.concatenate(maps), "emissions": np.concatenate(emissions),
              "transitions": np.concatenate(transitions), "column_neff": np.concatenate(neffs),
              "background": np.stack(backgrounds)}
    return table, arrays


def read_template_manifest(db_dir: str | Path) -> dict:
    """``DIR/manifest.json`` of a template database (InputError when absent, SchemaError when foreign)."""
    path = Path(db_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no template database manifest here; build it with 'trackfold templates build'",
                         path=path) from None
    except json.JSONDecodeError as error:
        raise SchemaError(f"{path}: not valid JSON (truncated?): {error}") from None
    if data.get("kind") != "template_db" or data.get("format_version") != FORMAT_VERSION:
        raise SchemaError(f"{path}: not a template database manifest of format {FORMAT_VERSION}; rebuild it")
    return data


def _up_to_date(out_dir: Path, fingerprint: dict) -> bool:
    try:
        manifest = read_template_manifest(out_dir)
    except (InputError, SchemaError):
        return False
    if any(manifest.get(key) != value for key, value in fingerprint.items()):
        return False
    files = manifest.get("files", {})
    return all((out_dir / name).is_file() and sha256_file(out_dir / name) == digest for name, digest in files.items())


def build_template_db(structures: Sequence[str | Path], out_dir: str | Path, *,
                      msa_dir: str | Path | None = None, min_length: int = DEFAULT_MIN_LENGTH,
                      dssp: bool = True, force: bool = False) -> tuple[dict, bool]:
    """Build (or confirm up to date) a template database; returns ``(manifest, rebuilt)``."""
    if min_length < 1:
        raise InputError(f"min_length must be at least 1, got {min_length}")
    out_dir = Path(out_dir)
    version = mkdssp_version() if dssp else None
    fingerprint = {
        "inputs": _inputs(structures),
        "msas": _msa_files(msa_dir),
        "settings": {"min_length": min_length, "msa_dir": None if msa_dir is None else str(msa_dir), "dssp": dssp},
        "dssp": version or ("unknown (mkdssp not found)" if dssp else "unknown (disabled)"),
    }
    if not force and _up_to_date(out_dir, fingerprint):
        LOG.info("template database %s is up to date (inputs unchanged)", out_dir)
        return read_template_manifest(out_dir), False
    entries, summaries, counters = collect_templates([e["path"] for e in fingerprint["inputs"] if "of" not in e],
                                                     msa_dir=msa_dir,
                                                     min_length=min_length, dssp=version is not None)
    table, arrays = _tables(entries)
    write_table(out_dir / CHAINS_FILE, table, TEMPLATE_CHAINS)
    write_npz(out_dir / ARRAYS_FILE, arrays, TEMPLATE_ARRAYS)
    manifest = {
        "kind": "template_db", "format_version": FORMAT_VERSION,
        "templates": len(entries), "profile_positions": int(arrays["residue_map"].size),
        "residues": int(arrays["coords"].shape[0]), "profiles_from_a3m": counters["from_a3m"],
        "dssp_failed": counters["dssp_failed"], "dssp_from_archive": counters["dssp_from_archive"], **fingerprint, "chains": summaries,
        "files": {CHAINS_FILE: sha256_file(out_dir / CHAINS_FILE), ARRAYS_FILE: sha256_file(out_dir / ARRAYS_FILE)},
    }
    write_text_atomic(out_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")  # last: its presence = complete
    LOG.info("built template database %s: %d templates, %d residues", out_dir, len(entries), manifest["residues"])
    return manifest, True
