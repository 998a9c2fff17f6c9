# One rule and one module per figure; each lists its module (workflow/wqk/figures/NAME.py)
# as an input so that editing one figure reruns only that figure. `wqk figure` writes the
# PDF and the PNG side by side.


rule figure_wqk_heatmaps:
    input:
        encoder=heatmap_matrices("encoder"),
        decoder=heatmap_matrices("decoder"),
        module=module("figures", "wqk_heatmaps"),
    output:
        pdf="figures/wqk_heatmaps.pdf",
        png=report(
            "figures/wqk_heatmaps.png",
            caption="../report/wqk_heatmaps.rst",
            category="Pretrained models",
        ),
    log:
        "logs/figures/wqk_heatmaps.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "wqk_heatmaps", encoder=None, decoder=None),
    shell:
        "wqk figure wqk_heatmaps --in encoder={input.encoder} decoder={input.decoder}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_scores_vs_params:
    input:
        models="results/aggregate/models.parquet",
        module=module("figures", "scores_vs_params"),
    output:
        pdf="figures/scores_vs_params_{group}.pdf",
        png=report(
            "figures/scores_vs_params_{group}.png",
            caption="../report/scores_vs_params.rst",
            category="Pretrained models",
            labels={"figure": "scores vs parameters", "models": "{group}"},
        ),
    log:
        "logs/figures/scores_vs_params_{group}.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=lambda wc: params_of(
            "figures",
            "scores_vs_params",
            groups=None,
            modality=GROUP_MODALITY[wc.group],
            figure=wc.group,
        ),
    shell:
        "wqk figure scores_vs_params --in models={input.models}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_encdec_stacks:
    input:
        models="results/aggregate/models.parquet",
        module=module("figures", "encdec_stacks"),
    output:
        pdf="figures/encdec_stacks.pdf",
        png=report(
            "figures/encdec_stacks.png",
            caption="../report/encdec_stacks.rst",
            category="Pretrained models",
        ),
    log:
        "logs/figures/encdec_stacks.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "encdec_stacks"),
    shell:
        "wqk figure encdec_stacks --in models={input.models}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_head_distributions:
    input:
        heads="results/aggregate/heads.parquet",
        module=module("figures", "head_distributions"),
    output:
        pdf="figures/head_distributions.pdf",
        png=report(
            "figures/head_distributions.png",
            caption="../report/head_distributions.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/figures/head_distributions.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "head_distributions"),
    shell:
        "wqk figure head_distributions --in heads={input.heads}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_depth_profile:
    input:
        layers="results/aggregate/layers.parquet",
        module=module("figures", "depth_profile"),
    output:
        pdf="figures/depth_profile.pdf",
        png=report(
            "figures/depth_profile.png",
            caption="../report/depth_profile.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/figures/depth_profile.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "depth_profile"),
    shell:
        "wqk figure depth_profile --in layers={input.layers}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_spectral_signatures:
    input:
        models="results/aggregate/models.parquet",
        module=module("figures", "spectral_signatures"),
    output:
        pdf="figures/spectral_signatures.pdf",
        png=report(
            "figures/spectral_signatures.png",
            caption="../report/spectral_signatures.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/figures/spectral_signatures.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "spectral_signatures"),
    shell:
        "wqk figure spectral_signatures --in models={input.models}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_rotary_symmetry:
    input:
        models="results/aggregate/models.parquet",
        module=module("figures", "rotary_symmetry"),
    output:
        pdf="figures/rotary_symmetry.pdf",
        png=report(
            "figures/rotary_symmetry.png",
            caption="../report/rotary_symmetry.rst",
            category="Beyond the paper",
        ),
    log:
        "logs/figures/rotary_symmetry.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "rotary_symmetry"),
    shell:
        "wqk figure rotary_symmetry --in models={input.models}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


# With validation active, the training-score figures overlay the paper's published curves.
PAPER_CURVES = (
    {"published": config["validation"]["training_curves"]}
    if config["activate"]["validation"]
    else {}
)


rule figure_training_scores:
    input:
        **PAPER_CURVES,
        summary="results/training/summary.csv",
        module=module("figures", "training_scores"),
    output:
        pdf="figures/training_scores_{dataset}.pdf",
        png=report(
            "figures/training_scores_{dataset}.png",
            caption="../report/training_scores.rst",
            category="Training",
            labels={"figure": "scores during training", "dataset": "{dataset}"},
        ),
    log:
        "logs/figures/training_scores_{dataset}.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=lambda wc: params_of("figures", "training_scores", dataset=wc.dataset),
        published=lambda wc, input: (
            f"published={input.published}" if PAPER_CURVES else ""
        ),
    shell:
        "wqk figure training_scores --in summary={input.summary} {params.published}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_training_layers:
    input:
        layers="results/training/layers.csv",
        module=module("figures", "training_layers"),
    output:
        pdf="figures/training_layers_{dataset}.pdf",
        png=report(
            "figures/training_layers_{dataset}.png",
            caption="../report/training_layers.rst",
            category="Training",
            labels={
                "figure": "scores per layer during training",
                "dataset": "{dataset}",
            },
        ),
    log:
        "logs/figures/training_layers_{dataset}.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=lambda wc: params_of("figures", "training_layers", dataset=wc.dataset),
    shell:
        "wqk figure training_layers --in layers={input.layers}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"


rule figure_training_loss:
    input:
        losses="results/training/losses.csv",
        module=module("figures", "training_loss"),
    output:
        pdf="figures/training_loss.pdf",
        png=report(
            "figures/training_loss.png",
            caption="../report/training_loss.rst",
            category="Training",
        ),
    log:
        "logs/figures/training_loss.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        opts=params_of("figures", "training_loss"),
    shell:
        "wqk figure training_loss --in losses={input.losses}"
        " {params.opts} --out {output.pdf} > {log} 2>&1"
