# Inference: one job per protein, features npz + checkpoint -> PDB and mmCIF (pLDDT), confidence JSON, 6D npz,
# residue table.
# Library: workflow_lib.inference (predict: network runs, stitch: crop-and-stitch, outputs: files, cli).
# GPU: the rule declares resources gpu=0 and runs on the CPU; a job given a GPU (`--set-resources predict:gpu=1`,
# as profiles/slurm does) runs on CUDA when torch sees one. One thread by default: proteins
# run side by side, and torch's OpenMP threads slow down badly when cores are oversubscribed (benchmarks/RESULTS.md).
# PREDICT_SETTINGS and structure_targets() live in rules/common.smk.

rule predict:
    input:
        features=f"{RESULTS}/{{proteome}}/features/{{protein}}.npz",
        model=PREDICT_MODEL,
    output:
        pdb=f"{RESULTS}/{{proteome}}/structures/{{protein}}.pdb",
        cif=f"{RESULTS}/{{proteome}}/structures/{{protein}}.cif",
        confidence=f"{RESULTS}/{{proteome}}/structures/{{protein}}.confidence.json",
        npz=f"{RESULTS}/{{proteome}}/structures/{{protein}}.pred.npz",
        residues=f"{RESULTS}/{{proteome}}/structures/{{protein}}.residues.parquet",
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        device=torch_device,
        window=PREDICT_SETTINGS.window,
        seed=PREDICT_SETTINGS.seed,
        max_msa=PREDICT_SETTINGS.max_msa,
    log:
        "logs/predict/{proteome}/{protein}.log",
    benchmark:
        f"{RESULTS}/benchmarks/predict/{{proteome}}/{{protein}}.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} predict --model {input.model} --out-dir {params.out_dir} --device {params.device} "
        "--window {params.window} --seed {params.seed} --max-msa {params.max_msa} --threads {threads} "
        "{input.features} > {log} 2>&1"
