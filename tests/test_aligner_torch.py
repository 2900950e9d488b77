"""The torch sequence–profile kernel on CPU tensors equals the NumPy kernel (and the loop reference): scores
exact in int32 milli-bits, identical alignments. No GPU is needed (CUDA is only chosen when present); on a
machine with CUDA the kernel tests also run on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_aligner_helpers import ALIGNER_DATA, SHARED_DATA, random_profile  # noqa: E402
from workflow_lib.aligner import add_pseudocounts, align_queries, align_targets, read_hhm  # noqa: E402
from workflow_lib.aligner import device, torch_kernels  # noqa: E402
from workflow_lib.aligner import viterbi_seq as viterbi_seq_module  # noqa: E402
from workflow_lib.aligner.reference import viterbi_sequence_reference  # noqa: E402
from workflow_lib.aligner.scores import sequence_scores  # noqa: E402
from workflow_lib.seqio.alphabet import encode  # noqa: E402
from workflow_lib.seqio.fasta import read_fasta  # noqa: E402


TORCH_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def hit_key(hit):
    return (hit.index, hit.raw_score, hit.score, hit.query_start, hit.query_end, hit.target_start, hit.target_end,
            hit.states, hit.pairs.tolist())


def assert_same_hits(left, right):
    assert [hit_key(h) for h in left] == [hit_key(h) for h in right]


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_profiles_equal_numpy_and_reference(seed, device):
    rng = np.random.default_rng(seed)
    profile = random_profile(rng, int(rng.integers(2, 40)))
    targets = [rng.integers(0, 21, int(rng.integers(1, 70))).astype(np.uint8) for _ in range(14)]
    targets += [np.array([7], dtype=np.uint8), np.full(6, 20, dtype=np.uint8),
                profile.emissions.argmax(axis=1).astype(np.uint8)]
    for backtrace in (True, False):
        fast = align_targets(profile, targets, backtrace=backtrace, device="numpy", lane_cells=256)
        torch_hits = align_targets(profile, targets, backtrace=backtrace, device=device, lane_cells=256)
        assert_same_hits(fast, torch_hits)
    scores = sequence_scores(profile)
    for target, hit in zip(targets, torch_hits):
        assert hit.raw_score == viterbi_sequence_reference(scores, target)[0]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_real_profile_and_sequences(device):
    profile = add_pseudocounts(read_hhm(ALIGNER_DATA / "hhm" / "globins4.hhm"))
    records = read_fasta(SHARED_DATA / "hmmer_examples" / "tutorial" / "globins45.fa")[:12]
    targets = [encode(r.sequence) for r in records] + [encode(records[0].sequence[30:40])]
    fast = align_targets(profile, targets, backtrace=True, device="numpy")
    torch_hits = align_targets(profile, targets, backtrace=True, device=device, lane_cells=2048)
    assert_same_hits(fast, torch_hits)
    assert min(h.score for h in torch_hits[:12]) > 50          # globins against the globin profile
    per_query = align_queries([profile, profile], targets[:3], device=device)
    assert [h.raw_score for h in per_query[1]] == [h.raw_score for h in fast[:3]]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_int64_path(monkeypatch, device):
    monkeypatch.setattr(viterbi_seq_module, "INT32_MAX_TARGET", 10)
    rng = np.random.default_rng(4)
    profile = random_profile(rng, 12)
    targets = [rng.integers(0, 20, n).astype(np.uint8) for n in (4, 25, 33)]
    assert_same_hits(align_targets(profile, targets, backtrace=True, device="numpy"),
                     align_targets(profile, targets, backtrace=True, device=device))


def test_device_selection(monkeypatch):
    monkeypatch.setattr(device, "_CUDA", False)
    assert torch_kernels.resolve_device(None) == torch_kernels.NUMPY
    assert torch_kernels.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ValueError):
        torch_kernels.resolve_device("")
    monkeypatch.setattr(device, "_CUDA", True)
    assert torch_kernels.resolve_device(None) == "cuda"
    # with CUDA "available", the default path goes through the torch kernel (run here on CPU tensors)
    calls = []
    original = torch_kernels.viterbi_seq_lanes_torch

    def on_cpu(scores, residues, *, backtrace, device):
        calls.append(device)
        return original(scores, residues, backtrace=backtrace, device="cpu")

    monkeypatch.setattr(torch_kernels, "viterbi_seq_lanes_torch", on_cpu)
    profile = random_profile(np.random.default_rng(2), 8)
    target = profile.emissions.argmax(axis=1).astype(np.uint8)
    hit = align_targets(profile, [target], backtrace=True)[0]
    assert calls == ["cuda"]
    assert hit.raw_score == align_targets(profile, [target], device="numpy")[0].raw_score


def test_cli_device_option(tmp_path):
    from test_aligner_cli import run
    records = read_fasta(SHARED_DATA / "hmmer_examples" / "tutorial" / "globins45.fa")[10:16]
    fasta = tmp_path / "globins.fa"
    fasta.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records))
    outputs = []
    for device in ("numpy", "cpu"):
        out = tmp_path / f"{device}.tsv"
        assert run(["align", str(ALIGNER_DATA / "hhm" / "globins4.hhm"), str(fasta), "--top", "4",
                    "--device", device, "--out", str(out)]) == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 5
