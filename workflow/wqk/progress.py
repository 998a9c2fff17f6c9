"""Progress bars: the one place that decides whether wqk draws one.

Every bar of the package comes from `bar`, a tqdm (tqdm.auto: a widget in Jupyter) whose
`disable` follows, in this order:

    the caller asks for none (enabled=False)           no bar
    `wqk -q ...` (set_quiet(True))                     no bar
    HF_HUB_DISABLE_PROGRESS_BARS is true               no bar (1, ON, YES, TRUE in any case,
                                                       as huggingface_hub reads it)
    otherwise                                          a bar only if its stream is a terminal

The last rule is tqdm's own (disable=None): the logs of Snakemake rules, which redirect
stderr to a file, get no carriage-return frames. This module imports nothing heavy; tqdm
is imported when a bar is made.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

ENV = "HF_HUB_DISABLE_PROGRESS_BARS"
TRUE_VALUES = frozenset({"1", "ON", "YES", "TRUE"})  # huggingface_hub.constants.ENV_VARS_TRUE_VALUES

_quiet = False


def set_quiet(quiet: bool) -> None:
    """No bars in this process from now on (True), or bars by the rules above (False).
    `wqk -q` sets it (wqk.cli.main, on every call, from its -q flag)."""
    global _quiet
    _quiet = bool(quiet)


def env_disables(environ: Mapping[str, str] | None = None) -> bool:
    """Whether HF_HUB_DISABLE_PROGRESS_BARS (read now, from environ or os.environ) is true."""
    value = (os.environ if environ is None else environ).get(ENV)
    return value is not None and value.upper() in TRUE_VALUES


def disable(
    enabled: bool = True, *, quiet: bool | None = None, environ: Mapping[str, str] | None = None
) -> bool | None:
    """tqdm's `disable` argument: True (no bar) when the caller, `wqk -q` (quiet; None: the
    process-wide setting) or HF_HUB_DISABLE_PROGRESS_BARS says so, else None (a bar only on
    a terminal)."""
    if not enabled or (_quiet if quiet is None else quiet) or env_disables(environ):
        return True
    return None


def bar(iterable: Iterable[Any] | None = None, *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm over iterable (or, without one, to update by hand: total=..., bar.update(n)),
    drawn or not by the rules of this module; kwargs go to tqdm (desc, unit, total, ...),
    except disable, which is decided here."""
    from tqdm.auto import tqdm

    if "disable" in kwargs:
        raise TypeError("bar() decides `disable` itself; pass enabled=False for no bar")
    return tqdm(iterable, disable=disable(enabled), **kwargs)


@contextmanager
def hub_bars() -> Iterator[None]:
    """huggingface_hub's and transformers' own bars (e.g. save_pretrained's "Writing model
    shards") follow the same rules for the time of the block: off unless wqk would draw on
    stderr."""
    from huggingface_hub import utils as hub
    from transformers.utils import logging as tf

    off = bool(disable()) or not sys.stderr.isatty()
    was_on = (not hub.are_progress_bars_disabled(), tf.is_progress_bar_enabled())
    if off:
        hub.disable_progress_bars()
        tf.disable_progress_bar()
    try:
        yield
    finally:
        if off and was_on[0]:
            hub.enable_progress_bars()
        if off and was_on[1]:
            tf.enable_progress_bar()
