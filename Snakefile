# wqk: symmetry and directionality of W_q W_k^T, from checkpoints to the paper's figures.
# Run: snakemake --cores 2 --configfile config/quickstart.yaml   (see README.md)

from snakemake.utils import min_version, validate

min_version("9.0")


# The paper run by default; --configfile replaces it instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


# HF_TOKEN (gated models such as Llama) is read from the environment by `wqk fetch`, a
# local rule that runs where Snakemake runs. It is deliberately not declared as `envvars:`:
# Snakemake would write `export HF_TOKEN='...'` into every spawned job's command line
# (visible to all users of the node through `ps`) and, with --verbose, into its log.


include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/train.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
    localrule: True
