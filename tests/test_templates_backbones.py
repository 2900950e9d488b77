"""Backbone archives as a template source, and the template prefilter for large template databases.

Fixture: ``tests/data/templates/promod3_slice/`` (50 chains of ``pdb_chains_promod3``: the full database's ten
best template hits of 1KT6_A, a lipocalin, and 40 chains drawn at random; with the MSA of 1KT6_A from trackfold's
own search; provenance in tests/data/README.md). On the full 19,887-template database the prefilter kept the
same ten best hits as a full Viterbi scan (benchmarks/RESULTS.md has the recall over many queries).
"""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest

from conftest import DATA
from workflow_lib.aligner import profile_from_alignment
from workflow_lib.cli import main
from workflow_lib.errors import InputError
from workflow_lib.features.template_maps import template_pair
from workflow_lib.features.templates import columns_features, hit_columns, template_features
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.structure import virtual_cb
from workflow_lib.structure.backbones import read_backbone_archive
from workflow_lib.templates import build_template_db, load_template_db, search_templates
from workflow_lib.templates.search import prefilter_candidates

SLICE = DATA / "templates" / "promod3_slice"
ARCHIVE = SLICE / "backbone.npz"
LIPOCALINS = ("5EZ2_A", "1QWD_B", "2HZQ_A", "1I4U_B", "1MKY_A", "1KXO_A")


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    out = tmp_path_factory.mktemp("promod3") / "db"
    manifest, rebuilt = build_template_db([ARCHIVE], out, msa_dir=SLICE)
    assert rebuilt
    return manifest, load_template_db(out)


@pytest.fixture(scope="module")
def query():
    return profile_from_alignment(read_a3m(SLICE / "1KT6_A.a3m"), name="1KT6_A")


def test_archive_chains_are_physical_backbones_with_dssp():
    entries = list(read_backbone_archive(ARCHIVE))
    assert len(entries) == 50 and len({e.chain.name for e in entries}) == 50
    for entry in entries:
        chain = entry.chain
        assert len(entry.ss8) == len(chain.sequence) == len(chain.residue_numbers) > 0
        assert set(entry.ss8) <= set("HGIEBTSPC")
        ca = chain.coords[:, 1].astype(np.float64)
        steps = np.linalg.norm(np.diff(ca, axis=0), axis=1)
        # gap-free stretches: every step a peptide bond (trans 3.8 Å, cis 2.9 Å), no break (> 4.2 Å)
        assert np.all((steps > 2.7) & (steps < 4.2)) and abs(np.median(steps) - 3.8) < 0.06, chain.name
        n_ca = np.linalg.norm(chain.coords[:, 0] - chain.coords[:, 1], axis=1)   # Å, not 0.01 Å
        assert abs(np.median(n_ca) - 1.46) < 0.04, chain.name
        assert np.isnan(chain.cb).all()                          # no Cβ stored: consumers build the virtual one
        cb = virtual_cb(chain.coords[:, 0], chain.coords[:, 1], chain.coords[:, 2])
        ca_cb = np.linalg.norm(cb - chain.coords[:, 1], axis=1)  # real backbones: ideal on average
        assert abs(np.median(ca_cb) - 1.52) < 0.05, chain.name
    first = entries[0].chain
    assert int(first.residue_numbers[1]) == int(first.residue_numbers[0]) + 1
    assert [e.chain.name for e in read_backbone_archive(ARCHIVE, names={"1KT6_A"})] == ["1KT6_A"]


