"""Run the search tools of the side-by-side benchmark with timing, and read their hits back.

Each tool is a :class:`Tool`: ``prepare`` builds its database from the benchmark's FASTA (timed apart from
the search), ``search`` runs every query with wall time, CPU time and peak RSS measured per child process
(``os.wait4``, whose ``ru_maxrss`` covers the child and the grandchildren it waited for), and ``hits`` reads
the raw output into ``query, target, evalue`` rows of the *final* iteration. Raw outputs and a ``run.json``
(written last, atomically) are cached under ``benchmarks/_work/search/...``; a rerun with the same inputs and
commands reuses them.

Commands (peers as named in the issue; reporting limits widened so that weak hits count in the ROC and in
the E ≤ 10 calibration row, which changes what is *printed*, not what is *searched*, except mmseqs'
``--max-seqs``, raised to the database size so the prefilter does not cap the hit list):

- ``jackhmmer -N 3 --cpu 1 --noali -o /dev/null --tblout OUT QUERIES.fasta DB.fasta`` (one process for all
  queries; reporting default E ≤ 10, inclusion 1e-3);
- ``hhblits -i Q.fasta -d DB -n 2 -cpu 1 -e 0.001 -E 10 -p 0 -Z N -B N -z 0 -b 0 -blasttab OUT -o /dev/null``
  per query, on an HH-suite database built from the same FASTA (single-sequence A3M → ffindex; ``hhmake`` per
  entry via ``ffindex_apply``; ``cstranslate -A cs219.lib -D context_data.lib -x 0.3 -c 4 -I a3m -b`` as
  ``hhsuitedb.py`` does);
- ``mmseqs easy-search QUERIES.fasta DB.fasta OUT.m8 TMP --num-iterations 3 -s 7.5 --threads 1 -e 10
  --max-seqs N``;
- ``trackfold search --db DB_DIR --out HITS.parquet --iterations 3 --cpus 1 QUERIES.fasta`` after
  ``trackfold db build --out DB_DIR DB.fasta``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from workflow_lib.errors import InputError, ToolError
from workflow_lib.seqio.fasta import iter_fasta
from workflow_lib.seqio.atomic import write_text_atomic
from workflow_lib.seqio.fasta import write_fasta

ROOT = Path(__file__).resolve().parents[2]
HHSUITE_DATA = Path("/usr/share/hhsuite/data")
NICE = ["nice", "-n", "10"]
_PIN = threading.local()


@contextmanager
def pinned(cpus: set[int]):
    """Commands that :func:`run_measured` starts in this thread run on ``cpus`` only (under ``taskset``); for
    the paired timing of :mod:`search_bench.paired`, which runs two tools at once."""
    previous = getattr(_PIN, "cpus", None)
    _PIN.cpus = set(cpus)
    try:
        yield
    finally:
        _PIN.cpus = previous


@dataclass
class Measured:
    """Wall seconds, CPU seconds (user + system, children included) and peak RSS (KiB) of one command."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_kib: int = 0
    commands: list[str] = field(default_factory=list)

    def add(self, other: Measured) -> None:
        self.wall_s += other.wall_s
        self.cpu_s += other.cpu_s
        self.peak_rss_kib = max(self.peak_rss_kib, other.peak_rss_kib)
        self.commands.extend(other.commands)


def run_measured(command: list[str], *, cwd: Path | None = None, env: dict | None = None,
                 stdout_path: Path | None = None, record: bool = True, nice: bool = True) -> Measured:
    """Run ``command`` (under ``nice -n 10``; on the cores of :func:`pinned` when set), raise ToolError on
    failure, return its resources."""
    full = (NICE + command) if nice else command
    cpus = getattr(_PIN, "cpus", None)
    if cpus:  # taskset, not a preexec_fn: the paired timing starts commands from two threads at once
        if shutil.which("taskset") is None:
            raise ToolError("pinning a command to a core needs taskset (util-linux)")
        full = ["taskset", "--cpu-list", ",".join(str(c) for c in sorted(cpus))] + full
    stdout = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    start = time.perf_counter()
    try:
        process = subprocess.Popen(full, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE)
        stderr = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout_path:
            stdout.close()
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise ToolError(f"{' '.join(command)} failed with exit code {process.returncode}:\n"
                        f"{stderr.decode(errors='replace')[-2000:]}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss),
                    [" ".join(command)] if record else [])


