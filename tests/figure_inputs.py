"""Snapshot a finished run's figure inputs, small, for tests/test_figure_layout.py: every
`wqk figure` command the run logged, with its inputs copied into a folder of the tests.

    python tests/figure_inputs.py RUN_DIR tests/figure_runs/quickstart [--log FILE ...]

The commands come from the run's Snakemake logs, or from the given files (the output of
`snakemake -n -p --forcerun RULE ...`, for a run made without -p).

Tables (Parquet or CSV) become gzipped CSVs (the figures draw the same bytes from them), a
table with a list column (the heads' sv2) Parquet;
a matrices file keeps only the layer and the top-left block that wqk_heatmaps shows (the
same block, so the same figure); an input that is a file of this repository (the paper's
training curves) is named by its path here, not copied. The commands go to figures.txt,
one a line, the inputs named relative to the folder, the output as {out}/NAME.pdf.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"^Shell command: wqk (figure .*?) > \S+ 2>&1\s*$")
WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2}


def logged_commands(logs: list[Path]) -> dict[str, list[str]]:
    """The last `wqk figure` argv the logs show for each output."""
    found = {}
    for log in logs:
        for line in log.read_text().splitlines():
            if m := COMMAND.match(line):
                argv = shlex.split(m[1])
                found[Path(argv[argv.index("--out") + 1]).stem] = argv
    return found


def params_of(argv: list[str]) -> dict[str, str]:
    out, on = {}, False
    for a in argv:
        if a.startswith("--"):
            on = a == "--param"
        elif on:
            key, _, value = a.partition("=")
            out[key] = value
    return out


def small_matrices(src: Path, dest: Path, stack: str, layer: int, size: int) -> None:
    """The rows of (stack, layer), or of the stack's last layer as wqk_heatmaps falls back to,
    each head cut to its first `size` dimensions of d: the block the figure draws."""
    table = pq.read_table(src)
    rows = [r for r in table.to_pylist() if r["stack"] == stack]
    layers = {r["layer"] for r in rows}
    chosen = layer if layer in layers else max(layers)
    kept = []
    for r in (r for r in rows if r["layer"] == chosen):
        d = r["d_q"] if r["factor"] == "q" else r["d_k"]
        n, width = min(size, d), WIDTH[r["dtype"]]
        w = np.frombuffer(r["weight"], np.uint8).reshape(r["head_dim"], d * width)[:, : n * width]
        kept.append(r | {"weight": w.tobytes(), "d_q": min(size, r["d_q"]), "d_k": min(size, r["d_k"])})
    pq.write_table(pa.Table.from_pylist(kept, schema=table.schema), dest, compression="zstd")


def has_lists(src: Path) -> bool:
    """Whether a table has a list column (qk_spectra's sv2), which a CSV cannot hold."""
    return src.suffix == ".parquet" and any(pa.types.is_list(t) for t in pq.read_schema(src).types)


def small_table(src: Path, dest: Path) -> None:
    """The table as a gzipped CSV, or (one with a list column) as Parquet."""
    df = pd.read_parquet(src) if src.suffix == ".parquet" else pd.read_csv(src)
    if dest.suffix == ".parquet":
        df.to_parquet(dest, index=False, compression="zstd")
        return
    df.to_csv(dest, index=False, compression={"method": "gzip", "mtime": 0})


def snapshot(run: Path, dest: Path, logs: list[Path] | None = None) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    lines = []
    logs = logs or sorted((run / ".snakemake" / "log").glob("*.log"))
    for name, argv in sorted(logged_commands(logs).items()):
        params = params_of(argv)
        out, args, on = [], iter(argv), False
        for a in args:
            if a == "--out":
                out += [a, f"{{out}}/{name}.pdf"]
                next(args)
                continue
            on = a == "--in" or (on and not a.startswith("--"))
            if not on or a == "--in":
                out.append(a)
                continue
            key, _, path = a.partition("=")
            src = run / path
            if (ROOT / path).is_file() and (ROOT / path).read_bytes() == src.read_bytes():
                out.append(f"{key}=@repo/{path}")
            elif "matrices" in Path(path).parts:
                small = f"{Path(path).stem}.{key}.parquet"  # (one model can be both panels)
                stack = params.get(f"{key}_stack", key)
                small_matrices(src, dest / small, stack, int(params.get("layer", 1)), int(params.get("size", 50)))
                out.append(f"{key}={small}")
            else:
                kind = "parquet" if has_lists(src) else "csv.gz"
                small = f"{Path(path).parent.name}-{Path(path).stem}.{kind}"  # aggregate-, training-layers
                small_table(src, dest / small)
                out.append(f"{key}={small}")
        lines.append(shlex.join(out))
    (dest / "figures.txt").write_text("\n".join(lines) + "\n")
    return lines


def commands(folder: Path, out: Path) -> list[list[str]]:
    """The argv of each figure of a snapshot, reading its inputs and writing under `out`."""
    found = []
    for line in (folder / "figures.txt").read_text().splitlines():
        argv = []
        for a in shlex.split(line):
            key, sep, path = a.partition("=")
            if sep and path.startswith("@repo/"):
                a = f"{key}={ROOT / path.removeprefix('@repo/')}"
            elif sep and (folder / path).is_file():
                a = f"{key}={folder / path}"
            argv.append(a.replace("{out}", str(out)))
        found.append(argv)
    return found


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a finished run's folder (with .snakemake/log)")
    p.add_argument("dest", type=Path, help="the snapshot's folder")
    p.add_argument("--log", type=Path, nargs="+", help="files with the commands (default: the run's logs)")
    a = p.parse_args()
    print("\n".join(snapshot(a.run, a.dest, a.log)))
    sys.exit(0)
