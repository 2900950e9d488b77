"""Where the workflow writes: the paths that rules declare and input functions ask for, each spelled once.

Every method returns one path; an argument left out stays a Snakemake wildcard, so a rule declares
``PATHS.chunk_fasta()`` (``{results}/{proteome}/chunks/chunk_{chunk}.fasta``) and an input function asks for
``PATHS.chunk_fasta("ecoli", "chunk_0003")``. Chunks are named as :func:`workflow_lib.db.chunks.chunk_name`
writes them (``chunk_NNNN``); the rules' ``chunk`` wildcard is the four digits. Log files are not here: they live
under ``logs/``, not under the results folder, and each is written in its rule.
"""

from __future__ import annotations

from dataclasses import dataclass

CHUNK = "chunk_{chunk}"
"""A chunk's name with the rules' ``chunk`` wildcard (four digits)."""

STAGE_FOLDERS = {"msa": "msa", "templates": "templates", "features": "features", "predict": "structures"}
"""The folder of each per-chunk stage under ``{results}/{proteome}/`` (inference writes ``structures/``)."""


@dataclass(frozen=True)
class WorkflowPaths:
    """The proteome workflow's files under ``results`` (config key ``results``)."""

    results: str

    # --- sequence databases (rules/db.smk) ------------------------------------------------------------------
    def db_dir(self, database: str = "{database}") -> str:
        return f"{self.results}/db/{database}"

    def db_manifest(self, database: str = "{database}") -> str:
        """A sequence database's manifest (rule db_build): the database is complete when it exists."""
        return f"{self.db_dir(database)}/manifest.json"

    def profile_db_manifest(self, database: str = "{database}") -> str:
        """The manifest of a database's profile database (rule db_cluster)."""
        return f"{self.results}/db/{database}.profiles/manifest.json"

    # --- chunks (rules/chunks.smk) --------------------------------------------------------------------------
    def chunk_table(self, proteome: str = "{proteome}") -> str:
        return f"{self.results}/{proteome}/chunks/chunks.parquet"

    def chunk_fasta(self, proteome: str = "{proteome}", chunk: str = CHUNK) -> str:
        return f"{self.results}/{proteome}/chunks/{chunk}.fasta"

    # --- the sharded search (rules/search.smk) --------------------------------------------------------------
    def search_iteration(self, proteome: str = "{proteome}", chunk: str = CHUNK,
                         iteration: int | str = "{iteration}") -> str:
        """The folder of one search iteration of a chunk."""
        return f"{self.results}/{proteome}/search/{chunk}/iter_{iteration}"

    def search_queries(self, proteome: str = "{proteome}", chunk: str = CHUNK,
                       iteration: int | str = "{iteration}") -> str:
        """The iteration's query profiles (rule search_profiles)."""
        return f"{self.search_iteration(proteome, chunk, iteration)}/queries.npz"

    def shard_hits(self, proteome: str = "{proteome}", chunk: str = CHUNK, iteration: int | str = "{iteration}",
                   shard: str = "{shard}") -> str:
        return f"{self.search_iteration(proteome, chunk, iteration)}/shard_{shard}.hits.parquet"

    def shard_times(self, proteome: str = "{proteome}", chunk: str = CHUNK, iteration: int | str = "{iteration}",
                    shard: str = "{shard}") -> str:
        return f"{self.search_iteration(proteome, chunk, iteration)}/shard_{shard}.times.parquet"

    def search_state(self, proteome: str = "{proteome}", chunk: str = CHUNK,
                     iteration: int | str = "{iteration}") -> str:
        """The merged state of an iteration (rule msa_merge): the next iteration starts from it."""
        return f"{self.search_iteration(proteome, chunk, iteration)}/state.parquet"

    def iteration_a3m_dir(self, proteome: str = "{proteome}", chunk: str = CHUNK,
                          iteration: int | str = "{iteration}") -> str:
        return f"{self.search_iteration(proteome, chunk, iteration)}/a3m"

    # --- per-chunk stages -----------------------------------------------------------------------------------
    def stage_dir(self, stage: str, proteome: str = "{proteome}") -> str:
        """The folder of a proteome's per-protein files of ``stage`` (a key of :data:`STAGE_FOLDERS`)."""
        return f"{self.results}/{proteome}/{STAGE_FOLDERS[stage]}"

    def chunk_stats(self, stage: str, proteome: str = "{proteome}", chunk: str = CHUNK) -> str:
        """A per-chunk stage's declared output, written after the chunk's per-protein files:
        ``{results}/{proteome}/{folder}/chunk_NNNN.stats.parquet``."""
        return f"{self.stage_dir(stage, proteome)}/{chunk}.stats.parquet"

    # --- the template database (rules/templates.smk) --------------------------------------------------------
    def template_db_dir(self, name: str = "{template_db}") -> str:
        return f"{self.results}/templates/{name}"

    def template_manifest(self, name: str = "{template_db}") -> str:
        """A template database's manifest (rule templates_build)."""
        return f"{self.template_db_dir(name)}/manifest.json"

    def template_msa_dir(self, name: str = "{template_db}") -> str:
        """The template chains' own MSAs (rule template_msas; ``trackfold templates build --msa-dir``)."""
        return f"{self.template_db_dir(name)}_msas"

    def template_msa_stats(self, name: str = "{template_db}") -> str:
        """The statistics table of those MSAs, written after them (rule template_msas)."""
        return f"{self.template_msa_dir(name)}/msa_stats.parquet"

    # --- the summary (rules/report.smk) ---------------------------------------------------------------------
    def proteome_file(self, name: str, proteome: str = "{proteome}") -> str:
        """A per-proteome file: ``summary.parquet``, ``summary.tsv``, ``runtime.parquet``."""
        return f"{self.results}/{proteome}/{name}"

    def report_file(self, name: str, proteome: str = "{proteome}") -> str:
        """A file of the proteome's report folder: ``index.html`` and the figures."""
        return f"{self.results}/{proteome}/report/{name}"

    # --- every rule -----------------------------------------------------------------------------------------
    def benchmark_dir(self) -> str:
        """Every job's benchmark table (the report and the model card read them)."""
        return f"{self.results}/benchmarks"

    def benchmark(self, rule: str, job: str) -> str:
        """A job's benchmark table: ``{results}/benchmarks/{rule}/{job}.tsv`` (``job`` names the job by its
        wildcards, e.g. ``{proteome}/{chunk}``)."""
        return f"{self.benchmark_dir()}/{rule}/{job}.tsv"

    def train_root(self, name: str) -> str:
        """A training run's folder (config ``train.name``)."""
        return f"{self.results}/train/{name}"


