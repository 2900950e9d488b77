# Training workflow (config section `train`): structures -> chains + identity split -> MSAs against the
# configured database (or precomputed A3Ms) -> features -> trackfold train -> predictions and evaluation of the
# held-out chains -> a generated model card. Everything lives under {results}/train/{train.name}/:
#
#   structures/                    the extracted train.structures_archive (rule train_structures, when set)
#   data/chains.parquet, split.json                                    train_data
#   msa/batch_NNN.fasta, msa/batch_NNN/{chain}.a3m, msa_stats.parquet  train_msa (one job per batch)
#   features/{chain}.npz, features/batch_NNN.{inputs,done}             train_features (one job per batch)
#   templates/hits/{chain}.hits.parquet, templates/batch_NNN.done      train_templates (train.templates: true)
#   templates/usable/{chain}.hits.parquet    the hits a chain may use (train_features, for its feature file)
#   pack/pack.npz                                                      train_pack (train.pack: true)
#   run/model.pt, metrics.*, validation.parquet, learning_curve.png    train_model (+ train_state.pt, undeclared)
#   predictions/{chain}.pdb, .pred.npz, targets.tsv                    train_predict (validation chains)
#   evaluation/evaluation.parquet, .json, .html                        train_evaluate (trackfold evaluate)
#   MODEL_CARD.md                                                      train_card
#
# The chains are known only after train_data, but the DAG is static (as for proteome chunks, so `snakemake -n`
# lists every job and no checkpoint re-evaluation is needed): train.msa_batches fixed batches, chain i of
# chains.parquet in batch i mod N. With train.pack, trackfold train reads one pack of every chain's MSA rows and
# backbone (trackfold train-pack) instead of per-chain feature files, which then exist only for the validation
# chains (predicted and evaluated after training): thousands of chains' co-evolution maps would take gigabytes.
# Resume: trackfold train writes run/train_state.pt every checkpoint_every
# steps; it is not a declared output, so Snakemake never deletes it, and a rerun of train_model after a kill
# (or `--forcerun train_model` after a time limit) continues from it. Library: workflow_lib.training
# (data, loop, ...; cli: train-data, train, train-batch, train-select, train-hits, train-pack, train-targets,
# train-card; card: the model card).
# From rules/common.smk: TRAIN (CFG.train's settings, or the defaults without a train section), TRAIN_PLAN
# (workflow_lib/workflow/train_plan.py) and TRAIN_PATHS (the run's files, workflow_lib/workflow/paths.py);
# all_targets() asks for TRAIN_PLAN's targets when the config has `train`.

import functools
import json


rule train_structures:
    input:
        archive=TRAIN.structures_archive or [],
    output:
        directory(TRAIN_PATHS.structures()),
    log:
        f"logs/train_structures/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_structures", TRAIN.name)
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/core.yaml"
    shell:
        "mkdir -p {output} && tar -xzf {input.archive} -C {output} > {log} 2>&1"


rule train_data:
    input:
        structures=TRAIN_PLAN.structures,
        extracted=TRAIN_PLAN.extracted,
    output:
        chains=TRAIN_PATHS.chains(),
        split=TRAIN_PATHS.split(),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        structures=TRAIN_PLAN.structure_args,
        settings=TRAIN.data_options(),
    log:
        f"logs/train_data/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_data", TRAIN.name)
    threads: TRAIN.data_threads
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} train-data --out-dir {params.out_dir} {params.settings} --cpus {threads} "
        "{params.structures} > {log} 2>&1"


rule train_msa:
    input:
        chains=rules.train_data.output.chains,
        manifest=TRAIN_PLAN.manifest,
    output:
        stats=TRAIN_PATHS.msa_stats(),
        fasta=TRAIN_PATHS.msa_fasta(),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        batches=TRAIN.msa_batches,
        db=manifest_dir,
        precomputed=TRAIN.precomputed_option(),
        settings=CFG.search.cli_options(),
    wildcard_constraints:
        batch=r"\d{3}",
    log:
        f"logs/train_msa/{TRAIN.name}/{{batch}}.log",
    benchmark:
        PATHS.benchmark("train_msa", f"{TRAIN.name}/{{batch}}")
    threads: TRAIN.msa_threads
    resources:
        mem_mb=4000,
        runtime=720,
    conda:
        "../envs/core.yaml"
    shell:
        "( {params.trackfold} train-batch --chains {input.chains} --batch {wildcards.batch} "
        "--batches {params.batches} --fasta {output.fasta} --out-dir {params.out_dir} {params.precomputed} && "
        "if [ -s {output.fasta} ]; then {params.trackfold} msa --db {params.db} --out-dir {params.out_dir} "
        "{params.settings} --cpus {threads} {output.fasta}; fi ) > {log} 2>&1"


