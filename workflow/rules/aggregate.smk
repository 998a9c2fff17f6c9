# Over models: the resolved catalogue, per-model statistics, comparison with the paper.


for catalogue_name, (catalogue_path, _) in CATALOGUES.items():

    rule:
        """The validated catalogue with derived slugs: what aggregation joins scores to
        (its swept models apart)."""
        name:
            catalogue_name
        input:
            CATALOGUE_FILES,
        output:
            catalogue_path,
        log:
            f"logs/{catalogue_name}.log",
        localrule: True
        run:
            write_catalogue_file(output[0], log[0])


for aggregate_name, spec in AGGREGATES.items():

    rule:
        """Median and interquartile range per model and stack (over layers and over heads)."""
        name:
            aggregate_name
        input:
            scores=expand(
                f"{spec['scores']}/{{slug}}.parquet",
                slug=CATALOGUES[spec["catalogue"]][1],
            ),
            null=spec["null"],
            catalogue=CATALOGUES[spec["catalogue"]][0],
        output:
            models=f"results/{aggregate_name}/models.parquet",
            models_csv=f"results/{aggregate_name}/models.csv",
            groups=f"results/{aggregate_name}/groups.parquet",
            groups_csv=f"results/{aggregate_name}/groups.csv",
            layers=f"results/{aggregate_name}/layers.parquet",
            heads=f"results/{aggregate_name}/heads.parquet",
        log:
            f"logs/{aggregate_name}.log",
        benchmark:
            f"benchmarks/{aggregate_name}.tsv"
        conda:
            "../envs/analysis.yaml"
        resources:
            mem_mb=8000,
            runtime=30,
        params:
            out_dir=subpath(output.models, parent=True),
            # folders, not one path per model: the command line stays short at any catalogue size
            scores=lambda wildcards, input: os.path.dirname(input.scores[0]),
            null=aggregate_null_flag,
        shell:
            "wqk aggregate --scores-dir {params.scores} {params.null} --catalogue {input.catalogue}"
            " --out-dir {params.out_dir} > {log} 2>&1"


rule validate:
    """Ours against the paper's published medians, quartiles and layers at its precision, with
    the expected cause of each gap."""
    input:
        models="results/aggregate/models.parquet",
        layers="results/aggregate/layers.parquet",
        authors_models="results/aggregate_authors/models.parquet",
        authors_layers="results/aggregate_authors/layers.parquet",
        published=config["validation"]["published"],
        published_layers=config["validation"]["published_layers"],
        paper_models=config["validation"]["paper_models"],
    output:
        "results/validation/paper_comparison.csv",
    log:
        "logs/validate.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        "wqk validate --models {input.models} --layers {input.layers} --published {input.published}"
        " --published-layers {input.published_layers} --paper-models {input.paper_models}"
        " --authors-models {input.authors_models} --authors-layers {input.authors_layers}"
        " --out {output} > {log} 2>&1"


if config["quantisation"]["models"]:

    rule quantisation:
        """The real float checkpoints of quantisation.models: their q/k quantised with each type
        the gguf package can write, dequantised and scored per layer, beside the null's spread.
        """
        input:
            get_quantisation_input,
        output:
            layers="results/quantisation/quantisation.parquet",
            summary="results/quantisation/summary.csv",
        log:
            "logs/quantisation.log",
        conda:
            "../envs/wqk.yaml"
        resources:
            mem_mb=8000,
            runtime=60,
        params:
            sources=get_quantisation_sources,
            names=get_quantisation_names,
            seed=config["quantisation"]["seed"],
        shell:
            "wqk quantisation {params.sources} --names {params.names} --seed {params.seed}"
            " --out {output.layers} --summary-out {output.summary} > {log} 2>&1"
