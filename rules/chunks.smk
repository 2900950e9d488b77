# Proteome chunks: a length-balanced chunk table per proteome, and one FASTA per chunk.


rule chunk_table:
    input:
        fasta=proteome_fasta,
    output:
        table=f"{RESULTS}/{{proteome}}/chunks/chunks.parquet",
    params:
        trackfold=TRACKFOLD,
        per_chunk=CHUNK_SETTINGS.proteins_per_chunk,
        max_length=CHUNK_SETTINGS.max_length,
        too_long=CHUNK_SETTINGS.too_long,
    log:
        "logs/chunk_table/{proteome}.log",
    benchmark:
        f"{RESULTS}/benchmarks/chunk_table/{{proteome}}.tsv"
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
        fasta=f"{RESULTS}/{{proteome}}/chunks/chunk_{{chunk}}.fasta",
    params:
        trackfold=TRACKFOLD,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/chunk_fasta/{proteome}/{chunk}.log",
    benchmark:
        f"{RESULTS}/benchmarks/chunk_fasta/{{proteome}}/{{chunk}}.tsv"
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