rule train_features:
    input:
        chains=rules.train_data.output.chains,
        stats=rules.train_msa.output.stats,
        templates=TRAIN_PLAN.batch_template_flag,
        db=TRAIN_PLAN.template_db,
    output:
        inputs=TRAIN_PATHS.feature_inputs(),
        flag=touch(TRAIN_PATHS.feature_flag()),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        msa_dir=input_parent("stats"),
        split=TRAIN_PLAN.feature_split,
        max_seqs=CFG.features.max_seqs,
        max_stats_seqs=CFG.features.max_stats_seqs,
        usable=functools.partial(TRAIN_PLAN.feature_template_step, TRACKFOLD),
        templates=TRAIN_PLAN.feature_template_options(CFG.features.max_templates),
    wildcard_constraints:
        batch=r"\d{3}",
    log:
        f"logs/train_features/{TRAIN.name}/{{batch}}.log",
    benchmark:
        PATHS.benchmark("train_features", f"{TRAIN.name}/{{batch}}")
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        "../envs/core.yaml"
    shell:
        "( {params.trackfold} train-select --chains {input.chains} --msa-dir {params.msa_dir} --split {params.split} "
        "--out {output.inputs} && mapfile -t a3ms < {output.inputs} && if [ ${{#a3ms[@]}} -gt 0 ]; then "
        "{params.usable}{params.trackfold} features --out-dir {params.out_dir} --max-seqs {params.max_seqs} "
        "--max-stats-seqs {params.max_stats_seqs} {params.templates} \"${{a3ms[@]}}\"; fi ) > {log} 2>&1"


rule train_templates:
    input:
        chains=rules.train_data.output.chains,
        stats=rules.train_msa.output.stats,
        db=TRAIN_PLAN.template_db,
    output:
        inputs=TRAIN_PATHS.template_inputs(),
        flag=touch(TRAIN_PATHS.template_flag()),
    params:
        trackfold=TRACKFOLD,
        msa_dir=input_parent("stats"),
        db_dir=TRAIN_PLAN.template_db_dir,
        out_dir=TRAIN_PATHS.template_hits(),
        max_hits=CFG.templates.max_hits,
        min_aligned=CFG.templates.min_aligned,
        decoys=CFG.templates.decoys,
    wildcard_constraints:
        batch=r"\d{3}",
    log:
        f"logs/train_templates/{TRAIN.name}/{{batch}}.log",
    benchmark:
        PATHS.benchmark("train_templates", f"{TRAIN.name}/{{batch}}")
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,
    conda:
        "../envs/core.yaml"
    shell:
        "( {params.trackfold} train-select --chains {input.chains} --msa-dir {params.msa_dir} --split all "
        "--out {output.inputs} && mapfile -t a3ms < {output.inputs} && if [ ${{#a3ms[@]}} -gt 0 ]; then "
        "{params.trackfold} templates search --templates {params.db_dir} --out-dir {params.out_dir} "
        "--max-hits {params.max_hits} --min-aligned {params.min_aligned} --decoys {params.decoys} "
        "--cpus {threads} \"${{a3ms[@]}}\"; fi ) > {log} 2>&1"


rule train_pack:
    input:
        chains=rules.train_data.output.chains,
        stats=TRAIN_PLAN.msa_stats,
        templates=TRAIN_PLAN.template_flags,
        db=TRAIN_PLAN.template_db,
    output:
        pack=TRAIN_PATHS.pack(),
    params:
        trackfold=TRACKFOLD,
        msa_dirs=TRAIN_PLAN.msa_dirs_option(),
        max_rows=TRAIN.pack_max_rows,
        templates=TRAIN_PLAN.pack_template_option(),
    log:
        f"logs/train_pack/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_pack", TRAIN.name)
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} train-pack --chains {input.chains} --msa-dir {params.msa_dirs} "
        "--max-rows {params.max_rows} {params.templates} --out {output.pack} > {log} 2>&1"


