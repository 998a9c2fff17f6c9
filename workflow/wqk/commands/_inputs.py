"""Shared parsing of `--in key=path` and `--param key=value` for `wqk figure` and `wqk table`."""

from __future__ import annotations

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
