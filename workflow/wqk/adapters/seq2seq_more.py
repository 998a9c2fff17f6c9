"""Encoder-decoder models beyond T5/Whisper: BART, mBART, Speech2Text, SpeechT5, MusicGen.

Stacks: "encoder" (bidirectional self-attention), "decoder" (causal self-attention),
"cross" (decoder queries against encoder states). Layers are counted per stack from the
weights: SpeechT5's config aliases num_hidden_layers to encoder_layers, which is not the
decoder's depth.
"""

from __future__ import annotations

from . import register
from .qk_templates import AR, BI, cfg, linear_stack, objectives

for _mt in ("bart", "mbart", "speech_to_text", "speecht5", "musicgen"):
    objectives(_mt, encoder=BI, decoder=AR)
objectives("musicgen_decoder", decoder=AR)

SELF = "layers.{i}.self_attn.{p}_proj.weight"
CROSS = "layers.{i}.encoder_attn.{p}_proj.weight"


def _qk(template: str, stack_prefix: str) -> tuple[str, str]:
    return (stack_prefix + template.replace("{p}", "q"), stack_prefix + template.replace("{p}", "k"))


def _bart_like(ckpt, prefixes, enc_self=SELF, enc_name="encoder.", dec_name="decoder."):
    c = ckpt.config
    h_enc = int(cfg(c, "encoder_attention_heads", "num_attention_heads"))
    h_dec = int(cfg(c, "decoder_attention_heads", "num_attention_heads"))
    yield from linear_stack(ckpt, "encoder", *_qk(enc_self, enc_name), h_enc, prefixes=prefixes)
    yield from linear_stack(ckpt, "decoder", *_qk(SELF, dec_name), h_dec, prefixes=prefixes)
    yield from linear_stack(ckpt, "cross", *_qk(CROSS, dec_name), h_dec, prefixes=prefixes)


@register("bart", "mbart", "speech_to_text")
def bart_blocks(ckpt):
    yield from _bart_like(ckpt, ("model.", ""))


@register("speecht5")
def speecht5_blocks(ckpt):
    yield from _bart_like(
        ckpt,
        ("speecht5.", ""),
        enc_self="layers.{i}.attention.{p}_proj.weight",
        enc_name="encoder.wrapped_encoder.",
        dec_name="decoder.wrapped_decoder.",
    )


def _musicgen_decoder(ckpt, n_heads: int, prefixes):
    # The decoder stack is self_attn; encoder_attn is cross-attention (queries from audio
    # codes, keys from the projected T5 text states) and goes to the "cross" stack.
    yield from linear_stack(ckpt, "decoder", *_qk(SELF, "decoder."), n_heads, prefixes=prefixes)
    yield from linear_stack(ckpt, "cross", *_qk(CROSS, "decoder."), n_heads, prefixes=prefixes)


@register("musicgen")
def musicgen_blocks(ckpt):
    c = ckpt.config
    yield from linear_stack(
        ckpt,
        "encoder",
        "text_encoder.encoder.block.{i}.layer.0.SelfAttention.q.weight",
        "text_encoder.encoder.block.{i}.layer.0.SelfAttention.k.weight",
        int(cfg(c, "text_encoder.num_heads")),
    )
    yield from _musicgen_decoder(ckpt, int(cfg(c, "decoder.num_attention_heads")), ("decoder.model.",))


@register("musicgen_decoder")
def musicgen_decoder_blocks(ckpt):
    yield from _musicgen_decoder(ckpt, int(cfg(ckpt.config, "num_attention_heads")), ("model.", ""))
