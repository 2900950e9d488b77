# Validation, the protein/chunk plan known when the DAG is built, and input functions.
# No rule lives here; every rule file includes the names defined below.

import re
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
from workflow_lib.workflow.config import (
    ChunkConfig,
    DatabaseConfig,
    PredictConfig,
    SearchConfig,
    check_moved_keys,
)

check_moved_keys(config)
validate(config, str(BASEDIR / "config" / "schema.yaml"), set_default=True)

RESULTS = config["results"]
CHUNK_SETTINGS = ChunkConfig.from_dict(config.get("chunks"), where="config 'chunks'")
DATABASES = {
    name: DatabaseConfig.from_dict(settings, where=f"config 'databases.{name}'")
    for name, settings in config["databases"].items()
}
SEARCH_SETTINGS = SearchConfig.from_dict(config.get("search"), where="config 'search'")
PREDICT_SETTINGS = PredictConfig.from_dict(config.get("predict"), where="config 'predict'")


def _model_path(path):
    """A relative checkpoint path is found in the working directory, else in the workflow (models/ ships there)."""
    if Path(path).is_absolute() or Path(path).exists() or not (BASEDIR / path).exists():
        return str(path)
    return str(BASEDIR / path)


PREDICT_MODEL = _model_path(PREDICT_SETTINGS.model)
SEARCH_DATABASE = SEARCH_SETTINGS.database or next(iter(DATABASES))
if SEARCH_DATABASE not in DATABASES:
    raise InputError(
        f"config 'search.database' is '{SEARCH_DATABASE}', which is not one of the databases "
        f"{sorted(DATABASES)}"
    )
