"""``trackfold search`` / ``trackfold msa`` and the workflow's per-job commands.

User commands:

- ``search --db DB --out HITS.parquet [--iterations N] [--cpus N] [--m8 FILE] QUERIES.fasta``: one hits table
  (:data:`~workflow_lib.schemas.search.HITS`) for all queries and iterations; ``--m8`` also writes BLAST tabular.
- ``msa --db DB --out-dir DIR [--iterations N] [--cpus N] QUERIES.fasta``: ``DIR/{safe_id}.a3m`` per query and
  ``DIR/msa_stats.parquet`` (:data:`~workflow_lib.schemas.search.MSA_STATS`).

The job bodies are :mod:`workflow_lib.search.jobs`; this module parses their arguments. Workflow commands (one
job each; rules/search.smk): ``search-profiles`` (a chunk's query profiles of one
iteration with their E-value calibration, :mod:`~workflow_lib.search.query_store`), ``search-shard`` (those
queries × one shard), ``msa-merge`` (all shards of an iteration → MSAs and the next state), ``msa-final`` (the final
``{safe_id}.a3m`` files and the chunk's statistics, written last).
"""

from __future__ import annotations

import argparse

from workflow_lib.errors import InputError
from workflow_lib.search import jobs
from workflow_lib.search.settings import Settings, add_settings_arguments, settings_from_args


def _device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="numpy",
                        help="where the Viterbi stages run: numpy, a torch device (cuda, cuda:1, cpu), or auto "
                             "(CUDA when torch sees a GPU, else NumPy); hits are identical on every backend (their "
                             "cost: benchmarks/RESULTS.md, \"Homology search on a GPU\") (default %(default)s)")


def _device(args: argparse.Namespace) -> str | None:
    device = args.device.strip()
    if device == "auto":
        return None
    if device != "numpy":
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            raise InputError(f"--device {device} needs torch, which is not installed")
        import torch
        try:
            torch.device(device)
        except RuntimeError:
            raise InputError(f"--device: {device!r} is not a torch device (auto, numpy, cpu, cuda, cuda:N)") from None
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"--device {device}: torch sees no CUDA device on this machine")
    return device


def _settings(args: argparse.Namespace) -> Settings:
    """The options' settings; a bad value (or context model file) is an input error, before any search."""
    try:
        settings = settings_from_args(args)
    except ValueError as error:
        raise InputError(str(error)) from None
    settings.msa.context()  # a bad model file fails here, before any search
    return settings


