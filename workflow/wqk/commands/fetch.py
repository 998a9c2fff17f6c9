"""`wqk fetch SOURCE [--out DIR] [--force]`: put what extraction needs from a hub model in the cache
(config.json + the tensors its record reads, or whole weight files with --all-weights) and copy it to DIR.
--force fetches it again, replacing the cached folder (a damaged one is fetched again anyway)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import SourceUnavailable


def add_arguments(p) -> None:
    p.add_argument("source", help="hub id org/name[@revision], or org/name[@revision]:FILE.gguf for one GGUF file")
    p.add_argument("--out", help="copy the fetched folder here (default: print the cache folder only)")
    p.add_argument("--revision", help="branch, tag or commit sha (default: main)")
    p.add_argument(
        "--all-weights", action="store_true", help="download whole weight files instead of the q/k byte ranges"
    )
    p.add_argument("--cache-dir", help="our cache root (default: $WQK_CACHE or ~/.cache/wqk)")
    p.add_argument(
        "--force", action="store_true", help="fetch again from the hub, replacing the cached folder atomically"
    )
    p.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    from ..adapters.tensors import tensor_filter
    from ..atomic import check_writable
    from ..checkpoints import parse_source
    from ..checkpoints.hub import fetch_hub

    out = None if args.out is None else check_writable(args.out, folder=True)
    src = parse_source(args.source)
    if src.kind != "hub":
        raise SourceUnavailable(
            f"nothing to fetch for the {src.kind} source {args.source}: use it directly as the source of `wqk extract`"
        )
    repo_id, at = src.repo, src.revision
    if at and args.revision and at != args.revision:
        raise SourceUnavailable(
            f"{args.source}: revision given twice ({at!r} and --revision {args.revision!r}): keep one"
        )
    folder = fetch_hub(
        repo_id,
        at or args.revision,
        args.cache_dir,
        qk_only=not args.all_weights,
        progress=not args.no_progress,
        force=args.force,
        tensors=tensor_filter,  # the tensors the model_type's record reads (else the name heuristic)
        file=src.file,
    )
    if out is None:
        print(folder)
        return 0
    copy_folder(folder, out)
    print(out)
    return 0


def copy_folder(src: Path, dst: Path) -> None:
    """Hard-link (else copy) src's files into dst, atomically: a temp folder renamed."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        for f in sorted(Path(src).iterdir()):
            if f.is_file():
                real = f.resolve()
                try:
                    os.link(real, tmp / f.name)
                except OSError:
                    shutil.copyfile(real, tmp / f.name)
        old = None
        if dst.exists():  # rename aside: a directory cannot be os.replace()d onto a full one
            old = Path(tempfile.mkdtemp(prefix=f".{dst.name}.old.", dir=dst.parent))
            os.replace(dst, old / "x")
        os.replace(tmp, dst)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
