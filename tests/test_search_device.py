"""The search on a torch device: the mixed-profile kernels (many queries' pairs in one bucket; torch operations
and the fused Triton kernel), batched calibration, and whole searches whose hits equal the NumPy search's. The
torch paths run on CPU tensors and the Triton kernel in Triton's CPU interpreter here; on a machine with CUDA
every test also runs on the GPU."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from conftest import example_database  # noqa: E402
from test_aligner_helpers import ALIGNER_DATA, random_profile  # noqa: E402
from workflow_lib.aligner import add_pseudocounts, align_pairs, align_targets, profile_from_sequence, read_hhm  # noqa: E402
from workflow_lib.aligner.lanes import QUERY_LENGTH_RATIO, pair_buckets  # noqa: E402
from workflow_lib.aligner.reference import viterbi_sequence_reference  # noqa: E402
from workflow_lib.aligner.scores import sequence_scores  # noqa: E402
from workflow_lib.aligner import torch_kernels, triton_kernels  # noqa: E402
from workflow_lib.aligner.torch_kernels import KERNEL_VARIABLE, kernel_choice, viterbi_mixed_lanes_torch  # noqa: E402
from workflow_lib.aligner.viterbi_seq import pack_targets  # noqa: E402
from workflow_lib.cli import main  # noqa: E402
from workflow_lib.errors import InputError  # noqa: E402
from workflow_lib.search.engine import DatabaseTotals, calibrate, make_queries  # noqa: E402
from workflow_lib.search.iterative import build_msas  # noqa: E402
from workflow_lib.search.settings import FAST  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta  # noqa: E402

TORCH_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def hit_key(hit):
    return (hit.index, hit.raw_score, hit.score, hit.query_start, hit.query_end, hit.target_start, hit.target_end,
            hit.states, hit.pairs.tolist())


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_mixed_lanes_equal_one_profile_per_call(device, seed, monkeypatch):
    """Profiles of 1–70 columns share buckets; every pair's score, best cell and alignment equal its own
    profile's NumPy kernel, and the scores the plain-loop reference (the torch kernel; on CUDA the default is
    the fused one, tested below)."""
    monkeypatch.setenv(KERNEL_VARIABLE, "torch")
    rng = np.random.default_rng(seed)
    profiles = [random_profile(rng, int(n)) for n in (1, 2, 9, 17, 40, 70)]
    targets = [rng.integers(0, 21, int(rng.integers(1, 90))).astype(np.uint8) for _ in range(90)]
    targets += [p.emissions.argmax(axis=1).astype(np.uint8) for p in profiles]   # a strong hit for each
    pair_profile = np.concatenate([rng.integers(0, len(profiles), 90), np.arange(len(profiles))])
    for backtrace in (True, False):
        mixed = align_pairs(profiles, pair_profile, targets, backtrace=backtrace, device=device, lane_cells=1024)
        assert [h.index for h in mixed] == list(range(len(targets)))
        for k, profile in enumerate(profiles):
            members = np.flatnonzero(pair_profile == k)
            alone = align_targets(profile, [targets[m] for m in members], backtrace=backtrace, device="numpy")
            assert [hit_key(h)[1:] for h in alone] == [hit_key(mixed[m])[1:] for m in members]
    scores = [sequence_scores(p) for p in profiles]
    for k in range(0, len(targets), 7):
        assert mixed[k].raw_score == viterbi_sequence_reference(scores[pair_profile[k]], targets[k])[0]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_mixed_lanes_on_real_profiles(device, example_dir):
    """A globin HMM and two single-sequence profiles of real proteins, against real proteins, in one bucket."""
    records = read_fasta(example_dir / "db" / "sprot_firmicutes_slice.fasta.gz")[:8]
    hmm = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "globins4.hhm"))
    sequences = [encode(r.sequence) for r in records] + [hmm.sequence]
    profiles = [hmm, profile_from_sequence(records[0].sequence[:90]), profile_from_sequence(records[3].sequence)]
    targets = [s for s in sequences for _ in profiles]
    pair_profile = np.tile(np.arange(len(profiles)), len(sequences))
    scores = [sequence_scores(p) for p in profiles]
    best, _, _, bt = viterbi_mixed_lanes_torch(scores, pair_profile, pack_targets(targets, list(range(len(targets)))),
                                               backtrace=True, device=device)
    assert bt.shape[0] == max(s.length for s in scores)
    mixed = align_pairs(profiles, pair_profile, targets, backtrace=True, device=device)
    for k in range(len(profiles)):
        members = np.flatnonzero(pair_profile == k)
        alone = align_targets(profiles[k], [targets[m] for m in members], backtrace=True, device="numpy")
        assert [hit_key(h)[1:] for h in alone] == [hit_key(mixed[m])[1:] for m in members]
        assert [int(best[m]) for m in members] == [h.raw_score for h in alone]
    assert mixed[len(sequences) * 3 - 3].score > 100      # the globin HMM on its own consensus


@pytest.fixture
def triton_device(monkeypatch):
    """``cuda`` where there is a GPU, else ``cpu`` with Triton's interpreter (the kernel rebuilt for it)."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed (pip install 'trackfold[gpu]')")
    if torch.cuda.is_available():
        return "cuda"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(triton_kernels, "_KERNEL", None)
    return "cpu"


