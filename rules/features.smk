# Features: one npz per protein from its A3M and, when templates are configured, its template hits.
# Library: workflow_lib.features (layout in workflow_lib/schemas/features.py); input functions: STAGE_INPUTS
# (rules/templates.smk, which must be included first).


rule features:
    input:
        unpack(STAGE_INPUTS.feature_inputs),
    output:
        npz=f"{RESULTS}/{{proteome}}/features/{{protein}}.npz",
    params:
        trackfold=TRACKFOLD,
        a3m=STAGE_INPUTS.a3m,
        out_dir=output_parent,
        templates=STAGE_INPUTS.feature_template_options,
        max_seqs=FEATURE_SETTINGS.max_seqs,
        max_stats_seqs=FEATURE_SETTINGS.max_stats_seqs,
    log:
        "logs/features/{proteome}/{protein}.log",
    benchmark:
        f"{RESULTS}/benchmarks/features/{{proteome}}/{{protein}}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} features --out-dir {params.out_dir} --max-seqs {params.max_seqs} "
        "--max-stats-seqs {params.max_stats_seqs} {params.templates} {params.a3m} > {log} 2>&1"
