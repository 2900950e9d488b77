# Templates: the template database (once per config) and the HMM-HMM template search, one job per chunk: every
# protein's {protein}.hits.parquet, then the chunk's table chunk_NNNN.stats.parquet (the declared output).
# Library: workflow_lib.templates (build, search, E-value calibration); input functions in
# workflow_lib/workflow/rule_inputs.py (STAGE_INPUTS, built in rules/common.smk and shared with
# rules/features.smk and rules/predict.smk); settings: CFG.templates.


rule template_msas:
    input:
        # timestamps ignored, as the databases' FASTA files (rules/common.smk, database_fasta)
        structures=[ancient(path) for path in STAGE_INPUTS.structures],
        companions=[ancient(path) for path in STAGE_INPUTS.structure_companions],
        manifest=PATHS.db_manifest(CFG.search_database),
    output:
        stats=PATHS.template_msa_stats(),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        fasta=STAGE_INPUTS.chains_fasta,
        db=manifest_dir,
        min_length=CFG.templates.min_length,
        settings=CFG.search.cli_options(),
    wildcard_constraints:
        template_db=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    log:
        "logs/template_msas/{template_db}.log",
    benchmark:
        PATHS.benchmark("template_msas", "{template_db}")
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
        structures=[ancient(path) for path in STAGE_INPUTS.structures],     # timestamps ignored, as above
        companions=[ancient(path) for path in STAGE_INPUTS.structure_companions],
        msas=STAGE_INPUTS.msas,
    output:
        manifest=PATHS.template_manifest(),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        msa_dir=STAGE_INPUTS.msa_option,
        min_length=CFG.templates.min_length,
    wildcard_constraints:
        template_db=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    log:
        "logs/templates_build/{template_db}.log",
    benchmark:
        PATHS.benchmark("templates_build", "{template_db}")
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
        stats=PATHS.chunk_stats("templates"),
    params:
        trackfold=TRACKFOLD,
        msa_dir=STAGE_INPUTS.msa_dir,
        db_dir=STAGE_INPUTS.db_dir_of,
        out_dir=output_parent,
        max_hits=CFG.templates.max_hits,
        min_aligned=CFG.templates.min_aligned,
        decoys=CFG.templates.decoys,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/template_search/{proteome}/{chunk}.log",
    benchmark:
        PATHS.benchmark("template_search", "{proteome}/{chunk}")
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