@pytest.mark.parametrize("seed", [0, 1])
def test_triton_kernel_equals_the_torch_kernel(triton_device, monkeypatch, seed):
    """Scores, best cells and every backtrace byte a path can reach (rows inside each lane's profile, columns
    inside its target) equal the torch kernel's; the hits equal NumPy's, one profile at a time."""
    rng = np.random.default_rng(seed)
    profiles = [random_profile(rng, int(n)) for n in (1, 4, 11, 23)]
    scores = [sequence_scores(p) for p in profiles]
    targets = [rng.integers(0, 21, int(rng.integers(1, 40))).astype(np.uint8) for _ in range(36)]
    targets += [p.emissions.argmax(axis=1).astype(np.uint8) for p in profiles]
    pair_profile = np.concatenate([rng.integers(0, len(profiles), 36), np.arange(len(profiles))])
    residues = pack_targets(targets, list(range(len(targets))))
    for backtrace in (False, True):
        fused = viterbi_mixed_lanes_torch(scores, pair_profile, residues, backtrace=backtrace, device=triton_device,
                                          kernel="triton")
        plain = viterbi_mixed_lanes_torch(scores, pair_profile, residues, backtrace=backtrace, device="cpu",
                                          kernel="torch")
        for got, expected in zip(fused[:3], plain[:3]):
            np.testing.assert_array_equal(got, expected)
        if backtrace:
            for lane, target in enumerate(targets):
                rows = scores[pair_profile[lane]].length
                np.testing.assert_array_equal(fused[3][:rows, :target.size, lane],
                                              plain[3][:rows, :target.size, lane])
    monkeypatch.setenv(KERNEL_VARIABLE, "triton")
    mixed = align_pairs(profiles, pair_profile, targets, backtrace=True, device=triton_device, lane_cells=512)
    for k, profile in enumerate(profiles):
        members = np.flatnonzero(pair_profile == k)
        alone = align_targets(profile, [targets[m] for m in members], backtrace=True, device="numpy")
        assert [hit_key(h)[1:] for h in alone] == [hit_key(mixed[m])[1:] for m in members]


