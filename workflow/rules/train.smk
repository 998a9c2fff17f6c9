# Training from scratch: corpus -> tokenizer -> train (scores every saved step in process)
# -> summary. One job per run: a saved step is scored by the scorer of `wqk score`, on the
# model's own tensors, then all but the last checkpoint are deleted.


rule corpus:
    """Training data as token ids (a memory-mapped .npy array): documents streamed from their
    source (pydoc, shakespeare offline; wikipedia, red_pajama through `datasets`; jigsaw from
    a local Kaggle download) and tokenised in chunks, at most the tokens the runs read.
    """
    input:
        tokenizer=lambda wc: tokenizer_dir(wc.dataset),
    output:
        "results/training/corpus/{dataset}.npy",
    log:
        "logs/training/corpus/{dataset}.log",
    benchmark:
        "benchmarks/corpus-{dataset}.tsv"
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=3000,
        runtime=1440,
    params:
        options=get_corpus_options,
    shell:
        "wqk corpus --name {wildcards.dataset} --tokenizer {input.tokenizer} {params.options}"
        " --out {output} > {log} 2>&1"


rule tokenizer_trained:
    """A WordPiece tokenizer trained on the corpus's documents, streamed from their source
    (fixed vocabulary, deterministic).
    """
    output:
        directory("results/training/tokenizer/corpus-{dataset}"),
    log:
        "logs/training/tokenizer/corpus-{dataset}.log",
    conda:
        "../envs/wqk.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        vocab_size=TRAINING.get("tokenizer", {}).get("vocab_size"),
        options=lambda wc: source_options(wc.dataset),
    shell:
        "wqk tokenizer --dataset {wildcards.dataset} {params.options}"
        " --vocab-size {params.vocab_size} --out {output} > {log} 2>&1"


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
    """One run, scored at every saved step in the same process (same bytes as `wqk score`
    on that step's checkpoint); a rerun resumes from the last checkpoint. Its settings (every
    option of `wqk train` the workflow gives: wqk.training.spec) are flags, a params: entry,
    so that changing one reruns it.

    Declared: done.json and the scores of every saved step, copied from the run folder when
    the run is complete. Snakemake deletes the declared outputs of a failed job; what
    resuming needs (checkpoints/, the scores in the run folder, matrices/ when kept) is not
    declared, so it survives.
    """
    input:
        corpus=get_train_corpus,
        tokenizer=get_train_tokenizer,
    output:
        done="results/training/runs/{run}/done.json",
        scores=expand("results/training/scores/{{run}}/step-{step}.parquet", step=STEPS),
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
        out=subpath(output.done, parent=True),
        scores=lambda wc: f"results/training/scores/{wc.run}",
        settings=get_train_settings,
        score_device=config["score"]["device"],
    shell:
        "wqk train --corpus {input.corpus} --tokenizer {input.tokenizer} {params.settings}"
        " --score-device {params.score_device} --out {params.out} --scores-out {params.scores}"
        " > {log} 2>&1"


rule train_summary:
    """Stable tables of every run and saved step: scores (medians over layers) and losses."""
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
        "../envs/analysis.yaml"
    params:
        runs=lambda wc, input: [os.path.dirname(p) for p in input.dones],
        # one folder per run, not one name per step: the paper's 3,600 file names would
        # make a command line longer than the 128 KiB one argument may hold
        scores=lambda wc, input: sorted({os.path.dirname(p) for p in input.scores}),
    shell:
        "wqk train-summary --runs {params.runs} --scores {params.scores} --out {output.summary}"
        " --layers-out {output.layers} --losses-out {output.losses} > {log} 2>&1"
