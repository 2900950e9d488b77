# Sequence databases: FASTA -> Parquet shards + manifest (a no-op when the inputs are unchanged).


rule db_build:
    input:
        database_fasta,
    output:
        manifest=PATHS.db_manifest(),
    params:
        trackfold=TRACKFOLD,
        shards=database_shard_count,
        duplicates=database_duplicate_policy,
        bad_records=database_bad_record_policy,
        out_dir=output_parent,
    wildcard_constraints:
        database=DATABASE_NAMES,
    log:
        "logs/db_build/{database}.log",
    benchmark:
        PATHS.benchmark("db_build", "{database}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} db build --out {params.out_dir} --shards {params.shards} "
        "--duplicate-ids {params.duplicates} --on-bad-record {params.bad_records} {input} > {log} 2>&1"


rule db_cluster:
    input:
        manifest=rules.db_build.output.manifest,
    output:
        manifest=PATHS.profile_db_manifest(),
    params:
        trackfold=TRACKFOLD,
        db_dir=manifest_parent,
        out_dir=output_parent,
        identity=profile_identity,
        coverage=profile_coverage,
    wildcard_constraints:
        database=DATABASE_NAMES,
    log:
        "logs/db_cluster/{database}.log",
    benchmark:
        PATHS.benchmark("db_cluster", "{database}")
    threads: 1
    resources:
        mem_mb=profile_job_mem_mb,
        runtime=profile_job_runtime,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} db cluster --db {params.db_dir} --out {params.out_dir} --identity {params.identity} "
        "--coverage {params.coverage} > {log} 2>&1"