@pytest.mark.parametrize("seed", [3, 4])
def test_hits_from_path_states_equal_hits_from_the_byte_matrix(seed):
    """The device traceback hands back each lane's states only; the cells recovered from the moves give the
    same hits as walking the byte matrix (NumPy kernel, real backtrace bytes; extra stopped rows are ignored)."""
    from workflow_lib.aligner import backtrace
    from workflow_lib.aligner.viterbi_seq import viterbi_seq_lanes
    rng = np.random.default_rng(seed)
    profile = random_profile(rng, 35)
    targets = [rng.integers(0, 21, int(rng.integers(1, 70))).astype(np.uint8) for _ in range(30)]
    targets.append(profile.emissions.argmax(axis=1).astype(np.uint8))
    indices = list(range(len(targets)))
    best, best_i, best_l, bt = viterbi_seq_lanes(sequence_scores(profile), pack_targets(targets, indices),
                                                 backtrace=True)
    expected = backtrace.sequence_hits(bt, best, best_i, best_l, indices)
    _, _, states = backtrace._paths(bt, best_i, best_l, backtrace._seq_step, len(backtrace.SEQ_STATES))
    codes = np.where(states >= 0, states, triton_kernels.STOPPED).astype(np.uint8)
    codes = np.concatenate([codes, np.full((4, codes.shape[1]), triton_kernels.STOPPED, np.uint8)])
    got = backtrace.sequence_hits_from_states(codes, best, best_i, best_l, indices)
    assert [hit_key(h) for h in got] == [hit_key(h) for h in expected]
    assert got[-1].states.count("M") >= 30


def test_kernel_choice(monkeypatch):
    monkeypatch.delenv(KERNEL_VARIABLE, raising=False)
    assert kernel_choice(None, "cpu") == "torch"                 # auto: Triton only on CUDA
    assert kernel_choice("triton", "cpu") == "triton"
    monkeypatch.setattr(triton_kernels, "triton_available", lambda: True)
    assert kernel_choice(None, "cuda:0") == "triton"
    monkeypatch.setattr(triton_kernels, "triton_available", lambda: False)
    assert kernel_choice(None, "cuda") == "torch"
    monkeypatch.setenv(KERNEL_VARIABLE, "torch")
    assert kernel_choice(None, "cuda") == "torch"
    monkeypatch.setenv(KERNEL_VARIABLE, "fast")
    with pytest.raises(ValueError, match=KERNEL_VARIABLE):
        kernel_choice(None, "cuda")
    assert torch_kernels.KERNELS == ("auto", "torch", "triton")


def test_mixed_lanes_run_to_the_longest_profile_they_use():
    """A bucket of short profiles' lanes does not loop over the rows of a long profile it does not use."""
    rng = np.random.default_rng(8)
    scores = [sequence_scores(random_profile(rng, n)) for n in (70, 6, 9)]
    targets = [rng.integers(0, 20, 12).astype(np.uint8) for _ in range(4)]
    residues = pack_targets(targets, list(range(4)))
    best, _, _, bt = viterbi_mixed_lanes_torch(scores, np.array([1, 2, 2, 1]), residues, backtrace=True,
                                               kernel="torch")
    assert bt.shape[0] == 9
    alone = [viterbi_mixed_lanes_torch([scores[k]], np.zeros(1, np.int64), residues[:, [w]], backtrace=False,
                                       kernel="torch")[0][0] for w, k in enumerate((1, 2, 2, 1))]
    assert best.tolist() == alone


def test_mixed_lanes_check_their_inputs():
    scores = [sequence_scores(random_profile(np.random.default_rng(0), 5))]
    residues = np.zeros((8, 3), dtype=np.intp)
    with pytest.raises(ValueError, match="lane_profile"):
        viterbi_mixed_lanes_torch(scores, np.array([0, 1, 0]), residues, backtrace=False)
    with pytest.raises(ValueError, match="lane_profile"):
        viterbi_mixed_lanes_torch(scores, np.array([0, 0]), residues, backtrace=False)
    with pytest.raises(ValueError, match="pair_profile"):
        align_pairs([random_profile(np.random.default_rng(0), 5)], [0, 1], [np.zeros(3, np.uint8)] * 2)


