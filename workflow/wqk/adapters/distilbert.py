"""DistilBERT: [distilbert.]transformer.layer.{i}.attention.{q_lin,k_lin}.weight; heads in
n_heads; post-norm."""

from __future__ import annotations

from . import BI, Attention, Record, Tiny, register

register(
    Record(
        "distilbert",
        (
            Attention(
                "encoder",
                "transformer.layer.{i}.attention.{p}.weight",
                qk=("q_lin", "k_lin"),
                prefixes=("distilbert.", "model.", ""),
                heads=("n_heads", "num_attention_heads"),
                pre_norm=False,
            ),
        ),
        dict(encoder=BI),
        tiny=Tiny(
            "DistilBertForMaskedLM",
            dict(dim=64, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=128, max_position_embeddings=64),
        ),
    )
)
