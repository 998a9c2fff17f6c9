"""T5: encoder self-attention, decoder self-attention and decoder cross-attention.

  encoder.block.{i}.layer.0.SelfAttention.{q,k}.weight   -> "encoder"
  decoder.block.{i}.layer.0.SelfAttention.{q,k}.weight   -> "decoder"
  decoder.block.{i}.layer.1.EncDecAttention.{q,k}.weight -> "cross"
nn.Linear [H*d_kv, d_model]; d_kv is its own config field and H*d_kv need not equal
d_model. No biases; pre-norm (the block's layer_norm; cross-attention's keys read the
encoder's final_layer_norm). T5 applies no 1/sqrt(k) scale (it is folded into
initialisation); scores are scale-free anyway. An encoder-only export (T5EncoderModel)
yields only "encoder".
"""

from __future__ import annotations

from . import AR, BI, Attention, Record, Tiny, register

PREFIXES = ("", "transformer.", "model.")


def t5_stacks(base: str = "", prefixes=PREFIXES, heads=("num_heads", "num_attention_heads")) -> dict[str, Attention]:
    """T5's three attentions under base (MusicGen's text encoder: "text_encoder.")."""

    def attention(stack: str, side: str, n: int, module: str, **kw) -> Attention:
        layer = f"{base}{side}.block.{{i}}.layer.{n}."
        return Attention(
            stack,
            layer + module + ".{p}.weight",
            qk=("q", "k"),
            prefixes=prefixes,
            heads=heads,
            norm=layer + "layer_norm.weight",
            **kw,
        )

    return {
        "encoder": attention("encoder", "encoder", 0, "SelfAttention"),
        "decoder": attention("decoder", "decoder", 0, "SelfAttention", required=False),
        "cross": attention(
            "cross", "decoder", 1, "EncDecAttention", k_norm=f"{base}encoder.final_layer_norm.weight", required=False
        ),
    }


register(
    Record(
        "t5",
        tuple(t5_stacks().values()),
        dict(encoder=BI, decoder=AR),
        # d_kv * num_heads = 32 != d_model = 64 on purpose; decoder deeper than encoder.
        tiny=Tiny(
            "T5ForConditionalGeneration",
            dict(
                d_model=64,
                d_kv=8,
                d_ff=64,
                num_layers=2,
                num_decoder_layers=3,
                num_heads=4,
                vocab_size=128,
                decoder_start_token_id=0,
                pad_token_id=0,
                eos_token_id=1,
            ),
        ),
    )
)
