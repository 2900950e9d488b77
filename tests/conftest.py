"""Shared fixtures: paths to the repository, the bundled example and the real-data test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def example_dir() -> Path:
    return ROOT / "example"


def example_database(folder: Path, count: int, shards: int = 2) -> tuple[Path, list]:
    """The first ``count`` sequences of the bundled example database as a database of ``shards`` shards in
    ``folder/db``; returns its directory and the records."""
    from workflow_lib.db.build import build_database
    from workflow_lib.seqio.fasta import read_fasta
    records = read_fasta(ROOT / "example" / "db" / "sprot_firmicutes_slice.fasta.gz")[:count]
    (folder / "in.fasta").write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records))
    build_database([folder / "in.fasta"], folder / "db", shards=shards)
    return folder / "db", records


@pytest.fixture(params=["numpy", "compiled"])
def cpu_kernels(request, monkeypatch):
    """Run a test against both CPU kernel families: the NumPy lanes and the compiled ones (numba; skipped
    where numba is not installed), switched by ``TRACKFOLD_KERNELS``."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setenv("TRACKFOLD_KERNELS", request.param)
    return request.param


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models on a shared CI machine: one torch thread avoids OpenMP oversubscription (restored after)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