@dataclass(frozen=True)
class TrainPaths:
    """A training run's files under its folder ``root`` (:meth:`WorkflowPaths.train_root`); batches are labelled
    ``000``, ``001``, ... (the rules' ``batch`` wildcard)."""

    root: str

    def structures(self) -> str:
        """The extracted structure archive (rule train_structures)."""
        return f"{self.root}/structures"

    def chains(self) -> str:
        return f"{self.root}/data/chains.parquet"

    def split(self) -> str:
        return f"{self.root}/data/split.json"

    def msa_stats(self, batch: str = "{batch}") -> str:
        """An MSA batch's statistics table (rule train_msa), written after the batch's A3Ms."""
        return f"{self.root}/msa/batch_{batch}/msa_stats.parquet"

    def msa_fasta(self, batch: str = "{batch}") -> str:
        return f"{self.root}/msa/batch_{batch}.fasta"

    def features_dir(self) -> str:
        return f"{self.root}/features"

    def feature_inputs(self, batch: str = "{batch}") -> str:
        return f"{self.root}/features/batch_{batch}.inputs"

    def feature_flag(self, batch: str = "{batch}") -> str:
        """The flag of a batch's feature files (rule train_features)."""
        return f"{self.root}/features/batch_{batch}.done"

    def template_inputs(self, batch: str = "{batch}") -> str:
        return f"{self.root}/templates/batch_{batch}.inputs"

    def template_flag(self, batch: str = "{batch}") -> str:
        """The flag of a batch's template search (rule train_templates)."""
        return f"{self.root}/templates/batch_{batch}.done"

    def template_hits(self) -> str:
        """Every chain's template hits (rule train_templates)."""
        return f"{self.root}/templates/hits"

    def usable_hits(self) -> str:
        """The hits each chain may use (``trackfold train-hits``)."""
        return f"{self.root}/templates/usable"

    def pack(self) -> str:
        return f"{self.root}/pack/pack.npz"

    def run_file(self, name: str) -> str:
        """A file of the training run's folder: ``model.pt``, ``metrics.parquet``, ..."""
        return f"{self.root}/run/{name}"

    def prediction_file(self, name: str) -> str:
        """``targets.tsv`` or ``inputs.txt`` of the held-out chains' predictions."""
        return f"{self.root}/predictions/{name}"

    def evaluation_file(self, name: str) -> str:
        return f"{self.root}/evaluation/{name}"

    def model_card(self) -> str:
        return f"{self.root}/MODEL_CARD.md"
