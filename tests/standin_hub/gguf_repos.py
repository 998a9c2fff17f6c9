"""GGUF files as llama.cpp's convert_hf_to_gguf.py writes them, from tiny HF checkpoints, and GGUF
repos in the hub's real layout (several quants of one model, a README, no config.json), as
GGUF-my-repo and the ggml-org repos publish them.

    to_gguf(hf_folder, out, qtype)                    one file
    write_gguf_repo(folder, model_type, qtypes, seed)  a repo: <name>-<QTYPE>.gguf per quant type
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize
from safetensors.numpy import load_file

from wqk.checkpoints.formats.gguf import permute

# HF model_type -> GGUF architecture, as llama.cpp's converter names them
GGUF_ARCH = {
    "llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3",
    "gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma3",
}  # fmt: skip
_HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.qkv_proj": "attn_qkv",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "input_layernorm": "attn_norm",
    # the rest of a block, as the converter names it (the store reads none of them)
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "post_attention_layernorm": "ffn_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
_GEMMA2_NORMS = {"post_attention_layernorm": "post_attention_norm"}  # gemma2/3 have four norms per block


def to_gguf(hf: Path, out: Path, qtype: GGMLQuantizationType = GGMLQuantizationType.F32, vocab: int = 0) -> Path:
    """The HF folder as llama.cpp's converter writes it: its metadata keys, every tensor of the
    blocks, the embedding and the final norm, q/k rows permuted for arch llama, Gemma's norms
    stored as 1 + w; the attention projections in qtype. vocab: a tokenizer of that many tokens
    in the metadata (real files carry one: a header of megabytes, read before any tensor)."""
    cfg = json.loads((hf / "config.json").read_text())
    arch = GGUF_ARCH[cfg["model_type"]]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    w = GGUFWriter(out, arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(cfg.get("head_dim") or cfg["hidden_size"] // heads)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta") or 10000.0
    if arch in ("gemma2", "gemma3"):
        w.add_sliding_window(cfg["sliding_window"])
    if arch == "gemma3":
        theta = cfg["rope_parameters"]["full_attention"]["rope_theta"]
        w.add_uint32("gemma3.attention.sliding_window_pattern", 3)  # the tiny model's layer_types
    w.add_rope_freq_base(float(theta))
    if vocab:
        w.add_tokenizer_model("llama")
        w.add_token_list([f"<token {i}>" for i in range(vocab)])
        w.add_token_scores([float(-i) for i in range(vocab)])
    names = _HF_TO_GGUF | (_GEMMA2_NORMS if arch in ("gemma2", "gemma3") else {})
    for name, t in sorted(load_file(hf / "model.safetensors").items()):
        if name in ("model.norm.weight", "model.embed_tokens.weight"):
            g_name = "output_norm.weight" if name == "model.norm.weight" else "token_embd.weight"
        elif name.startswith("model.layers."):
            _, _, i, *rest = name.split(".")
            module, kind = ".".join(rest[:-1]), rest[-1]
            if module not in names:
                continue
            g_name = f"blk.{i}.{names[module]}.{kind}"
        else:
            continue
        t = t.astype(np.float32)
        if vocab and g_name == "token_embd.weight":
            t = np.resize(t, (vocab, t.shape[1]))  # one row per token, as the real file's
        if arch == "llama" and g_name.endswith(("attn_q.weight", "attn_k.weight")):
            t = permute(t, heads if "attn_q" in g_name else kv)
        if arch.startswith("gemma") and g_name.endswith("norm.weight"):
            t = t + np.float32(1)
        if qtype != GGMLQuantizationType.F32 and g_name.endswith(("attn_q.weight", "attn_k.weight", "attn_qkv.weight")):
            q = quantize(t, qtype)
            w.add_tensor(g_name, q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(g_name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def write_gguf_repo(folder: Path, model_type: str, qtypes: list[str], seed: int = 0, vocab: int = 20_000) -> list[Path]:
    """folder/<name>-<QTYPE>.gguf for each GGML type name in qtypes (the attention projections in
    it, the rest F32), from the tiny model of model_type's record, with a tokenizer of `vocab`
    tokens in the metadata, and a README.md."""
    from wqk.tiny import build_tiny

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hf = build_tiny(model_type, folder.parent / f".{folder.name}.hf", seed=seed)
    name = folder.name.removesuffix("-GGUF")
    files = [to_gguf(hf, folder / f"{name}-{q}.gguf", GGMLQuantizationType[q], vocab) for q in qtypes]
    (folder / "README.md").write_text(
        f"# {folder.name} (stand-in)\n\nTiny RANDOM weights of a {model_type} record's tiny config, "
        f"converted to GGUF ({', '.join(qtypes)}); not the model.\n"
    )
    return files
