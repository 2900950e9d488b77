# The configuration, built once, and what every rule file shares with the others (the typed configuration CFG,
# the paths of the workflow's files PATHS, the protein/chunk plan known when the DAG is built, input functions).
# No rule lives here. A rule file uses the names defined below and no name of another rule file, so the rule
# files may be included in any order after this one.

import re
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

BASEDIR = Path(workflow.basedir)
if str(BASEDIR) not in sys.path:
    sys.path.insert(0, str(BASEDIR))

from workflow_lib.db.chunks import chunk_name, chunk_table
from workflow_lib.seqio.fasta import read_fasta
from workflow_lib.workflow.config import WorkflowConfig, check_moved_keys
from workflow_lib.workflow.paths import WorkflowPaths
from workflow_lib.workflow.rule_inputs import ReportInputs, StageInputs
from workflow_lib.workflow.train_plan import TrainPlan

check_moved_keys(config)  # before the schema, whose message would only say that the key is not allowed
validate(config, str(BASEDIR / "config" / "schema.yaml"), set_default=True)
CFG = WorkflowConfig.from_dict(config)
"""The whole configuration, typed (workflow_lib/workflow/config.py): CFG.results, CFG.databases, CFG.search,
CFG.chunks, CFG.templates, CFG.features, CFG.report, CFG.predict, CFG.train (None without a train section)."""
PATHS = WorkflowPaths(CFG.results)
"""Every file the proteome workflow declares (workflow_lib/workflow/paths.py)."""


def _model_path(path):
    """A relative checkpoint path is found in the working directory, else in the workflow (models/ ships there)."""
    if Path(path).is_absolute() or Path(path).exists() or not (BASEDIR / path).exists():
        return str(path)
    return str(BASEDIR / path)


PREDICT_MODEL = _model_path(CFG.predict.model)


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
        CFG.chunks.proteins_per_chunk,
        max_length=CFG.chunks.max_length,
        too_long=CFG.chunks.too_long,
        source=fasta,
    )
    return table


PLANS = {name: _plan_proteome(name, fasta) for name, fasta in CFG.proteomes.items()}
PROTEOMES = sorted(PLANS)


def proteome_fasta(wildcards):
    return CFG.proteomes[wildcards.proteome]


def chunks_of(proteome):
    return sorted({int(c) for c in PLANS[proteome]["chunk"] if c >= 0})


def chunk_names(proteome):
    return [chunk_name(c) for c in chunks_of(proteome)]


DATABASE_NAMES = "|".join(re.escape(name) for name in CFG.databases)
"""The `database` wildcard's constraint: one of the configured databases."""


def database_fasta(wildcards):
    """A database's FASTA files, their modification times ignored (``ancient``): a copy or re-sync of the reference
    data with new timestamps does not rebuild the database and rerun every search after it; a FASTA replaced in
    place needs ``--forcerun db_build`` (a changed list of files reruns by itself)."""
    return [ancient(path) for path in CFG.databases[wildcards.database].fasta]


def database_shard_count(wildcards):
    return CFG.databases[wildcards.database].shards


def database_duplicate_policy(wildcards):
    return CFG.databases[wildcards.database].duplicate_ids


def database_bad_record_policy(wildcards):
    return CFG.databases[wildcards.database].on_bad_record


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


def workflow_rules():
    """Every rule of the workflow (called once all rule files are read)."""
    return workflow.rules


def default_targets():
    """The default target's files (rule all, defined in the Snakefile after the rule files)."""
    return rules.all.input


def all_targets():
    if TRAIN_PLAN.enabled:
        return TRAIN_PLAN.targets(CFG.results)  # rules/train.smk: the training run instead of the proteome targets
    targets = [PATHS.db_manifest(CFG.search_database)]
    for proteome in PROTEOMES:
        targets.append(PATHS.chunk_table(proteome))
        targets += [msa_stats_path(proteome, name) for name in chunk_names(proteome)]
        targets += STAGE_INPUTS.template_targets(proteome)
        targets += STAGE_INPUTS.feature_targets(proteome)
        targets += STAGE_INPUTS.structure_targets(proteome)
        targets.append(PATHS.proteome_file("summary.parquet", proteome))
    return targets


