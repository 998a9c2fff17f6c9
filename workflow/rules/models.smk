# Per model: (fetch | build tiny) -> score, one job that reads the weights once and writes
# the scores, the matrices file and the null reference (a separate null job would spend
# about a second importing torch: a third of scoring a 2 GB model).


# The null reference is an output of `score` when the config activates it.
NULL_OUTPUT = (
    {"null": "results/null/{slug}.parquet"}
    if config["activate"]["null_reference"]
    else {}
)
# With validation active, `score` also writes the scores of the authors' method (the
# paper's code path, mistakes included: wqk.authors), which prove the errata.
AUTHORS_OUTPUT = (
    {"authors": "results/scores_authors/{slug}.parquet"}
    if config["activate"]["validation"]
    else {}
)
NULL_SEED = config["null_reference"]["seed"]


rule tiny:
    """A tiny random model of one model_type (synthetic: never data)."""
    output:
        directory("results/tiny/{slug}"),
    log:
        "logs/tiny/{slug}.log",
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        model_type=get_tiny_model_type,
        seed=config["tiny"]["seed"],
    shell:
        "wqk tiny {params.model_type} --out {output} --seed {params.seed} > {log} 2>&1"


rule fetch:
    """Only the bytes extraction needs (config and q/k tensors) of a hub checkpoint."""
    output:
        temp(directory("results/fetch/{slug}")),
    log:
        "logs/fetch/{slug}.log",
    benchmark:
        "benchmarks/fetch-{slug}.tsv"
    retries: 2
    # Compute nodes of many clusters have no internet: download where Snakemake runs.
    localrule: True
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=4000,
        runtime=240,
        hub_downloads=1,
    params:
        source=lambda wc: fetch_source(MODELS[wc.slug]),
        revision=get_revision,
    shell:
        "wqk fetch {params.source} --out {output} --revision {params.revision} > {log} 2>&1"


rule score:
    """Scores, matrices (each key head once, at the checkpoint's precision) and null
    reference of one model, in one pass over its weights (CUDA when the job has a GPU).
    """
    input:
        get_extract_input,
    output:
        **NULL_OUTPUT,
        **AUTHORS_OUTPUT,
        scores="results/scores/{slug}.parquet",
        matrices="results/matrices/{slug}.parquet",
    log:
        "logs/score/{slug}.log",
    benchmark:
        "benchmarks/score-{slug}.tsv"
    conda:
        "../envs/wqk.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=1,
    params:
        source=get_extract_source,
        name=lambda wc: MODELS[wc.slug]["model_id"],
        synthetic=lambda wc: "--synthetic" if MODELS[wc.slug]["synthetic"] else "",
        device=config["score"]["device"],
        metrics=score_flags(),
        null=lambda wc, output: (
            f"--null-out {output.null} --null-seed {NULL_SEED}" if NULL_OUTPUT else ""
        ),
        authors=lambda wc, output: (
            f"--authors-out {output.authors}" if AUTHORS_OUTPUT else ""
        ),
    shell:
        "wqk score {params.source:q} --name {params.name:q} {params.synthetic} --device {params.device}"
        " {params.metrics} --matrices-out {output.matrices} {params.null} {params.authors}"
        " --out {output.scores} > {log} 2>&1"