def test_pair_buckets_cover_every_pair_once_within_the_limits():
    rng = np.random.default_rng(5)
    query_lengths = rng.integers(20, 900, 400)
    target_lengths = rng.integers(10, 1200, 400)
    buckets = pair_buckets(query_lengths, target_lengths, backtrace=True, lane_cells=20_000, max_lanes=64,
                           backtrace_bytes=4_000_000, row_cost_cells=2_000)
    flat = sorted(k for bucket in buckets for k in bucket)
    assert flat == list(range(400))
    for bucket in buckets:
        lengths = query_lengths[bucket]
        assert lengths.max() < lengths.min() * QUERY_LENGTH_RATIO  # one profile-length group per bucket
        assert len(bucket) <= 64
        if len(bucket) > 8:  # MIN_LANES may exceed the budgets for very long targets
            assert len(bucket) * target_lengths[bucket].max() <= 20_000 + 128 * len(bucket)
    with pytest.raises(ValueError):
        pair_buckets([0, 5], [3, 4], backtrace=False)


# ----------------------------------------------------------------------------------------- whole searches

@pytest.fixture(scope="module")
def small_db(tmp_path_factory, example_dir):
    """250 example database sequences in 2 shards; two of them and two example proteome proteins as queries."""
    db, records = example_database(tmp_path_factory.mktemp("devicedb"), 250)
    proteome = read_fasta(example_dir / "proteomes" / "anaerococcus_slice.fasta")
    return db, [records[5], records[120], proteome[10], proteome[4]]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_batched_calibration_equals_one_by_one(small_db, device):
    db, records = small_db
    totals = DatabaseTotals.from_manifest(db)
    profiles = [profile_from_sequence(r.sequence) for r in records]
    batched = make_queries([r.id for r in records], profiles, totals, FAST.search, device=device)
    for query, profile in zip(batched, profiles):
        assert query.calibration == calibrate(profile, totals, device="numpy")


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_search_on_a_torch_device_equals_numpy(small_db, device):
    """Two iterations over two shards: the same hits, E-values, alignments and MSAs, with the prefilter in one
    process and in two forked ones (which never touch the device)."""
    db, records = small_db
    search, settings = FAST.search, FAST.replace(iterations=2).msa
    reference = build_msas(records, db, search, settings, cpus=1, device="numpy")
    for cpus in (1, 2):
        result = build_msas(records, db, search, settings, cpus=cpus, device=device)
        for mine, theirs in zip(result, reference):
            assert len(mine.iterations) == len(theirs.iterations)
            for a, b in zip(mine.iterations, theirs.iterations):
                pd.testing.assert_frame_equal(a.hits, b.hits)
            assert mine.alignment.rows == theirs.alignment.rows
    assert sum(len(it.hits) for r in reference for it in r.iterations) > 20


def test_cli_device_option(small_db, tmp_path, capsys):
    db, records = small_db
    fasta = tmp_path / "q.fasta"
    fasta.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records[:2]))
    tables = []
    for device in ["numpy", "cpu"]:
        out = tmp_path / f"{device}.parquet"
        assert main(["search", "--db", str(db), "--out", str(out), "--iterations", "1", "--device", device,
                     str(fasta)]) == 0
        tables.append(pd.read_parquet(out))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    capsys.readouterr()
    assert main(["search", "--db", str(db), "--out", str(tmp_path / "x.parquet"), "--device", "gpu0", str(fasta)]) != 0
    assert "'gpu0' is not a torch device" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["search", "--db", str(db), "--out", str(tmp_path / "x.parquet"), "--device", "cuda",
                     str(fasta)]) != 0
        assert "torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_device_is_a_job_resource_not_a_config_key():
    """Where the search runs is the profile's business: ``search.device`` names the resource to set instead."""
    from workflow_lib.workflow.config import SearchConfig, check_moved_keys
    assert "--device" not in SearchConfig().cli_options()   # the rules add --device from the job's resources
    with pytest.raises(InputError, match="unknown key"):
        SearchConfig.from_dict({"device": "cuda"})
    with pytest.raises(InputError, match=r"'search.device' is no longer .*--set-resources search_profiles:gpu=1"):
        check_moved_keys({"search": {"device": "cuda"}})
    check_moved_keys({"search": {"iterations": 2}, "predict": {}})
