# Per model: (fetch | build tiny) -> extract -> score -> null reference.


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
        source=lambda wc: MODELS[wc.slug]["source"],
        revision=get_revision,
    shell:
        "wqk fetch {params.source} --out {output} --revision {params.revision} > {log} 2>&1"


rule extract:
    """Per-head Q_h, K_h of every attention layer, one row group per layer."""
    input:
        get_extract_input,
    output:
        "results/matrices/{slug}.parquet",
    log:
        "logs/extract/{slug}.log",
    benchmark:
        "benchmarks/extract-{slug}.tsv"
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        source=get_extract_source,
        name=lambda wc: MODELS[wc.slug]["model_id"],
        synthetic=lambda wc: "--synthetic" if MODELS[wc.slug]["synthetic"] else "",
    shell:
        "wqk extract {params.source:q} --name {params.name:q} {params.synthetic} --out {output} > {log} 2>&1"


rule score:
    """Symmetry and directionality per head and per layer (CUDA when the job has a GPU)."""
    input:
        "results/matrices/{slug}.parquet",
    output:
        "results/scores/{slug}.parquet",
    log:
        "logs/score/{slug}.log",
    benchmark:
        "benchmarks/score-{slug}.tsv"
    conda:
        "../envs/wqk.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=1,
    params:
        device=config["score"]["device"],
    shell:
        "wqk score {input} --out {output} --device {params.device} > {log} 2>&1"


rule null_reference:
    """Scores of random Gaussian Q, K with the model's shapes (synthetic, fixed seed)."""
    input:
        "results/scores/{slug}.parquet",
    output:
        "results/null/{slug}.parquet",
    log:
        "logs/null/{slug}.log",
    benchmark:
        "benchmarks/null-{slug}.tsv"
    conda:
        "../envs/wqk.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        seed=config["null_reference"]["seed"],
    shell:
        "wqk null --scores {input} --out {output} --seed {params.seed} > {log} 2>&1"
