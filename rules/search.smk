# MSA stage: iterative search per chunk x shard x iteration, a merge per iteration, the final MSAs per chunk.
#
#   search_profiles  the chunk's query profiles (iteration 1: sequences; later: the previous iteration's MSAs)
#                    with their E-value calibration, once for all shards
#   search_shard  those queries vs one shard
#   msa_merge     all shards of one iteration -> MSAs + state (converged proteins stop searching)
#   msa_final     the last state -> results/{proteome}/msa/{protein}.a3m, then chunk_NNNN.stats.parquet
# Each shard is read once per chunk and iteration for all queries of the chunk. Library: workflow_lib.search.
# The query profiles and the per-shard hits are temp(): deleted once the iteration's merge has read them
# (`--notemp` keeps them); the merged state and the iteration's A3Ms stay, so a rerun resumes from them.


rule search_profiles:
    input:
        fasta=PATHS.chunk_fasta(),
        manifest=PATHS.db_manifest(CFG.search_database),
        state=previous_state,
    output:
        profiles=temp(PATHS.search_queries()),
    params:
        trackfold=TRACKFOLD,
        db=manifest_dir,
        state=state_option,
        precomputed=precomputed_option,
        settings=CFG.search.cli_options(),
        device=search_device,
    wildcard_constraints:
        chunk=r"\d{4}",
        iteration=r"\d+",
    log:
        "logs/search_profiles/{proteome}/{chunk}/{iteration}.log",
    benchmark:
        PATHS.benchmark("search_profiles", "{proteome}/{chunk}_{iteration}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} search-profiles {input.fasta} --db {params.db} --iteration {wildcards.iteration} "
        "{params.state} {params.precomputed} {params.settings} {params.device} --out {output.profiles} > {log} 2>&1"


rule search_shard:
    input:
        fasta=PATHS.chunk_fasta(),
        manifest=PATHS.db_manifest(CFG.search_database),
        profiles=rules.search_profiles.output.profiles,
    output:
        hits=temp(PATHS.shard_hits()),
        times=temp(PATHS.shard_times()),
    params:
        trackfold=TRACKFOLD,
        db=manifest_dir,
        settings=CFG.search.cli_options(),
        device=search_device,
    wildcard_constraints:
        chunk=r"\d{4}",
        shard=r"\d{3}",
        iteration=r"\d+",
    log:
        "logs/search_shard/{proteome}/{chunk}/{iteration}_{shard}.log",
    benchmark:
        PATHS.benchmark("search_shard", "{proteome}/{chunk}_{iteration}_{shard}")
    threads: 1
    resources:
        mem_mb=3000,
        runtime=240,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} search-shard {input.fasta} --db {params.db} --shard {wildcards.shard} "
        "--iteration {wildcards.iteration} --profiles {input.profiles} {params.settings} {params.device} "
        "--cpus {threads} --out {output.hits} --times {output.times} > {log} 2>&1"


rule msa_merge:
    input:
        fasta=PATHS.chunk_fasta(),
        hits=shard_hits,
        times=shard_times,
        state=previous_state,
    output:
        state=PATHS.search_state(),
    params:
        trackfold=TRACKFOLD,
        a3m_dir=iteration_a3m_dir,
        state=state_option,
        precomputed=precomputed_option,
        settings=CFG.search.cli_options(),
    wildcard_constraints:
        chunk=r"\d{4}",
        iteration=r"\d+",
    log:
        "logs/msa_merge/{proteome}/{chunk}/{iteration}.log",
    benchmark:
        PATHS.benchmark("msa_merge", "{proteome}/{chunk}_{iteration}")
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} msa-merge {input.fasta} --iteration {wildcards.iteration} --hits {input.hits} "
        "--times {input.times} {params.state} {params.precomputed} {params.settings} "
        "--a3m-dir {params.a3m_dir} --out-state {output.state} > {log} 2>&1"


if CFG.profile_search:

    rule msa_profiles:
        input:
            profiles=PATHS.profile_db_manifest(CFG.search_database),
            fasta=PATHS.chunk_fasta(),
        output:
            stats=PATHS.chunk_stats("msa"),
        params:
            trackfold=TRACKFOLD,
            out_dir=output_parent,
            db_dir=manifest_parent,
            settings=CFG.search.cli_options(),
        wildcard_constraints:
            chunk=r"\d{4}",
        log:
            "logs/msa_profiles/{proteome}/{chunk}.log",
        benchmark:
            PATHS.benchmark("msa_profiles", "{proteome}/{chunk}")
        threads: 1
        resources:
            mem_mb=profile_job_mem_mb,
            runtime=profile_job_runtime,
        conda:
            "../envs/core.yaml"
        shell:
            "{params.trackfold} msa {input.fasta} --db {params.db_dir} --out-dir {params.out_dir} "
            "--stats {output.stats} {params.settings} > {log} 2>&1"

else:

    rule msa_final:
        input:
            fasta=PATHS.chunk_fasta(),
            state=final_state,
        output:
            stats=PATHS.chunk_stats("msa"),
        params:
            trackfold=TRACKFOLD,
            out_dir=output_parent,
            settings=CFG.search.cli_options(),
        wildcard_constraints:
            chunk=r"\d{4}",
        log:
            "logs/msa_final/{proteome}/{chunk}.log",
        benchmark:
            PATHS.benchmark("msa_final", "{proteome}/{chunk}")
        threads: 1
        resources:
            mem_mb=2000,
            runtime=30,
        conda:
            "../envs/core.yaml"
        shell:
            "{params.trackfold} msa-final {input.fasta} --state {input.state} --out-dir {params.out_dir} "
            "{params.settings} --stats {output.stats} > {log} 2>&1"
