# Per-proteome summary table, runtime table, report figures and HTML pages (report/index.html and one page per
# protein under report/proteins/, written before the index) (workflow_lib/report); `snakemake --report
# report.html` puts the figures, with the captions in report/, into one HTML file.
# The summary picks up whichever stages the workflow has (workflow_lib/workflow/rule_inputs.py): a stage's files
# become inputs as soon as some rule can produce them, so adding a stage's rules needs no change here.

from workflow_lib.workflow.rule_inputs import ReportInputs


report: "../report/workflow.rst"


REPORT_SETTINGS = config.get("report", {})
REPORT_INPUTS = ReportInputs(
    RESULTS,
    PLANS,
    workflow_rules,
    default_targets,
    templates_enabled=bool(getattr(globals().get("TEMPLATE_SETTINGS"), "enabled", True)),
    proteins=REPORT_SETTINGS.get("proteins", []),
)


rule summary:
    input:
        unpack(REPORT_INPUTS.inputs),
    output:
        summary=f"{RESULTS}/{{proteome}}/summary.parquet",
        table=f"{RESULTS}/{{proteome}}/summary.tsv",
        runtime=f"{RESULTS}/{{proteome}}/runtime.parquet",
        pages=f"{RESULTS}/{{proteome}}/report/index.html",
        msa_coverage=report(
            f"{RESULTS}/{{proteome}}/report/msa_coverage.png",
            caption="../report/msa_coverage.rst",
            category="{proteome}",
            subcategory="MSA",
        ),
        plddt_per_residue=report(
            f"{RESULTS}/{{proteome}}/report/plddt_per_residue.png",
            caption="../report/plddt_per_residue.rst",
            category="{proteome}",
            subcategory="Structures",
        ),
        distributions=report(
            f"{RESULTS}/{{proteome}}/report/distributions.png",
            caption="../report/distributions.rst",
            category="{proteome}",
            subcategory="Proteome",
        ),
        neff_vs_plddt=report(
            f"{RESULTS}/{{proteome}}/report/neff_vs_plddt.png",
            caption="../report/neff_vs_plddt.rst",
            category="{proteome}",
            subcategory="Proteome",
        ),
        runtime_plot=report(
            f"{RESULTS}/{{proteome}}/report/runtime.png",
            caption="../report/runtime.rst",
            category="{proteome}",
            subcategory="Runtime",
        ),
    params:
        trackfold=TRACKFOLD,
        results=REPORT_INPUTS.results_dir,
        require=REPORT_INPUTS.require_option,
        proteins=REPORT_INPUTS.protein_options,
        plot_proteins=REPORT_SETTINGS.get("plot_proteins", 6),
        plots_dir=REPORT_INPUTS.plots_dir,
    log:
        "logs/summary/{proteome}.log",
    benchmark:
        f"{RESULTS}/benchmarks/summary/{{proteome}}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/core.yaml"
    shell:
        "{params.trackfold} summarize --results {params.results} --proteome {wildcards.proteome} "
        "--out {output.summary} --tsv {output.table} --runtime-out {output.runtime} --logs logs "
        "--plots-dir {params.plots_dir} --pages-dir {params.plots_dir} --plot-proteins {params.plot_proteins} {params.require} {params.proteins} "
        "> {log} 2>&1"
