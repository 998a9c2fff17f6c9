"""What `wqk figure` and `wqk table` share: the module by name, `--in key=path` inputs,
`--param key=value` keywords (checked against the module's function before any input is
read) and the output files (checked before the work)."""

from __future__ import annotations

import importlib
import inspect
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
    out = {}
    for key, value in pairs(items, "--param").items():
        try:
            out[key] = yaml.safe_load(value) if value != "" else None
        except yaml.YAMLError as e:
            problem = " ".join(str(getattr(e, "problem", None) or e).split())
            raise WqkError(
                f"--param {key}={value}: not a YAML value ({problem}); quote text, e.g. {key}='...'"
            ) from None
    return out


def check_params(kind: str, module, call: str, kwargs: dict, raw: dict[str, str]) -> dict:
    """kwargs as `call` (draw or build, which gets them all) takes them, or a WqkError now
    naming the --param: a keyword it does not take, or a value of another type than the
    keyword's default (an int for a float is fine; for a str default a value that YAML reads
    as another type stays the text as written: `modality=yes` is "yes", not True)."""
    name = module.__name__.rsplit(".", 1)[-1]
    signature = list(inspect.signature(getattr(module, call)).parameters.values())[1:]  # after `data`
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature)
    accepted = {p.name: p for p in signature if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    out = {}
    for key, value in kwargs.items():
        param = accepted.get(key)
        if param is None:
            if takes_any:
                out[key] = value
                continue
            if not accepted:
                raise WqkError(f"--param {key}={raw[key]}: {kind} {name}'s {call}() takes no keywords")
            raise WqkError(
                f"--param {key}={raw[key]}: {kind} {name} has no keyword {key!r}; its keywords: {', '.join(accepted)}"
            )
        default = param.default
        if value is None or default is None or default is param.empty:
            out[key] = value
        elif isinstance(default, str):
            out[key] = value if isinstance(value, str) else raw[key]
        elif isinstance(value, bool) != isinstance(default, bool) or not isinstance(
            value, (int, float) if isinstance(default, float) else type(default)
        ):
            raise WqkError(
                f"--param {key}={raw[key]}: {value!r} is not {type(default).__name__} "
                f"({kind} {name}'s {key} is {default!r} by default)"
            )
        else:
            out[key] = value
    return out


def outputs(package, out: str) -> list[Path]:
    """The files written for --out (the package's output_paths: wqk.figures or wqk.tables),
    each checked now, before the work."""
    from ..atomic import check_writable

    if not str(out).strip():
        check_writable(out)  # raises: --out is empty
    if Path(out).name in ("", ".", ".."):
        raise WqkError(f"--out {out} names a folder; give a file name")
    paths = package.output_paths(out)
    for p in paths:
        check_writable(p)
    return paths


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise WqkError(f"input {path} not found: run the step that writes it first")
    if path.suffix == ".parquet":
        import pyarrow as pa

        try:
            return pd.read_parquet(path)
        except (pa.ArrowException, OSError) as e:
            raise WqkError(
                f"input {path} is not a readable Parquet file ({str(e).splitlines()[0]}): truncated or corrupt? "
                "run the step that writes it again"
            ) from None
    # pandas 3's read_csv leaves a block per column; consolidated, as read_parquet's, a wide
    # table takes new columns without a PerformanceWarning.
    return pd.read_csv(path, sep="\t" if path.suffix in (".tsv", ".tab") else ",").copy()


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


def prepare(kind: str, args, call: str):
    """(module wqk.<kind>s.<name>, its keywords for `call`, its loaded inputs); clear errors,
    before any input is read, for an unknown name, a bad --param or an unwritable --out,
    then for a missing input."""
    package = importlib.import_module(f"wqk.{kind}s")
    known = sorted(p.stem for p in Path(package.__file__).parent.glob("*.py") if not p.stem.startswith("_"))
    outputs(package, args.out)
    if args.name not in known:
        raise WqkError(f"no {kind} named {args.name!r}; known {kind}s: {', '.join(known)}")
    module = importlib.import_module(f"wqk.{kind}s.{args.name}")
    kwargs = check_params(kind, module, call, params(args.params), pairs(args.params, "--param"))
    return module, kwargs, load_inputs(module, pairs(args.inputs, "--in"), kwargs)
