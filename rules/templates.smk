# Templates: the template database (once per config) and the HMM-HMM template search, one job per chunk: every
# protein's {protein}.hits.parquet, then the chunk's table chunk_NNNN.stats.parquet (the declared output).
# Library: workflow_lib.templates (build, search, E-value calibration); input functions in
# workflow_lib/workflow/rule_inputs.py (STAGE_INPUTS, shared with rules/features.smk and rules/predict.smk).

from workflow_lib.workflow.rule_inputs import StageInputs
from workflow_lib.workflow.config import FeatureConfig, TemplateConfig

TEMPLATE_SETTINGS = TemplateConfig.from_dict(config.get("templates"), where="config 'templates'")
FEATURE_SETTINGS = FeatureConfig.from_dict(config.get("features"), where="config 'features'")
# msa_stats_path comes from rules/common.smk (the MSA stage's chunk table)
STAGE_INPUTS = StageInputs(RESULTS, TEMPLATE_SETTINGS, FEATURE_SETTINGS, PLANS,
                           msa_stats=globals().get("msa_stats_path"))


rule template_msas:
    input:
        structures=STAGE_INPUTS.structures,
        companions=STAGE_INPUTS.structure_companions,
        manifest=f"{RESULTS}/db/{SEARCH_DATABASE}/manifest.json",
    output:
        stats=f"{RESULTS}/templates/{{template_db}}_msas/msa_stats.parquet",
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        fasta=STAGE_INPUTS.chains_fasta,
        db=manifest_dir,
        min_length=TEMPLATE_SETTINGS.min_length,
        settings=SEARCH_SETTINGS.cli_options(),
    wildcard_constraints:
        template_db=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    log:
        "logs/template_msas/{template_db}.log",
    benchmark:
        f"{RESULTS}/benchmarks/template_msas/{{template_db}}.tsv"
    threads: 2
    resources:
        mem_mb=3000,
        runtime=240,
    conda:
        "../envs/core.yaml"
    shell:
        "({params.trackfold} templates sequences --out {params.fasta} --min-length {params.min_length} "
        "{input.structures} && {params.trackfold} msa --db {params.db} --out-dir {params.out_dir} "
        "--cpus {threads} {params.settings} {params.fasta}) > {log} 2>&1"


rule templates_build:
    input:
        structures=STAGE_INPUTS.structures,
        companions=STAGE_INPUTS.structure_companions,
        msas=STAGE_INPUTS.msas,
    output:
        manifest=f"{RESULTS}/templates/{{template_db}}/manifest.json",
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        msa_dir=STAGE_INPUTS.msa_option,
        min_length=TEMPLATE_SETTINGS.min_length,
    wildcard_constraints:
        template_db=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    log:
        "logs/templates_build/{template_db}.log",
    benchmark:
        f"{RESULTS}/benchmarks/templates_build/{{template_db}}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} templates build --out {params.out_dir} {params.msa_dir} "
        "--min-length {params.min_length} {input.structures} > {log} 2>&1"


rule template_search:
    input:
        msa=STAGE_INPUTS.msa_done,
        db=STAGE_INPUTS.db_manifest,
        plan=STAGE_INPUTS.plan,
    output:
        stats=f"{RESULTS}/{{proteome}}/templates/chunk_{{chunk}}.stats.parquet",
    params:
        trackfold=TRACKFOLD,
        msa_dir=STAGE_INPUTS.msa_dir,
        db_dir=STAGE_INPUTS.db_dir_of,
        out_dir=output_parent,
        max_hits=TEMPLATE_SETTINGS.max_hits,
        min_aligned=TEMPLATE_SETTINGS.min_aligned,
        decoys=TEMPLATE_SETTINGS.decoys,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/template_search/{proteome}/{chunk}.log",
    benchmark:
        f"{RESULTS}/benchmarks/template_search/{{proteome}}/{{chunk}}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} templates search --templates {params.db_dir} --out-dir {params.out_dir} "
        "--max-hits {params.max_hits} --min-aligned {params.min_aligned} --decoys {params.decoys} "
        "--cpus {threads} --stats {output.stats} --chunk-plan {input.plan} --chunk {wildcards.chunk} {params.msa_dir} "
        "> {log} 2>&1"
