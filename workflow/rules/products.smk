# Figures and tables: one rule per entry of wqk.registry, generated here. `wqk figure` writes
# NAME.pdf and NAME.png side by side, `wqk table` NAME.csv, NAME.md and NAME.tex. Each rule's
# code inputs are the package files rendering it may run (wqk.code_graph), so that editing
# shared code reruns exactly the figures and tables that use it.


# Only the entries this run makes have a rule: a figure of revision sweeps, without any,
# would have inputs no rule writes.
for entry in (e for e in PRODUCTS if e.stems(PLAN)):

    rule:
        name:
            entry.rule
        input:
            unpack(product_inputs(entry)),
        output:
            **product_outputs(entry),
        log:
            f"logs/{entry.kind}s/{entry.stem}.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            # the command's words as params: a shell: string is formatted when the job
            # runs, after this loop has moved on to its last entry
            command=f"wqk {entry.kind} {entry.name}",
            inputs=product_in_flags,
            opts=product_param_flags(entry),
            out=lambda wildcards, output: output[0],  # the PDF, or the CSV
        shell:
            "{params.command} --in {params.inputs} {params.opts} --out {params.out} > {log} 2>&1"