def register(subparsers: argparse._SubParsersAction) -> None:
    search = subparsers.add_parser("search", help="search a database with each query; one hits table",
                                   description="Iterative profile search (prefilter → Viterbi → E-values).")
    search.add_argument("queries", help="protein FASTA")
    search.add_argument("--db", required=True,
                        help="database directory: sequences (trackfold db build) or profiles (trackfold db cluster)")
    search.add_argument("--out", required=True, help="hits table (.parquet)")
    search.add_argument("--m8", help="also write BLAST tabular (outfmt 6) here")
    search.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores)")
    _device_argument(search)
    add_settings_arguments(search)
    search.set_defaults(handler=run_search)

    msa = subparsers.add_parser("msa", help="iterative MSAs: DIR/{id}.a3m and DIR/msa_stats.parquet",
                                description="Iterative MSA assembly against a database (HHblits-style).")
    msa.add_argument("queries", help="protein FASTA")
    msa.add_argument("--db", required=True,
                     help="database directory: sequences (trackfold db build) or profiles (trackfold db cluster)")
    msa.add_argument("--out-dir", required=True, help="output directory")
    msa.add_argument("--cpus", type=int, default=1, help="processes (0 = all cores)")
    msa.add_argument("--stats", help="statistics table (default OUT_DIR/msa_stats.parquet), written last")
    _device_argument(msa)
    add_settings_arguments(msa)
    msa.set_defaults(handler=run_msa)

    profiles = subparsers.add_parser("search-profiles",
                                     help="(workflow) a chunk's calibrated query profiles for one iteration")
    _query_arguments(profiles)
    profiles.add_argument("--out", required=True, help="query profiles (.npz) for search-shard --profiles")
    _device_argument(profiles)
    add_settings_arguments(profiles)
    profiles.set_defaults(handler=run_search_profiles)

    shard = subparsers.add_parser("search-shard", help="(workflow) one chunk's queries against one shard")
    _query_arguments(shard)
    shard.add_argument("--shard", type=int, required=True)
    shard.add_argument("--profiles", help="the chunk's queries from search-profiles (else built here)")
    shard.add_argument("--out", required=True, help="hits table")
    shard.add_argument("--times", required=True, help="per-query time table")
    shard.add_argument("--cpus", type=int, default=1)
    _device_argument(shard)
    add_settings_arguments(shard)
    shard.set_defaults(handler=run_search_shard)

    merge = subparsers.add_parser("msa-merge", help="(workflow) merge shard hits of one iteration into MSAs")
    merge.add_argument("queries", help="chunk FASTA")
    merge.add_argument("--iteration", type=int, required=True)
    merge.add_argument("--hits", nargs="+", required=True, help="hits tables of every shard")
    merge.add_argument("--times", nargs="+", required=True, help="time tables of every shard")
    merge.add_argument("--state", help="state table of the previous iteration")
    merge.add_argument("--precomputed", help="directory of precomputed A3Ms (iteration 1)")
    merge.add_argument("--a3m-dir", required=True, help="where this iteration's A3Ms go")
    merge.add_argument("--out-state", required=True)
    add_settings_arguments(merge)
    merge.set_defaults(handler=run_msa_merge)

    final = subparsers.add_parser("msa-final", help="(workflow) final A3Ms and MSA statistics of a chunk")
    final.add_argument("queries", help="chunk FASTA")
    final.add_argument("--state", required=True, help="state table of the last iteration")
    final.add_argument("--out-dir", required=True)
    final.add_argument("--stats", required=True, help="statistics table (written last)")
    add_settings_arguments(final)
    final.set_defaults(handler=run_msa_final)


def _query_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queries", help="chunk FASTA")
    parser.add_argument("--db", required=True)
    parser.add_argument("--iteration", type=int, required=True)
    parser.add_argument("--state", help="state table of the previous iteration (iterations > 1)")
    parser.add_argument("--precomputed", help="directory of precomputed A3Ms; those proteins are not searched")


def run_search(args: argparse.Namespace) -> int:
    return jobs.search_job(args.queries, args.db, out=args.out, m8=args.m8, settings=_settings(args),
                           cpus=args.cpus, device=_device(args))


def run_msa(args: argparse.Namespace) -> int:
    return jobs.msa_job(args.queries, args.db, out_dir=args.out_dir, settings=_settings(args), cpus=args.cpus,
                        device=_device(args), stats=args.stats)


def run_search_profiles(args: argparse.Namespace) -> int:
    return jobs.search_profiles_job(args.queries, args.db, iteration=args.iteration, out=args.out,
                                    settings=_settings(args), state=args.state, precomputed=args.precomputed,
                                    device=_device(args))


def run_search_shard(args: argparse.Namespace) -> int:
    return jobs.search_shard_job(args.queries, args.db, shard=args.shard, iteration=args.iteration, out=args.out,
                                 times=args.times, settings=_settings(args), profiles=args.profiles,
                                 state=args.state, precomputed=args.precomputed, cpus=args.cpus,
                                 device=_device(args))


def run_msa_merge(args: argparse.Namespace) -> int:
    return jobs.msa_merge_job(args.queries, iteration=args.iteration, hits=args.hits, times=args.times,
                              a3m_dir=args.a3m_dir, out_state=args.out_state, settings=_settings(args),
                              state=args.state, precomputed=args.precomputed)


def run_msa_final(args: argparse.Namespace) -> int:
    return jobs.msa_final_job(args.queries, state=args.state, out_dir=args.out_dir, stats=args.stats,
                              settings=_settings(args))
