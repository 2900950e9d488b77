# Per-proteome summary table, runtime table, report figures and HTML pages (report/index.html and one page per
# protein under report/proteins/, written before the index) (workflow_lib/report); `snakemake --report
# report.html` puts the figures, with the captions in report/, into one HTML file.
# The summary picks up whichever stages the workflow has (REPORT_INPUTS, built in rules/common.smk from
# workflow_lib/workflow/rule_inputs.py): a stage's files become inputs as soon as some rule can produce them, so
# adding a stage's rules needs no change here. Settings: CFG.report (proteins, plot_proteins).


report: "../report/workflow.rst"


rule summary:
    input:
        unpack(REPORT_INPUTS.inputs),
    output:
        summary=PATHS.proteome_file("summary.parquet"),
        table=PATHS.proteome_file("summary.tsv"),
        runtime=PATHS.proteome_file("runtime.parquet"),
        pages=PATHS.report_file("index.html"),
        msa_coverage=report(
            PATHS.report_file("msa_coverage.png"),
            caption="../report/msa_coverage.rst",
            category="{proteome}",
            subcategory="MSA",
        ),
        plddt_per_residue=report(
            PATHS.report_file("plddt_per_residue.png"),
            caption="../report/plddt_per_residue.rst",
            category="{proteome}",
            subcategory="Structures",
        ),
        distributions=report(
            PATHS.report_file("distributions.png"),
            caption="../report/distributions.rst",
            category="{proteome}",
            subcategory="Proteome",
        ),
        neff_vs_plddt=report(
            PATHS.report_file("neff_vs_plddt.png"),
            caption="../report/neff_vs_plddt.rst",
            category="{proteome}",
            subcategory="Proteome",
        ),
        runtime_plot=report(
            PATHS.report_file("runtime.png"),
            caption="../report/runtime.rst",
            category="{proteome}",
            subcategory="Runtime",
        ),
    params:
        trackfold=TRACKFOLD,
        results=REPORT_INPUTS.results_dir,
        require=REPORT_INPUTS.require_option,
        proteins=REPORT_INPUTS.protein_options,
        plot_proteins=CFG.report.plot_proteins,
        plots_dir=REPORT_INPUTS.plots_dir,
    log:
        "logs/summary/{proteome}.log",
    benchmark:
        PATHS.benchmark("summary", "{proteome}")
    threads: 4  # the protein pages in parallel: the last job of a proteome, when its cores are free (capped at --cores)
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} summarize --results {params.results} --proteome {wildcards.proteome} "
        "--out {output.summary} --tsv {output.table} --runtime-out {output.runtime} --logs logs --cpus {threads} "
        "--plots-dir {params.plots_dir} --pages-dir {params.plots_dir} --plot-proteins {params.plot_proteins} "
        "{params.require} {params.proteins} > {log} 2>&1"
