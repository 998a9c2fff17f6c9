"""python tests/standin_hub {build,serve,cost} ROOT [--popular] [--port N] [--throttle N]

cost: what listing, fetching and scoring a few popular models costs (cost.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python tests/standin_hub`: import it as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "standin_hub"
    import standin_hub  # noqa: F401

from . import build, build_popular, red_pajama_url, start
from .server import TOKEN


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tests/standin_hub", description=__doc__)
    p.add_argument("command", choices=["build", "serve", "cost"])
    p.add_argument("root", type=Path, help="folder of the stand-in hub's repos and data")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--cdn-port", type=int, default=8766)
    p.add_argument("--throttle", type=int, default=0, help="answer every n-th file request 429 once")
    p.add_argument(
        "--popular", action="store_true", help="the models of config/catalogue/hub_popular.tsv, not the paper's"
    )
    a = p.parse_args(argv)
    if a.command == "cost":
        from .cost import main as cost

        return cost(a.root)
    (build_popular if a.popular else build)(a.root)
    if a.command == "build":
        print(f"built {a.root}")
        return 0
    hub = start(a.root, port=a.port, cdn_port=a.cdn_port, throttle=a.throttle)
    print(f"export HF_ENDPOINT={hub.url} HF_TOKEN={TOKEN}")
    if not a.popular:
        print(f"# training data: jigsaw_dir={a.root / 'kaggle' / 'jigsaw'} red_pajama_url={red_pajama_url(hub)}")
    print("serving; Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
