# wqk: symmetry and directionality of W_q W_k^T, from checkpoints to the paper's figures.
# Run: snakemake --cores 2 --configfile config/quickstart.yaml   (see README.md)
#
# The workflow is workflow/Snakefile; a checkout uses it as a module, exactly as a project
# that deploys it does, so that what is tested here is what a deployment runs.


# The paper run by default; --configfile replaces it instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


module wqk:
    snakefile:
        "workflow/Snakefile"
    config:
        config


use rule * from wqk