rule train_model:
    input:
        chains=rules.train_data.output.chains,
        data=TRAIN_PLAN.model_inputs,
        init=TRAIN_PLAN.init,
    output:
        model=TRAIN_PATHS.run_file("model.pt"),
        metrics=TRAIN_PATHS.run_file("metrics.parquet"),
        metrics_json=TRAIN_PATHS.run_file("metrics.json"),
        validation=TRAIN_PATHS.run_file("validation.parquet"),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        data=TRAIN_PLAN.train_data_option(),
        options=TRAIN.train_options(),
        init=init_model_option,
        device=torch_device,
    log:
        f"logs/train_model/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_model", TRAIN.name)
    threads: TRAIN.threads
    resources:
        mem_mb=TRAIN.mem_mb,
        runtime=TRAIN.runtime,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} train {params.data} "
        "--out-dir {params.out_dir} {params.options} {params.init} --threads {threads} --device {params.device} "
        ">> {log} 2>&1"


rule train_predict:
    input:
        model=rules.train_model.output.model,
        chains=rules.train_data.output.chains,
        stats=TRAIN_PLAN.msa_stats,
        features=TRAIN_PLAN.feature_flags,
    output:
        targets=TRAIN_PATHS.prediction_file("targets.tsv"),
        inputs=TRAIN_PATHS.prediction_file("inputs.txt"),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
        batches=TRAIN.msa_batches,
        msa_dir=input_parent("stats", levels=2),
        features_dir=input_parent("features"),
        device=torch_device,
        window=CFG.predict.window,
        seed=CFG.predict.seed,
        max_msa=CFG.predict.max_msa,
        fold=CFG.predict.fold,
        precision=CFG.predict.precision,
        crop_pairs=CFG.predict.crop_pairs,
        template_weight=CFG.predict.template_weight,
        template_anchor=CFG.predict.template_anchor,
    log:
        f"logs/train_predict/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_predict", TRAIN.name)
    threads: 1
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,
    conda:
        "../envs/core.yaml"
    shell:
        "( {params.trackfold} train-targets --chains {input.chains} --batches {params.batches} "
        "--msa-dir {params.msa_dir} --features-dir {params.features_dir} --pred-dir {params.out_dir} "
        "--out {output.targets} --inputs-list {output.inputs} && mapfile -t inputs < {output.inputs} && "
        "{params.trackfold} predict --model {input.model} --out-dir {params.out_dir} --device {params.device} "
        "--window {params.window} --seed {params.seed} --max-msa {params.max_msa} --fold {params.fold} "
        "--precision {params.precision} --crop-pairs {params.crop_pairs} "
        "--template-weight {params.template_weight} --template-anchor {params.template_anchor} "
        "--threads {threads} \"${{inputs[@]}}\" ) > {log} 2>&1"


rule train_evaluate:
    input:
        targets=rules.train_predict.output.targets,
    output:
        table=TRAIN_PATHS.evaluation_file("evaluation.parquet"),
        summary=TRAIN_PATHS.evaluation_file("evaluation.json"),
    params:
        trackfold=TRACKFOLD,
        out_dir=output_parent,
    log:
        f"logs/train_evaluate/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_evaluate", TRAIN.name)
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} evaluate --targets {input.targets} --out-dir {params.out_dir} > {log} 2>&1"


rule train_card:
    input:
        chains=rules.train_data.output.chains,
        split=rules.train_data.output.split,
        stats=TRAIN_PLAN.msa_stats,
        model=rules.train_model.output.model,
        metrics=rules.train_model.output.metrics,
        validation=rules.train_model.output.validation,
        evaluation=rules.train_evaluate.output.table,
    output:
        card=TRAIN_PATHS.model_card(),
    params:
        trackfold=TRACKFOLD,
        data_dir=input_parent("chains"),
        run_dir=input_parent("model"),
        evaluation_dir=input_parent("evaluation"),
        settings=shlex.quote(json.dumps(TRAIN_PLAN.card_settings, sort_keys=True)),
        benchmarks=PATHS.benchmark_dir(),
    log:
        f"logs/train_card/{TRAIN.name}.log",
    benchmark:
        PATHS.benchmark("train_card", TRAIN.name)
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} train-card --data-dir {params.data_dir} --run-dir {params.run_dir} "
        "--msa-stats {input.stats} --evaluation-dir {params.evaluation_dir} --settings {params.settings} "
        "--benchmarks {params.benchmarks} --out {output.card} > {log} 2>&1"
