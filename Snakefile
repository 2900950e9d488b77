# trackfold: proteomes -> MSAs -> templates -> features -> three-track structure predictions.
# This file only wires: the configuration (built once), paths and input functions are in rules/common.smk, one
# rule file per stage.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/db.smk"
include: "rules/chunks.smk"
include: "rules/search.smk"
include: "rules/templates.smk"
include: "rules/features.smk"
include: "rules/predict.smk"
include: "rules/report.smk"
include: "rules/train.smk"


rule all:
    input:
        all_targets(),
    default_target: True
