"""The explorer: results/explorer/index.html, an interactive page over every head of every
model, that a browser opens from disk with no network.

Model, then stack, then layer, then head: symmetry against directionality per head with the
null reference's spread beside it, depth profiles, spectra and rotary s(d) where present,
filters by objective, modality and family, search by model id, the selection in the URL's
hash. The page carries plotly.js (the copy bundled in the `plotly` wheel) and the index of
models inline. Each model's layers and heads are inline too while they fit in
`inline_limit` bytes; beyond that (thousands of models), each model's are one file,
data/<slug>.js, loaded by a <script> tag when the model is picked (a file:// page may load
scripts beside it, where fetch() is refused).

The bytes depend on the tables alone: sorted keys, numbers rounded once (explorer.data),
no time stamps.
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ..version import __version__

if TYPE_CHECKING:  # pandas only when a page is built: common.smk imports code_files at parse time
    import pandas as pd

INLINE_LIMIT = 2_000_000  # bytes of per-model data kept inside index.html
DATA_DIR = "data"
ASSETS = ("page.html", "style.css", "app.js")


def plotly_js() -> str:
    """plotly.min.js of the installed `plotly` package (its offline bundle)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _json(value) -> str:
    # ensure_ascii: no U+2028 in a script; "</" escaped: a string cannot close the <script>
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).replace("</", "<\\/")


def _asset(name: str) -> str:
    return (files(__package__) / name).read_text(encoding="utf-8")


def page_data(
    models: pd.DataFrame, layers: pd.DataFrame, heads: pd.DataFrame, null_dir: str | Path | None = None
) -> tuple[dict, dict[str, dict]]:
    """(the index, slug -> that model's data) of the tables."""
    from . import data

    null = data.null_from_models(models) | data.read_null(null_dir, models["slug"].unique())
    index = {
        "version": __version__,
        "models": data.index(models),
        "decimals": {
            "default": data.DECIMALS,
            "rotary": data.decimals(data.ROTARY_PREFIX),
            "columns": data.FEWER_DECIMALS,
        },
        "rotary_offsets": data.rotary_offsets(heads.columns.union(layers.columns)),
    }
    return index, data.per_model(layers, heads, null)


def build(
    models: pd.DataFrame,
    layers: pd.DataFrame,
    heads: pd.DataFrame,
    null_dir: str | Path | None = None,
    inline_limit: int = INLINE_LIMIT,
    title: str = "wqk explorer",
) -> dict[str, bytes]:
    """Every file of the explorer: relative path -> bytes (index.html, and data/<slug>.js
    when the per-model data exceed inline_limit)."""
    index, per_model = page_data(models, layers, heads, null_dir)
    texts = {slug: _json(d) for slug, d in per_model.items()}
    split = sum(len(t) for t in texts.values()) > inline_limit
    index["split"] = split
    out: dict[str, bytes] = {}
    if split:
        for slug, text in texts.items():
            out[f"{DATA_DIR}/{slug}.js"] = f"wqkModel({text});\n".encode()
        inline = "{}"
    else:
        inline = "{" + ",".join(f"{json.dumps(slug)}:{texts[slug]}" for slug in sorted(texts)) + "}"
    page = _asset("page.html")
    for marker, text in (
        ("title", html.escape(title)),
        ("style", _asset("style.css")),
        ("plotly", plotly_js()),
        ("index", _json(index)),
        ("models", inline),
        ("app", _asset("app.js")),
    ):
        page = page.replace(f"<!--wqk:{marker}-->", text)
    out["index.html"] = page.encode()
    return dict(sorted(out.items()))


def write(built: dict[str, bytes], out_dir: str | Path) -> list[Path]:
    """The files under out_dir (atomically each), and no stale data/<slug>.js beside them."""
    from ..atomic import atomic_path

    out_dir = Path(out_dir)
    stale = set((out_dir / DATA_DIR).glob("*.js")) - {out_dir / p for p in built}
    for path in sorted(stale):
        path.unlink()
    written = []
    for rel, content in built.items():
        with atomic_path(out_dir / rel) as tmp:
            tmp.write_bytes(content)
        written.append(out_dir / rel)
    return written


def code_files() -> list[str]:
    """The page's own files beside this module (the rule lists them as inputs)."""
    return [f"explorer/{name}" for name in ASSETS]
