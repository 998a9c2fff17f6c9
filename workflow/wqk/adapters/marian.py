"""Marian (Helsinki-NLP/opus-mt-*) and M2M-100 (also NLLB-200): BART's layout
(bart.bart_stacks: encoder, decoder and cross-attention under "model.").

Marian is post-norm (no gain feeds the attention); M2M-100 is pre-norm
(self_attn_layer_norm, encoder_attn_layer_norm; the keys of cross-attention read the
encoder's final layer_norm). Sinusoidal absolute positions enter x, not the form.
"""

from __future__ import annotations

from . import AR, BI, Record, Tiny, register
from .bart import bart_stacks
from .sizes import SEQ2SEQ_32

_ENC_DEC = dict(encoder=BI, decoder=AR)
_TOKENS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)

register(
    Record(
        "marian",
        tuple(bart_stacks(pre_norm=False).values()),
        _ENC_DEC,
        tiny=Tiny("MarianMTModel", dict(SEQ2SEQ_32, **_TOKENS)),
    )
)
register(
    Record(
        "m2m_100",
        tuple(bart_stacks().values()),
        _ENC_DEC,
        tiny=Tiny("M2M100ForConditionalGeneration", dict(SEQ2SEQ_32, **_TOKENS)),
    )
)
