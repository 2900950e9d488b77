"""Training at scale: backbone archives as a training source, the split against validation chains, training
packs (co-evolution computed on the training device), batched crops, the trajectory FAPE and bond violations.

Real data: the 50-chain slice of ProMod3's structure database in tests/data/templates/promod3_slice (with a
real A3M of 1KT6_A) and the tiny preset.
"""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from workflow_lib.cli import main
from workflow_lib.errors import InputError
from workflow_lib.evaluate.core import read_native
from workflow_lib.features.build import build_features
from workflow_lib.features.coevolution import coevolution_features, coevolution_features_torch
from workflow_lib.features.msa_features import sequence_weights
from workflow_lib.features.templates import columns_features, hit_columns, read_hits
from workflow_lib.model.checkpoint import load_checkpoint
from workflow_lib.model.network import ThreeTrackNetwork
from workflow_lib.model.structure import backbone_from_frames, frames_from_3_points
from workflow_lib.schemas.io import read_frame
from workflow_lib.schemas.templates import TEMPLATE_SEARCH_STATS
from workflow_lib.schemas.training import TRAINING_CHAINS
from workflow_lib.seqio.msa import read_a3m
from workflow_lib.templates import load_template_db
from workflow_lib.training.config import TrainConfig, training_model_config
from workflow_lib.training.data import (collect_chains, cross_identities, prepare_training_data,
                                        split_against_validation, split_by_identity)
from workflow_lib.training.examples import collate, make_example, pick_templates
from workflow_lib.training.loop import train
from workflow_lib.training.losses import LossWeights, bond_violation_loss, bonded_pairs, total_loss
from workflow_lib.training.pack import TEMPLATE_MAX_IDENTITY, build_pack, read_pack, usable_templates

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def archive(data_dir):
    return data_dir / "templates" / "promod3_slice" / "backbone.npz"


@pytest.fixture(scope="module")
def prepared(archive, data_dir, tmp_path_factory):
    """train-data on 12 chains of the archive (split against 3 validation chains), A3Ms (1KT6_A real, the
    others query-only) and a training pack."""
    out = tmp_path_factory.mktemp("scale")
    names = {"1KT6_A", "1F7S_A", "1I4U_B", "1KXO_A", "1QWD_B", "2HZQ_A", "2IOJ_A", "2J9U_A", "2O71_A",
             "3PLW_A", "4ES7_A", "5HDE_A"}
    table = prepare_training_data([archive], out / "data", names=names, val_chains=3, seed=1)
    a3m_dir = out / "a3m"
    a3m_dir.mkdir()
    shutil.copy(data_dir / "templates" / "promod3_slice" / "1KT6_A.a3m", a3m_dir)
    counts = build_pack(read_frame(out / "data" / "chains.parquet", TRAINING_CHAINS), [a3m_dir, out / "data" / "a3m"],
                        out / "pack.npz", max_rows=8)
    return table, out, counts


def test_archive_chains_are_training_chains(archive):
    records, skipped = collect_chains([archive], min_length=40, max_length=400, names={"1KT6_A", "3BXL_B"})
    assert [r.name for r in records] == ["1KT6_A"]       # 3BXL_B has 17 residues
    assert records[0].chain == "1KT6_A" and records[0].structure == str(archive)
    assert skipped == {"shorter than 40": 1}


def test_split_against_validation_leaves_out_close_chains(prepared):
    table, out, _ = prepared
    split = __import__("json").loads((out / "data" / "split.json").read_text())
    assert split["split_method"] == "against validation"
    assert split["validation_chains"] + split["validation_candidates_dropped"] == 3
    assert split["train_chains"] + split["validation_chains"] + split["excluded_near_validation"] == 12
    assert 0.0 < split["max_cross_identity"] <= 0.3
    assert set(table["split"]) == {"train", "validation"}


