# The explorer (every head in one page, opened from disk) and the release (the run's results as a
# citable dataset). The package does the work: wqk.explorer, wqk.release; the input functions are
# in common.smk. The explorer is a default target (get_explorer_output, in get_final_output);
# the release is made when asked:
#   snakemake --cores 2 release


rule explorer:
    """Every head of every model in one page that opens from disk, with no network."""
    input:
        models="results/aggregate/models.parquet",
        layers="results/aggregate/layers.parquet",
        heads="results/aggregate/heads.parquet",
        null=get_population_null,
        code=get_explorer_code,  # asked when the DAG needs the rule, not at parse time
    output:
        report(
            directory(EXPLORER),
            patterns=["{page}.html"],
            caption="../report/explorer.rst",
            category="Explorer",
            labels={"page": "explorer"},
        ),
    log:
        "logs/explorer.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        null=aggregate_null_flag,
    shell:
        "wqk explorer --models {input.models} --layers {input.layers} --heads {input.heads}"
        " {params.null} --out-dir {output} > {log} 2>&1"


rule release_config:
    """The config this run used, as Snakemake resolved it (files, --config, the schema's defaults)."""
    output:
        "results/release/config.yaml",
    log:
        "logs/release_config.log",
    localrule: True
    params:
        config=config,
    run:
        write_release_config(params.config, output[0], log[0])


rule release:
    """The run's results as a versioned, citable dataset (wqk.release): `snakemake release`."""
    input:
        unpack(get_release_input),
    output:
        # the folder is the command's (it removes what an earlier release left there); a
        # directory() output would get Snakemake's hidden time stamp file in the bundle
        f"{RELEASE}/SHA256SUMS",
    log:
        "logs/release.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        name=RELEASE_NAME,
        out=lambda wildcards, output: os.path.dirname(output[0]),
        folders=release_folder_flags,
    shell:
        "wqk release --name {params.name} --catalogue {input.catalogue} {params.folders}"
        " --validation {input.validation} --tables {input.tables} --figures {input.figures}"
        " --config {input.config} --lock {input.lock} --citation {input.citation}"
        " --out {params.out} > {log} 2>&1"
