"""The model: a BERT of the run's size for its objective (optionally initialised with
W_q := W_k), and its optimizer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .spec import TrainConfig


def build_model(cfg: TrainConfig, vocab_size: int, pad_id: int):
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertLMHeadModel

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        intermediate_size=cfg.intermediate,
        max_position_embeddings=max(512, cfg.seq_len),
        pad_token_id=pad_id,
        is_decoder=cfg.objective == "autoregressive",
        hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout,
    )
    torch.manual_seed(cfg.seed)
    cls = BertLMHeadModel if cfg.objective == "autoregressive" else BertForMaskedLM
    model = cls(config)
    if cfg.init == "symmetric":
        symmetrize(model)
    return model


def symmetrize(model) -> None:
    """W_q := W_k (and b_q := b_k) in every layer: M_h = W_q,h W_k,h^T starts symmetric."""
    import torch

    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            att = layer.attention.self
            att.query.weight.copy_(att.key.weight)
            att.query.bias.copy_(att.key.bias)


def optimizer(model, cfg: TrainConfig):
    import torch

    # As transformers' Trainer: no weight decay on biases and LayerNorm weights.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr)
