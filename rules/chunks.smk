# Proteome chunks: a length-balanced chunk table per proteome, and one FASTA per chunk.


rule chunk_table:
    input:
        fasta=proteome_fasta,
    output:
        table=PATHS.chunk_table(),
    params:
        trackfold=TRACKFOLD,
        per_chunk=CFG.chunks.proteins_per_chunk,
        max_length=CFG.chunks.max_length,
        too_long=CFG.chunks.too_long,
    log:
        "logs/chunk_table/{proteome}.log",
    benchmark:
        PATHS.benchmark("chunk_table", "{proteome}")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} chunk {input.fasta} --proteome {wildcards.proteome} --out {output.table} "
        "--proteins-per-chunk {params.per_chunk} --max-length {params.max_length} "
        "--too-long {params.too_long} > {log} 2>&1"


rule chunk_fasta:
    input:
        fasta=proteome_fasta,
        table=rules.chunk_table.output.table,
    output:
        fasta=PATHS.chunk_fasta(),
    params:
        trackfold=TRACKFOLD,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/chunk_fasta/{proteome}/{chunk}.log",
    benchmark:
        PATHS.benchmark("chunk_fasta", "{proteome}/{chunk}")
    group:
        "chunking"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} chunk-extract {input.fasta} --chunks {input.table} --chunk {wildcards.chunk} "
        "--out {output.fasta} > {log} 2>&1"
