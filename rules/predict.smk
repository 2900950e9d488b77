# Inference: one job per chunk: the chunk's feature files + checkpoint -> per protein PDB and mmCIF (pLDDT),
# confidence JSON, 6D npz, residue table; then the chunk's table chunk_NNNN.stats.parquet (the declared output).
# Proteins are sorted by length and share forward passes within predict.batch_size / predict.max_tokens; longer
# than predict.window they are cropped and stitched; the job's memory follows its longest protein.
# Library: workflow_lib.inference (predict: network runs and batches, stitch: crop-and-stitch, outputs, cli).
# GPU: the rule declares resources gpu=0 and runs on the CPU; a job given a GPU (`--set-resources predict:gpu=1`,
# as profiles/slurm does) runs on CUDA when torch sees one. One thread by default: chunks
# run side by side, and torch's OpenMP threads slow down badly when cores are oversubscribed (benchmarks/RESULTS.md).
# Settings: CFG.predict; input functions: STAGE_INPUTS and predict_mem_mb / predict_runtime (rules/common.smk).

rule predict:
    input:
        features=PATHS.chunk_stats("features"),
        model=PREDICT_MODEL,
        plan=STAGE_INPUTS.plan,
    output:
        stats=PATHS.chunk_stats("predict"),
    params:
        trackfold=TRACKFOLD,
        features_dir=STAGE_INPUTS.features_dir,
        out_dir=output_parent,
        device=torch_device,
        window=CFG.predict.window,
        seed=CFG.predict.seed,
        max_msa=CFG.predict.max_msa,
        batch_size=CFG.predict.batch_size,
        max_tokens=CFG.predict.max_tokens,
        pair_heads=CFG.predict.pair_heads_option,
        fold=CFG.predict.fold,
        precision=CFG.predict.precision,
        crop_pairs=CFG.predict.crop_pairs,
        template_weight=CFG.predict.template_weight,
        template_anchor=CFG.predict.template_anchor,
    wildcard_constraints:
        chunk=r"\d{4}",
    log:
        "logs/predict/{proteome}/{chunk}.log",
    benchmark:
        PATHS.benchmark("predict", "{proteome}/{chunk}")
    threads: 1
    resources:
        mem_mb=predict_mem_mb,
        runtime=predict_runtime,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} predict --model {input.model} --out-dir {params.out_dir} --device {params.device} "
        "--window {params.window} --seed {params.seed} --max-msa {params.max_msa} --batch-size {params.batch_size} "
        "--max-tokens {params.max_tokens} --pair-heads {params.pair_heads} --fold {params.fold} "
        "--precision {params.precision} --crop-pairs {params.crop_pairs} "
        "--template-weight {params.template_weight} --template-anchor {params.template_anchor} --threads {threads} --stats {output.stats} "
        "--chunk-plan {input.plan} --chunk {wildcards.chunk} {params.features_dir} > {log} 2>&1"
