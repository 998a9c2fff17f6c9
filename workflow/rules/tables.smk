# One rule and one module per table; `wqk table` writes NAME.csv, NAME.md and NAME.tex.


rule table_scores_language:
    input:
        models="results/aggregate/models.parquet",
        module=module("tables", "scores_language"),
    output:
        table_outputs("scores_language"),
    log:
        "logs/tables/scores_language.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "scores_language"),
    shell:
        "wqk table scores_language --in models={input.models} {params.opts} --out {params.prefix} > {log} 2>&1"


rule table_scores_all:
    input:
        models="results/aggregate/models.parquet",
        module=module("tables", "scores_all"),
    output:
        csv=report(
            "results/tables/scores_all.csv",
            caption="../report/scores_all.rst",
            category="Scores",
        ),
        md="results/tables/scores_all.md",
        tex="results/tables/scores_all.tex",
    log:
        "logs/tables/scores_all.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "scores_all"),
    shell:
        "wqk table scores_all --in models={input.models} {params.opts} --out {params.prefix} > {log} 2>&1"


rule table_robustness:
    input:
        models="results/aggregate/models.parquet",
        module=module("tables", "robustness"),
    output:
        csv=report(
            "results/tables/robustness.csv",
            caption="../report/robustness.rst",
            category="Beyond the paper",
        ),
        md="results/tables/robustness.md",
        tex="results/tables/robustness.tex",
    log:
        "logs/tables/robustness.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "robustness"),
    shell:
        "wqk table robustness --in models={input.models} {params.opts} --out {params.prefix} > {log} 2>&1"


rule table_errata:
    input:
        comparison="results/validation/paper_comparison.csv",
        module=module("tables", "errata"),
    output:
        csv=report(
            "results/tables/errata.csv",
            caption="../report/errata.rst",
            category="Comparison with the paper",
        ),
        md="results/tables/errata.md",
        tex="results/tables/errata.tex",
    log:
        "logs/tables/errata.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "errata"),
    shell:
        "wqk table errata --in comparison={input.comparison} {params.opts} --out {params.prefix} > {log} 2>&1"


rule table_paper_comparison:
    input:
        comparison="results/validation/paper_comparison.csv",
        module=module("tables", "paper_comparison"),
    output:
        csv=report(
            "results/tables/paper_comparison.csv",
            caption="../report/paper_comparison.rst",
            category="Comparison with the paper",
        ),
        md="results/tables/paper_comparison.md",
        tex="results/tables/paper_comparison.tex",
    log:
        "logs/tables/paper_comparison.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "paper_comparison"),
    shell:
        "wqk table paper_comparison --in comparison={input.comparison} {params.opts} --out {params.prefix} > {log} 2>&1"


rule table_symmetric_init:
    input:
        losses="results/training/losses.csv",
        summary="results/training/summary.csv",
        module=module("tables", "symmetric_init"),
    output:
        csv=report(
            "results/tables/symmetric_init.csv",
            caption="../report/symmetric_init.rst",
            category="Training",
        ),
        md="results/tables/symmetric_init.md",
        tex="results/tables/symmetric_init.tex",
    log:
        "logs/tables/symmetric_init.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "symmetric_init"),
    shell:
        "wqk table symmetric_init --in losses={input.losses} summary={input.summary} {params.opts}"
        " --out {params.prefix} > {log} 2>&1"


rule table_training_comparison:
    input:
        summary="results/training/summary.csv",
        published=config["validation"]["training_curves"],
        module=module("tables", "training_comparison"),
    output:
        csv=report(
            "results/tables/training_comparison.csv",
            caption="../report/training_comparison.rst",
            category="Training",
        ),
        md="results/tables/training_comparison.md",
        tex="results/tables/training_comparison.tex",
    log:
        "logs/tables/training_comparison.log",
    localrule: True
    conda:
        "../envs/wqk.yaml"
    params:
        prefix=subpath(output[0], strip_suffix=".csv"),
        opts=params_of("tables", "training_comparison"),
    shell:
        "wqk table training_comparison --in summary={input.summary} published={input.published}"
        " {params.opts} --out {params.prefix} > {log} 2>&1"
