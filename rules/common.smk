# Validation, the protein/chunk plan known when the DAG is built, and input functions.
# No rule lives here; every rule file includes the names defined below.

import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

BASEDIR = Path(workflow.basedir)
if str(BASEDIR) not in sys.path:
    sys.path.insert(0, str(BASEDIR))

from workflow_lib.db.chunks import chunk_name, chunk_table
from workflow_lib.errors import InputError
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.workflow.config import ChunkConfig, DatabaseConfig

validate(config, str(BASEDIR / "config" / "schema.yaml"), set_default=True)

RESULTS = config["results"]
CHUNK_SETTINGS = ChunkConfig.from_dict(config.get("chunks"), where="config 'chunks'")
DATABASES = {
    name: DatabaseConfig.from_dict(settings, where=f"config 'databases.{name}'")
    for name, settings in config["databases"].items()
}
SEARCH_DATABASE = config.get("search", {}).get("database", next(iter(DATABASES)))
if SEARCH_DATABASE not in DATABASES:
    raise InputError(
        f"config 'search.database' is '{SEARCH_DATABASE}', which is not one of the databases "
        f"{sorted(DATABASES)}"
    )



def _python():
    """The rules' interpreter: the conda env's `python` under --sdm conda, else the one running Snakemake
    (so `.venv/bin/snakemake` works without activating the venv)."""
    methods = {str(m).lower() for m in workflow.deployment_settings.deployment_method}
    if any("conda" in m for m in methods):
        return "python"
    return shlex.quote(sys.executable)


# The library on PYTHONPATH, so rules work in the workflow's venv and in per-rule conda envs alike.
# Rules receive it as params.trackfold (Snakemake's lint wants no globals inside shell commands).
TRACKFOLD = (
    f"PYTHONPATH={shlex.quote(str(BASEDIR))}${{PYTHONPATH:+:$PYTHONPATH}} {_python()} -m workflow_lib"
)


def _plan_proteome(name, fasta):
    """Read a proteome now, so `snakemake -n` lists every chunk job (no checkpoints)."""
    records = read_fasta(fasta)
    table = chunk_table(
        name,
        records,
        CHUNK_SETTINGS.proteins_per_chunk,
        max_length=CHUNK_SETTINGS.max_length,
        too_long=CHUNK_SETTINGS.too_long,
        source=fasta,
    )
    return table


PLANS = {name: _plan_proteome(name, fasta) for name, fasta in config["proteomes"].items()}
PROTEOMES = sorted(PLANS)


def proteome_fasta(wildcards):
    return config["proteomes"][wildcards.proteome]


def chunks_of(proteome):
    return sorted({int(c) for c in PLANS[proteome]["chunk"] if c >= 0})


def chunk_names(proteome):
    return [chunk_name(c) for c in chunks_of(proteome)]


def database_fasta(wildcards):
    return list(DATABASES[wildcards.database].fasta)


def database_shard_count(wildcards):
    return DATABASES[wildcards.database].shards


def database_duplicate_policy(wildcards):
    return DATABASES[wildcards.database].duplicate_ids


def output_parent(wildcards, output):
    return str(Path(output[0]).parent)


def database_shards(database):
    return [f"{RESULTS}/db/{database}/shard_{i:03d}.parquet" for i in range(DATABASES[database].shards)]


def all_targets():
    targets = [f"{RESULTS}/db/{SEARCH_DATABASE}/manifest.json"]
    for proteome in PROTEOMES:
        targets.append(f"{RESULTS}/{proteome}/chunks/chunks.parquet")
        targets += [
            f"{RESULTS}/{proteome}/chunks/{name}.fasta" for name in chunk_names(proteome)
        ]
    return targets
