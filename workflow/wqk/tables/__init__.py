"""Tables: one module per table with `build(data: dict[str, DataFrame], **params) -> DataFrame`.

`write(df, stem)` writes the same DataFrame as STEM.csv (full precision), STEM.md (pipe
table), STEM.tex (booktabs tabular) and STEM.html (the table a report shows), with small
formatters of our own so that the output does not depend on optional packages (tabulate,
jinja2) or their versions.
"""

from __future__ import annotations

import html
import math
import os
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import write_text

SUFFIXES = (".csv", ".md", ".tex", ".html")
LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}  # fmt: skip


def cell(value) -> str:
    """A value as table text: floats to 4 decimals (3 significant digits when large)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        v = float(value)
        return f"{v:.3g}" if abs(v) >= 1e5 else f"{v:.4f}"
    return str(value)


def quartile_text(median, q25, q75, digits: int = 2) -> str:
    """'0.42 [0.31, 0.50]': median and interquartile range."""
    if any(pd.isna(v) for v in (median, q25, q75)):
        return ""
    return f"{median:.{digits}f} [{q25:.{digits}f}, {q75:.{digits}f}]"


def params_text(n) -> str:
    """Parameter count as 110M, 1.3B, 70B; empty when unknown."""
    if pd.isna(n):
        return ""
    n = float(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            v = n / scale
            return f"{v:.3g}{unit}"
    return f"{int(n)}"


def _numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def to_markdown(df: pd.DataFrame) -> str:
    head = [str(c) for c in df.columns]
    rows = [[cell(v).replace("|", "\\|") for v in r] for r in df.itertuples(index=False)]
    align = ["---:" if _numeric(df[c]) else ":---" for c in df.columns]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(df: pd.DataFrame, caption: str | None = None) -> str:
    spec = "".join("r" if _numeric(df[c]) else "l" for c in df.columns)
    lines = []
    if caption:
        lines.append(f"% {caption}")
    lines += [f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
    lines.append(" & ".join(latex_escape(str(c)) for c in df.columns) + " \\\\")
    lines.append("\\midrule")
    for r in df.itertuples(index=False):
        lines.append(" & ".join(latex_escape(cell(v)) for v in r) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_html(df: pd.DataFrame, caption: str | None = None) -> str:
    """A standalone page holding the table (numbers right-aligned), as the report shows it."""
    right = ' style="text-align:right"'

    def row(cells, tag):
        return "<tr>" + "".join(f"<{tag}{a}>{html.escape(c)}</{tag}>" for a, c in cells) + "</tr>"

    align = [right if _numeric(df[c]) else "" for c in df.columns]
    lines = [
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><style>',
        "table{border-collapse:collapse;font:13px sans-serif}th,td{padding:2px 8px;border-bottom:1px solid #ddd}",
        "</style></head><body><table>",
    ]
    if caption:
        lines.append(f"<caption>{html.escape(caption)}</caption>")
    lines.append(row(zip(align, map(str, df.columns)), "th"))
    lines += [row(zip(align, map(cell, r)), "td") for r in df.itertuples(index=False)]
    lines.append("</table></body></html>")
    return "\n".join(lines) + "\n"


def output_paths(stem: str | os.PathLike) -> list[Path]:
    """[STEM.csv, STEM.md, STEM.tex, STEM.html]: what `write` writes (one of these suffixes of
    stem is dropped, any other kept)."""
    stem = Path(stem)
    if stem.suffix in SUFFIXES:
        stem = stem.with_suffix("")
    return [stem.with_name(stem.name + ext) for ext in SUFFIXES]


def write(df: pd.DataFrame, stem: str | os.PathLike, caption: str | None = None) -> list[Path]:
    """STEM.csv, STEM.md, STEM.tex, STEM.html from one DataFrame (a suffix of those is dropped)."""
    paths = output_paths(stem)
    write_text(paths[0], df.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    md = (f"{caption}\n\n" if caption else "") + to_markdown(df)
    write_text(paths[1], md)
    write_text(paths[2], to_latex(df, caption))
    write_text(paths[3], to_html(df, caption))
    return paths
