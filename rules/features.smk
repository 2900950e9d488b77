# Features: one job per chunk: a {protein}.npz per protein from its A3M and, when templates are configured, its
# template hits; then the chunk's table chunk_NNNN.stats.parquet (the declared output).
# Library: workflow_lib.features (layout in workflow_lib/schemas/features.py); input functions: STAGE_INPUTS
# (rules/common.smk); settings: CFG.features.


rule features:
    input:
        unpack(STAGE_INPUTS.feature_inputs),
        plan=STAGE_INPUTS.plan,
    output:
        stats=PATHS.chunk_stats("features"),
    params:
        trackfold=TRACKFOLD,
        msa_dir=STAGE_INPUTS.msa_dir,
        out_dir=output_parent,
        templates=STAGE_INPUTS.feature_template_options,
        max_seqs=CFG.features.max_seqs,
        max_stats_seqs=CFG.features.max_stats_seqs,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/features/{proteome}/{chunk}.log",
    benchmark:
        PATHS.benchmark("features", "{proteome}/{chunk}")
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} features --out-dir {params.out_dir} --max-seqs {params.max_seqs} "
        "--max-stats-seqs {params.max_stats_seqs} {params.templates} --stats {output.stats} "
        "--chunk-plan {input.plan} --chunk {wildcards.chunk} {params.msa_dir} > {log} 2>&1"