def test_split_against_validation_measures_identity_both_ways(archive):
    """Identity is asymmetric (each chain's profile against the other sequence): 1VLV_A's profile finds 10.0% of
    3HFW_A identical, 3HFW_A's finds 4.2% of 1VLV_A (measured). At a 7% threshold the pair is too close whichever
    of the two is the validation chain; 5HDE_A (at most 2.0% identical to either) stays in training."""
    records, _ = collect_chains([archive], names={"1VLV_A", "3HFW_A", "5HDE_A"})
    by_name = {record.name: record.sequence for record in records}
    forward = cross_identities([by_name["1VLV_A"]], [by_name["3HFW_A"]])[0, 0]
    backward = cross_identities([by_name["3HFW_A"]], [by_name["1VLV_A"]])[0, 0]
    assert backward <= 0.07 < forward                 # only one direction exceeds the threshold
    for validation, close in (("1VLV_A", "3HFW_A"), ("3HFW_A", "1VLV_A")):
        table, measured = split_against_validation(records, val_names={validation}, identity=0.07)
        assert dict(zip(table["name"], table["split"])) == {validation: "validation", "5HDE_A": "train"}
        assert measured["excluded"] == 1 and close not in set(table["name"])
        assert measured["max_cross_identity"] <= 0.07


def test_split_needs_a_sensible_validation_count(archive, tmp_path):
    with pytest.raises(InputError, match="--val-chains"):
        prepare_training_data([archive], tmp_path, names={"1KT6_A", "1F7S_A"}, val_chains=2)


