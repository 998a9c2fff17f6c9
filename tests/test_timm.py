"""timm checkpoints: their records derived from timm's own forward (wqk.derive.timm).

timm imports torchvision, which loads only beside the torch it was built for, so timm lives in an
env of its own (`bash install.sh timm`: ./.venv-timm, which CI installs). In the main env the
timm tests run in that env (test_the_timm_tests_pass_in_the_timm_env); where timm imports, they
run here. The checkpoint is written by timm's own hub export (save_for_hf: config.json naming the
architecture, model.safetensors of its state_dict), as the hub's timm/ repos hold them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wqk.checkpoints.checkpoint import model_type_of

ROOT = Path(__file__).resolve().parents[1]
TIMM_PYTHON = ROOT / ".venv-timm" / "bin" / "python"
HERE = importlib.util.find_spec("timm") is not None
needs_timm = pytest.mark.skipif(not HERE, reason="timm is not installed here: these run in .venv-timm")


def test_a_timm_config_names_its_architecture_as_its_model_type():
    assert model_type_of({"architecture": "vit_base_patch16_224.augreg2_in21k_ft_in1k"}) == "timm:vit_base_patch16_224"
    assert model_type_of({"architecture": "deit_tiny_patch16_224", "model_type": "vit"}) == "vit"  # transformers'
    assert model_type_of({}) == ""


def test_without_timm_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    from wqk.adapters import get_record
    from wqk.errors import UnsupportedModelType

    monkeypatch.setitem(sys.modules, "timm", None)  # import timm raises ImportError
    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    with pytest.raises(UnsupportedModelType, match=r"pip install 'wqk\[timm\]'") as e:
        get_record("timm:vit_base_patch16_224", "timm/vit_base_patch16_224.augreg_in1k")
    assert "timm/vit_base_patch16_224.augreg_in1k" in str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(HERE, reason="timm imports here: its tests run in this process")
def test_the_timm_tests_pass_in_the_timm_env():
    if not TIMM_PYTHON.exists():
        pytest.skip("no .venv-timm: bash install.sh timm (CI installs it)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [str(TIMM_PYTHON), "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", __file__],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and " skipped" in run.stdout  # the timm tests ran, the wrapper skipped


# --- with timm --------------------------------------------------------------------------------

ARCHITECTURES = [  # (architecture, what the record must say beyond the fused [q | k | v] rows)
    ("vit_base_patch16_224", {"heads_default": 12, "bias": "derived"}),
    ("deit_tiny_distilled_patch16_224", {"heads_default": 3}),
    ("vit_small_patch14_reg4_dinov2", {"heads_default": 6}),
    ("vit_base_patch16_siglip_224", {"heads_default": 12}),
    ("beit_base_patch16_224", {"heads_default": 12, "bias": None, "q_bias": "blocks.{i}.attn.q_bias"}),
    ("eva_giant_patch14_224", {"heads_default": 16, "bias": None, "q_bias": "blocks.{i}.attn.q_bias"}),
    # a 2-d rotary of timm's own (its bands zeroed while tracing): left out of the record, as V-JEPA 2's
    ("eva02_tiny_patch14_224", {"heads_default": 3, "bias": None, "q_bias": "blocks.{i}.attn.q_bias"}),
    ("vit_pe_core_tiny_patch16_384", {"heads_default": 3}),
]


@needs_timm
@pytest.mark.parametrize("arch,fields", ARCHITECTURES, ids=[a for a, _ in ARCHITECTURES])
def test_vit_deit_beit_eva_derive_from_timms_forward(arch, fields):
    from wqk.derive import derive

    d = derive("timm:" + arch)
    assert d.ok, f"{arch}: {d.category}: {d.reason}"  # the logits test passed inside derive
    (a,) = d.record.attention
    assert (a.stack, a.weight, a.fused, a.norm) == (
        "encoder",
        "blocks.{i}.attn.qkv.weight",
        "blocks",
        "blocks.{i}.norm1.weight",
    )
    for name, value in fields.items():
        assert getattr(a, name) == value, name
    assert d.record.objectives == {"encoder": "bidirectional"} and d.record.rope is None
    assert d.facts["modality"] == "vision"


# transformers' types that build a timm model (TimmWrapper), derived where timm imports: the
# Perception Encoder's ViT shrunk through timm's own arguments (shrink._tiny_timm: two blocks, its
# head count, heads 8 wide), its rotary left out; where the timm model has no attention, that
TIMM_TYPES = {
    "pe_video_encoder": ("derived", 16),
    "perception_lm": ("derived", 16),
    "timm_wrapper": ("no attention", None),  # its default architecture: ResNet-50
    "edgetam_vision_model": ("no attention", None),  # its default backbone: ResNet-50
}


@needs_timm
@pytest.mark.parametrize("model_type", sorted(TIMM_TYPES))
def test_transformers_types_that_build_a_timm_model_derive_where_timm_imports(model_type):
    from wqk.derive import derive

    want, heads = TIMM_TYPES[model_type]
    d = derive(model_type)
    if want != "derived":
        assert not d.ok and d.category == want, (d.category, d.reason)
        return
    assert d.ok, f"{d.category}: {d.reason}"
    (timm_part,) = [a for a in d.record.attention if ".timm_model." in a.weight]
    assert (timm_part.fused, timm_part.heads, timm_part.heads_default) == ("blocks", (), heads)
    assert d.facts["modality"] == "vision"


@needs_timm
@pytest.mark.parametrize(
    "arch,category",
    [("convnext_tiny", "no attention"), ("cait_xxs24_224", "not bilinear"), ("swin_tiny_patch4_window7_224", "layout")],
)
def test_timm_architectures_without_a_record_are_refused_by_category(arch, category):
    from wqk.derive import derive

    d = derive("timm:" + arch)
    assert not d.ok and d.category == category, (d.category, d.reason)


@pytest.fixture(scope="module")
def exported_vit(tmp_path_factory):
    """vit_tiny_patch16_224 at its full size (12 blocks, 3 heads of 64), timm's own random
    initialisation with noise on its biases and gains (which timm starts at 0 and 1), exported as
    timm pushes a model to the hub."""
    import timm
    import torch
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("timm-vit")
    save_for_hf(model, str(folder), safe_serialization=True)
    return model, folder


@needs_timm
def test_a_timm_vit_checkpoint_scores_and_its_blocks_give_timms_own_attention(exported_vit, tmp_path, monkeypatch):
    """The blocks wqk reads from the exported checkpoint give, for every layer and head, the
    attention probabilities timm's own forward computes (softmax of s (x Q_h + b_q)(x K_h + b_k)^T)."""
    import torch

    from wqk.adapters import get_record
    from wqk.adapters.reader import read_blocks, with_extras
    from wqk.api import score
    from wqk.checkpoints import open_checkpoint

    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    model, folder = exported_vit
    ckpt = open_checkpoint(str(folder))
    assert ckpt.model_type == "timm:vit_tiny_patch16_224"
    record = get_record(ckpt.model_type, ckpt.model_id, ckpt.config)
    blocks = list(with_extras(ckpt, read_blocks(ckpt, record), record))  # with biases and gains
    assert [(b.stack, b.layer, b.n_heads) for b in blocks] == [("encoder", i, 3) for i in range(12)]

    inputs, probabilities = {}, {}
    hooks = []
    for i, blk in enumerate(model.blocks):
        blk.attn.fused_attn = False  # timm's explicit softmax, whose output attn_drop receives
        hooks.append(blk.attn.register_forward_pre_hook(lambda m, a, i=i: inputs.__setitem__(i, a[0].detach())))
        hooks.append(
            blk.attn.attn_drop.register_forward_pre_hook(lambda m, a, i=i: probabilities.__setitem__(i, a[0].detach()))
        )
    with torch.no_grad():
        model(torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1)))
    for h in hooks:
        h.remove()
    for b in blocks:
        x = inputs[b.layer].double()
        q = torch.einsum("btd,hdc->bhtc", x, b.q.double()) + b.q_bias.double()[None, :, None, :]
        k = torch.einsum("btd,hdc->bhtc", x, b.k.double()) + b.k_bias.double()[None, :, None, :]
        mine = torch.softmax(q @ k.transpose(-1, -2) * b.q.shape[-1] ** -0.5, dim=-1)
        torch.testing.assert_close(mine, probabilities[b.layer].double(), rtol=0, atol=2e-5)

    table = score(str(folder), device="cpu", progress=False)
    layers = table[table["scope"] == "layer"]
    assert len(layers) == 12 and (layers["stack"] == "encoder").all()
    assert (table[table["scope"] == "head"].groupby("layer").size() == 3).all()
    assert layers["symmetry"].between(-1, 1).all() and layers["symmetry"].notna().all()


