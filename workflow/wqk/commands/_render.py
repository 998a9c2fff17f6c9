"""What `wqk figure` and `wqk table` share: the module by name, `--in key=path` inputs and
`--param key=value` keywords."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import yaml

from ..errors import WqkError


def pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise WqkError(f"{what} {item!r} is not key=value")
        out[key.strip()] = value
    return out


def params(items: list[str]) -> dict:
    """Values typed as YAML scalars: 1 -> int, true -> bool, text stays text."""
    return {k: yaml.safe_load(v) if v != "" else None for k, v in pairs(items, "--param").items()}


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise WqkError(f"input {path} not found: run the step that writes it first")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix in (".tsv", ".tab"):
        return pd.read_csv(path, sep="\t")
    return pd.read_csv(path)


def load_inputs(module, inputs: dict[str, str], kwargs: dict) -> dict[str, pd.DataFrame]:
    """Each input through the module's `load(key, path, **params)` if it has one."""
    loader = getattr(module, "load", None)
    data = {}
    for key, path in sorted(inputs.items()):
        if loader is not None:
            if not Path(path).is_file():
                raise WqkError(f"input {path} not found: run the step that writes it first")
            data[key] = loader(key, path, **kwargs)
        else:
            data[key] = read_table(path)
    return data


def add_arguments(p, kind: str, call: str, out_help: str) -> None:
    p.add_argument("name", help=f"{kind} module in wqk.{kind}s")
    p.add_argument("--in", dest="inputs", nargs="+", default=[], metavar="KEY=PATH", help="inputs by key")
    p.add_argument("--param", dest="params", nargs="*", default=[], metavar="KEY=VALUE", help=f"{call}() keywords")
    p.add_argument("--out", required=True, help=out_help)


def prepare(kind: str, args):
    """(module wqk.<kind>s.<name>, its keywords, its loaded inputs); clear errors for an
    unknown name or a missing input."""
    package = importlib.import_module(f"wqk.{kind}s")
    known = sorted(p.stem for p in Path(package.__file__).parent.glob("*.py") if not p.stem.startswith("_"))
    if args.name not in known:
        raise WqkError(f"no {kind} named {args.name!r}; known {kind}s: {', '.join(known)}")
    module = importlib.import_module(f"wqk.{kind}s.{args.name}")
    kwargs = params(args.params)
    return module, kwargs, load_inputs(module, pairs(args.inputs, "--in"), kwargs)