def test_torch_coevolution_equals_numpy(data_dir):
    alignment = read_a3m(data_dir / "templates" / "openfold_query.a3m.gz")
    codes = np.asarray(alignment.matches)[:200, :150]
    weights = sequence_weights(codes)
    assert codes.shape[0] > 50
    expected = coevolution_features(codes, weights)
    got = coevolution_features_torch(torch.from_numpy(codes.astype(np.int64)), torch.from_numpy(weights)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.abs(expected).max() > 0.1


def test_pack_round_trip_matches_the_sources(prepared, data_dir):
    table, out, counts = prepared
    packed_table, chains = read_pack(out / "pack.npz")
    assert counts["chains"] == len(table) == len(chains)
    assert list(packed_table["name"]) == list(table["name"]) and list(packed_table["split"]) == list(table["split"])
    chain = next(c for c in chains if c.name == "1KT6_A")
    alignment = read_a3m(data_dir / "templates" / "promod3_slice" / "1KT6_A.a3m")
    assert chain.msa.shape == (8, 175) and np.array_equal(chain.msa[0], np.asarray(alignment.matches)[0])
    features = build_features(data_dir / "templates" / "promod3_slice" / "1KT6_A.a3m", max_seqs=8,
                              max_stats_seqs=8)
    np.testing.assert_array_equal(chain.msa, features["msa"])
    assert chain.coevolution is None                     # on the CPU: computed on first use
    np.testing.assert_allclose(chain.features()["coevolution"], features["coevolution"], atol=1e-5)
    np.testing.assert_allclose(chain.seq_weights, sequence_weights(chain.msa))   # the kept rows' weights
    ca = chain.coords[:, 1]
    steps = np.linalg.norm(np.diff(ca, axis=0), axis=1)
    assert 3.7 < np.median(steps) < 3.9            # real backbone, to 0.01 Å
    # the MSA statistics a model may read: the rows' deletion counts packed, profile and means as the builder's
    packed = chain.features()
    np.testing.assert_array_equal(packed["deletion_matrix"], features["deletion_matrix"])
    assert packed["deletion_matrix"].max() > 0
    np.testing.assert_allclose(packed["profile"], features["profile"], atol=1e-6)
    np.testing.assert_allclose(packed["deletion_mean"], features["deletion_mean"], atol=1e-6)


@pytest.fixture(scope="module")
def template_pack(prepared, archive, data_dir):
    """The prepared chains packed with templates: a template database of the whole 50-chain slice and every
    chain's hits from ``trackfold templates search`` of its A3M."""
    table, out, _ = prepared
    slice_dir = data_dir / "templates" / "promod3_slice"
    a3ms = [out / "a3m" / "1KT6_A.a3m"] + sorted(p for p in (out / "data" / "a3m").glob("*.a3m")
                                                 if p.stem != "1KT6_A")
    assert main(["templates", "build", str(archive), "--out", str(out / "tdb"), "--msa-dir", str(slice_dir)]) == 0
    assert main(["templates", "search", *map(str, a3ms), "--templates", str(out / "tdb"),
                 "--out-dir", str(out / "hits")]) == 0
    chains = read_frame(out / "data" / "chains.parquet", TRAINING_CHAINS)
    counts = build_pack(chains, [out / "a3m", out / "data" / "a3m"], out / "pack_templates.npz", max_rows=8,
                        template_hits=out / "hits", templates=out / "tdb", max_templates=3)
    return chains, out, counts


def test_template_search_rerun_resumes_from_receipts(template_pack, capsys):
    """Queries whose receipt matches (same A3M, database, settings) are not searched again; their stats rows come
    back from the receipts; --no-resume searches again to the same hits."""
    _, out, _ = template_pack
    a3ms = sorted((out / "data" / "a3m").glob("*.a3m"))[:2]
    run = ["templates", "search", *map(str, a3ms), "--templates", str(out / "tdb"), "--out-dir", str(out / "hits"),
           "--stats", str(out / "again.parquet")]
    before = [read_hits(out / "hits" / f"{a3m.stem}.hits.parquet") for a3m in a3ms]
    capsys.readouterr()
    assert main(run) == 0
    printed = capsys.readouterr().out
    assert "resumed: 2 of 2" in printed and "hits of" not in printed
    stats = read_frame(out / "again.parquet", TEMPLATE_SEARCH_STATS)
    assert list(stats["protein"]) == [a3m.stem for a3m in a3ms]
    assert list(stats["hits"]) == [len(hits) for hits in before]
    assert main(run + ["--no-resume"]) == 0
    assert capsys.readouterr().out.count("hits of") == 2
    for a3m, hits in zip(a3ms, before):
        assert read_hits(out / "hits" / f"{a3m.stem}.hits.parquet").equals(hits)


def test_pack_keeps_usable_templates_on_the_chains_columns(template_pack):
    chains, out, counts = template_pack
    table, packed = read_pack(out / "pack_templates.npz")
    by_name = {chain.name: chain for chain in packed}
    lipocalin = by_name["1KT6_A"]
    cluster = dict(zip(chains["name"], chains["cluster"]))
    validation = set(chains.loc[chains["split"] == "validation", "name"])
    hits = read_hits(out / "hits" / "1KT6_A.hits.parquet")
    assert hits.iloc[0]["template"] == "1KT6_A"                         # it finds itself first...
    names = [hit.template for hit in lipocalin.templates]
    assert names and "1KT6_A" not in names and len(names) <= 3         # ...which is never packed
    assert counts["templates"] == sum(len(chain.templates) for chain in packed)
    assert len(set(cluster.values())) == len(cluster)     # the split against validation: each its own cluster
    for chain, split in zip(packed, table["split"]):
        for hit in chain.templates:
            assert hit.template != chain.name
            assert split == "validation" or hit.template not in validation
    identity = dict(zip(hits["template"], hits["identity"]))
    assert all(identity[name] <= 0.9 for name in names)
    # packed columns equal the hits' own (coordinates to 0.01 Å)
    database = load_template_db(out / "tdb")
    row = hits[hits["template"] == names[0]].iloc[0]
    expected = hit_columns(row, database, lipocalin.msa[0])
    got = lipocalin.templates[0]
    for key in ("placed", "aligned", "identical", "positive", "codes", "ss"):
        np.testing.assert_array_equal(getattr(got, key), getattr(expected, key), err_msg=key)
    placed = expected.placed
    centre = expected.coords[placed, 1].mean(axis=0)
    np.testing.assert_allclose(got.coords[placed, 1], expected.coords[placed, 1] - centre, atol=0.006)
    assert np.isnan(got.coords[~placed]).all() and got.confidence == pytest.approx(expected.confidence)


def test_identity_clusters_keep_a_related_chain_out_of_the_templates(archive, template_pack):
    """Single-linkage clusters of the whole slice at 30% join 2HZQ_A and 5EZ2_A (35.6% identical, measured; the
    slice's only pair above 30%), and 5EZ2_A is among 2HZQ_A's template hits: with those clusters it is not a
    usable template of 2HZQ_A, with every chain its own cluster (the split against validation) it is."""
    records, _ = collect_chains([archive])
    table = split_by_identity(records, identity=0.3)
    cluster = dict(zip(table["name"], table["cluster"].astype(int)))
    sequences = dict(zip(table["name"], table["sequence"]))
    pair = max(cross_identities([sequences["2HZQ_A"]], [sequences["5EZ2_A"]])[0, 0],
               cross_identities([sequences["5EZ2_A"]], [sequences["2HZQ_A"]])[0, 0])
    assert pair > 0.3 and cluster["2HZQ_A"] == cluster["5EZ2_A"]
    assert table["cluster"].value_counts().max() > 1 and table["cluster"].nunique() < len(table)
    _, out, _ = template_pack
    hits = read_hits(out / "hits" / "2HZQ_A.hits.parquet")
    assert "5EZ2_A" in set(hits["template"])
    clustered = usable_templates(hits, "2HZQ_A", cluster["2HZQ_A"], False, cluster, set(),
                                 max_identity=TEMPLATE_MAX_IDENTITY)
    alone = {name: k for k, name in enumerate(table["name"])}
    unclustered = usable_templates(hits, "2HZQ_A", alone["2HZQ_A"], False, alone, set(),
                                   max_identity=TEMPLATE_MAX_IDENTITY)
    assert "5EZ2_A" not in set(clustered["template"]) and "5EZ2_A" in set(unclustered["template"])


def test_crops_train_with_their_templates(template_pack, tmp_path):
    _, out, _ = template_pack
    table, chains = read_pack(out / "pack_templates.npz")
    lipocalin = next(c for c in chains if c.name == "1KT6_A")
    bare = dataclasses.replace(next(c for c in chains if c.name != "1KT6_A"), templates=())
    inputs, _ = make_example(lipocalin, 20, 64, None, 8, max_templates=2)
    assert inputs["templates_pair"].shape == (1, min(2, len(lipocalin.templates)), 64, 64, 131)
    full = columns_features(lipocalin.templates[:2])
    np.testing.assert_array_equal(inputs["templates_pair"][0].numpy(), full["template_pair"][:, 20:84, 20:84])
    assert "templates_pair" not in make_example(lipocalin, 20, 64, None, 8)[0]    # max_templates 0: none
    dropped = [len(pick_templates(lipocalin.templates, 3, 0.5, np.random.default_rng(seed))) for seed in range(20)]
    assert min(dropped) < len(lipocalin.templates) and max(dropped) > 0
    batch, _ = collate([make_example(lipocalin, 0, 40, None, 8, max_templates=2),
                        make_example(bare, 0, 30, None, 8, max_templates=2)])
    assert batch["templates_pair"].shape[:3] == (2, min(2, len(lipocalin.templates)), 40)
    assert batch["template_mask"][1].sum() == 0 and batch["template_mask"][0].sum() > 0
    train_chains = [c for c, s in zip(chains, table["split"]) if s == "train"]
    val_chains = [c for c, s in zip(chains, table["split"]) if s == "validation"]
    config = TrainConfig(model=training_model_config("tiny").to_dict(), steps=2, crop_size=48, batch_size=2,
                         max_msa_rows=8, max_templates=2, lr=3e-3, warmup_steps=1, checkpoint_every=2,
                         val_every=100, val_max_chains=1, val_crop=48, seed=5)
    result = train(config, train_chains, list(range(len(train_chains))), val_chains, tmp_path / "templates")
    assert result.step == 2 and all(np.isfinite(row["loss"]) for row in result.history if row["split"] == "train")
    # the template update starts at exactly zero; training with templates moves it, training without does not
    trained = load_checkpoint(result.model_path)[0].pair_embedding.template_update.attention.linear_o.weight
    assert trained.abs().max() > 0
    plain = train(dataclasses.replace(config, max_templates=0), train_chains, list(range(len(train_chains))),
                  val_chains, tmp_path / "plain")
    untouched = load_checkpoint(plain.model_path)[0].pair_embedding.template_update.attention.linear_o.weight
    assert untouched.abs().max() == 0
    # the final validation also folds each chain from its distogram; the card shows it and the pack's templates,
    # and says templates change nothing only for the run trained without them
    from workflow_lib.training.card import model_card

    assert result.validation["fold_lddt_ca"].between(0, 1).all() and result.validation["fold_tm_score"].notna().all()
    card = model_card(data_dir=out / "data", run_dir=tmp_path / "templates", pack=out / "pack_templates.npz")
    assert "## Training pack" in card and "| validation |" in card and "folded from the distogram" in card
    # the split it describes is the one train-data made: against validation chains, no clusters
    split = __import__("json").loads((out / "data" / "split.json").read_text())
    assert "Single-linkage" not in card and "- **Split.** Against validation chains" in card
    assert (f"the {split['excluded_near_validation']} chains more than 30% identical to a validation chain left out "
            f"of training; training chains not clustered") in card
    assert "templates: up to 2 per crop" in card and "Not used in training" not in card
    plain_card = model_card(data_dir=out / "data", run_dir=tmp_path / "plain", pack=out / "pack_templates.npz")
    assert "Not used in training" in plain_card and "best 30–90% identical" not in plain_card


def test_pack_refuses_a_missing_msa(prepared, tmp_path):
    _, out, _ = prepared
    table = read_frame(out / "data" / "chains.parquet", TRAINING_CHAINS)
    with pytest.raises(InputError, match=r"no .*\.a3m"):
        build_pack(table, [tmp_path], tmp_path / "pack.npz")
    assert not (tmp_path / "pack.npz").exists()


def test_padded_batch_predicts_each_crop_as_alone(prepared):
    _, out, _ = prepared
    _, chains = read_pack(out / "pack.npz")
    torch.manual_seed(0)
    model = ThreeTrackNetwork(training_model_config("tiny")).eval()
    first = make_example(chains[0], 0, 40, None, 8)
    second = make_example(chains[1], 5, 28, None, 8)
    inputs, targets = collate([first, second])
    assert inputs["msa"].shape[0] == 2 and inputs["seq_mask"][1, 28:].sum() == 0
    with torch.no_grad():
        together = model(inputs)
        alone = model(second[0])
    np.testing.assert_allclose(together["dist_logits"][1, :28, :28].numpy(), alone["dist_logits"][0].numpy(),
                               atol=2e-4)
    np.testing.assert_allclose(together["plddt"][1, :28].numpy(), alone["plddt"][0].numpy(), atol=2e-4)
    loss, parts = total_loss(together, targets, LossWeights())
    assert torch.isfinite(loss) and parts["violation"] >= 0
    # a model that reads the MSA statistics: padded the same way, and a crop still predicts as alone
    torch.manual_seed(0)
    reading = ThreeTrackNetwork(training_model_config("tiny", msa_statistics=True)).eval()
    first = make_example(chains[0], 0, 40, None, 8, msa_statistics=True)
    second = make_example(chains[1], 5, 28, None, 8, msa_statistics=True)
    inputs, _ = collate([first, second])
    assert inputs["deletion_matrix"].shape == inputs["msa"].shape and inputs["profile"].shape == (2, 40, 21)
    with torch.no_grad():
        together = reading(inputs)
        alone = reading(second[0])
    np.testing.assert_allclose(together["dist_logits"][1, :28, :28].numpy(), alone["dist_logits"][0].numpy(),
                               atol=2e-4)


def test_bond_violation_is_zero_for_a_real_backbone_and_grows_when_broken(prepared):
    _, out, _ = prepared
    _, chains = read_pack(out / "pack.npz")
    chain = next(c for c in chains if c.name == "1KT6_A")
    coords = torch.from_numpy(chain.coords[None])
    mask = torch.from_numpy(chain.atom_mask[None])
    bonded = bonded_pairs(mask, torch.from_numpy(chain.residue_index[None]))
    loss, errors = bond_violation_loss(coords, bonded)
    assert float(errors["c_n_error"]) < 0.05 and float(errors["ca_ca_error"]) < 0.1
    squeezed = coords.clone()
    squeezed[0, 50:] -= (squeezed[0, 50, 1] - squeezed[0, 49, 1]) * 0.5   # move half the chain 1.9 Å closer
    broken, _ = bond_violation_loss(squeezed, bonded)
    assert float(broken) > float(loss) + 0.5 / bonded.sum()
    frames = frames_from_3_points(coords[..., 0, :], coords[..., 1, :], coords[..., 2, :])
    ideal = backbone_from_frames(frames)                                   # ideal residues on real frames
    ideal_loss, ideal_errors = bond_violation_loss(ideal, bonded)
    assert float(ideal_errors["ca_ca_error"]) < 0.1


def test_training_from_a_pack_in_batches(prepared, tmp_path):
    _, out, _ = prepared
    table, chains = read_pack(out / "pack.npz")
    train_chains = [c for c, s in zip(chains, table["split"]) if s == "train"]
    val_chains = [c for c, s in zip(chains, table["split"]) if s == "validation"]
    config = TrainConfig(model=training_model_config("tiny").to_dict(), steps=3, crop_size=32, batch_size=3,
                         max_msa_rows=8, lr=3e-3, warmup_steps=1, checkpoint_every=3, val_every=100,
                         val_max_chains=1, val_crop=48, redraw_every=2, seed=3)
    result = train(config, train_chains, list(range(len(train_chains))), val_chains, tmp_path)
    assert result.step == 3 and result.model_path.exists()
    rows = [row for row in result.history if row["split"] == "train"]
    assert all(row["n_chains"] == 3 and np.isfinite(row["loss"]) for row in rows)
    assert len(result.validation) == len(val_chains)
    # every architecture option at once trains from the same pack
    options = dict(msa_statistics=True, row_attention_to_pair=True, str_attention="geometric", no_heads_geometric=4)
    config = dataclasses.replace(config, model=training_model_config("tiny", **options).to_dict())
    result = train(config, train_chains, list(range(len(train_chains))), val_chains, tmp_path / "all_options")
    assert result.step == 3 and all(np.isfinite(row["loss"]) for row in result.history if row["split"] == "train")


def test_network_reports_its_frame_trajectory():
    torch.manual_seed(0)
    config = training_model_config("tiny")
    model = ThreeTrackNetwork(config).eval()
    msa = torch.randint(0, 20, (1, 3, 12))
    with torch.no_grad():
        out = model({"msa": msa, "residue_index": torch.arange(12)[None]})
    assert out["trajectory_rot"].shape == (config.n_blocks_3track + 1, 1, 12, 3, 3)
    assert torch.equal(out["trajectory_trans"][-1], out["frames_trans"])


def test_loss_weights_are_checked():
    with pytest.raises(InputError, match="unknown loss weight"):
        TrainConfig(model=training_model_config("tiny").to_dict(), loss_weights={"violations": 1.0})


def test_a_backbone_archive_is_a_native_for_evaluation(archive):
    native = read_native(archive, "1KT6_A")
    assert len(native.sequence) == 175 and np.isfinite(native.cb).all()
    with pytest.raises(InputError, match="no chain"):
        read_native(archive, "9ZZZ_A")
    with pytest.raises(InputError, match="needs the chain's name"):
        read_native(archive)


def test_names_files_are_read_and_checked(tmp_path):
    from workflow_lib.training.jobs import read_names

    listed = tmp_path / "names.txt"
    listed.write_text("# chains with MSAs\n1KT6_A\n\n2IOJ_A extra words\n")
    assert read_names(str(listed)) == {"1KT6_A", "2IOJ_A"} and read_names(None) is None
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="lists no chain"):
        read_names(str(empty))
    with pytest.raises(InputError, match="cannot read the names file"):
        read_names(str(tmp_path / "missing.txt"))