def digest(*parts: str | Path) -> str:
    hasher = hashlib.sha1()
    for part in parts:
        hasher.update(Path(part).read_bytes() if isinstance(part, Path) else part.encode())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def write_records(path: Path, records: list[tuple[str, str]]) -> Path:
    """FASTA with one line per sequence, rewritten only when its content changes (keeps caches valid)."""
    text = "".join(f">{n}\n{s}\n" for n, s in records)
    if not path.exists() or path.read_text() != text:
        write_fasta(path, records, width=0)
    return path


class Tool:
    """One search tool of the benchmark. Subclasses set ``name``, ``label`` and implement the steps."""

    name = "tool"
    label = "tool"
    version_command: list[str] = []

    def available(self) -> tuple[bool, str]:
        raise NotImplementedError

    def version(self) -> str:
        if not self.version_command:
            return ""
        try:
            out = subprocess.run(self.version_command, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        text = (out.stdout + out.stderr).strip().splitlines()
        return text[0][:80] if text else "unknown"

    def config(self) -> str:
        """Everything about the commands that should invalidate the cache when it changes."""
        return self.name

    def prepare(self, db_fasta: Path, work: Path, n_db: int) -> Measured:
        return Measured()

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        raise NotImplementedError

    def hits(self, work: Path) -> pd.DataFrame:
        raise NotImplementedError

    # ----------------------------------------------------------- cached run

    def run(self, queries: Path, db_fasta: Path, work: Path, n_queries: int, n_db: int, *,
            force: bool = False, search_name: str = "search") -> dict:
        """Prepare (``work/db``, kept while the database and commands are unchanged) and search
        (``work/search``, kept while queries, database and commands are unchanged); returns the run record."""
        search_dir = work / search_name
        build = self.ensure_database(db_fasta, work, n_db, force=force)
        key = digest(queries, db_fasta, self.config())
        record_path = search_dir / "run.json"
        if not force and record_path.exists():
            record = json.loads(record_path.read_text())
            if record.get("key") == key:
                record["cached"] = True
                return record
        if search_dir.exists():
            shutil.rmtree(search_dir)
        search_dir.mkdir(parents=True)
        print(f"[search-bench] {self.name}: searching {n_queries} queries", file=sys.stderr, flush=True)
        search = self.search(queries, db_fasta, work / "db", search_dir, n_db)
        record = {
            "key": key, "tool": self.name, "label": self.label, "version": self.version(),
            "n_queries": n_queries, "n_db": n_db,
            "build": build, "search": asdict(search),
            "finished": time.strftime("%Y-%m-%d %H:%M"),
        }
        write_text_atomic(record_path, json.dumps(record, indent=1))
        record["cached"] = False
        return record

    def ensure_database(self, db_fasta: Path, work: Path, n_db: int, *, force: bool = False) -> dict:
        """Build the database in ``work/db`` unless a build from the same FASTA and commands is there (or
        ``force``); returns the build record (its time and commands)."""
        db_dir = work / "db"
        build_key = digest(db_fasta, self.config())
        build_path = db_dir / "build.json"
        if not force and build_path.exists():
            stored = json.loads(build_path.read_text())
            if stored.get("key") == build_key:
                return stored["build"]
        if db_dir.exists():
            shutil.rmtree(db_dir)
        db_dir.mkdir(parents=True)
        print(f"[search-bench] {self.name}: preparing database in {db_dir}", file=sys.stderr, flush=True)
        build = asdict(self.prepare(db_fasta, db_dir, n_db))
        write_text_atomic(build_path, json.dumps({"key": build_key, "build": build}, indent=1))
        return build

    def load_hits(self, work: Path, search_name: str = "search") -> pd.DataFrame:
        return self.hits(work / search_name)


# ---------------------------------------------------------------- jackhmmer

class Jackhmmer(Tool):
    name = "jackhmmer"
    label = "jackhmmer -N 3"
    version_command = ["jackhmmer", "-h"]

    def version(self) -> str:
        out = subprocess.run(["jackhmmer", "-h"], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("# HMMER"):
                return line[2:].strip()
        return "unknown"

    def available(self) -> tuple[bool, str]:
        return (shutil.which("jackhmmer") is not None, "jackhmmer not on PATH")

    def config(self) -> str:
        return "jackhmmer -N 3 --cpu 1 --noali tblout v1"

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        return run_measured(["jackhmmer", "-N", "3", "--cpu", "1", "--noali", "-o", os.devnull,
                             "--tblout", str(work / "hits.tbl"), str(queries), str(db_fasta)])

    def hits(self, work: Path) -> pd.DataFrame:
        return read_hmmer_tblout(work / "hits.tbl")


class Phmmer(Jackhmmer):
    """phmmer: one sequence-profile search per query (jackhmmer's first iteration)."""

    name = "phmmer"
    label = "phmmer"

    def available(self) -> tuple[bool, str]:
        return (shutil.which("phmmer") is not None, "phmmer not on PATH")

    def config(self) -> str:
        return "phmmer --cpu 1 --noali tblout v1"

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        return run_measured(["phmmer", "--cpu", "1", "--noali", "-o", os.devnull,
                             "--tblout", str(work / "hits.tbl"), str(queries), str(db_fasta)])


def read_hmmer_tblout(path: Path) -> pd.DataFrame:
    """HMMER ``--tblout`` → query, target, evalue (full-sequence E-value); jackhmmer writes the final round."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) < 18:
            raise InputError(f"line {number}: not an HMMER tblout row", path=path)
        rows.append((fields[2], fields[0], float(fields[4])))
    frame = pd.DataFrame(rows, columns=["query", "target", "evalue"])
    # a target listed twice for a query (should not happen): keep the last, i.e. latest round
    return frame.drop_duplicates(["query", "target"], keep="last").reset_index(drop=True)


# ---------------------------------------------------------------- hhblits

def cstranslate_binary() -> str | None:
    """Debian ships cstranslate only under /usr/libexec/hhsuite (SIMD variants), not on PATH."""
    found = shutil.which("cstranslate")
    if found:
        return found
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    for simd in ("avx2", "avx", "sse4.1", "ssse3", "sse3", "plain"):
        candidate = Path(f"/usr/libexec/hhsuite/cstranslate-{simd}")
        flag = simd.replace(".", "_")
        if candidate.exists() and (simd == "plain" or flag in cpuinfo):
            return str(candidate)
    return None


def write_ffindex(base: Path, entries: list[tuple[str, bytes]]) -> None:
    """ffindex pair ``base.ffdata`` / ``base.ffindex``: entries sorted by name, each NUL-terminated."""
    offset = 0
    index_lines = []
    data_path = Path(f"{base}.ffdata")
    with open(data_path, "wb") as data:
        for name, payload in sorted(entries):
            blob = payload + b"\0"
            data.write(blob)
            index_lines.append(f"{name}\t{offset}\t{len(blob)}\n")
            offset += len(blob)
    write_text_atomic(Path(f"{base}.ffindex"), "".join(index_lines))


class HHblits(Tool):
    name = "hhblits"
    label = "hhblits -n 2"
    version_command = ["hhblits", "-h"]

    def version(self) -> str:
        out = subprocess.run(["hhblits", "-h"], capture_output=True, text=True)
        for line in (out.stdout + out.stderr).splitlines():
            if line.startswith("HHblits"):
                return line.strip().rstrip(":")
        return "unknown"

    def available(self) -> tuple[bool, str]:
        missing = [b for b in ("hhblits", "hhmake", "ffindex_apply") if shutil.which(b) is None]
        if cstranslate_binary() is None:
            missing.append("cstranslate")
        if not (HHSUITE_DATA / "cs219.lib").exists() or not (HHSUITE_DATA / "context_data.lib").exists():
            missing.append(f"{HHSUITE_DATA}/cs219.lib, context_data.lib (hhsuite-data)")
        return (not missing, "missing: " + ", ".join(missing))

    def config(self) -> str:
        return "hhblits -n 2 -cpu 1 -e 0.001 -E 10 -p 0 -z 0 -b 0 blasttab v1"

    def prepare(self, db_fasta: Path, work: Path, n_db: int) -> Measured:
        base = work / "db"
        entries = []
        name = None
        for line in db_fasta.read_text().splitlines():
            if line.startswith(">"):
                name = line[1:].split()[0]
            elif name is not None:
                entries.append((name, f">{name}\n{line}\n".encode()))
                name = None
        write_ffindex(Path(f"{base}_a3m"), entries)
        measured = run_measured(["ffindex_apply", "-q", f"{base}_a3m.ffdata", f"{base}_a3m.ffindex",
                                 "-i", f"{base}_hhm.ffindex", "-d", f"{base}_hhm.ffdata", "--",
                                 "hhmake", "-i", "stdin", "-o", "stdout", "-v", "0"])
        env = dict(os.environ, OMP_NUM_THREADS="1")
        measured.add(run_measured([cstranslate_binary(), "-A", str(HHSUITE_DATA / "cs219.lib"),
                                   "-D", str(HHSUITE_DATA / "context_data.lib"), "-x", "0.3", "-c", "4",
                                   "-f", "-i", f"{base}_a3m", "-o", f"{base}_cs219", "-I", "a3m", "-b"],
                                  env=env))
        for suffix in ("hhm", "cs219"):   # ffindex_apply / cstranslate may leave the index unsorted
            measured.add(run_measured(["ffindex_build", "-as", f"{base}_{suffix}.ffdata",
                                       f"{base}_{suffix}.ffindex"], record=False))
        return measured

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        out_dir = work / "out"
        query_dir = work / "queries"
        out_dir.mkdir()
        query_dir.mkdir()
        total = Measured()
        lines = queries.read_text().splitlines()
        names = []
        for header, sequence in zip(lines[0::2], lines[1::2]):
            name = header[1:].split()[0]
            names.append(name)
            (query_dir / f"{len(names) - 1}.fasta").write_text(f"{header}\n{sequence}\n")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for number, name in enumerate(names):
            query = query_dir / f"{number}.fasta"
            measured = run_measured(["hhblits", "-i", str(query), "-d", str(db_dir / "db"), "-n", "2",
                                     "-cpu", "1", "-e", "0.001", "-E", "10", "-p", "0", "-Z", str(n_db + 10),
                                     "-B", str(n_db + 10), "-z", "0", "-b", "0", "-v", "0",
                                     "-blasttab", str(out_dir / f"{number}.m8"), "-o", os.devnull],
                                    env=env, record=number == 0)
            total.add(measured)
            if number % 100 == 99:
                print(f"[search-bench] hhblits: {number + 1}/{len(names)} queries", file=sys.stderr, flush=True)
        (work / "query_names.txt").write_text("\n".join(names) + "\n")
        return total

    def hits(self, work: Path) -> pd.DataFrame:
        names = (work / "query_names.txt").read_text().split()
        frames = []
        for number, name in enumerate(names):
            frame = read_m8(work / "out" / f"{number}.m8")
            frame["query"] = name    # hhblits writes the query's name as in the FASTA; be explicit anyway
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else empty_hits()


def empty_hits() -> pd.DataFrame:
    return pd.DataFrame({"query": pd.Series(dtype=str), "target": pd.Series(dtype=str),
                         "evalue": pd.Series(dtype=float)})


def read_m8(path: Path) -> pd.DataFrame:
    """BLAST tabular (12 columns; E-value is column 11) → query, target, evalue."""
    rows = []
    if path.exists():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < 12:
                raise InputError(f"line {number}: not a 12-column BLAST tabular row", path=path)
            rows.append((fields[0], fields[1].split()[0], float(fields[10])))
    frame = pd.DataFrame(rows, columns=["query", "target", "evalue"]) if rows else empty_hits()
    return frame


# ---------------------------------------------------------------- mmseqs2

class MMseqs(Tool):
    name = "mmseqs"
    label = "mmseqs easy-search --num-iterations 3 -s 7.5"
    version_command = ["mmseqs", "version"]

    def available(self) -> tuple[bool, str]:
        return (shutil.which("mmseqs") is not None, "mmseqs not on PATH")

    def __init__(self, widen_prefilter: bool = True) -> None:
        # benchmark sets: --max-seqs = database size, so the hit list is limited by E-value only;
        # scaling runs keep mmseqs' default (300), its normal cost on a large database
        self.widen_prefilter = widen_prefilter

    def config(self) -> str:
        if self.widen_prefilter:
            return "mmseqs easy-search --num-iterations 3 -s 7.5 --threads 1 -e 10 --max-seqs N v1"
        return "mmseqs easy-search --num-iterations 3 -s 7.5 --threads 1 -e 10 v1"

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        tmp = work / "tmp"
        widen = ["--max-seqs", str(max(n_db, 300))] if self.widen_prefilter else []
        measured = run_measured(["mmseqs", "easy-search", str(queries), str(db_fasta), str(work / "hits.m8"),
                                 str(tmp), "--num-iterations", "3", "-s", "7.5", "--threads", "1",
                                 "-e", "10", *widen, "-v", "1"])
        shutil.rmtree(tmp, ignore_errors=True)
        return measured

    def hits(self, work: Path) -> pd.DataFrame:
        return read_m8(work / "hits.m8")


# ---------------------------------------------------------------- trackfold

class Trackfold(Tool):
    """``trackfold search`` with its defaults: context-specific pseudocounts and the sensitive prefilter from
    iteration 2 on (:data:`workflow_lib.search.settings.DEFAULT`)."""

    name = "trackfold"
    label = "trackfold search --iterations 3"

    def __init__(self, python: Path | None = None, iterations: int = 3, cpus: int = 1) -> None:
        self.python = python or ROOT / ".venv" / "bin" / "python"
        self.iterations = iterations
        self.cpus = cpus
        self.label = f"trackfold search --iterations {iterations}"

    extra_arguments: tuple[str, ...] = ()
    """Options added to ``trackfold search`` (and to the cache key)."""

    def command(self) -> list[str]:
        return [str(self.python), "-m", "workflow_lib"]

    def available(self) -> tuple[bool, str]:
        try:
            out = subprocess.run(self.command() + ["search", "--help"], capture_output=True, text=True,
                                 cwd=ROOT, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            return False, f"not yet run: {error}"
        if out.returncode != 0:
            return False, "not yet run: `trackfold search` does not exist yet"
        return True, ""

    def version(self) -> str:
        out = subprocess.run(self.command() + ["--version"], capture_output=True, text=True, cwd=ROOT)
        return (out.stdout + out.stderr).strip().splitlines()[0] if (out.stdout + out.stderr).strip() else "unknown"

    def config(self) -> str:
        # the code itself changes while it is developed: key the cache on the search and aligner sources (the
        # aligner builds the profiles and runs Viterbi) and the database's k-mer index
        sources = sorted([*(ROOT / "workflow_lib" / "search").glob("**/*.py"),
                          *(ROOT / "workflow_lib" / "aligner").glob("**/*.py"),
                          ROOT / "workflow_lib" / "db" / "kmer_index.py"])
        return (f"trackfold --iterations {self.iterations} --cpus {self.cpus} " + digest(*sources)
                + "".join(f" {option}" for option in self.extra_arguments))

    SHARD_RESIDUES = 4_000_000
    """Residues per shard at most, as a user shards a large database (a search job's memory follows its shard)."""

    def prepare(self, db_fasta: Path, work: Path, n_db: int) -> Measured:
        residues = sum(len(record.sequence) for record in iter_fasta(db_fasta, allow_duplicates=True))
        shards = max(1, math.ceil(residues / self.SHARD_RESIDUES))
        return run_measured(self.command() + ["db", "build", "--out", str(work / "db"), "--shards", str(shards),
                                              str(db_fasta)], cwd=ROOT)

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        return run_measured(self.command() + ["search", "--db", str(db_dir / "db"), "--out", str(work / "hits.parquet"),
                                              "--iterations", str(self.iterations), "--cpus", str(self.cpus),
                                              *self.extra_arguments, str(queries)], cwd=ROOT)

    def hits(self, work: Path) -> pd.DataFrame:
        return read_trackfold_hits(work / "hits.parquet")


class TrackfoldVariant(Trackfold):
    """``trackfold search`` with other settings than the defaults (context pseudocounts and the sensitive
    prefilter, :data:`workflow_lib.search.settings.DEFAULT`), given explicitly."""

    def __init__(self, python: Path | None = None, iterations: int = 3, cpus: int = 1) -> None:
        super().__init__(python, iterations, cpus)
        self.label = f"trackfold search --iterations {iterations} " + " ".join(self.extra_arguments)


class TrackfoldFast(TrackfoldVariant):
    """The fast settings (:data:`workflow_lib.search.settings.FAST`): substitution pseudocounts, the fast prefilter
    in every iteration."""

    name = "trackfold_fast"
    extra_arguments = ("--pseudocounts", "substitution", "--no-sensitive")


class TrackfoldSensitive(TrackfoldVariant):
    """Substitution pseudocounts with the sensitive prefilter (:data:`workflow_lib.search.settings.PRESETS`
    ``sensitive``)."""

    name = "trackfold_sensitive"
    extra_arguments = ("--pseudocounts", "substitution", "--sensitive")


class TrackfoldContext(TrackfoldVariant):
    """Context-specific pseudocounts (workflow_lib.aligner.context) with the fast prefilter
    (:data:`workflow_lib.search.settings.PRESETS` ``context``)."""

    name = "trackfold_context"
    extra_arguments = ("--pseudocounts", "context", "--no-sensitive")


class TrackfoldProfiles(Trackfold):
    """``trackfold search`` against a profile database: ``trackfold db build`` then ``trackfold db cluster``
    (both timed as the database build), ``--iterations 2`` (as hhblits -n 2), substitution pseudocounts for the
    query (better than context-specific ones on this benchmark's first 100 queries: ROC1 0.163 against 0.138)."""

    name = "trackfold_profiles"

    def __init__(self, python: Path | None = None, iterations: int = 2, cpus: int = 1) -> None:
        super().__init__(python, iterations, cpus)
        self.label = f"trackfold search --iterations {iterations} --pseudocounts substitution (profile database)"

    def config(self) -> str:
        sources = sorted([ROOT / "workflow_lib" / "db" / "cluster.py", ROOT / "workflow_lib" / "db" / "profiles.py"])
        return super().config() + " profiles " + digest(*sources)

    def prepare(self, db_fasta: Path, work: Path, n_db: int) -> Measured:
        measured = super().prepare(db_fasta, work, n_db)
        measured.add(run_measured(self.command() + ["db", "cluster", "--db", str(work / "db"), "--out",
                                                    str(work / "profiles")], cwd=ROOT))
        return measured

    def search(self, queries: Path, db_fasta: Path, db_dir: Path, work: Path, n_db: int) -> Measured:
        return run_measured(self.command() + ["search", "--db", str(db_dir / "profiles"),
                                              "--out", str(work / "hits.parquet"), "--iterations",
                                              str(self.iterations), "--pseudocounts", "substitution", str(queries)],
                            cwd=ROOT)


def read_trackfold_hits(path: Path) -> pd.DataFrame:
    """The final iteration's rows of a `trackfold search` hits table → query, target, evalue."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    needed = {"query", "target", "evalue", "iteration"}
    missing = needed - set(table.column_names)
    if missing:
        raise InputError(f"hits table lacks columns {sorted(missing)}", path=path)
    frame = table.select(sorted(needed)).to_pandas()
    if frame.empty:
        return empty_hits()
    last = frame.groupby("query")["iteration"].transform("max")
    frame = frame[frame["iteration"] == last]
    return frame[["query", "target", "evalue"]].astype({"evalue": float}).reset_index(drop=True)


def all_tools(trackfold_iterations: int = 3) -> list[Tool]:
    return [Jackhmmer(), HHblits(), MMseqs(), Trackfold(iterations=trackfold_iterations),
            TrackfoldFast(iterations=trackfold_iterations), TrackfoldSensitive(iterations=trackfold_iterations),
            TrackfoldContext(iterations=trackfold_iterations)]