def test_archive_disagreements_name_the_file_and_chain(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(SLICE, broken)
    with pytest.raises(InputError, match=r"needs dssp\.fasta\.gz beside it"):
        (broken / "dssp.fasta.gz").unlink()
        list(read_backbone_archive(broken / "backbone.npz"))
    lines = gzip.open(SLICE / "dssp.fasta.gz", "rt").read().splitlines()
    lines[1] = lines[1][:-1]                                       # the first chain's states one short
    with gzip.open(broken / "dssp.fasta.gz", "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    first = lines[0][1:].split()[0]
    with pytest.raises(InputError, match=rf"chains\.fasta\.gz.*{first}.*DSSP states"):
        list(read_backbone_archive(broken / "backbone.npz"))
    lines = gzip.open(SLICE / "chains.fasta.gz", "rt").read().splitlines()
    lines[0], lines[2] = lines[2], lines[0]                        # two chains swapped
    with gzip.open(broken / "chains.fasta.gz", "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"chains\.fasta\.gz.*record 1 should be"):
        list(read_backbone_archive(broken / "backbone.npz"))
    shutil.copy(SLICE / "chains.fasta.gz", broken / "chains.fasta.gz")
    shutil.copy(SLICE / "dssp.fasta.gz", broken / "dssp.fasta.gz")
    with gzip.open(broken / "dssp.fasta.gz", "at") as handle:   # one record too many
        handle.write(">9XYZ_A\nCCCC\n")
    with pytest.raises(InputError, match=r"dssp\.fasta\.gz.*more records than the archive's 50 chains.*9XYZ_A"):
        list(read_backbone_archive(broken / "backbone.npz"))


def test_template_database_from_an_archive(database):
    manifest, db = database
    assert manifest["templates"] == len(db) == 50 and manifest["dssp_from_archive"] == 50
    assert manifest["profiles_from_a3m"] == 1                   # 1KT6_A from its MSA, the rest single-sequence
    assert {entry["path"].rsplit("/", 1)[-1] for entry in manifest["inputs"]} == \
        {"backbone.npz", "chains.fasta.gz", "dssp.fasta.gz"}
    row = db.chains.set_index("template").loc["1KT6_A"]
    assert row["profile_source"].startswith("a3m:") and set(row["ss3"]) <= set("HEC")
    structure = db.structure(db.index("1KT6_A"))
    assert structure.coords.shape == (int(row["structure_length"]), 5, 3)


def test_prefilter_keeps_the_full_scan_hits(database, query):
    _, db = database
    candidates = prefilter_candidates(query, db)
    assert 0 < len(candidates) < len(db)                         # it does drop templates
    full, _ = search_templates(query, db, prefilter=False, max_hits=50)
    filtered, _ = search_templates(query, db, prefilter=True, max_hits=50)
    assert full["template"].iloc[0] == "1KT6_A" and set(LIPOCALINS) <= set(full["template"].head(8))
    significant = full[full["evalue"] <= 1.0]
    kept = filtered.set_index("template")
    for _, hit in significant.iterrows():                       # same hits, same E-values (db_size: all 50)
        assert kept.loc[hit["template"], "evalue"] == pytest.approx(hit["evalue"], rel=1e-9)
    assert (filtered["db_size"] == 50).all()
    capped, _ = search_templates(query, db, prefilter=True, max_candidates=3)
    assert len(capped) <= 3 and capped["template"].iloc[0] == "1KT6_A"


def test_template_features_of_a_crop_are_the_crop_of_the_features(database, query):
    """Training crops build template features from per-column hits: they must equal the whole query's cut."""
    _, db = database
    hits, _ = search_templates(query, db, max_hits=6)
    codes = np.asarray(read_a3m(SLICE / "1KT6_A.a3m").matches)[0]
    full = template_features(hits, db, codes, max_templates=6)
    columns = [hit_columns(row, db, codes) for _, row in hits.sort_values("rank").head(6).iterrows()]
    assert [c.template for c in columns][:2] == ["1KT6_A", "5EZ2_A"]   # itself, then the closest lipocalin
    positions = np.r_[10:60, 100:140]
    crop = columns_features(columns, positions)
    np.testing.assert_array_equal(crop["template_pair"], template_pair(full, positions))
    np.testing.assert_array_equal(crop["template_pair"], template_pair(full)[:, positions][:, :, positions])
    np.testing.assert_array_equal(crop["template_1d"], full["template_1d"][:, positions])
    lipocalin = columns[1]
    assert 0.2 < lipocalin.identical[lipocalin.aligned].mean() < 0.4 and lipocalin.placed.sum() > 100
    assert np.isnan(lipocalin.coords[~lipocalin.placed]).all() and np.isfinite(lipocalin.coords[lipocalin.placed, 1]).all()


def test_templates_cli_reads_archives(tmp_path):
    out = tmp_path / "chains.fasta"
    assert main(["templates", "sequences", "--out", str(out), "--min-length", "30", str(ARCHIVE)]) == 0
    names = [line[1:] for line in out.read_text().splitlines() if line.startswith(">")]
    expected = [e.chain.name for e in read_backbone_archive(ARCHIVE) if len(e.chain) >= 30]
    assert names == expected and "1KT6_A" in names and len(names) < 50
