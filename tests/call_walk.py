"""The call path of a command through the package, as a check that it only goes down."""

from __future__ import annotations

import sys


def _module(frame) -> str | None:
    if frame.f_code.co_name == "<module>":  # an import running, not a call
        return None
    name = frame.f_globals.get("__name__", "")
    return name if name == "wqk" or name.startswith("wqk.") else None


def climbs(fn, *args, **kwargs) -> list[str]:
    """Run fn and return every call that climbs back into a wqk module already on the call
    stack below another module (A -> B -> A), as 'A -> B -> A' chains."""
    found: set[str] = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        module = _module(frame)
        if module is None:
            return
        chain: list[str] = []
        f = frame.f_back
        while f is not None:
            m = _module(f)
            if m is not None and (not chain or chain[-1] != m):
                chain.append(m)
            f = f.f_back
        chain.reverse()
        if chain and chain[-1] != module and module in chain:
            found.add(" -> ".join(chain[chain.index(module) :] + [module]))

    sys.setprofile(profile)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return sorted(found)
