"""Training corpora: the accepted names (package, configs, parse-time check), the hub
loaders on local stand-ins with the real datasets' layout and column names, and the token
files: streamed, chunked, memory-mapped, the same ids as the text route, bounded memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from rehearse import copy_workflow
from wqk.errors import SourceUnavailable, WqkError
from wqk.training import corpus, tokenizer
from wqk.training.train import TrainConfig, batch_of, chunk, load_tokens, train

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONFIGS = ["config/config.yaml", "config/quickstart.yaml", "tests/config/test.yaml"]

# Documents with what real text has: \r\n and \r line ends, blank lines of spaces, runs of
# blank lines, a leading blank line, non-ASCII text.
DOCS = [
    "First document.\r\nSecond line of it.\r\n\r\nA paragraph after a CRLF blank line.\n",
    "\n  \nAfter blank lines of spaces.\n\n\n\nAfter three blank lines.\rAn old-Mac line end.\n",
    "Ünïcödé façade — naïve café.\n",
    "   \n",  # an empty document: skipped
    "def f(x):\n    return x ** 2\n\nprint(f(3))\n",
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    text = tmp_path_factory.mktemp("pydoc") / "pydoc.txt"
    corpus.write_corpus(corpus.pydoc(), text, max_chars=60_000)
    return tokenizer.build(tmp_path_factory.mktemp("tok") / "tok", text, vocab_size=500)


@pytest.fixture(scope="module")
def tok(tok_dir):
    return tokenizer.load(tok_dir)


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
def test_config_datasets_are_corpus_names(config):
    datasets = yaml.safe_load((ROOT / config).read_text())["training"]["datasets"]
    assert set(datasets) <= set(corpus.NAMES), (config, datasets, corpus.NAMES)


def test_every_name_has_a_source_and_the_commands_accept_them():
    from wqk.commands import corpus as corpus_cmd
    from wqk.commands import tokenizer as tokenizer_cmd

    for name in corpus.NAMES:
        assert callable(getattr(corpus, name)), name
    for module in (corpus_cmd, tokenizer_cmd):
        import argparse

        p = argparse.ArgumentParser()
        module.add_arguments(p)
        flag = "--name" if module is corpus_cmd else "--dataset"
        choices = next(a.choices for a in p._actions if flag in a.option_strings)
        assert tuple(choices) == corpus.NAMES
    with pytest.raises(WqkError, match="red_pajama"):
        corpus.documents("redpajama")


@pytest.mark.slow
def test_unknown_dataset_stops_snakemake_naming_the_key_and_the_names(tmp_path):
    wf = copy_workflow(tmp_path)
    text = (wf / "tests" / "config" / "test.yaml").read_text()
    assert "datasets: [pydoc]" in text
    (wf / "tests" / "config" / "bad.yaml").write_text(text.replace("datasets: [pydoc]", "datasets: [pydoc, redpajama]"))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", HF_HUB_OFFLINE="1")
    r = subprocess.run([str(BIN / "snakemake"), "-n", "--configfile", "tests/config/bad.yaml"],
                       cwd=wf, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "training.datasets" in out and "'redpajama'" in out
    assert ", ".join(corpus.NAMES) in out
    assert "rule " not in out  # no job was planned, let alone run


# --- sources: the hub loaders on local stand-ins ------------------------------------------


def test_wikipedia_streams_the_parquet_repository(monkeypatch, tmp_path):
    """The loader asks `datasets` for wikimedia/wikipedia 20231101.en, streamed, and reads
    its `text` column; here the hub call is served by a local Parquet file of that layout."""
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"id": ["12", "25"], "url": ["u1", "u2"], "title": ["Anarchism", "Autism"],
                             "text": [DOCS[0], "Autism is a condition.\n\nIt has a history.\n"]}), parquet)  # fmt: skip
    real, calls = datasets.load_dataset, []

    def load_dataset(path, name=None, **kwargs):
        calls.append((path, name, kwargs))
        assert kwargs.get("streaming") is True and "trust_remote_code" not in kwargs
        assert (path, name) == ("wikimedia/wikipedia", "20231101.en")
        return real("parquet", data_files=str(parquet), split=kwargs["split"], streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    docs = list(corpus.documents("wikipedia"))
    assert docs == [DOCS[0].strip() + "\n", "Autism is a condition.\n\nIt has a history.\n"]
    assert len(calls) == 1 and calls[0][2]["split"] == "train"


def _red_pajama_copy(root: Path) -> list[str]:
    """RedPajama-V2's layout (dataset card): a listing of shard keys, one JSON Lines .json.gz
    document file per key, documents in `raw_content` among other columns."""
    keys = ["2023-14/0000/en_head", "2023-14/0000/en_middle", "2023-14/0001/en_head"]
    (root / "listings").mkdir(parents=True)
    (root / "listings" / "en-2023-14-head_middle.txt").write_text("\n".join(keys) + "\n")
    texts = []
    for i, key in enumerate(keys):
        path = root / "documents" / f"{key}.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{"url": f"https://example.org/{i}/{j}", "date_download": "2023-03-20T00:00:00Z",
                 "source_domain": "example.org", "title": f"page {i}.{j}", "nlines": 2,
                 "raw_content": f"Shard {i} page {j}.\nSecond line.\n"} for j in range(3)]  # fmt: skip
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        texts += [r["raw_content"] for r in rows]
    return texts


def test_red_pajama_reads_the_listing_and_its_json_documents(tmp_path):
    """The same loader as for the published files (`datasets`' generic text and JSON
    builders, streamed), on a local copy with the published layout."""
    pytest.importorskip("datasets")
    texts = _red_pajama_copy(tmp_path / "rpv2")
    docs = list(corpus.documents("red_pajama", red_pajama_url=str(tmp_path / "rpv2")))
    assert docs == texts  # listing order, then row order


def test_red_pajama_never_asks_for_a_loading_script(monkeypatch):
    """The listing is read as a plain file (fsspec), the documents with the generic json loader:
    no loading script, no trust_remote_code, and an unreachable site names --red-pajama-url."""
    import io

    import fsspec

    datasets = pytest.importorskip("datasets")
    opened, calls = [], []

    def load_dataset(path, *args, **kwargs):
        calls.append((path, kwargs))
        raise ConnectionError("offline")

    def offline_open(url, *args, **kwargs):
        opened.append(url)
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(fsspec, "open", offline_open)
    with pytest.raises(SourceUnavailable, match="--red-pajama-url"):
        next(corpus.documents("red_pajama"))
    assert opened == [f"{corpus.RED_PAJAMA_URL}/listings/en-2023-14-head_middle.txt"] and calls == []

    monkeypatch.setattr(fsspec, "open", lambda url, *a, **k: io.StringIO("2023-14/0000/en_head\n\n"))
    with pytest.raises(SourceUnavailable, match="--red-pajama-url"):
        next(corpus.documents("red_pajama"))
    ((path, kwargs),) = calls
    assert path == "json" and kwargs["streaming"] is True and "trust_remote_code" not in kwargs
    assert kwargs["data_files"] == f"{corpus.RED_PAJAMA_URL}/documents/2023-14/0000/en_head.json.gz"


# --- paragraphs and token files -----------------------------------------------------------


def test_documents_give_the_paragraphs_of_their_text_file(tmp_path):
    for max_chars in (None, 60, 1000):
        text = tmp_path / f"docs-{max_chars}.txt"
        corpus.write_corpus(DOCS, text, max_chars)
        assert list(corpus.paragraphs(DOCS, max_chars)) == list(corpus.file_paragraphs(text))
    assert list(corpus.paragraphs(DOCS))[:3] == [
        "First document.\nSecond line of it.\n",
        "A paragraph after a CRLF blank line.\n",
        "After blank lines of spaces.\n",
    ]


def test_token_file_is_the_text_routes_ids_written_in_chunks(tok, tmp_path):
    docs = list(corpus.pydoc())[:200]
    text = tmp_path / "pydoc.txt"
    corpus.write_corpus(docs, text)
    # what training tokenised before: every paragraph, each followed by [SEP], in one list
    sep, expected = tok.token_to_id("[SEP]"), []
    for enc in tok.encode_batch(list(corpus.file_paragraphs(text)), add_special_tokens=False):
        expected += [*enc.ids, sep]
    for batch_chars in (1, 777, 1 << 20):
        out = tmp_path / f"tokens-{batch_chars}.npy"
        n = corpus.write_tokens(corpus.paragraphs(docs), tok, out, batch_chars=batch_chars)
        ids = corpus.read_tokens(out)
        assert n == len(expected) and isinstance(ids, np.memmap) and ids.dtype == np.uint16
        assert ids.tolist() == expected
        assert np.load(out).tolist() == expected  # an ordinary .npy file
    assert load_tokens(text, tok).tolist() == expected  # a text corpus, tokenised for training
    out = tmp_path / "cut.npy"
    assert corpus.write_tokens(corpus.paragraphs(docs), tok, out, max_tokens=1000, batch_chars=500) == 1000
    assert corpus.read_tokens(out).tolist() == expected[:1000]


class _WideTokenizer:
    """A vocabulary over 65536 ids: uint32 token files."""

    class _Enc:
        def __init__(self, ids):
            self.ids = ids

    def token_to_id(self, token):
        return 70_000 if token == "[SEP]" else None

    def get_vocab_size(self):
        return 70_001

    def encode_batch(self, texts, add_special_tokens=False):
        return [self._Enc([len(t), 69_999]) for t in texts]


def test_wide_vocabularies_get_uint32_and_empty_corpora_no_file(tmp_path):
    out = tmp_path / "wide.npy"
    assert corpus.write_tokens(["ab\n", "cde\n"], _WideTokenizer(), out) == 6
    ids = corpus.read_tokens(out)
    assert ids.dtype == np.uint32 and ids.tolist() == [3, 69_999, 70_000, 4, 69_999, 70_000]
    with pytest.raises(WqkError, match="no text"):
        corpus.write_tokens([], _WideTokenizer(), tmp_path / "empty.npy")
    assert not list(tmp_path.glob("*empty*")) and not list(tmp_path.glob(".*"))


def test_corpus_and_tokenizer_commands_stream_a_dataset(tok_dir, tmp_path):
    from wqk.cli import main

    out = tmp_path / "pydoc.npy"
    assert (
        main(["corpus", "--name", "pydoc", "--tokenizer", str(tok_dir), "--max-tokens", "5000", "--out", str(out)]) == 0
    )
    tok = tokenizer.load(tok_dir)
    expected = tmp_path / "expected.npy"
    corpus.write_tokens(corpus.paragraphs(corpus.pydoc()), tok, expected, max_tokens=5000)
    assert out.read_bytes() == expected.read_bytes()
    # a tokenizer trained on the streamed documents = one trained on their text file
    text = tmp_path / "pydoc.txt"
    corpus.write_corpus(corpus.pydoc(), text, max_chars=60_000)
    a, b = tmp_path / "from-dataset", tmp_path / "from-text"
    argv = ["tokenizer", "--vocab-size", "500", "--out"]
    assert main([*argv, str(a), "--dataset", "pydoc", "--max-chars", "60000"]) == 0
    assert main([*argv, str(b), "--corpus", str(text)]) == 0
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()


# --- training reads the memory map ----------------------------------------------------------


def test_batches_are_rows_of_the_memory_map(tok, tmp_path):
    import torch

    out = tmp_path / "t.npy"
    corpus.write_tokens(corpus.paragraphs(corpus.pydoc()), tok, out, max_tokens=10_000)
    data = chunk(load_tokens(out, tok), 16)
    assert isinstance(data, np.memmap) and data.shape == (625, 16)
    rows = torch.tensor([3, 0, 624, 3])
    batch = batch_of(data, rows)
    assert batch.dtype == torch.int64 and batch.shape == (4, 16)
    assert torch.equal(batch[0], torch.from_numpy(np.load(out)[48:64].astype(np.int64)))
    assert torch.equal(batch[0], batch[3])
    with pytest.raises(WqkError, match="fewer than one sequence"):
        chunk(load_tokens(out, tok)[:10], 16)


def test_training_on_the_token_file_equals_training_on_the_text(tok_dir, tmp_path):
    """Same seeds -> same batches: a run on the .npy token file and a run on the text it
    was made from write the same weights and losses."""
    text, ids = tmp_path / "pydoc.txt", tmp_path / "pydoc.npy"
    corpus.write_corpus(corpus.pydoc(), text, max_chars=60_000)
    corpus.write_tokens(corpus.file_paragraphs(text), tokenizer.load(tok_dir), ids)
    settings = dict(layers=2, hidden=32, heads=2, intermediate=64, seq_len=16, batch_size=4, lr=1e-3, warmup=2,
                    steps=4, save_every=4, log_every=2, device="cpu", threads=1)  # fmt: skip
    outputs = []
    for source in (text, ids):
        run = tmp_path / f"run-{source.suffix[1:]}"
        train(TrainConfig(corpus=str(source), tokenizer=str(tok_dir), out=str(run), dataset="pydoc", **settings))
        outputs.append([(run / "loss.csv").read_bytes(),
                        *(p.read_bytes() for p in sorted(run.glob("checkpoints/*/model.safetensors")))])  # fmt: skip
    assert len(outputs[0]) >= 2 and outputs[0] == outputs[1]


# --- memory -----------------------------------------------------------------------------

PEAK_RSS = textwrap.dedent(
    """
    import re, resource, sys
    import torch
    from wqk.training import tokenizer
    from wqk.training.train import batch_of, chunk, load_tokens

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def mapped():  # resident bytes of the token file's mapping (/proc/self/smaps)
        maps = open("/proc/self/smaps").read().split("\\n")
        total, inside = 0, False
        for line in maps:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                inside = "tokens.npy" in line
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
        return total

    tok = tokenizer.load(sys.argv[1])
    tok.encode_batch(["warm up the tokenizer"] * 64)
    before = peak()
    data = chunk(load_tokens(sys.argv[2], tok), 64)
    loaded = peak()
    g = torch.Generator().manual_seed(0)
    for _ in range(3000):  # ~96,000 random rows: every page of the file
        batch_of(data, torch.randint(data.shape[0], (32,), generator=g))
    print(data.size, data.nbytes, loaded - before, mapped())
    """
)


@pytest.mark.slow
def test_a_text_corpus_and_its_batches_hold_no_corpus_in_memory(tok_dir, tmp_path):
    """24 MB of text: ~9 M ids, which as a Python list (36 bytes an id) and a list of
    encodings took about 1.2 GB; streamed in chunks into a memory map, the peak grows by
    tens of MB. Random batches read every page of the file, and let go of them: they do
    not pile up in the process's RSS."""
    paragraphs = list(corpus.paragraphs(corpus.pydoc()))
    text = tmp_path / "big.txt"
    with open(text, "w", encoding="utf-8") as f:
        size, i = 0, 0
        while size < 24_000_000:
            p = paragraphs[(i * 7919) % len(paragraphs)] + "\n"
            f.write(p)
            size, i = size + len(p), i + 1
    r = subprocess.run([sys.executable, "-c", PEAK_RSS, str(tok_dir), str(text)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    n, nbytes, tokenising, resident = map(int, r.stdout.split())
    assert n > 5_000_000 and nbytes > 10e6
    assert tokenising < 150e6, f"tokenising grew the peak RSS by {tokenising / 1e6:.0f} MB"
    assert resident < nbytes / 20, f"{resident / 1e6:.1f} MB of the {nbytes / 1e6:.0f} MB token file stay resident"