# ------------------------------------------------------------------------------------------------ MSA stage
# rules/search.smk writes results/{proteome}/msa/{protein}.a3m for every protein of a chunk and, last,
# results/{proteome}/msa/chunk_NNNN.stats.parquet; later stages depend on that table and read the A3Ms by path,
# because the per-protein A3Ms are not declared outputs of the per-chunk job. The template, feature and predict
# stages work the same way, one job per chunk (workflow_lib/workflow/rule_inputs.py).


def msa_stats_path(proteome, chunk):
    """The MSA stage's table of chunk `chunk` (chunk_NNNN), written after the chunk's A3Ms."""
    return PATHS.chunk_stats("msa", proteome, chunk)


def search_shards():
    return [f"{i:03d}" for i in range(CFG.databases[CFG.search_database].shards)]


def search_iteration(wildcards, iteration=None):
    """The proteome, chunk and iteration of a search job (another `iteration` of the same chunk when given), as
    the arguments of PATHS' search paths."""
    iteration = int(wildcards.iteration) if iteration is None else iteration
    return wildcards.proteome, f"chunk_{wildcards.chunk}", iteration


def shard_hits(wildcards):
    return [PATHS.shard_hits(*search_iteration(wildcards), shard) for shard in search_shards()]


def shard_times(wildcards):
    return [PATHS.shard_times(*search_iteration(wildcards), shard) for shard in search_shards()]


def iteration_a3m_dir(wildcards):
    return PATHS.iteration_a3m_dir(*search_iteration(wildcards))


def final_state(wildcards):
    """The state table of the chunk's last iteration (rule msa_final's input)."""
    return PATHS.search_state(*search_iteration(wildcards, CFG.search.iterations))


def previous_state(wildcards):
    """The state table of the previous iteration (none for iteration 1)."""
    iteration = int(wildcards.iteration)
    if iteration == 1:
        return []
    return PATHS.search_state(*search_iteration(wildcards, iteration - 1))


def state_option(wildcards, input):
    return f"--state {input.state}" if input.state else ""


def precomputed_option(wildcards):
    path = CFG.search.precomputed_msas
    return f"--precomputed {shlex.quote(path)}" if path and int(wildcards.iteration) == 1 else ""


def predict_mem_mb(wildcards, attempt):
    """A predict job's memory (resources mem_mb): from the longest protein of its chunk, times the attempt."""
    longest = STAGE_INPUTS.longest(wildcards.proteome, f"chunk_{wildcards.chunk}")
    templates = CFG.features.max_templates if CFG.templates.enabled else 0
    return attempt * CFG.predict.memory_mb(longest, templates)


def predict_runtime(wildcards, attempt):
    """A predict job's minutes (resources runtime): from its proteins' forward passes, times the attempt."""
    lengths = STAGE_INPUTS.lengths(wildcards.proteome, f"chunk_{wildcards.chunk}")
    return attempt * CFG.predict.runtime_min(lengths)


def profile_identity(wildcards):
    return CFG.databases[wildcards.database].profile_identity


def profile_coverage(wildcards):
    return CFG.databases[wildcards.database].profile_coverage


def manifest_parent(wildcards, input):
    """The directory of the rule's ``manifest`` (or ``profiles``) input: a database directory."""
    return str(Path(input[0]).parent)


def profile_job_mem_mb(wildcards, attempt):
    """db_cluster holds every sequence of the database while clustering (UniProt-2014: 1.5 GB); msa_profiles
    one loaded profile database."""
    return attempt * 4000


def profile_job_runtime(wildcards, attempt):
    return attempt * 240


# ------------------------------------------------------------------------------------------- per-stage helpers
# Built once from CFG and PLANS; their bound methods are the rules' input and params functions.

STAGE_INPUTS = StageInputs(CFG.results, CFG.templates, CFG.features, PLANS, msa_stats=msa_stats_path)
"""The per-chunk template, feature and predict rules (workflow_lib/workflow/rule_inputs.py)."""

REPORT_INPUTS = ReportInputs(CFG.results, PLANS, workflow_rules, default_targets,
                             templates_enabled=CFG.templates.enabled, proteins=CFG.report.proteins)
"""Inputs of the summary (rules/report.smk), from whichever stages the workflow has."""

TRAIN_PLAN = TrainPlan.build(CFG, model_path=_model_path, configfiles=workflow.overwrite_configfiles or [])
"""The training workflow (rules/train.smk; `enabled` with a train section): paths, batches and options."""
TRAIN = TRAIN_PLAN.settings
TRAIN_PATHS = TRAIN_PLAN.paths