@needs_timm
def test_wqk_tiny_builds_the_model_a_timm_record_was_derived_on(tmp_path, monkeypatch):
    from wqk.checkpoints import open_checkpoint
    from wqk.tiny import build_tiny

    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    folder = build_tiny("timm:deit_tiny_patch16_224", tmp_path / "tiny")
    ckpt = open_checkpoint(str(folder))
    assert ckpt.model_type == "timm:deit_tiny_patch16_224"
    assert sorted(n for n in ckpt.store.names() if n.endswith("attn.qkv.weight")) == [
        "blocks.0.attn.qkv.weight",
        "blocks.1.attn.qkv.weight",
    ]


HUB_ID = "timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k"
RECORD_TENSORS = re.compile(r"blocks\.\d+\.(attn\.qkv|attn\.q_bias|norm1)\.(weight|bias)")


@needs_timm
def test_a_timm_repo_on_the_hub_is_range_fetched_and_scores_as_its_folder(exported_vit, tmp_path, monkeypatch):
    """The export served by the stand-in hub at a real timm/ id: only the tensors the derived
    record names come over the wire, and the scores equal the local folder's."""
    import pandas as pd
    from safetensors import safe_open

    from standin_hub import point_at, start
    from wqk.cli import main

    _, folder = exported_vit
    root = tmp_path / "hub"
    shutil.copytree(folder, root / "models" / HUB_ID)
    (root / "manifest.json").write_text(json.dumps({"models": {HUB_ID: {}}}))
    hub = start(root, log_unknown=False)
    try:
        point_at(hub, monkeypatch, tmp_path / "caches", token=None)
        assert main(["score", HUB_ID, "--out", str(tmp_path / "hub.parquet"), "--quiet"]) == 0
        ranges = [e["range"] for e in hub.cdn.seen if e["path"].endswith("/model.safetensors") and e["range"]]
    finally:
        hub.stop()
    assert main(["score", str(folder), "--out", str(tmp_path / "local.parquet"), "--quiet"]) == 0
    got, want = pd.read_parquet(tmp_path / "hub.parquet"), pd.read_parquet(tmp_path / "local.parquet")
    numbers = [c for c in want.columns if c not in ("model", "provenance")]
    pd.testing.assert_frame_equal(got[numbers], want[numbers], check_exact=True)
    assert set(got["model_type"]) == {"timm:vit_tiny_patch16_224"}

    (fetched,) = (tmp_path / "caches" / "wqk").rglob("model.safetensors")
    with safe_open(str(fetched), "pt") as f:
        kept = sorted(f.keys())
    assert all(RECORD_TENSORS.fullmatch(n) for n in kept), kept
    assert {f"blocks.{i}.attn.qkv.weight" for i in range(12)} <= set(kept)
    wire = sum(int(b) + 1 - int(a) for a, b in (r.removeprefix("bytes=").split("-") for r in ranges))
    whole = (folder / "model.safetensors").stat().st_size
    assert 0 < wire < whole / 2, (wire, whole)  # the q/k rows' tensors, not the MLPs


@needs_timm
def test_the_printed_record_module_of_a_timm_architecture_registers_its_record(capsys, tmp_path, monkeypatch):
    from wqk.adapters import BI, Attention, Record, Tiny
    from wqk.cli import main
    from wqk.derive import derive

    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    assert main(["records", "derive", "timm:deit_tiny_patch16_224"]) == 0
    source = capsys.readouterr().out
    assert "from timm " in source.splitlines()[0]  # the library it was derived from, not transformers
    registered = []
    namespace = dict(BI=BI, Attention=Attention, Record=Record, Tiny=Tiny, register=registered.append)
    exec(compile(source.replace("from . import", "# from . import"), "<record>", "exec"), namespace)
    (record,) = registered
    derived = derive("timm:deit_tiny_patch16_224").record
    assert record.attention == derived.attention and record.tiny == derived.tiny and record.tiny.family == "timm"