PROFILE_SEARCH = DATABASES[SEARCH_DATABASE].profiles
"""The MSA stage searches the search database's profile database (rule msa_profiles) instead of its shards."""
if PROFILE_SEARCH and SEARCH_SETTINGS.precomputed_msas:
    raise InputError(
        "config 'search.precomputed_msas' works with the sharded sequence search only; the search database "
        f"'{SEARCH_DATABASE}' has 'profiles: true'"
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


def database_bad_record_policy(wildcards):
    return DATABASES[wildcards.database].on_bad_record


def output_parent(wildcards, output):
    return str(Path(output[0]).parent)


def input_parent(name, levels=1):
    """A params function: the folder `levels` up from input `name` (its first file when it is a list)."""

    def parent(wildcards, input):
        files = input[name]
        path = files if isinstance(files, str) else files[0]
        return str(Path(path).parents[levels - 1])

    return parent


def manifest_dir(wildcards, input):
    """The sequence database folder of input `manifest` (empty when the rule has no database input)."""
    manifest = input.manifest
    if not manifest:
        return ""
    return str(Path(manifest if isinstance(manifest, str) else manifest[0]).parent)


def init_model_option(wildcards, input):
    return f"--init-model {shlex.quote(input.init[0])}" if input.init else ""


def search_device(wildcards, resources):
    """The search jobs' `--device`: NumPy, or the job's GPU when it was given one (resources gpu >= 1, e.g.
    `--set-resources search_shard:gpu=1`; `auto` falls back to NumPy where torch sees no GPU)."""
    return "--device auto" if resources.gpu else "--device numpy"


def torch_device(wildcards, resources):
    """Inference and training `--device`: the CPU, or CUDA when the job was given a GPU (resources gpu >= 1,
    e.g. `--set-resources predict:gpu=1`; `auto` falls back to the CPU where torch sees no GPU)."""
    return "auto" if resources.gpu else "cpu"


def database_shards(database):
    return [f"{RESULTS}/db/{database}/shard_{i:03d}.parquet" for i in range(DATABASES[database].shards)]


def workflow_rules():
    """Every rule of the workflow (called once all rule files are read)."""
    return workflow.rules


def default_targets():
    """The default target's files (rule all, defined in the Snakefile after the rule files)."""
    return rules.all.input


def all_targets():
    if config.get("train"):
        return train_targets()  # rules/train.smk: the training workflow instead of the proteome targets
    targets = [f"{RESULTS}/db/{SEARCH_DATABASE}/manifest.json"]
    for proteome in PROTEOMES:
        targets.append(f"{RESULTS}/{proteome}/chunks/chunks.parquet")
        targets += [msa_stats_path(proteome, name) for name in chunk_names(proteome)]
        targets += STAGE_INPUTS.template_targets(proteome)
        targets += STAGE_INPUTS.feature_targets(proteome)
        targets += STAGE_INPUTS.structure_targets(proteome)
        targets.append(f"{RESULTS}/{proteome}/summary.parquet")
    return targets


# ------------------------------------------------------------------------------------------------ MSA stage
# rules/search.smk writes results/{proteome}/msa/{protein}.a3m for every protein of a chunk and, last,
# results/{proteome}/msa/chunk_NNNN.stats.parquet; later stages depend on that table and read the A3Ms by path,
# because the per-protein A3Ms are not declared outputs of the per-chunk job. The template, feature and predict
# stages work the same way, one job per chunk (workflow_lib/workflow/rule_inputs.py).


def msa_stats_path(proteome, chunk):
    return f"{RESULTS}/{proteome}/msa/{chunk}.stats.parquet"


def search_db_dir():
    return f"{RESULTS}/db/{SEARCH_DATABASE}"


def search_shards():
    return [f"{i:03d}" for i in range(DATABASES[SEARCH_DATABASE].shards)]


def search_iteration_dir(wildcards, iteration=None):
    iteration = int(wildcards.iteration) if iteration is None else iteration
    return f"{RESULTS}/{wildcards.proteome}/search/chunk_{wildcards.chunk}/iter_{iteration}"


def shard_hits(wildcards):
    return [f"{search_iteration_dir(wildcards)}/shard_{s}.hits.parquet" for s in search_shards()]


def shard_times(wildcards):
    return [f"{search_iteration_dir(wildcards)}/shard_{s}.times.parquet" for s in search_shards()]


def iteration_a3m_dir(wildcards):
    return f"{search_iteration_dir(wildcards)}/a3m"


def final_state(wildcards):
    """The state table of the chunk's last iteration (rule msa_final's input)."""
    return f"{search_iteration_dir(wildcards, SEARCH_SETTINGS.iterations)}/state.parquet"


def previous_state(wildcards):
    """The state table of the previous iteration (none for iteration 1)."""
    iteration = int(wildcards.iteration)
    if iteration == 1:
        return []
    return f"{search_iteration_dir(wildcards, iteration - 1)}/state.parquet"


def state_option(wildcards, input):
    return f"--state {input.state}" if input.state else ""


def precomputed_option(wildcards):
    path = SEARCH_SETTINGS.precomputed_msas
    return f"--precomputed {shlex.quote(path)}" if path and int(wildcards.iteration) == 1 else ""


def predict_mem_mb(wildcards, attempt):
    """A predict job's memory (resources mem_mb): from the longest protein of its chunk, times the attempt."""
    longest = STAGE_INPUTS.longest(wildcards.proteome, f"chunk_{wildcards.chunk}")
    templates = FEATURE_SETTINGS.max_templates if TEMPLATE_SETTINGS.enabled else 0
    return attempt * PREDICT_SETTINGS.memory_mb(longest, templates)


def predict_runtime(wildcards, attempt):
    """A predict job's minutes (resources runtime): from its proteins' forward passes, times the attempt."""
    return attempt * PREDICT_SETTINGS.runtime_min(STAGE_INPUTS.lengths(wildcards.proteome, f"chunk_{wildcards.chunk}"))


def profile_identity(wildcards):
    return DATABASES[wildcards.database].profile_identity


def profile_coverage(wildcards):
    return DATABASES[wildcards.database].profile_coverage


def manifest_parent(wildcards, input):
    """The directory of the rule's ``manifest`` (or ``profiles``) input: a database directory."""
    return str(Path(input[0]).parent)


def profile_job_mem_mb(wildcards, attempt):
    """db_cluster holds every sequence of the database while clustering (UniProt-2014: 1.5 GB); msa_profiles
    one loaded profile database."""
    return attempt * 4000


def profile_job_runtime(wildcards, attempt):
    return attempt * 240
