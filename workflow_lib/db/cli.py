"""Sub-commands ``trackfold db build``, ``trackfold db cluster``, ``trackfold db info`` and ``trackfold chunk``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from workflow_lib.db.build import (BAD_RECORD_POLICIES, DEFAULT_DUPLICATE_IDS, DEFAULT_ON_BAD_RECORD, DEFAULT_SHARDS,
                                   DUPLICATE_POLICIES, build_database, read_manifest)
from workflow_lib.db.chunks import ChunkSettings, chunk_name, chunk_table
from workflow_lib.db.cluster import DEFAULT_COVERAGE, DEFAULT_IDENTITY
from workflow_lib.db.profiles import KIND as PROFILE_KIND
from workflow_lib.db.profiles import build_profile_db, database_kind, read_profile_manifest
from workflow_lib.db.kmer_index import DEFAULT_SHAPE, MAX_WEIGHT, contiguous_shape
from workflow_lib.errors import InputError
from workflow_lib.schemas.db import CHUNKS
from workflow_lib.schemas.io import read_frame, write_table
from workflow_lib.seqio.fasta import Record, read_fasta, write_fasta


def register(subparsers: argparse._SubParsersAction) -> None:
    db = subparsers.add_parser("db", help="build and inspect sharded sequence databases")
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", required=True)

    build = db_commands.add_parser("build", help="FASTA files -> Parquet shards + manifest (no-op if unchanged)")
    build.add_argument("fasta", nargs="+", help="protein FASTA files (plain or .gz)")
    build.add_argument("--out", required=True, help="database directory")
    build.add_argument("--shards", type=int, default=DEFAULT_SHARDS, help="number of shards (default %(default)s)")
    build.add_argument("--duplicate-ids", choices=DUPLICATE_POLICIES, default=DEFAULT_DUPLICATE_IDS,
                       help="same ID, different sequence: rename to ID__2 (default) or stop")
    build.add_argument("--on-bad-record", choices=BAD_RECORD_POLICIES, default=DEFAULT_ON_BAD_RECORD,
                       help="a record that breaks the FASTA policy (a character that is not a residue, an empty or "
                            "a nucleotide sequence): skip it, counted and listed in the manifest (default), or stop")
    seeds = build.add_mutually_exclusive_group()
    seeds.add_argument("--seed-shape", default=DEFAULT_SHAPE,
                       help="seed shape of the prefilter's k-mer index: 1 = a residue that counts, 0 = one skipped "
                            "(default %(default)s, a spaced 4-mer; 1111 = contiguous 4-mers)")
    seeds.add_argument("--kmer-length", type=int, default=None,
                       help=f"contiguous k-mers instead of a seed shape, 1-{MAX_WEIGHT} (the same as --seed-shape "
                            f"with k ones)")
    build.add_argument("--force", action="store_true", help="rebuild even if the inputs are unchanged")
    build.set_defaults(handler=run_db_build)

    cluster = db_commands.add_parser(
        "cluster", help="cluster a sequence database into a profile database (HHblits' Uniclust form; no-op if "
                        "unchanged)")
    cluster.add_argument("--db", required=True, help="sequence database directory (trackfold db build)")
    cluster.add_argument("--out", required=True, help="profile database directory")
    cluster.add_argument("--identity", type=float, default=DEFAULT_IDENTITY,
                         help="minimum identity of a member to its representative (default %(default)s)")
    cluster.add_argument("--coverage", type=float, default=DEFAULT_COVERAGE,
                         help="minimum fraction of both sequences the alignment covers (default %(default)s)")
    cluster.add_argument("--shards", type=int, default=None, help="shards (default: as the sequence database)")
    cluster.add_argument("--cpus", type=int, default=1, help="processes for the alignments (0 = all cores)")
    cluster.add_argument("--force", action="store_true", help="rebuild even if the inputs are unchanged")
    cluster.set_defaults(handler=run_db_cluster)

    info = db_commands.add_parser("info", help="print a database's manifest summary")
    info.add_argument("db", help="database directory")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    info.set_defaults(handler=run_db_info)

    chunk = subparsers.add_parser("chunk", help="split a proteome into length-balanced chunks")
    chunk.add_argument("fasta", help="proteome FASTA (plain or .gz)")
    chunk.add_argument("--proteome", required=True, help="proteome name (as in the config)")
    chunk.add_argument("--out", required=True, help="chunk table (Parquet) to write")
    chunk.add_argument("--fasta-dir", help="also write chunk_NNNN.fasta files here")
    chunk.add_argument("--proteins-per-chunk", type=int, default=ChunkSettings.proteins_per_chunk,
                       help="proteins per chunk, balanced by residues (default %(default)s)")
    chunk.add_argument("--max-length", type=int, default=ChunkSettings.max_length,
                       help="proteins longer than this are skipped or stop the run, see --too-long "
                            "(default %(default)s)")
    chunk.add_argument("--too-long", choices=("skip", "error"), default=ChunkSettings.too_long,
                       help="what to do with proteins longer than --max-length (default %(default)s)")
    chunk.set_defaults(handler=run_chunk)

    extract = subparsers.add_parser("chunk-extract", help="write the FASTA of one chunk of a chunk table")
    extract.add_argument("fasta", help="proteome FASTA the table was made from")
    extract.add_argument("--chunks", required=True, help="chunk table written by 'trackfold chunk'")
    extract.add_argument("--chunk", required=True, type=int, help="chunk number")
    extract.add_argument("--out", required=True, help="FASTA to write")
    extract.set_defaults(handler=run_chunk_extract)


def run_db_build(args: argparse.Namespace) -> int:
    seed_shape = args.seed_shape if args.kmer_length is None else contiguous_shape(args.kmer_length)
    manifest, rebuilt = build_database(args.fasta, args.out, shards=args.shards,
                                       duplicate_ids=args.duplicate_ids, on_bad_record=args.on_bad_record,
                                       seed_shape=seed_shape,
                                       force=args.force)
    state = "built" if rebuilt else "up to date"
    print(f"{args.out}: {state}: {manifest.total_sequences} sequences, {manifest.total_residues} residues, "
          f"{manifest.n_shards} shards")
    return 0


def run_db_cluster(args: argparse.Namespace) -> int:
    manifest, rebuilt = build_profile_db(args.db, args.out, identity=args.identity, coverage=args.coverage,
                                         shards=args.shards, cpus=args.cpus, force=args.force)
    state = "built" if rebuilt else "up to date"
    print(f"profile database {args.out} {state}: {manifest['sequences']} sequences in {manifest['clusters']} clusters "
          f"({len(manifest['shards'])} shards)")
    return 0


def run_db_info(args: argparse.Namespace) -> int:
    if database_kind(args.db) == PROFILE_KIND:
        manifest = read_profile_manifest(args.db)
        if args.json:
            print(json.dumps(manifest, indent=2))
            return 0
        print(f"profile database {args.db}")
        print(f"sequences       {manifest['sequences']}")
        print(f"clusters        {manifest['clusters']}")
        print(f"source          {manifest['source']}")
        for shard in manifest["shards"]:
            print(f"{shard['profiles']:<18}{shard['clusters']:>8} clusters {shard['sequences']:>8} sequences")
        return 0
    manifest = read_manifest(args.db)
    if args.json:
        print(manifest.to_json(), end="")
        return 0
    print(f"database        {args.db}")
    print(f"sequences       {manifest.total_sequences}")
    print(f"residues        {manifest.total_residues}")
    for shard in manifest.shards:
        print(f"{shard['file']:<16}{shard['sequences']:>8} sequences {shard['residues']:>12} residues")
    for entry in manifest.inputs:
        print(f"input           {entry['path']} ({entry['sequences']} sequences, "
              f"{entry.get('duplicates_dropped', 0)} exact duplicates dropped, "
              f"{entry.get('duplicates_renamed', 0)} renamed, {entry.get('bad_records', 0)} bad records skipped)")
    return 0


def write_chunk_table(fasta: str | Path, proteome: str, out: str | Path, settings: ChunkSettings,
                      fasta_dir: str | Path | None = None) -> int:
    """Write the chunk table (and optionally every chunk's FASTA); returns the number of chunks."""
    records = read_fasta(fasta)
    table = chunk_table(proteome, records, settings.proteins_per_chunk, max_length=settings.max_length,
                        too_long=settings.too_long, source=str(fasta))
    n_chunks = int(table["chunk"].max()) + 1
    if fasta_dir is not None:
        for chunk in range(n_chunks):
            write_chunk_fasta(records, table, chunk, Path(fasta_dir) / f"{chunk_name(chunk)}.fasta")
    write_table(out, table, CHUNKS)
    return n_chunks


def write_chunk_fasta(records: list[Record], table: pd.DataFrame, chunk: int, out: str | Path) -> int:
    """Write the proteins of ``chunk`` (in FASTA order) to ``out``; returns how many."""
    by_id = {r.id: r for r in records}
    members = table.loc[table["chunk"] == chunk, "protein"].tolist()
    if not members:
        raise InputError(f"chunk {chunk} is empty in this chunk table")
    missing = [m for m in members if m not in by_id]
    if missing:
        raise InputError(f"proteins {missing[:3]} of chunk {chunk} are not in the FASTA (was it changed after "
                         "chunking?)")
    write_fasta(out, [(f"{by_id[m].id} {by_id[m].description}".rstrip(), by_id[m].sequence) for m in members])
    return len(members)


def run_chunk(args: argparse.Namespace) -> int:
    settings = ChunkSettings(proteins_per_chunk=args.proteins_per_chunk, max_length=args.max_length,
                           too_long=args.too_long)
    n_chunks = write_chunk_table(args.fasta, args.proteome, args.out, settings, args.fasta_dir)
    print(json.dumps({"proteome": args.proteome, "chunks": n_chunks, "table": str(args.out)}))
    return 0


def run_chunk_extract(args: argparse.Namespace) -> int:
    table = read_frame(args.chunks, CHUNKS)
    count = write_chunk_fasta(read_fasta(args.fasta), table, args.chunk, args.out)
    print(f"{args.out}: {count} proteins")
    return 0
