# Over models: the resolved catalogue, per-model statistics, comparison with the paper.


rule catalogue:
    """The validated catalogue with derived slugs: what aggregation joins scores to."""
    input:
        config["catalogue"],
    output:
        "results/catalogue.tsv",
    log:
        "logs/catalogue.log",
    localrule: True
    run:
        write_catalogue(CATALOGUE, output[0])
        Path(log[0]).write_text(
            f"{len(CATALOGUE)} models from {config['catalogue']}\n"
        )


rule aggregate:
    """Median and interquartile range per model and stack (over layers and over heads)."""
    input:
        scores=get_all_scores,
        null=get_all_null,
        catalogue="results/catalogue.tsv",
    output:
        models="results/aggregate/models.parquet",
        models_csv="results/aggregate/models.csv",
        groups="results/aggregate/groups.parquet",
        groups_csv="results/aggregate/groups.csv",
        layers="results/aggregate/layers.parquet",
        heads="results/aggregate/heads.parquet",
    log:
        "logs/aggregate.log",
    benchmark:
        "benchmarks/aggregate.tsv"
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        out_dir=subpath(output.models, parent=True),
        null=lambda wc, input: f"--null {' '.join(input.null)}" if input.null else "",
    shell:
        "wqk aggregate --scores {input.scores} {params.null} --catalogue {input.catalogue}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule aggregate_authors:
    """The aggregate of the authors' method's scores: what validation proves causes with."""
    input:
        scores=expand("results/scores_authors/{slug}.parquet", slug=SLUGS),
        catalogue="results/catalogue.tsv",
    output:
        models="results/aggregate_authors/models.parquet",
        models_csv="results/aggregate_authors/models.csv",
        groups="results/aggregate_authors/groups.parquet",
        groups_csv="results/aggregate_authors/groups.csv",
        layers="results/aggregate_authors/layers.parquet",
        heads="results/aggregate_authors/heads.parquet",
    log:
        "logs/aggregate_authors.log",
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        out_dir=subpath(output.models, parent=True),
    shell:
        "wqk aggregate --scores {input.scores} --catalogue {input.catalogue}"
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
        "../envs/wqk.yaml"
    shell:
        "wqk validate --models {input.models} --layers {input.layers} --published {input.published}"
        " --published-layers {input.published_layers} --paper-models {input.paper_models}"
        " --authors-models {input.authors_models} --authors-layers {input.authors_layers}"
        " --out {output} > {log} 2>&1"
