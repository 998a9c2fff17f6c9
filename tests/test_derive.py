"""Records derived from transformers' own forward (wqk.derive), against the hand-written ones.

- agreement: for every hand record with a tiny model, the record derived from the structure of
  that tiny model's config reads the same factors, bit for bit, from the same saved checkpoint:
  q and k per head, the q/k biases, the pre-norm gains, whether the norm centres, the rotary
  frequencies and layout, the form (QK-norm folding). Where a hand record must stay, MUST_STAY
  says why, and the test checks that the derivation indeed refuses, with that category.
- the derivation's pieces: templates over layers, mask kinds, the scale fit between two forwards
  (a non-linear map and a per-head scale refused), column matching up to a factor and a constant;
- `wqk records derive` prints a record module that, executed, registers the same record;
- the cache: a second lookup derives nothing; get_record falls back to a derived record, and
  `wqk score` scores a model type that has no hand record (MPNet), equal to its own forward.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from wqk.adapters import get_record, records
from wqk.adapters.reader import read_blocks, with_extras
from wqk.adapters.record import Attention
from wqk.checkpoints import open_checkpoint
from wqk.derive import derive
from wqk.derive.assemble import template
from wqk.derive.calls import Underivable, _mask_kind, fit_scale
from wqk.derive.columns import match_columns
from wqk.tiny import build_tiny

# each test's freed memory back to the system (conftest.release_memory)
pytestmark = pytest.mark.usefixtures("release_memory")

HAND = [r.model_type for r in records() if r.tiny is not None]

# model_type -> (the factors in which the derived record differs, why the hand record must stay)
MUST_STAY = {
    "swinv2": (
        {"form"},
        "cosine attention (q and k normalised per head, then scaled per head): the derived record marks its "
        "blocks qk_norm_gain_folded (the normalisation left out, qk_norm_unit), the hand record, which the "
        "paper's Swin v2 scores came from, plain bilinear; their q and k are the same",
    ),
}


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in cache:
            cache[model_type] = build_tiny(model_type, tmp_path_factory.mktemp(model_type))
        return cache[model_type]

    return get


def _blocks(folder: Path, record) -> dict:
    ckpt = open_checkpoint(str(folder))
    return {(b.stack, b.layer): b for b in with_extras(ckpt, read_blocks(ckpt, record), record)}


def _differences(hand, derived) -> list[str]:
    out = []
    for f in ("q", "k", "q_bias", "k_bias", "q_gain", "k_gain"):
        x, y = getattr(hand, f), getattr(derived, f)
        if (x is None) != (y is None) or (x is not None and not (x.shape == y.shape and torch.equal(x, y))):
            out.append(f)
    out += [f for f in ("norm_centred", "rope", "form", "heads") if getattr(hand, f) != getattr(derived, f)]
    return out


@pytest.mark.parametrize("model_type", HAND)
def test_the_derived_record_reads_the_hand_records_factors(model_type, tiny_models):
    folder = tiny_models(model_type)
    hand = get_record(model_type)
    config = json.loads((folder / "config.json").read_text())
    result = derive(hand.tiny.family or model_type, config)
    assert result.ok, f"{result.category}: {result.reason}"
    want, got = _blocks(folder, hand), _blocks(folder, result.record)
    assert set(want) <= set(got), f"hand reads {sorted(want)}, derived {sorted(got)}"
    allowed, why = MUST_STAY.get(model_type, (set(), ""))
    bad = {key: d for key in want if set(d := _differences(want[key], got[key])) != allowed}
    assert not bad, (bad, why)
    # the stacks the derived record yields have the hand record's objectives (a hand record may name
    # more: BERT's decoder, when a config says is_decoder)
    assert {s: hand.objectives[s] for s in result.record.objectives} == result.record.objectives


def test_templates_keep_constant_numbers_and_name_the_varying_ones():
    names = ["encoder.block.0.layer.0.SelfAttention.q.weight", "encoder.block.1.layer.0.SelfAttention.q.weight"]
    assert template(names) == ("encoder.block.{i}.layer.0.SelfAttention.q.weight", [(0,), (1,)])
    swin = ["layers.0.blocks.0.q", "layers.0.blocks.1.q", "layers.1.blocks.0.q"]
    assert template(swin) == ("layers.{i}.blocks.{j}.q", [(0, 0), (0, 1), (1, 0)])
    assert template(["a.0.q"]) == ("a.{i}.q", [(0,)])  # one layer: its number is the field
    assert template(["a.0.q", "b.1.q"]) is None


def test_mask_kinds():
    t = 6
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    assert _mask_kind(torch.ones(t, t, dtype=torch.bool)) == "full"
    assert _mask_kind(causal) == "causal"
    band = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs() <= 1
    assert _mask_kind(band) == "band"
    offset = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    assert _mask_kind((offset >= -1) & (offset <= 2)) == "band"  # one back, two ahead (T5Gemma 2's encoder)
    prefix = causal | (torch.arange(t)[None, :] < 2)
    assert _mask_kind(prefix) == "prefix"
    assert _mask_kind(causal.T) == "mixed"  # the future open, the past masked


def test_the_scale_fit_takes_row_constants_and_position_terms_and_nothing_else():
    g = torch.Generator().manual_seed(0)
    out, other = (torch.randn(2, 3, 5, 5, generator=g, dtype=torch.float64) for _ in range(2))
    position = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)  # ALiBi-like: no token in it
    rows = lambda: torch.randn(2, 3, 5, 1, generator=g, dtype=torch.float64)  # noqa: E731
    open_ = torch.ones(2, 3, 5, 5, dtype=torch.bool)
    s, terms = fit_scale(0.5 * out + position + rows(), 0.5 * other + position + rows(), out, other, open_)
    assert abs(s - 0.5) < 1e-12 and terms
    s, terms = fit_scale(2 * out, 2 * other, out, other, open_)
    assert abs(s - 2) < 1e-12 and not terms
    with pytest.raises(Underivable, match="no linear map"):  # soft-capping
        fit_scale(torch.tanh(out), torch.tanh(other), out, other, open_)
    per_head = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)[None, :, None, None]
    with pytest.raises(Underivable, match="scaled per head"):
        fit_scale(per_head * out, per_head * other, out, other, open_)
    s, terms = fit_scale(per_head * out + position, per_head * other + position, out, other, open_, per_head=True)
    assert abs(s - 2) < 1e-12 and terms  # the heads' mean
    with pytest.raises(Underivable, match="scaled per head"):  # a head's form flipped: no positive scale
        fit_scale(-per_head * out, -per_head * other, out, other, open_, per_head=True)


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_cosine_attention_scaled_per_head_is_its_heads_normalised_forms():
    """Swin2SR's attention is Swin v2's: q and k normalised per head (a QK-norm without a gain),
    their product times exp(logit_scale), a positive scale of each head's own, plus a table of
    relative positions. The form of each head is read, normalisation and scale left out (the
    derivation's facts say per_head_scale), as the hand record of Swin v2 reads it."""
    swin2sr = derive("swin2sr")
    assert swin2sr.ok and swin2sr.facts["per_head_scale"], swin2sr.reason
    (a,) = swin2sr.record.attention
    assert a.qk_norm_unit and a.heads_by == "i" and swin2sr.record.objectives == {"encoder": "bidirectional"}
    assert not derive("swin").facts["per_head_scale"]


def test_columns_match_up_to_a_factor_and_a_constant_and_nothing_else():
    g = torch.Generator().manual_seed(1)
    source = torch.randn(18, 6, generator=g, dtype=torch.float64)
    target = torch.stack([0.25 * source[:, 3], -2 * source[:, 0] + 0.7, torch.randn(18, generator=g).double()], 1)
    found = match_columns(target, [source])
    assert (found[0].column, found[0].factor) == (3, pytest.approx(0.25)) and found[0].offset == pytest.approx(0)
    assert (found[1].column, found[1].factor, found[1].offset) == (0, pytest.approx(-2), pytest.approx(0.7))
    assert found[2] is None


def test_candidate_matching_finds_what_the_whole_cosine_matrix_finds(monkeypatch):
    """columns._candidates' projections on random unit vectors keep every pair the whole matrix
    keeps: the same first source of each column, over several sources, copies up to sign, factor
    and constant, a source column that is a copy of an earlier one (the earlier wins), a
    near-copy through float32, and a constant target column (no source)."""
    from wqk.derive import columns

    g = torch.Generator().manual_seed(2)
    a, b = (torch.randn(40, n, generator=g, dtype=torch.float64) for n in (300, 200))
    b[:, 7] = 3 * a[:, 11] - 1  # b's column 7 holds a's column 11 again: a, the earlier source, wins
    target = torch.stack(
        [-0.5 * a[:, 11] + 2, 4 * b[:, 7], b[:, 150].float().double() * 0.125, a[:, 299] + 3, torch.ones(40)]
        + [torch.randn(40, generator=g, dtype=torch.float64) for _ in range(60)],
        1,
    )
    fast = columns.match_columns(target, [a, b])
    monkeypatch.setattr(columns, "MAX_PAIRS", -1)  # the whole matrix, as before the candidates
    whole = columns.match_columns(target, [a, b])
    assert fast == whole
    assert [(m.source, m.column) for m in fast[:4]] == [(0, 11), (0, 11), (1, 150), (0, 299)]
    assert fast[4:] == [None] * 61


def test_the_printed_record_module_registers_the_derived_record(capsys):
    from wqk.adapters import AR, BI, Attention, Record, Rotary, Tiny
    from wqk.cli import main

    assert main(["records", "derive", "gpt_neox"]) == 0
    source = capsys.readouterr().out
    registered = []
    namespace = dict(
        AR=AR, BI=BI, Attention=Attention, Record=Record, Rotary=Rotary, Tiny=Tiny, register=registered.append
    )
    exec(compile(source.replace("from . import", "# from . import"), "<record>", "exec"), namespace)
    derived = derive("gpt_neox").record
    assert len(registered) == 1
    assert registered[0].attention == derived.attention and registered[0].rope == derived.rope
    assert registered[0].objectives == derived.objectives


def test_a_derivation_is_cached_and_read_back_without_deriving(tmp_path, monkeypatch):
    import wqk.derive as derive_module
    from wqk.derive.store import cached, path_for

    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    first = cached("mpnet")
    assert first.ok and path_for("mpnet", None).is_file()
    monkeypatch.setattr(derive_module, "derive", lambda *a: pytest.fail("derived again"))
    again = cached("mpnet")
    assert (again.record.attention, again.record.objectives, again.record.rope) == (
        first.record.attention,
        first.record.objectives,
        first.record.rope,
    )


def test_a_type_without_a_hand_record_scores_through_its_derived_record(tmp_path, monkeypatch):
    """MPNet (sentence-transformers' all-mpnet-base-v2): no hand record; `wqk score` reads it
    through its derived record (verified on its own tiny model), every layer and head."""
    import transformers

    from wqk.cli import main
    from wqk.derive.shrink import tiny_config

    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    config = tiny_config("mpnet")
    model = transformers.MPNetModel(config)
    model.save_pretrained(tmp_path / "mpnet")
    assert main(["score", str(tmp_path / "mpnet"), "--out", str(tmp_path / "scores.parquet"), "--device", "cpu"]) == 0
    import pandas as pd

    scores = pd.read_parquet(tmp_path / "scores.parquet")
    heads = scores[scores.scope == "head"]
    assert set(heads["stack"]) == {"encoder"} and len(heads) == config.num_hidden_layers * config.num_attention_heads
    assert heads.symmetry.between(-1, 1).all()
    assert get_record("mpnet").attention[0].weight == "encoder.layer.{i}.attention.attn.{p}.weight"


def assert_cross_only(result) -> None:
    """A type whose every attention reads its keys from another input than its queries: a record of
    cross-attention alone, no self-attention stack and so no objective."""
    assert result.ok, (result.category, result.reason)
    assert {a.stack for a in result.record.attention} == {"cross"} and result.record.objectives == {}


@pytest.mark.slow  # a derivation, a score and an aggregation
def test_a_type_of_cross_attention_alone_scores_and_aggregates_as_cross_attention(tmp_path, monkeypatch):
    """CvT: queries and keys read two convolutions of the tokens. `wqk score` reads every layer as the
    cross stack; a catalogue row names no objective (its record has none to give, and one given is
    refused); the aggregates file it under cross-attention."""
    import pandas as pd

    from wqk.aggregate import aggregate
    from wqk.catalogue import CatalogueError, load_catalogue
    from wqk.cli import main

    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    assert main(["tiny", "cvt", "--out", str(tmp_path / "cvt")]) == 0
    assert main(["score", str(tmp_path / "cvt"), "--out", str(tmp_path / "s.parquet"), "--device", "cpu"]) == 0
    scores = pd.read_parquet(tmp_path / "s.parquet")
    config = json.loads((tmp_path / "cvt" / "config.json").read_text())
    heads = scores[scores.scope == "head"]
    assert set(heads["stack"]) == {"cross"}
    assert len(heads) == sum(d * h for d, h in zip(config["depth"], config["num_heads"]))
    header = "model_id\tsource\tfamily\tmodality\tfigure\tsynthetic\tobjective_encoder\tobjective_decoder"
    path = tmp_path / "c.tsv"
    path.write_text(f"{header}\n{scores.model.iloc[0]}\ttiny:cvt\tCvT\tvision\tvision\tTrue\t\t\n")
    (row,) = load_catalogue(path)
    assert (row["objective_encoder"], row["objective_decoder"]) == ("", "")
    out = aggregate(scores, pd.DataFrame([row]))
    assert set(out["models"]["objective"]) == {"cross-attention"} and set(out["models"]["stack"]) == {"cross"}
    path.write_text(f"{header}\n{scores.model.iloc[0]}\ttiny:cvt\tCvT\tvision\tvision\tTrue\tbidirectional\t\n")
    with pytest.raises(CatalogueError, match="'cvt' has no encoder self-attention.*none: cross-attention only"):
        load_catalogue(path)


def test_refusals_name_their_category():
    assert derive("convnext").category == "no attention"
    latent = derive("deepseek_v3")  # keys from a latent and a decoupled rotary projection
    assert latent.category == "not bilinear" and "several projections" in latent.reason, latent.reason
    unknown = derive("no_such_model_type")
    assert unknown.category == "unknown type" and "transformers" in unknown.reason
    part = derive("sam_mask_decoder")  # a sub-config of SAM's; no model class is built from it alone
    assert part.category == "no model" and "SamMaskDecoderConfig" in part.reason, part.reason
    assert derive("blip_text_model").ok  # its model class lives in another module (modeling_blip_text)
    assert derive("pocket_tts_audio_tokenizer_decoder").ok  # a codec's decoder: run on latents
    assert derive("mimi").ok  # a codec: a waveform of as many frames at its frame rate as tokens elsewhere
    # float32 tensors of its own meet float64 weights only with 128 mel bins (the variant that fits): retried
    # in float32, it runs; queries scaled per dimension, and content-position terms
    assert derive("gemma4_audio").category == "not bilinear"
    muse = derive("muse_spark_audio")  # a waveform of whole tokens runs it: convolutions only
    assert muse.category == "no attention" and "forward ran no softmax" in muse.reason, muse.reason
    # its forward's first input is hidden_states: pixels first (Florence 2's backbone), then states, which run
    # (in float32): an additive attention, no softmax over a q.k product
    slanet = derive("slanet")
    assert slanet.category == "no attention" and "forward ran no softmax" in slanet.reason, slanet.reason
    # latents whose keys are [features; latents]: cross-attention alone, a record of that stack (no objective)
    assert_cross_only(derive("idefics2_perceiver"))
    vocoder = derive("speecht5_hifigan")  # run on mel frames: its forward, not only its source, has no attention
    assert vocoder.category == "no attention" and "forward ran no softmax" in vocoder.reason, vocoder.reason


def test_a_stack_filed_by_tower_under_causal_and_open_masks_goes_by_each_layers_mask():
    # MusicGen Melody's T5 text encoder (open) and its decoder over codes (causal), both text towers:
    # the text encoder's self-attention is the encoder's
    d = derive("musicgen_melody")
    assert d.ok, (d.category, d.reason)
    assert d.record.objectives == {"encoder": "bidirectional", "decoder": "autoregressive"}
    assert [a.stack for a in d.record.attention if a.weight.startswith("text_encoder.")] == ["encoder"]


@pytest.mark.parametrize(
    "model_type,stacks",
    [
        ("colpali", {"encoder", "decoder"}),  # its SigLIP vision model, inside PaliGemma, runs on its own
        ("cosmos3_edge_vision", {"encoder"}),  # flattened patches named pixel_values beside grid_thw
        ("flava", {"encoder", "decoder"}),  # its multimodal encoder reads hidden states, as the towers give them
        # learned queries; cross-attention over image states every other layer: its self-attention, one
        # template, is filed "decoder" in every layer (the layers that hold cross-attention made some of
        # them the decoder's and the others the encoder's, and the record read every layer in both stacks)
        ("blip_2_qformer", {"decoder", "cross"}),
        ("omniasr_ctc", {"encoder"}),  # a waveform as [B, 1, samples]: one channel
        pytest.param(  # input_values as [B, frames, mel bins] (a minute of CPU: 1024 frames)
            "audio-spectrogram-transformer", {"encoder"}, marks=pytest.mark.slow
        ),
        ("lfm2_moe", {"decoder"}),  # layer_types unset by its config class: every layer attention
        ("siglip2_vision_model", {"encoder"}),  # NaFlex: flattened patches, their grid and mask
        ("pix2struct_vision_model", {"encoder"}),  # flattened patches led by their row and column
        ("granitemoehybrid", {"decoder"}),  # a hybrid whose default config has no attention layer: a hint
        ("qwen2_5_omni_audio_encoder", {"encoder"}),  # one sample's features packed, and feature_lens
        ("clap_audio_model", {"encoder"}),  # spectrograms as images [B, channels, frames, mel bins]
        pytest.param(  # a waveform of whole frames of its DAC codec's hop length
            "pe_audio_encoder", {"encoder"}, marks=pytest.mark.slow
        ),
        ("phi4_multimodal_audio", {"encoder"}),  # features as hidden_states; its required mask as None
        ("dots3_note_audio_encoder", {"encoder"}),  # each chunk's samples (chunk_sample_lengths)
        ("fun_asr_nano_encoder", {"encoder"}),  # mel bins x stacked frames, a mask over the frames
        ("pix2struct_text_model", {"decoder", "cross"}),  # encoder states for its encoder_decoder_attention
        ("tvp", {"encoder"}),  # frames of its backbone; its forward runs on a batch of one only
        ("seggpt", {"encoder"}),  # a prompt image and mask stacked over the image, on the batch
        ("superglue", {"encoder", "cross"}),  # image pairs [B, 2, C, H, W], keypoints of each
        ("evolla", {"encoder", "decoder", "cross"}),  # protein_input_ids: its protein encoder's tokens
        ("muse_spark_vision", {"encoder"}),  # flattened patches of patch_temporal frames, merge_size
        ("kimi_k25_vision", {"encoder"}),  # flattened patches, each as a small image
        ("paddleocr_vl_vision", {"encoder"}),  # those as a batch of one
        ("video_llama_3_vision", {"encoder"}),  # each image's merge_sizes beside grid_thw
        ("gemma4_vision", {"encoder"}),  # flat patches and their pixel_position_ids, whole pooling kernels
        ("mgp-str", {"encoder"}),  # a [height, width] image size: non-square pixels
        ("mllama_vision_model", {"encoder"}),  # max_num_tiles tiles; intermediate_layers_indices in the depth
    ],
)
def test_the_forwards_reach_nested_towers_and_the_inputs_they_name(model_type, stacks):
    d = derive(model_type)
    assert d.ok, (d.category, d.reason)
    assert {a.stack for a in d.record.attention} == stacks


def test_a_query_bias_saved_under_a_name_of_its_own_is_the_records_q_bias():
    """VideoMAE holds query.bias and a key without bias; transformers saves the bias as q_bias (as
    the hub's checkpoints hold it): the record reads q_bias, and derives no bias from the weights."""
    d = derive("videomae")
    assert d.ok, (d.category, d.reason)
    (a,) = d.record.attention
    assert (a.bias, a.q_bias) == (None, "encoder.layer.{i}.attention.attention.q_bias")


def test_a_field_transformers_reads_and_the_config_class_lacks_is_filled_where_its_meaning_fixes_it():
    from transformers import DbrxConfig, MoonshineStreamingConfig

    from wqk.derive.shrink import filled

    config = DbrxConfig()
    assert not hasattr(config.attn_config, "rope_theta")
    assert filled(config, AttributeError("'DbrxAttentionConfig' object has no attribute 'rope_theta'"))
    assert config.attn_config.rope_theta == 10000.0  # the nested config that lacked it
    streaming = MoonshineStreamingConfig()
    assert filled(streaming, AttributeError("'MoonshineStreamingConfig' object has no attribute 'num_key_value_heads'"))
    assert streaming.num_key_value_heads == streaming.num_attention_heads
    assert not filled(config, AttributeError("'DbrxConfig' object has no attribute 'some_size'"))  # no meaning known
    assert not filled(config, ValueError("'DbrxConfig' object has no attribute 'rope_theta'"))


def test_the_hand_records_of_the_paper_stay_hand(tmp_path):
    """get_record returns the hand record where there is one, never a derived one."""
    for model_type in ("bert", "llama", "whisper"):
        assert get_record(model_type) is next(r for r in records() if r.model_type == model_type)
    assert dataclasses.is_dataclass(get_record("bert"))


def test_records_list_and_coverage_say_hand_derived_or_refused_and_why(tmp_path, monkeypatch, capsys):
    from wqk.cli import main
    from wqk.derive.coverage import coverage_table, statuses

    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    assert main(["records", "list", "bert", "mpnet", "convnext", "gpt_oss"]) == 0
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["bert"].startswith("hand\t")
    assert lines["mpnet"].startswith("derived\t\tstacks encoder")
    assert lines["convnext"].startswith("refused\tno attention\t")
    assert lines["gpt_oss"].startswith("derived\t")
    rows = statuses(["bert", "mpnet", "convnext", "gpt_oss", "sam_mask_decoder", "deepseek_v3"])
    table = {
        label: rest.split()
        for label, rest in (re.split(r"\s{2,}", line, maxsplit=1) for line in coverage_table(rows).splitlines())
    }
    assert table["with dot-product attention"] == ["4", "100%"]  # a part of a composite is none of them
    assert table["without a model class of their own"][0] == "1"
    assert table["score: hand-written record"] == ["1", "25.0%"] and table["score: derived record"] == ["2", "50.0%"]
    assert table["refused: not bilinear (its attention logits are not a bilinear form of the token vectors)"][0] == "1"
    # DeepSeek-V3's latent attention out of the base: 3 of the 3 types a bilinear form describes
    assert table["score, of those whose logits are a bilinear form"] == ["3", "100.0%", "of", "3"]
    assert table["without dot-product attention"][0] == "1"
    from wqk.derive.store import cached

    assert cached("gpt_oss").facts["extra_logits"] == 1  # its sinks: one logit per head beside the keys


def test_a_config_its_validators_refuse_is_repaired_on_the_fields_they_name():
    """A shrunk config a class refuses gets the fields its refusal names moved: restored (CSM's
    codebook must be a power of two), an image enlarged only as far as its validator needs
    (LW-DETR: a multiple of its windows, not its own 1024), a count the shrinking left alone
    set from a ladder (Hiera: fewer query-pool stages than its 2 layers); the rest stays shrunk."""
    from wqk.derive.shrink import WIDTH, tiny_config

    csm = tiny_config("csm")
    assert csm.codec_config.codebook_size == 2048 and csm.hidden_size == WIDTH
    lw = tiny_config("lw_detr")
    assert lw.backbone_config.image_size == 64
    hiera = tiny_config("hiera")
    assert hiera.image_size == [32, 32] and hiera.num_query_pool == 1 and hiera.num_query_pool < len(hiera.depths)


@pytest.mark.slow  # a derivation
def test_a_type_whose_default_config_its_own_validator_refuses_is_built_from_its_checkpoints_fields():
    """The Gemma 4 assistant's config class refuses its own defaults (per-layer inputs, a MoE block,
    layers with keys of their own: its checkpoints have none): built from the fields its checkpoints
    have, its forward asks for its main model's keys, so it has dot-product attention that cannot
    run alone (forward), not none (which its own modeling file, calling the text model's, had said)."""
    from wqk.derive.build import has_attention_source
    from wqk.derive.shrink import tiny_config

    text = tiny_config("gemma4_assistant").text_config
    assert text.num_kv_shared_layers == text.num_hidden_layers and text.hidden_size_per_layer_input == 0
    assert has_attention_source("gemma4_assistant")
    assistant = derive("gemma4_assistant")
    assert assistant.category == "forward" and "shared_kv_states" in assistant.reason, assistant.reason


def test_sequences_and_depths_that_no_size_field_shrinks_are_cut_too():
    """What made a tiny model slow, though its widths were tiny: AST's spectrogram (1024 frames x 128
    bins, 1214 tokens), Kosmos-2.5's 2048 latent queries, Nemotron-H's depth that its block-type
    list sets (52 layers in NeMo SpeechLM's language model): cut, with every kind of layer kept."""
    import transformers

    from wqk.derive.shrink import QUERIES, tiny_config

    ast = tiny_config("audio-spectrogram-transformer")
    assert (ast.max_length, ast.num_mel_bins) == (64, 32)
    assert tiny_config("kosmos-2.5").latent_query_num == QUERIES
    text = tiny_config("nemo_speechlm").text_config
    full = transformers.AutoConfig.for_model("nemo_speechlm").text_config.layers_block_type
    assert len(full) > 40 and text.layers_block_type == full[: len(text.layers_block_type)]
    assert len(text.layers_block_type) <= 8 and set(text.layers_block_type) == set(full)


def test_a_refusal_that_names_no_field_is_raised_as_it_is():
    """ESMFold 2's ESMC refuses unequal key heads; the repairs restore its 40 heads, which the shrunk
    width refuses in words that name no field: raised as it is, with the first refusal, on which the
    shrinking retries with as many key heads as query heads."""
    import transformers

    from wqk.derive.shrink import _Counts, _repaired, _shrink_dict, tiny_config

    config = transformers.AutoConfig.for_model("esmfold2")
    own = config.to_dict()
    with pytest.raises(Exception, match=r"hidden size \(96\) is not a multiple") as refused:
        _repaired(type(config), _shrink_dict(own, _Counts()), own)  # "hidden size", not hidden_size: no field
    assert "num_key_value_heads" in str(refused.value.first_refusal)
    esmc = tiny_config("esmfold2").esmc_config
    assert esmc.num_key_value_heads == esmc.num_attention_heads


def test_sizes_the_class_computes_from_others_are_left_to_it():
    """A size computed from the shrunk ones: Bamba's mamba_d_head (declared "auto"), D-FINE's
    head_dim (no field: __post_init__ sets it, a key passed back would overwrite it); a latent
    attention's rotary part of 0 stays 0 (GLM-5 Next: its validator wants none); DBRX's unset
    clip_qkv, which its forward cannot take, a bound no value reaches."""
    from wqk.derive.shrink import WIDTH, tiny_config

    bamba = tiny_config("bamba")
    assert bamba.hidden_size == WIDTH and bamba.mamba_d_head * bamba.mamba_n_heads == bamba.mamba_expand * WIDTH
    assert bamba.layers_block_type == ["linear_attention", "full_attention"]  # the hint: one attention layer
    d_fine = tiny_config("d_fine")
    assert d_fine.d_model == WIDTH and d_fine.head_dim * d_fine.decoder_attention_heads == WIDTH
    glm = tiny_config("glm5_next_text")
    assert glm.qk_rope_head_dim == 0 and glm.qk_nope_head_dim == 16
    assert tiny_config("dbrx").attn_config.clip_qkv == 1e9
    # an image size the class sets in __post_init__ when unset (Sam3's tracker: 1008) stays the shrunk one
    assert tiny_config("sam3_tracker_video").vision_config.backbone_config.image_size == 32
    zamba2 = tiny_config("zamba2")  # mamba_headdim: set in __post_init__, no field
    assert zamba2.mamba_headdim * zamba2.n_mamba_heads == zamba2.mamba_expand * WIDTH
    assert "hybrid" in zamba2.layers_block_type  # its layer types, under their own name, keep every kind
    zamba = tiny_config("zamba")  # attention_hidden_size: declared None, 2 x hidden_size when unset
    assert zamba.attention_hidden_size == 2 * WIDTH and zamba.layers_block_type.count("hybrid") == 2
    griffin = tiny_config("recurrent_gemma")  # lru_width: declared None, hidden_size when unset
    assert griffin.lru_width == WIDTH
    # its block_types, a pattern the depth repeats: deep enough to reach the attention block
    assert "sliding_attention" in griffin.layers_block_type, griffin.layers_block_type


def test_counts_tied_to_other_fields_follow_them():
    """A stack's key heads divide that stack's query heads (Moonshine: encoder_ and decoder_ fields);
    the experts a token takes are no more than the experts (num_experts_per_token); a group count
    equal to the width (Mimi's depthwise upsampling) is the width."""
    from wqk.derive.shrink import WIDTH, tiny_config

    moon = tiny_config("moonshine")
    for stack in ("encoder", "decoder"):
        heads, kv = getattr(moon, f"{stack}_num_attention_heads"), getattr(moon, f"{stack}_num_key_value_heads")
        assert heads % kv == 0 and kv < heads, (stack, heads, kv)
    kimi = tiny_config("kimi_linear")
    assert kimi.num_experts_per_token <= kimi.num_experts
    assert tiny_config("mimi").upsample_groups == WIDTH


def test_equal_head_fields_of_two_stacks_go_by_the_stack():
    """Moonshine's encoder layers write their head counts into the config the decoder is built
    from, so its tiny model has as many heads in both stacks although the tiny config gives each
    its own count: each attention takes the field of the stack its path names."""
    d = derive("moonshine")
    assert d.ok, d.reason
    heads = {a.stack: a.heads for a in d.record.attention}
    assert heads == {
        "encoder": ("encoder_num_attention_heads",),
        "decoder": ("decoder_num_attention_heads",),
        "cross": ("decoder_num_attention_heads",),
    }, heads


def test_time_series_models_run_on_past_values():
    """A time series model gets past values by its signature (PatchTST: [B, context, channels]; the
    forecasting encoder-decoders: the lags' history, time features, a mask and the future window,
    with a horizon where the config leaves it to the checkpoint) and is filed as time series; an
    auto-correlation (Autoformer) is no attention."""
    from wqk.derive.shrink import SERIES_HORIZON, tiny_config

    assert tiny_config("informer").prediction_length == SERIES_HORIZON
    for model_type, stacks in (("patchtst", {"encoder"}), ("time_series_transformer", {"encoder", "decoder", "cross"})):
        d = derive(model_type)
        assert d.ok, (model_type, d.reason)
        assert {a.stack for a in d.record.attention} == stacks and d.facts["modality"] == "time series"
    auto = derive("autoformer")
    assert auto.category == "no attention" and "no softmax" in auto.reason, auto.reason


@pytest.mark.parametrize(
    "model_type",
    [
        "decision_transformer",  # a trajectory: states, actions, returns to go, timesteps
        "xmod",  # each sequence's language adapter (lang_ids)
        "blt_global_transformer",  # a tower that reads its input embeddings as another gives them
        "musicgen_melody_decoder",  # token ids of every codebook, a row each
        "step3p5",  # no layer slides, yet its forward builds a sliding mask: a window set
    ],
)
def test_inputs_named_by_the_signature_and_fields_the_forward_reads_let_it_run(model_type):
    d = derive(model_type)
    assert d.ok, (d.category, d.reason)


def test_sizes_tied_to_the_width_and_classes_built_on_the_config_itself():
    """Parts that sum to the width are rescaled (Reformer's axial position embeddings); a codebook
    size equal to a width elsewhere is kept (EnCodec's, a power of 2, in MusicGen Melody); the
    model of a composite config is the class built on it, not AutoModel's decoder model."""
    import transformers

    from wqk.derive.build import model_class
    from wqk.derive.shrink import WIDTH, tiny_config

    reformer = tiny_config("reformer")
    assert sum(reformer.axial_pos_embds_dim) == reformer.hidden_size == WIDTH
    melody = tiny_config("musicgen_melody")
    assert melody.audio_encoder.codebook_size == transformers.EncodecConfig().codebook_size
    assert model_class(melody).config_class is type(melody)
    assert model_class(tiny_config("exaone")).__name__ == "LlamaModel"  # no class of its own: AutoModel's


def test_a_forward_that_overflows_float64_runs_in_float32():
    """FSMT fills its causal mask with float64's minimum converted to float32: its forward runs
    in float32, so its refusal, if any, is past the forward."""
    assert derive("fsmt").category != "forward"
    assert derive("canine").ok  # its float32 mask times float64's minimum scored NaN at every position


def test_masks_of_patches_and_blocks_leave_each_query_keys_to_see():
    """BLT's patches of bytes given by patch_lengths (its random entropy model would cut one a
    byte), MobileViT's image two patches a side at its output stride, Granite Speech's context
    blocks as short as the tiny inputs (its Shaw relative keys, q . E(i - j), are zeroed as
    DeBERTa's c2p terms are, and it is filed as audio, as its class declares)."""
    from wqk.derive.shrink import tiny_config

    assert tiny_config("mobilevit").image_size == 128 and tiny_config("granite_speech_encoder").context_size == 4
    assert derive("blt").ok and derive("mobilevit").ok
    granite = derive("granite_speech_encoder")
    assert granite.ok, granite.reason
    assert _zeroed(granite) == {"rel_pos_emb.weight"} and granite.facts["modality"] == "audio"


def _zeroed(derivation) -> set[str]:
    """The position terms a derivation zeroed, by the last two parts of their names."""
    return {".".join(n.split(".")[-2:]) for n in derivation.facts.get("position tables zeroed", [])}


def test_relative_positions_read_by_the_queries_are_zeroed_and_the_content_term_scored():
    """Parakeet's attention is Transformer-XL's, (q + u) . k + (q + v) . R(i - j) with R sinusoids
    of relative positions: the forwards without rotation see one table at every position, the
    forwards at the real ones a softmax input that is no linear map of q.k. The projection of the
    sinusoids and u, v are zeroed (as the hand records of DeBERTa zero its c2p and p2c terms): the
    record scores the content-content part, q . k, and passes the logits test on that model."""
    d = derive("parakeet_encoder")
    assert d.ok, d.reason
    assert _zeroed(d) == {"self_attn.bias_u", "self_attn.bias_v", "relative_k_proj.weight"}, _zeroed(d)
    conformer = derive("wav2vec2-conformer")
    assert conformer.ok and _zeroed(conformer) == {"self_attn.pos_bias_u", "self_attn.pos_bias_v", "linear_pos.weight"}


def test_the_position_terms_zeroed_are_named_as_such():
    """The names of the position terms (tables, their projections, Transformer-XL's u and v) and
    nothing a bilinear form needs: biases of q and k, a pos_embed added to the tokens."""
    from wqk.derive.verified import POSITION_TABLES

    terms = [
        "encoder.layers.0.self_attn.relative_k_proj.weight",
        "encoder.layers.0.self_attn.bias_u",
        "layers.3.self_attn.pos_bias_v",
        "encoder.layers.1.self_attn.linear_pos.weight",
        "encoder.layers.0.attention.emb_rel_k",
        "encoder.layers.0.attn.rel_pos_emb.weight",
        "encoder.layers.0.self_attn.distance_embedding.weight",
        "encoder.rel_embeddings.weight",
    ]
    others = [
        "encoder.layers.0.self_attn.q_proj.bias",
        "encoder.layers.0.attn.bias",
        "encoder.layers.0.self_attn.k_proj.weight",
        "encoder.layers.0.self_attn.relative_v_proj.weight",
        "embeddings.position_embeddings.weight",
        "encoder.layers.0.self_attn.linear_out.weight",
        "pos_embed",
        "encoder.layers.0.attention.emb_rel_v",
    ]
    assert [n for n in terms if not POSITION_TABLES.search(n)] == []
    assert [n for n in others if POSITION_TABLES.search(n)] == []


def test_queries_pooled_from_the_keys_tokens_are_self_attention():
    """Funnel's pooling layers: the queries read the sequence mean-pooled (its CLS token kept), the
    keys the whole one: self-attention of the encoder, not cross-attention (which had split its
    blocks between an encoder and a decoder the reader numbered otherwise); latents read beside the
    context (IDEFICS 2's perceiver), all copies of key tokens, and another sequence's states stay
    cross-attention. Funnel's softmax input, rounded to float32 in the float64 model, is held to
    float32's precision, and its relative positions and token-type terms are zeroed."""
    from wqk.derive.calls import _pooled_from

    g = torch.Generator().manual_seed(0)
    k = torch.randn(2, 9, 96, generator=g, dtype=torch.float64)
    pooled = torch.cat([k[:, :1], (k[:, 1:9:2] + k[:, 2:9:2]) / 2], 1)
    assert _pooled_from(pooled.reshape(-1, 96), k.reshape(-1, 96), 2)
    assert not _pooled_from(k[:, 3:7].reshape(-1, 96), k.reshape(-1, 96), 2)  # copies: latents beside context
    other = torch.randn(2, 5, 96, generator=g, dtype=torch.float64)
    assert not _pooled_from(other.reshape(-1, 96), k.reshape(-1, 96), 2)
    funnel = derive("funnel")
    assert funnel.ok, funnel.reason
    assert {a.stack for a in funnel.record.attention} == {"encoder", "decoder"}
    assert "r_kernel" in {n.rsplit(".", 1)[1] for n in funnel.facts["position tables zeroed"]}
    perceiver = derive("idefics2_perceiver")
    assert_cross_only(perceiver)


def test_a_model_that_packs_its_samples_is_derived_on_one():
    """Qwen3-ASR's audio encoder packs the batch into one sequence and attends within each sample's
    part (cu_seqlens): with two samples each attention call runs two products, which no single
    call reads; the derivation runs again on one sample (inputs.B back to 2 after it)."""
    from wqk.derive import inputs

    d = derive("qwen3_asr_encoder")
    assert d.ok and d.facts["modality"] == "audio", d.reason
    assert inputs.B == 2


def test_a_mask_read_as_booleans_runs_under_sdpa():
    """Nemotron ASR streaming's encoder masks with mask.logical_not(), which inverts eager's additive
    mask (every logit masked): its forward runs again under SDPA, whose mask is boolean, where its
    relative positions (Parakeet's) are zeroed and its content term derives."""
    d = derive("nemotron_asr_streaming_encoder")
    assert d.ok and "relative_k_proj.weight" in _zeroed(d), d.reason


def test_a_non_bilinear_softmax_input_stays_refused_after_the_position_terms():
    """Zeroing position terms rescues only what they cause: Doge's softmax input (a mask computed
    from the values) stays no linear map of q.k; PP-FormulaNet's SAM encoder derives with its tables
    zeroed (its keys read as scaled per column only while its tiny grid left its decoder one key
    token: two rows, where any column is a multiple of any other)."""
    doge = derive("doge")
    assert doge.category == "not bilinear" and "no linear map" in doge.reason, doge.reason
    formula = derive("pp_formulanet")
    assert formula.ok, formula.reason
    assert any("rel_pos_h" in name for name in formula.facts["position tables zeroed"])


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_a_decoder_whose_length_follows_predicted_durations_is_fit_in_each_forward_alone():
    """FastSpeech 2's decoder runs over as many frames as the durations its predictor reads from
    the tokens (eval mode ignores duration_labels): the forward of other tokens has another length,
    so each forward's softmax input is fit alone, where a term of position cannot cancel. Its head
    counts are read from the encoder_config and decoder_config dicts its modules read (config.json
    holds them beside the flat fields they were made from)."""
    fastspeech = derive("fastspeech2_conformer")
    assert fastspeech.ok, fastspeech.reason
    assert {a.stack: a.heads for a in fastspeech.record.attention} == {
        "encoder": ("encoder_config.num_attention_heads",),
        "decoder": ("decoder_config.num_attention_heads",),
    }
    assert fastspeech.record.objectives == {"encoder": "bidirectional", "decoder": "bidirectional"}
    assert "pos_bias_u" in {n.rsplit(".", 1)[1] for n in _zeroed(fastspeech)}


def test_fit_runs_of_two_lengths_admits_no_term_of_position_and_one_scale():
    """fit_runs on forwards of two lengths: q.k times one scale plus a constant per row passes; a
    term of position, or another scale in the second forward, is refused."""
    from wqk.derive.calls import fit_runs

    g = torch.Generator().manual_seed(0)
    out, other, row = (
        torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((1, 2, 5, 5), (1, 2, 7, 7), (1, 2, 5, 1))
    )
    scale, position = fit_runs(0.5 * out + row, 0.5 * other, out, other)
    assert abs(scale - 0.5) < 1e-12 and not position
    i = torch.arange(5.0)
    with pytest.raises(Underivable, match="no linear map"):
        fit_runs(0.5 * out + 0.1 * (i[None, :] - i[:, None]), 0.5 * other, out, other)
    with pytest.raises(Underivable, match="scaled by 0.5 and 0.25"):
        fit_runs(0.5 * out, 0.25 * other, out, other)


def test_qk_norm_biases_and_a_norm_over_all_heads_are_folded_as_q_and_k_are():
    """GLM-OCR's vision tower: a qkv bias before its QK-norm, centred and scaled by the gain as q
    and k are; ESMC: one LayerNorm over all heads' columns (its mean over all of them)."""
    assert derive("glm_ocr_vision").ok
    esmc = derive("esmc")
    assert esmc.ok and esmc.record.attention[0].qk_norm_centred == "projection"


def test_a_qk_norm_with_a_gain_per_head_is_folded_head_by_head():
    """Chameleon's QK LayerNorm normalises each head's columns and applies a gain and a shift of
    each head's own ([heads, head_dim], the norm's statistics over the last dim only), on queries
    packed [B*T, heads, head_dim]: read as a QK-norm, its gain per head folded by the reader, its
    per-token scalings those of the packed rows."""
    chameleon = derive("chameleon")
    assert chameleon.ok, chameleon.reason
    decoder = next(a for a in chameleon.record.attention if a.stack == "decoder")
    assert decoder.qk_norm is not None and decoder.qk_norm_centred is True, decoder


def test_a_qk_norms_shift_after_the_norm_is_read_beside_its_gain():
    """Persimmon's QK LayerNorm has a bias, added after the norm: the blocks' q_norm_bias and
    k_norm_bias, which the logits test adds to the scaled q and k."""
    persimmon = derive("persimmon")
    assert persimmon.ok, persimmon.reason


@pytest.mark.slow
def test_key_heads_no_field_states_are_read_from_the_k_weight(tmp_path):
    """MiMo-V2-Flash's code gives its sliding layers twice num_key_value_heads, a count no config
    field holds: the record reads each layer's key heads from its k weight (kv_heads_from_weight),
    its full layers' as well; a k weight of no whole number of heads is a corrupt checkpoint."""
    from safetensors.torch import load_file, save_file

    from wqk.adapters.reader import locate, read_qk
    from wqk.errors import CorruptCheckpoint

    mimo = derive("mimo_v2_flash")
    assert mimo.ok, mimo.reason
    (a,) = mimo.record.attention
    assert a.kv_heads_from_weight and a.kv_heads == () and not a.multi_query
    folder = build_tiny("mimo_v2_flash", tmp_path / "m")
    ckpt = open_checkpoint(str(folder))
    config = json.loads((folder / "config.json").read_text())
    kinds = config["layer_types"]
    blocks = list(read_blocks(ckpt, mimo.record))
    want = [config["num_key_value_heads"] * (2 if kind == "sliding_attention" else 1) for kind in kinds]
    assert [b.n_kv_heads for b in blocks] == want and len(set(want)) == 2
    (weights,) = folder.glob("*.safetensors")
    tensors = load_file(weights)
    name = "layers.1.self_attn.k_proj.weight"
    tensors[name] = tensors[name][:-3]
    save_file(tensors, weights, metadata={"format": "pt"})
    ckpt = open_checkpoint(str(folder))
    site = next(s for s in locate(ckpt, mimo.record) if s.layer == 1)
    with pytest.raises(CorruptCheckpoint, match="no whole number of key heads"):
        read_qk(ckpt, site)


@pytest.mark.slow
def test_stages_that_reduce_their_keys_are_told_apart_by_the_configs_list(tmp_path):
    """SegFormer's stages attend to keys their sr_ratios reduce (8, 4, 2: cross-attention) but the
    last (1: self-attention), one module class: the two templates name the same tensors, and
    Attention.layer_if reads each layer once, in its own stack, at a checkpoint's depths too."""
    from transformers import SegformerConfig, SegformerModel

    segformer = derive("segformer")
    assert segformer.ok, segformer.reason
    encoder, cross = segformer.record.attention
    assert encoder.weight == cross.weight == "encoder.block.{i}.{j}.attention.self.{p}.weight"
    assert (encoder.stack, encoder.layer_if) == ("encoder", ("sr_ratios", "i", "==", 1))
    assert (cross.stack, cross.layer_if) == ("cross", ("sr_ratios", "i", "!=", 1))
    config = SegformerConfig(**{**segformer.record.tiny.config, "depths": [2, 2, 2, 2]})
    SegformerModel(config).save_pretrained(tmp_path / "s")
    blocks = list(read_blocks(open_checkpoint(str(tmp_path / "s")), segformer.record))
    assert [(b.stack, b.layer) for b in blocks] == [("encoder", 0), ("encoder", 1)] + [("cross", n) for n in range(6)]
    assert all(not torch.equal(a.q, b.q) for n, a in enumerate(blocks) for b in blocks[n + 1 :])


def test_a_heads_rows_in_one_order_its_key_head_shares_read_in_order():
    """Qwen2.5-Omni's DiT de-interleaves its first head's q and k rows alike before a rotary of that
    head alone: q_h . k_h sums the same products in any shared order, so the layout is the plain
    one; an order the key head does not share, or rows of another head, is no layout."""
    from wqk.derive.infer import _one_order_a_head

    shuffled = [[0, 2, 1, 3], [4, 5, 6, 7]]
    assert _one_order_a_head(shuffled, {0: [0, 2, 1, 3], 1: [4, 5, 6, 7]}, [0, 1], 4)
    assert not _one_order_a_head(shuffled, {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}, [0, 1], 4)
    assert not _one_order_a_head([[0, 1, 2, 4], [3, 5, 6, 7]], {0: [0, 1, 2, 4], 1: [3, 5, 6, 7]}, [0, 1], 4)
    # grouped: both query heads read key head 0, each in its own order the key head must share
    assert not _one_order_a_head([[0, 2, 1, 3], [4, 5, 6, 7]], {0: [0, 2, 1, 3]}, [0, 0], 4)


def test_stages_are_told_apart_by_a_list_of_the_configs_not_by_their_sizes():
    """SegFormer's stages differ in their widths and head counts too, by other values in each
    checkpoint (b0's hidden_sizes end in 256, b2's in 512): layer_if names the list that says what
    the stage does (sr_ratios: 1 where no keys are reduced), whatever the config lists first; where
    no list tells the layers apart, the record is refused."""
    from wqk.derive.assemble import _layer_if

    lists = {"hidden_sizes": [32, 64, 160, 256], "num_attention_heads": [1, 2, 5, 8], "sr_ratios": [8, 4, 2, 1]}
    self_site = SimpleNamespace(q_weight="encoder.block.3.0.q", layer_lists=lists)
    cross = [SimpleNamespace(q_weight=f"encoder.block.{i}.0.q", layer_lists=lists) for i in range(3)]
    weight = "encoder.block.{i}.{j}.q"
    assert _layer_if([self_site], cross, weight, [(3, 0)]) == ("sr_ratios", "i", "==", 1)
    assert _layer_if(cross, [self_site], weight, [(0, 0), (1, 0), (2, 0)]) == ("sr_ratios", "i", "!=", 1)
    sizes_only = {k: v for k, v in lists.items() if k != "sr_ratios"}
    with pytest.raises(Underivable, match="no per-stage or per-layer list of the config tells their layers apart"):
        _layer_if([SimpleNamespace(q_weight="encoder.block.3.0.q", layer_lists=sizes_only)], cross, weight, [(3, 0)])


def test_a_block_two_stacks_read_that_no_call_ran_as_is_refused():
    """A record whose encoder and cross templates name the same tensors reads each layer twice;
    the derivation refuses it where a block is one no call ran as (PVT's and SuperGlue's records
    were so before Attention.layer_if), and keeps a layer read by one stack alone (X-CLIP's first
    message attention, over copies of one class embedding, is no call)."""
    from wqk.blocks import AttentionBlock
    from wqk.derive.verified import _blocks_of

    q = torch.randn(2, 4, 2)

    def block(stack, layer, factor):
        return AttentionBlock(stack, layer, factor, factor)

    facts = [SimpleNamespace(stack="encoder", q_weight="l.0.q"), SimpleNamespace(stack="cross", q_weight="l.1.q")]
    layers = {("encoder", "l.0.q"): ("encoder", 0), ("cross", "l.1.q"): ("cross", 0)}
    calls = [SimpleNamespace(call=SimpleNamespace(name=f.q_weight)) for f in facts]
    other = torch.randn(2, 4, 2)
    read = {("encoder", 0): block("encoder", 0, q), ("cross", 0): block("cross", 0, other)}
    assert len(_blocks_of(calls, facts, read, layers)) == 2
    alone = {**read, ("encoder", 1): block("encoder", 1, torch.randn(2, 4, 2))}
    assert len(_blocks_of(calls, facts, alone, layers)) == 2
    twice = {**read, ("encoder", 1): block("encoder", 1, other), ("cross", 1): block("cross", 1, q)}
    with pytest.raises(Underivable, match="reads cross layer 1, encoder layer 1 from the tiny model"):
        _blocks_of(calls, facts, twice, layers)


def test_a_qk_norm_on_some_layers_is_read_by_the_layer(tmp_path):
    """Llama 4's weightless QK-norm is in its RoPE layers only (no_rope_layers: its NoPE layers,
    every fourth, have none): the record names that list and the template field that indexes it,
    and the reader marks those layers' blocks qk_norm_gain_folded and the others bilinear. A
    config.json that leaves the list empty (the real Llama 4 Scout's) gets the one transformers'
    config class fills in from no_rope_layer_interval."""
    d = derive("llama4_text")
    assert d.ok and d.record.attention[0].qk_norm_layers == ("no_rope_layers", "i"), d.reason
    folder = build_tiny("llama4_text", tmp_path / "tiny")

    def forms():
        return [b.form for _, b in sorted(_blocks(folder, d.record).items())]

    assert forms() == ["qk_norm_gain_folded"] * 3 + ["bilinear"]
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, "no_rope_layers": [], "no_rope_layer_interval": 2}), encoding="utf-8")
    assert forms() == ["qk_norm_gain_folded", "bilinear"] * 2


def test_a_layers_own_key_heads_in_per_layer_config_are_read_by_the_layer(tmp_path):
    """EmbeddingGemma 2's full-attention layers have key heads of their own, in transformers'
    per-layer overrides (per_layer_config["5"]["num_key_value_heads"]): the record names the
    config's key, and the reader takes each layer's override of it, zero-padded keys included."""
    from wqk.adapters.reader import locate

    d = derive("embedding_gemma2_text")
    assert d.ok and d.record.attention[0].kv_heads == ("num_key_value_heads",), d.reason
    folder = build_tiny("embedding_gemma2_text", tmp_path / "tiny")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    full = [i for i, kind in enumerate(config["layer_types"]) if kind == "full_attention"]
    assert full and all(str(i) in config["per_layer_config"] for i in full), config.get("per_layer_config")

    def key_heads() -> list[int]:
        return [site.kv_heads for site in locate(open_checkpoint(str(folder)), d.record)]

    own = config["per_layer_config"][str(full[0])]["num_key_value_heads"]
    assert own != config["num_key_value_heads"]
    want = [own if i in full else config["num_key_value_heads"] for i in range(config["num_hidden_layers"])]
    assert key_heads() == want
    assert [b.n_kv_heads for _, b in sorted(_blocks(folder, d.record).items())] == want  # the blocks split so
    padded = {f"{int(i):02d}": v for i, v in config["per_layer_config"].items()}  # as transformers writes 10+ layers
    (folder / "config.json").write_text(json.dumps({**config, "per_layer_config": padded}), encoding="utf-8")
    assert key_heads() == want
    (folder / "config.json").write_text(json.dumps({**config, "per_layer_config": {}}), encoding="utf-8")
    assert key_heads() == [config["num_key_value_heads"]] * len(want)


def test_a_vq_vaes_decoder_is_run_on_codes():
    """Emu3's VQ-VAE: its encode runs (each image's required image_sizes given, base_channels and
    hidden_size shrunk together), and its decoder's attention (over the latent grid) runs only in
    decode, on codes: the derivation decodes the codes its encode gives, and other codes, so every
    attention is read; its codes stay as wide as its latents in the tiny config (the decoder
    stacks the two)."""
    from wqk.derive.shrink import tiny_config

    tiny = tiny_config("emu3_vqgan")
    assert tiny.embed_dim == tiny.latent_channels
    for model_type in ("emu3_vqgan", "emu3"):
        d = derive(model_type)
        assert d.ok, (model_type, d.category, d.reason)
        weights = [a.weight for a in d.record.attention]
        assert any(w.endswith("decoder.middle_block.attn_1.{p}.weight") for w in weights), (model_type, weights)


def test_q_and_k_saved_fused_with_each_heads_rows_reordered_are_read_as_stored():
    """Step 3.5's vision tower and Gradium Phonon: transformers saves q, k and v as the checkpoint's
    fused in_proj weight, each head's q and k rows permuted back from rotate-half pairs to
    interleaved ones. The record reads the fused rows as stored (one order for q and k leaves each
    head's form as it is), and the logits test on the saved model passes; Gradium's rotary, rotate-half
    in the model, is interleaved on the stored rows. A block is found only where it holds the rows."""
    from wqk.derive.verified import _rows_reordered

    for model_type in ("step3p5_vision", "step3p7"):
        d = derive(model_type)
        assert d.ok, (model_type, d.category, d.reason)
        fused = [(a.weight, a.fused) for a in d.record.attention if a.weight.endswith("attn.in_proj_weight")]
        assert fused and all(f == "blocks" for _, f in fused), (model_type, fused)
    gradium = derive("gradium_phonon_tts")  # its save-time permutation reads key heads as query heads:
    assert gradium.ok, (gradium.category, gradium.reason)  # derived on a tiny model with as many of each
    tiny = gradium.record.tiny.config
    assert tiny["num_key_value_heads"] == tiny["num_attention_heads"], tiny
    assert [(a.weight, a.fused) for a in gradium.record.attention] == [
        ("layers.{i}.self_attn.in_proj.weight", "blocks")
    ]
    assert gradium.record.rope.layout == "interleaved"  # the stored rows' pairs, found at real positions
    t = torch.arange(10.0).reshape(5, 2)
    where = {row.numpy().tobytes(): i for i, row in enumerate(t)}
    assert _rows_reordered(where, t[[3, 2]]) == 2
    assert _rows_reordered(where, t[[1, 3]]) is None  # rows 1 and 3: not one block
    assert _rows_reordered(where, torch.tensor([[4.0, 5.0], [7.0, 7.0]])) is None  # a row it does not hold


def test_a_qk_norms_gain_offset_stays_where_no_pre_norm_is_read():
    """Qwen4-Exp's attention reads a hyper-connection mix (no pre-norm gain to fold) through a
    QK-norm that scales by 1 + w: the record keeps the QK-norm's offset."""
    qwen4 = derive("qwen4_exp_text")
    assert qwen4.ok and qwen4.record.attention[0].gain_offset == 1.0, qwen4.reason


@pytest.mark.slow
def test_the_encoder_norm_a_cross_attention_reads_is_its_last_layers_in_every_checkpoint(tmp_path):
    """An encoder's output is its last layer's norm (Canary's norm_out, PLBart's final_layer_norm),
    read by the decoder's cross-attention as its keys' gain: the record names that layer {last}, not
    the tiny model's number, so a checkpoint of three encoder layers reads layer 2's; a norm in the
    query's own layer (BLT's cross-attention layers, one each) is each layer's own."""
    from wqk.derive.infer import last_layer

    params = [f"encoder.layers.{i}.final_layer_norm.weight" for i in range(2)] + ["decoder.layers.0.q.weight"]
    q = "decoder.layers.0.encoder_attn.q_proj.weight"
    assert last_layer(params[1], params, q) == "encoder.layers.{last}.final_layer_norm.weight"
    assert last_layer(params[0], params, q) == params[0]  # not the last one
    assert last_layer(params[0], params[:1], q) == params[0]  # one layer: nothing tells it from its first
    own = "decoder.layers.1.norm.weight"
    assert last_layer(own, [own, "decoder.layers.0.norm.weight"], "decoder.layers.1.encoder_attn.q_proj.weight") == own
    plbart = derive("plbart")
    assert plbart.ok, plbart.reason
    assert [a.k_norm for a in plbart.record.attention if a.stack == "cross"] == [
        "encoder.layers.{last}.final_layer_norm.weight"
    ]
    canary = derive("canary")  # pre-norm: its cross-attention's keys' gain is read
    assert canary.ok, canary.reason
    (cross,) = [a for a in canary.record.attention if a.stack == "cross"]
    assert cross.k_norm == "encoder.layers.{last}.norm_out.weight"
    encoder = dict(canary.record.tiny.config["encoder_config"], num_hidden_layers=3)
    folder = build_tiny("canary", tmp_path / "canary", encoder_config=encoder)
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        want = f.get_tensor(next(n for n in f.keys() if n.endswith("encoder.layers.2.norm_out.weight")))
    crosses = [b for (stack, _), b in _blocks(folder, canary.record).items() if stack == "cross"]
    assert crosses and all(torch.equal(b.k_gain, want) for b in crosses)
    blt = derive("blt")
    assert blt.ok, blt.reason
    assert {a.k_norm for a in blt.record.attention if a.stack == "cross"} == {
        "local_encoder.cross_attn_layers.{i}.k_norm.weight",
        "local_decoder.cross_attn_layers.{i}.k_norm.weight",
    }


@pytest.mark.slow
def test_a_per_dimension_scale_after_the_qk_norm_folds_with_its_gain(tmp_path):
    """TimesFM 2.5 scales its RMS-normed queries per dimension by softplus(scaling) x 1.44 /
    sqrt(head_dim): the derivation finds the parameter behind the norm's output, and the reader
    folds the scale after the norm's gain, into each head's q (a diagonal, as the gain is)."""
    import torch.nn.functional as F

    d = derive("timesfm2_5")
    assert d.ok, d.reason
    (a,) = d.record.attention
    assert (a.q_scale, a.scale_map) == ("layers.{i}.self_attn.scaling", "softplus")
    assert a.qk_norm == ("layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.k_norm.weight")
    folder = build_tiny("timesfm2_5", tmp_path / "t")
    from safetensors.torch import load_file, save_file

    (weights,) = folder.glob("*.safetensors")
    tensors = load_file(weights)
    generator = torch.Generator().manual_seed(0)
    for name in ("q_norm.weight", "scaling"):  # built as ones: drawn, so that each column's factor differs
        t = tensors[f"layers.1.self_attn.{name}"]
        tensors[f"layers.1.self_attn.{name}"] = torch.rand(t.shape, generator=generator).to(t.dtype) + 0.5
    save_file(tensors, weights, metadata={"format": "pt"})
    ckpt = open_checkpoint(str(folder))
    block = next(b for b in read_blocks(ckpt, d.record) if b.layer == 1)
    store = ckpt.store
    w = store.get("layers.1.self_attn.q_proj.weight").double()
    gain = store.get("layers.1.self_attn.q_norm.weight").double()
    scale = F.softplus(store.get("layers.1.self_attn.scaling").double())
    pre = store.get("layers.1.input_layernorm.weight").double()
    heads, k = block.q.shape[0], block.q.shape[2]
    want = (w.reshape(heads, k, -1) * (gain * scale)[None, :, None] * pre).transpose(1, 2)
    assert torch.allclose(block.q.double(), want, rtol=1e-6), float((block.q.double() - want).abs().max())


def test_a_backbone_read_at_several_levels_keeps_its_stages():
    """RT-DETR reads its ResNet's stages 2 to 4 (AIFI attends over the last): the stages those
    name are kept, with the per-level widths of its encoder's outputs shrunk (decoder_in_channels);
    a Swin backbone read at four levels gets an image whose fourth stage has more than one token;
    stages that are layers (Depth Anything's DINOv2) are cut with the depth."""
    from wqk.derive.shrink import WIDTH, tiny_config

    rt = tiny_config("rt_detr")
    assert rt.backbone_config.out_indices == [2, 3, 4] and len(rt.backbone_config.depths) == 4
    assert rt.decoder_in_channels == [WIDTH] * 3 and rt.num_queries <= 16
    swin = tiny_config("maskformer").backbone_config
    assert len(swin.depths) == 4 and swin.image_size == 128 and len(set(swin.num_heads)) == 4
    assert tiny_config("depth_anything").backbone_config.num_hidden_layers == 2


def test_the_inputs_of_detectors_and_list_main_inputs():
    """An image that gives RT-DETR's coarsest level (stride 32) 4 x 4 tokens; OneFormer's main
    inputs, a list, and its task tokens (task_seq_len of them); LW-DETR ViT's backbone, which reads
    pixels, built rather than its encoder of windowed states."""
    from wqk.derive.build import build, model_class
    from wqk.derive.inputs import forward_inputs
    from wqk.derive.shrink import tiny_config

    rt = build(tiny_config("rt_detr"))
    assert forward_inputs(rt)["pixel_values"].shape[-1] == 128
    one = tiny_config("oneformer")
    inputs = forward_inputs(build(one))
    assert set(inputs) == {"pixel_values", "task_inputs"} and inputs["task_inputs"].shape[-1] == one.task_seq_len
    assert model_class(tiny_config("lw_detr_vit")).__name__ == "LwDetrViTBackbone"


def test_sizes_computed_after_a_repair_and_stored_under_an_alias():
    """LW-DETR: its projector's channels, one a feature level (its hint: one level), computed by
    the class once its image size is repaired; OmDet-Turbo's encoder_hidden_dim, stored as d_model,
    shrunk; EoMT's last layers with queries (num_blocks) fewer than the tiny depth."""
    from wqk.derive.shrink import WIDTH, tiny_config

    lw = tiny_config("lw_detr")
    assert lw.projector_in_channels == [WIDTH] and lw.num_feature_levels == 1
    assert tiny_config("omdet-turbo").encoder_hidden_dim == WIDTH
    eomt = tiny_config("eomt")
    assert 0 < eomt.num_blocks < eomt.num_hidden_layers


def test_rt_detr_derives():
    """Its AIFI encoder over the backbone's last level, the ResNet's convolutions drawn at their fan-in
    (of the kernel alone, four stages of them drove the logits to 1e41)."""
    d = derive("rt_detr")
    assert d.ok, (d.category, d.reason)
    assert {a.stack for a in d.record.attention} >= {"encoder", "decoder"}


def test_a_softmax_written_out_is_no_reason_to_count_a_type_without_attention():
    """Reformer's LSH attention computes exp(logits - logsumexp), and Gemma 3n's audio encoder caps its
    logits, neither of which a derivation follows to a softmax over q.k: they are refused as not
    bilinear by name (a content-dependent bucket mask; a tanh cap), not counted as having no attention."""
    from wqk.derive.coverage import statuses

    gemma3n_audio, reformer = statuses(["reformer", "gemma3n_audio"])  # sorted by type
    assert (reformer.status, reformer.category) == ("refused", "not bilinear") and "LSH" in reformer.detail
    # its soft-capped logits are no product the derivation follows: refused by name, not "no attention"
    assert gemma3n_audio.category == "not bilinear" and "soft-capped" in gemma3n_audio.detail


def test_audio_features_are_as_wide_as_the_config_says():
    from wqk.derive.inputs import _feature_width
    from wqk.derive.shrink import tiny_config

    assert _feature_width(tiny_config("wav2vec2-bert")) == 160  # two frames of 80 mel bins stacked
    assert _feature_width(tiny_config("fun_asr_nano_encoder")) == 80 * 7  # num_stacked_frames
    assert _feature_width(tiny_config("xcodec2")) == 160  # its semantic encoder's (Wav2Vec2-BERT)


def test_grids_prompts_and_token_counts_follow_the_shrunk_image():
    """Sizes of the patch grid other configs state scale as the grid does (SAM's image_embedding_size,
    SAM 2's backbone_feature_sizes and its prompt encoder's patch_size, the stride of the image
    embeddings); SAM's positional features fill the prompt width; a keypoint detector keeps as many
    keypoints of every image (LightGlue: no pruning)."""
    from wqk.derive.shrink import KEYPOINTS, WIDTH, tiny_config

    sam = tiny_config("sam")
    grid = sam.vision_config.image_size // sam.vision_config.patch_size
    assert sam.prompt_encoder_config.image_embedding_size == grid
    assert 2 * sam.vision_config.num_pos_feats == sam.prompt_encoder_config.hidden_size == WIDTH
    sam2 = tiny_config("sam2")
    sizes = [s[0] for s in sam2.vision_config.backbone_feature_sizes]
    assert sizes == [8, 4, 2] and sam2.prompt_encoder_config.image_size // sam2.prompt_encoder_config.patch_size == 2
    glue = tiny_config("lightglue")
    assert glue.keypoint_detector_config.max_keypoints == KEYPOINTS and glue.width_confidence < 0
    loftr = tiny_config("efficientloftr")  # per-block channels the class sets from out_features
    assert loftr.stage_block_out_channels[-1][0] == loftr.hidden_size == WIDTH
    # its self-attention's queries and keys pooled apart (a conv, a max-pool): filed as cross-attention
    assert_cross_only(derive("efficientloftr"))


def test_prompts_and_places_the_forwards_take_reach_the_attentions_behind_them():
    """SAM's mask decoder (points over an image whose grid its prompt encoder states), Kosmos-2's
    places of image embeddings in its text, Grounding DINO's phrases split at its delimiter tokens:
    the forward runs, and what stops the record comes after it. SAM-HQ's two-way transformer's
    cross-attentions alternate layer by layer (Attention.interleave), and the final one, like
    Kosmos-2's x_attn after its layers (latent queries over the image), is a layer of a template
    without a numbered field (Attention.single)."""
    sam_hq = derive("sam_hq")
    assert sam_hq.ok and [a.interleave for a in sam_hq.record.attention if a.stack == "cross"] == [(0, 2), (1, 2), None]
    kosmos = derive("kosmos-2")
    assert kosmos.ok, (kosmos.category, kosmos.reason)
    x_attn = [a for a in kosmos.record.attention if "x_attn" in a.weight]
    assert [(a.stack, a.single) for a in x_attn] == [("cross", True)]
    dino = derive("grounding-dino")  # its fusion layer's heads: encoder_attention_heads // 2 (below)
    assert dino.ok, (dino.category, dino.reason)


def test_vision_inputs_and_sizes_follow_the_forward_and_the_config():
    """MiniCPM-V: patches packed in a strip with their target_sizes, its merger's insert_layer_id
    inside the shrunk depth (the merger's attention outside the layers: one block of its own);
    X-CLIP: frames that differ, and twice as many texts as videos (its prompt generator's queries are
    the texts, the same for every video: B of them are too few to match columns); Florence 2: stage
    widths its stage heads divide; Llama 4:
    the hint that makes its default vision config run; Idefics2: its resampler's context; BridgeTower:
    pixels under the forward's name."""
    from wqk.derive.build import build, model_class
    from wqk.derive.inputs import forward_inputs
    from wqk.derive.shrink import tiny_config

    config = tiny_config("minicpmv4_6_vision")
    assert config.insert_layer_id < config.num_hidden_layers
    inputs = forward_inputs(build(config))
    assert inputs["target_sizes"].tolist() == [list(config.window_kernel_size)]
    assert inputs["pixel_values"].shape[-1] == config.patch_size * inputs["target_sizes"].prod()
    minicpm = derive("minicpmv4_6_vision")
    assert minicpm.ok, (minicpm.category, minicpm.reason)  # its merger's lone attention: one block
    assert [a.single for a in minicpm.record.attention if "vit_merger" in a.weight] == [True]
    xclip = derive("xclip_vision_model")  # its frames differ: its message attention runs over them
    assert xclip.ok and [a.interleave for a in xclip.record.attention] == [(0, 2), (1, 2)], xclip.reason
    inputs = forward_inputs(build(tiny_config("xclip")))
    assert inputs["input_ids"].shape[0] == 2 * inputs["pixel_values"].shape[0]
    florence = tiny_config("florence_vision")
    assert all(w % h == 0 for w, h in zip(florence.embed_dim, florence.num_heads))
    assert derive("llama4_vision_model").ok  # its rotary in complex numbers, kept complex in float64
    assert derive("idefics2").ok  # its perceiver resampler runs on its own: a context and its mask
    bridge = tiny_config("bridgetower_vision_model")
    assert set(forward_inputs(build(bridge, model_class(bridge)))) == {"image"}


def test_heads_the_code_divides_from_a_field_are_read_through_it_and_fixed_ones_by_default(tmp_path):
    """BridgeTower's vision model: nn.MultiheadAttention(hidden_size, hidden_size // 64), one head at
    the tiny width and 12 in its checkpoints, no field naming any: the code that builds it states
    the count, and the record divides the field by the constant (heads_ratio 64), so a checkpoint
    768 wide reads 12 heads, not the one a fixed head would give. Grounding DINO's text enhancer and
    fusion: encoder_attention_heads // 2. Chameleon's VQ-VAE attention, whose code names no head
    count: one head, heads_default."""
    from wqk.adapters.reader import locate
    from wqk.derive.heads import _divided_in_code

    bridge = derive("bridgetower_vision_model")
    assert bridge.ok, (bridge.category, bridge.reason)
    a = bridge.record.attention[0]
    assert (a.heads, a.heads_ratio, a.heads_default) == (("hidden_size",), 64, None), a
    folder = build_tiny("bridgetower_vision_model", tmp_path / "tiny")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 768}), encoding="utf-8")
    assert {site.heads for site in locate(open_checkpoint(str(folder)), bridge.record)} == {12}
    dino = derive("grounding-dino")
    divided = {
        (a.heads, a.heads_ratio) for a in dino.record.attention if "fusion_layer" in a.weight or "enhancer" in a.weight
    }
    assert divided == {(("encoder_attention_heads",), 2)}, divided
    code = "self.attn = nn.MultiheadAttention(config.hidden_size, config.hidden_size // 64)"
    assert _divided_in_code({"hidden_size": 128}, 2, [code]) == ("hidden_size", 64)
    assert _divided_in_code({"hidden_size": 128}, 3, [code]) is None  # not the count seen
    two = code + "; n = config.width // 32"
    assert _divided_in_code({"hidden_size": 128, "width": 64}, 2, [two]) is None  # two readings: none
    vq = derive("chameleon_vqgan")
    assert vq.ok and [a.heads_default for a in vq.record.attention] == [1], vq.reason


def test_shares_of_the_width_per_layer_overrides_and_expert_sizes_shrink_with_the_config():
    """LayoutLMv3's box: 4 coordinates and 2 shapes that make the width; BLT's hidden_size_global, the
    global stack's width; per_layer_config overrides in their ratio to the config's own fields (Gemma 4's
    full layers: heads twice as wide; dots.note's sliding layers: half the heads, a head width the sum of
    its latent parts); LongCat-Flash's zero experts and expert FFN; Gemma 4's assistant, every layer
    reusing its backbone's keys and values."""
    from wqk.derive.shrink import WIDTH, tiny_config

    layout = tiny_config("layoutlmv3")
    assert 4 * layout.coordinate_size + 2 * layout.shape_size == WIDTH
    assert tiny_config("blt").encoder_config.hidden_size_global == WIDTH
    gemma = tiny_config("gemma4_unified_text").to_dict()
    assert gemma["per_layer_config"] == {"5": {"head_dim": 2 * gemma["head_dim"]}}
    dots = tiny_config("dots3_note_text", kv_equal=True).to_dict()
    (sliding,) = dots["per_layer_config"].values()
    assert sliding["num_attention_heads"] == dots["num_attention_heads"] // 2
    assert sliding["head_dim"] == sliding["qk_nope_head_dim"] + dots["qk_rope_head_dim"]
    longcat = tiny_config("longcat_flash")
    assert longcat.zero_expert_num <= 4 and longcat.expert_ffn_hidden_size == 2 * WIDTH
    assistant = tiny_config("gemma4_unified_assistant").text_config
    assert assistant.num_kv_shared_layers == assistant.num_hidden_layers


def test_inputs_a_forward_requires_by_name():
    """OmDet-Turbo's prompts (classes and task token ids, their masks, classes per task); Idefics2's
    perceiver: its context and a required mask over it."""
    from wqk.derive.build import build
    from wqk.derive.inputs import forward_inputs
    from wqk.derive.shrink import tiny_config

    omdet = forward_inputs(build(tiny_config("omdet-turbo")))
    assert {"classes_input_ids", "classes_attention_mask", "tasks_input_ids", "tasks_attention_mask"} <= set(omdet)
    assert omdet["classes_structure"].tolist() == [1] * omdet["pixel_values"].shape[0]
    perceiver = forward_inputs(build(tiny_config("idefics2_perceiver")))
    assert perceiver["attention_mask"].shape == perceiver["context"].shape[:2]


@pytest.mark.parametrize(
    "model_type",
    [
        "udop",  # token boxes, by which it places its image's patches
        "idefics",  # images per text and the images each token attends to
        "clvp_encoder",  # its hint: heads wide enough for its rotary of 32
        "blt_local_encoder",  # bytes pooled into patches (patch_ids, num_patches)
        "ernie4_5_vl_moe_text",  # its hint: rope sections of the tiny head
    ],
)
def test_boxes_images_per_text_patches_and_hints_let_the_forward_run(model_type):
    d = derive(model_type)
    assert d.ok, (d.category, d.reason)


def test_audio_models_run_on_the_inputs_their_forwards_and_configs_name():
    """Token ids over codebooks (Dia's decoder: [B, tokens, codebooks], with encoder states;
    Kyutai's text stream beside them), a projector reached through get_audio_features (Fun-ASR
    Nano), features as wide as the first linear layer reads (Granite Speech 5's stacked frames), a
    sub-model on the root's own config (SeamlessM4T's speech encoder): the forward runs, and the
    last two derive with their relative positions zeroed (Shaw's keys, Transformer-XL's terms)."""
    from wqk.derive.shrink import WIDTH, tiny_config

    dia = tiny_config("dia_decoder")
    assert dia.cross_hidden_size == WIDTH and dia.cross_num_attention_heads != dia.num_attention_heads
    tokenizer = tiny_config("vibevoice_acoustic_tokenizer")
    assert len(tokenizer.downsampling_ratios) == len(tokenizer.depths) - 1
    for model_type in ("dia_decoder", "dia", "kyutai_speech_to_text", "fun_asr_nano"):
        assert derive(model_type).ok, (model_type, derive(model_type).reason)
    for model_type, zeroed in (
        ("granite_speech5_encoder", "rel_pos_emb.weight"),
        ("seamless_m4t", "linear_pos.weight"),
    ):
        d = derive(model_type)
        assert d.ok and zeroed in _zeroed(d), (model_type, d.reason)


@pytest.mark.slow
def test_a_root_whose_towers_leave_attention_out_gives_its_error_to_the_retries():
    """X-Codec 2's root forward fails with key heads fewer than query heads, and its towers leave its
    decoder out: the root's error stands, so the retry with as many key heads runs it, and it
    derives, its semantic encoder's relative keys zeroed. Half a minute."""
    d = derive("xcodec2")
    assert d.ok and "distance_embedding.weight" in _zeroed(d), d.reason


def test_sizes_and_ropes_a_config_leaves_to_its_checkpoint_are_set():
    """Experts left unset (dots.llm1, DiffusionGemma) where the model builds them: a few, unless a
    flag turns them off (Gemma 4's enable_moe_block); a rope per layer kind left empty (Cohere
    Compass): the default rope for each kind; a VQ-VAE whose attention is as wide as its last stage
    (Emu3): every stage the tiny width."""
    from wqk.derive.shrink import WIDTH, tiny_config

    dots = tiny_config("dots1")
    assert dots.n_routed_experts == 4 and dots.num_experts_per_tok == 2 and dots.n_shared_experts == 1
    assert tiny_config("diffusion_gemma_text").num_experts == 4
    assert tiny_config("gemma4_text").num_experts is None
    compass = tiny_config("cohere_compass_text")
    assert set(compass.rope_parameters) == set(compass.layer_types)
    vq = tiny_config("emu3").vq_config
    assert vq.base_channels * vq.channel_multiplier[-1] == vq.hidden_size == WIDTH


def test_a_tower_without_a_forward_of_its_own_is_left_to_the_root():
    """Chameleon's VQ-VAE has no forward: its text model derives past it, not a forward error,
    with the VQ-VAE's encoder block (run through its encode) beside the text decoder."""
    d = derive("chameleon")
    assert d.ok, d.reason
    assert {a.stack for a in d.record.attention} == {"encoder", "decoder"}


def test_a_tower_that_embeds_patches_linearly_reads_them_flattened():
    """Molmo 2's ViT: a position per patch of the tiny grid, and patches as rows of pixels."""
    from wqk.derive.build import build
    from wqk.derive.inputs import forward_inputs
    from wqk.derive.shrink import tiny_config

    config = tiny_config("molmo2_vision")
    assert config.num_position_embeddings == (config.image_size[0] // config.patch_size) ** 2
    pixels = forward_inputs(build(config))["pixel_values"]
    assert pixels.shape[1:] == (config.num_position_embeddings, 3 * config.patch_size**2)


def test_token_ids_beside_audio_features_of_one_embedding_a_token():
    """Voxtral Realtime adds its audio embeddings to its token embeddings position by position and
    refuses ids alone: a variant of the ids beside as many frames as make one embedding a token."""
    from wqk.derive.build import build
    from wqk.derive.inputs import input_variants
    from wqk.derive.shrink import tiny_config

    model = build(tiny_config("voxtral_realtime"))
    both = [v for v in input_variants(model) if "input_ids" in v and "input_features" in v]
    assert both, "no variant of ids and audio"
    with torch.no_grad():
        model(**both[-1])


def test_states_a_forward_projects_itself_are_made_beside_its_embeds():
    """BLT's local decoder reads byte states and the global transformer's patch states (patch_embeds,
    through patch_embedding_projection), not token ids."""
    from wqk.derive.build import build
    from wqk.derive.inputs import input_variants
    from wqk.derive.shrink import tiny_config

    model = build(tiny_config("blt_local_decoder"))
    both = [v for v in input_variants(model) if "inputs_embeds" in v and "patch_embeds" in v]
    assert both and both[0]["patch_embeds"].shape[-1] == model.patch_embedding_projection.in_features
    with torch.no_grad():
        model(**both[0])


def test_a_model_without_a_forward_runs_its_encoder_and_its_lone_1x1_convolution_attention_is_read():
    """Chameleon's VQ-VAE has no forward: it is built and its encode runs; its one attention block
    (1x1 convolutions over [B, C, H, W], one head no config field states, no number in its name)
    reads as a record of one block, one head, q alone not taken for a gated q."""
    from wqk.derive.build import model_class
    from wqk.derive.shrink import tiny_config

    assert model_class(tiny_config("chameleon_vqgan")).__name__ == "ChameleonVQVAE"
    d = derive("chameleon_vqgan")
    assert d.ok, (d.category, d.reason)
    (a,) = d.record.attention
    assert (a.weight, a.single, a.heads_default, a.q_gate) == ("encoder.mid.attn_1.{p}.weight", True, 1, False)
    assert d.facts["modality"] == "vision"


@pytest.mark.slow
def test_a_generation_composite_without_a_forward_runs_its_towers():
    """Qwen3-Omni's model has no forward: its towers run each on its own; its thinker's audio and
    vision encoders are encoders inside it; its talker's config reads the vision config's
    spatial_merge_size, which the config class lacks."""
    d = derive("qwen3_omni_moe")
    assert d.ok, (d.category, d.reason)
    assert {a.weight.split(".")[0]: a.stack for a in d.record.attention}["audio_tower"] == "encoder"


def test_a_tower_whose_modules_compute_no_attention_is_no_reason_to_refuse_its_composite():
    """GLM-Image's VQ-VAE is a quantizer alone (its type's module computes attention, for the other
    towers): refused as no attention, not for its forward; the composite's other towers derive."""
    d = derive("glm_image_vqmodel")
    assert d.category == "no attention" and "no class of its model's modules" in d.reason, d.reason


def test_a_type_without_a_modeling_module_is_built_by_the_class_its_task_mapping_names():
    """PP-Chart2Table has no modeling module: the image-text-to-text mapping names GOT-OCR 2's model."""
    from wqk.derive.build import model_class
    from wqk.derive.shrink import tiny_config

    assert model_class(tiny_config("pp_chart2table")).__name__ == "GotOcr2ForConditionalGeneration"


def test_an_attention_outside_the_numbered_layers_is_one_layer_of_its_own():
    merger = Attention("encoder", "vit_merger.self_attn.{p}.weight", single=True)  # a template without {i}: one module
    assert merger.fields == ()  # derived for MiniCPM-V's merger and Kosmos-2's projection (tests above)
    assert derive("minimax_m3_vl").ok  # its indexer's head count moved off its text model's (HINTS)


def test_codegens_fused_weight_is_read_shard_by_shard_query_value_key():
    from wqk.adapters.common import fused_rows

    w = torch.arange(24.0)[:, None]  # 4 shards of [q_s v_s k_s], 2 rows each: 2 heads of 4
    q, k = fused_rows(w, 2, 2, "qvk_shards")
    assert q.flatten().tolist() == [0, 1, 6, 7, 12, 13, 18, 19] and k.flatten().tolist() == [
        4,
        5,
        10,
        11,
        16,
        17,
        22,
        23,
    ]
    codegen = derive("codegen")
    assert codegen.ok and codegen.record.attention[0].fused == "qvk_shards"


def test_templates_that_alternate_may_number_other_layers():
    """X-CLIP's vision layers run a message attention over the frames' class tokens, then the
    self-attention over each frame's patches: they alternate layer by layer (Attention.interleave),
    the message attention's first layer, over the embeddings' class tokens (the same whatever the
    frames), no call of the tokens' own. The reader numbers both by their layer, message first;
    templates that do not alternate stay refused."""
    from wqk.derive.assemble import _alternate

    def run(*names):
        return [(n, [SimpleNamespace(q_weight=w) for w in ws]) for n, ws in names]

    message = ("m", ["layers.1.message_attn.q_proj.weight", "layers.2.message_attn.q_proj.weight"])
    own = ("s", [f"layers.{i}.self_attn.q_proj.weight" for i in range(3)])
    entries = run(own, message)
    forward = [own[1][0], message[1][0], own[1][1], message[1][1], own[1][2]]
    position = {id(f): forward.index(f.q_weight) for _, g in entries for f in g}
    assert [key for key, _ in _alternate(entries, position)] == ["m", "s"]
    position = {id(f): n for n, f in enumerate(f for _, g in entries for f in g)}  # one after the other
    assert _alternate(entries, position) is None
    xclip = derive("xclip_vision_model")
    assert xclip.ok, xclip.reason
    assert [(a.weight.split(".")[3], a.interleave) for a in xclip.record.attention] == [
        ("message_attn", (0, 2)),
        ("self_attn", (1, 2)),
    ]


@pytest.mark.slow  # a derivation of the whole composite
def test_x_clips_prompt_generator_reads_its_texts_over_the_video_as_cross_attention():
    """X-CLIP's texts (twice its videos in the tiny forward: test_vision_inputs_and_sizes...) are
    its prompt generator's queries over the video's tokens, normed by its own layernorm."""
    xclip = derive("xclip")
    assert xclip.ok, (xclip.category, xclip.reason)
    prompts = [a for a in xclip.record.attention if a.weight.startswith("prompts_generator.")]
    assert [(a.stack, a.k_norm) for a in prompts] == [("cross", "prompts_generator.layernorm.weight")]


def test_an_einsum_with_a_parameter_is_a_projection():
    """XLNet projects with torch.einsum("ibh,hnd->ibnd", h, self.q) over parameters [d_model, heads,
    head_dim]: a projection x @ W (conv1d's orientation), the parameter read flattened to [d_model,
    heads * head_dim]; its relative position kernel r and the u, v and segment biases are zeroed
    (the content term scored, as Transformer-XL's elsewhere). An einsum whose parameter's first
    dim is not the one contracted is no projection."""
    from wqk.adapters.reader import _as_matrix
    from wqk.derive.trace import tracing

    xlnet = derive("xlnet")
    assert xlnet.ok, xlnet.reason
    (a,) = xlnet.record.attention
    assert (a.weight, a.qk, a.conv1d) == ("layer.{i}.rel_attn.{p}", ("q", "k"), True)
    assert {"rel_attn.r", "rel_attn.r_w_bias", "rel_attn.seg_embed"} <= _zeroed(xlnet)
    w = torch.arange(24.0).reshape(2, 3, 4)
    assert torch.equal(_as_matrix(w), w.reshape(2, 12))

    class Einsums(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.t = torch.nn.Parameter(torch.randn(8, 2, 4)), torch.nn.Parameter(torch.randn(2, 4, 8))

        def forward(self, x):
            return torch.einsum("ibh,hnd->ibnd", x, self.q), torch.einsum("ibh,ndh->ibnd", x, self.t)

    model = Einsums()
    x = torch.randn(5, 2, 8)
    with tracing(model) as trace:
        model(x)
    (projection,) = trace.projections
    assert projection.weight == "q" and projection.conv1d
    assert torch.allclose(projection.out, x @ model.q.detach().reshape(8, 8))


@pytest.mark.slow
def test_informers_record_traced_under_full_attention_is_its_probsparse_logits(tmp_path):
    """Informer is traced with full attention (its hint): ProbSparse, its checkpoints' attention,
    keeps a content-chosen subset of queries, whose logits against every key are the record's form
    (the same q and k projections and scale); the others get none."""
    from transformers import InformerConfig, InformerModel

    from wqk.derive.inputs import input_variants
    from wqk.derive.trace import tracing

    informer = derive("informer")
    assert informer.ok, informer.reason
    # 64 steps of context: ProbSparse keeps 5 x ceil(ln(65)) = 25 queries of them (all of a shorter one)
    config = InformerConfig(**{**informer.record.tiny.config, "attention_type": "prob", "context_length": 64})
    torch.manual_seed(0)
    model = InformerModel(config).double().eval()
    model.save_pretrained(tmp_path / "prob")
    ckpt = open_checkpoint(str(tmp_path / "prob"))
    block = next(b for b in with_extras(ckpt, read_blocks(ckpt, informer.record), informer.record) if b.layer == 0)
    assert block.stack == "encoder"
    seen = {}

    def keep(module, args, kwargs):
        seen["x"] = kwargs.get("hidden_states", args[0] if args else None)

    model.encoder.layers[0].self_attn.register_forward_pre_hook(keep, with_kwargs=True)
    with tracing(model) as trace, torch.no_grad():
        model(**input_variants(model)[0])
    x = seen["x"].double()
    n, t, _ = x.shape
    q = torch.einsum("btd,hdc->bhtc", x, block.q.double()) + block.q_bias.double()[None, :, None]
    k = torch.einsum("btd,hdc->bhtc", x, block.k.double()) + block.k_bias.double()[None, :, None]
    full = (q @ k.transpose(-1, -2) * block.q.shape[2] ** -0.5).reshape(n * block.n_heads, t, t)
    scores = trace.softmaxes[0].scores.double()  # [N * H, u queries kept, T keys]
    assert scores.shape[0] == n * block.n_heads and scores.shape[1] < t and scores.shape[2] == t
    # each kept query's logits are one row of the full form
    distance = (scores[:, :, None, :] - full[:, None, :, :]).abs().amax(-1).amin(-1)
    assert float(distance.max()) < 1e-9 * float(full.abs().max()), float(distance.max())


def test_a_learned_scale_of_the_queries_columns_is_folded_into_q(tmp_path):
    """TimesFM scales its queries' columns by softplus(scaling) x 1.44 / sqrt(head_dim) after the
    projection: the derivation finds the parameter and its map (Attention.q_scale, scale_map), the
    reader folds softplus(scaling) into each head's q and its bias; the constant is the softmax
    scale's. Factors no parameter explains stay refused (LeViT's BatchNorm: a running variance)."""
    import torch.nn.functional as F

    from wqk.derive.calls import _column_scale

    timesfm = derive("timesfm")
    assert timesfm.ok, timesfm.reason
    (a,) = timesfm.record.attention
    assert (a.q_scale, a.scale_map) == ("layers.{i}.self_attn.scaling", "softplus")
    folder = build_tiny("timesfm", tmp_path / "timesfm")
    ckpt = open_checkpoint(str(folder))
    block = next(b for b in with_extras(ckpt, read_blocks(ckpt, timesfm.record), timesfm.record) if b.layer == 0)
    store = ckpt.store
    w = store.get("layers.0.self_attn.q_proj.weight").double()
    scale = F.softplus(store.get("layers.0.self_attn.scaling").double())
    heads, k = block.q.shape[0], block.q.shape[2]
    want = (w.reshape(heads, k, -1) * scale[None, :, None]).transpose(1, 2)
    assert torch.allclose(block.q.double(), want, rtol=1e-6)
    bias = store.get("layers.0.self_attn.q_proj.bias").double().reshape(heads, k) * scale
    assert torch.allclose(block.q_bias.double(), bias, rtol=1e-6)
    assert not derive("levit").ok
    trace = SimpleNamespace(parameters={"attn.s": torch.tensor([1.0, 2.0])})
    calls = [SimpleNamespace(name="attn")]
    assert _column_scale([3.0, 6.0, 3.0, 6.0], 2, 2, trace, calls)[1:] == ("identity", 3.0)
    assert _column_scale([3.0, 5.0, 3.0, 6.0], 2, 2, trace, calls) is None


def test_a_config_json_with_floats_json_cannot_hold_derives(tmp_path):
    """transformers writes an infinite float of config.json as {"__float__": "Infinity"} (Bamba's
    time_step_limit [0.0, inf], as every Mamba-2 hybrid's): read back as the float, the derivation
    of the checkpoint's own structure runs, where the config class refused the object."""
    from wqk.derive.shrink import _special_floats

    folder = build_tiny("bamba", tmp_path / "bamba")
    config = json.loads((folder / "config.json").read_text())
    assert config["time_step_limit"][1] == {"__float__": "Infinity"}
    assert derive("bamba", config).ok
    assert _special_floats([{"__float__": "-Infinity"}, {"a": {"__float__": "NaN"}}, {"__float__": "x"}])[0] == float(
        "-inf"
    )
    assert _special_floats({"__float__": "x"}) == {"__float__": "x"}


def test_latent_attention_over_a_normalised_latent_is_not_bilinear():
    """GLM-5 Next's queries are q_b_proj of q_a_layernorm(q_a_proj(x)) (latent attention with no
    rotary part): a form of per-token normalised latents, refused as not bilinear, where its keys'
    rows had been read as a layout of kv_b_proj's."""
    glm = derive("glm5_next_text")
    assert glm.category == "not bilinear" and "latent attention" in glm.reason, glm.reason


def test_a_gate_saved_before_q_k_and_v_in_one_tensor_is_read_past():
    """HRM saves each layer's gate, q, k and v projections as one gqkv_proj tensor, [g | q | k | v]
    (transformers' conversion cuts it into four): the record reads it fused "gate_blocks", its q
    rows after the gate's, and its biases so; rows that hold no gate beside q, k, v are refused."""
    from wqk.adapters.common import fused_rows
    from wqk.errors import HeadsDoNotFit

    w = torch.arange(16.0)[:, None]  # 2 heads of 2 rows: g 0-3, q 4-7, k 8-11, v 12-15
    q, k = fused_rows(w, 2, 2, "gate_blocks")
    assert q.flatten().tolist() == [4, 5, 6, 7] and k.flatten().tolist() == [8, 9, 10, 11]
    with pytest.raises(HeadsDoNotFit, match="g, q, k, v"):
        fused_rows(torch.zeros(12, 1), 2, 2, "gate_blocks")
    hrm = derive("hrm_text")
    assert hrm.ok, hrm.reason
    assert {(a.weight, a.fused) for a in hrm.record.attention} == {
        (f"{m}_module.layers.{{i}}.attn.gqkv_proj.weight", "gate_blocks") for m in "LH"
    }


def test_one_head_that_the_code_fixes_needs_no_config_field():
    from wqk.derive.heads import names_no_heads

    assert not names_no_heads(torch.nn.MultiheadAttention)  # its heads are an argument (BridgeTower: width // 64)
    wavtokenizer = derive("wavtokenizer")  # a 1x1-convolution attention of one head, no gate beside its query rows
    assert wavtokenizer.ok and wavtokenizer.record.attention[0].heads_default == 1, wavtokenizer.reason
    cvt = derive("cvt")  # 1 head in its first stage: no gate; its keys and queries read two convolutions
    assert_cross_only(cvt)
    assert cvt.record.attention[0].heads == ("num_heads",) and cvt.record.attention[0].heads_by == "i"


def test_heads_a_ratio_field_divides_are_read_through_it():
    convbert = derive("convbert")  # num_attention_heads // head_ratio heads
    assert convbert.ok and convbert.record.attention[0].heads_ratio == "head_ratio", convbert.reason


def test_head_counts_per_layer_are_read_by_the_layer():
    """Laguna's query heads per layer (num_attention_heads_per_layer, each tiny layer a count of its own,
    no field's) and Sapiens2's key heads per layer (as many as its query heads in its first layer): the
    list's key, indexed by the layer's number (heads_by), beside the other count's scalar key."""
    for model_type, heads, kv in (
        ("laguna", "num_attention_heads_per_layer", "num_key_value_heads"),
        ("sapiens2", "num_attention_heads", "num_key_value_heads_per_layer"),
    ):
        d = derive(model_type)
        assert d.ok, (model_type, d.category, d.reason)
        a = d.record.attention[0]
        assert (a.heads, a.kv_heads, a.heads_by) == ((heads,), (kv,), "i"), (model_type, a)


def test_staged_towers_keep_what_their_configs_tie_to_their_stages():
    """LeViT's three stages (its config builds the subsampling between them) and patches of 16; PVT's
    four (the last alone reads a class token and reduces no keys); Swin2SR's patches of one pixel and
    per-stage lists as shrunk; MobileViT v2's image, whose coarsest map holds a patch; Sapiens2's key
    heads per layer, each kind of layer once; DeepSeek-OCR 2's MLP kinds and SAMs downsampled to the
    encoder they feed."""
    from wqk.derive.shrink import WIDTH, tiny_config

    levit = tiny_config("levit")
    assert len(levit.depths) == 3 and levit.patch_size == 16
    pvt = tiny_config("pvt")
    assert len(pvt.depths) == 4 and pvt.sequence_reduction_ratios[-1] == 1
    swin2sr = tiny_config("swin2sr")
    assert swin2sr.patch_size == 1 and list(swin2sr.depths) == [1, 2] and len(swin2sr.num_heads) == 2
    mobilevit = tiny_config("mobilevitv2")
    assert mobilevit.image_size >= mobilevit.output_stride * mobilevit.patch_size
    sapiens = tiny_config("sapiens2")
    assert sapiens.num_key_value_heads_per_layer == [sapiens.num_attention_heads, 2]
    assert tiny_config("deepseek_ocr2_text").mlp_layer_types == ["dense", "sparse"]
    for model_type in ("unlimited_ocr_vision", "deepseek_ocr2_vision"):
        vision = tiny_config(model_type)
        assert vision.sam_config.downsample_channels[-1] == vision.encoder_config.hidden_size == WIDTH


def test_inputs_of_towers_fed_by_others_and_of_patches_laid_out_otherwise():
    """Unlimited-OCR's CLIP encoder: its SAM's patch embeddings; DeepSeek-OCR 2's encoder: states with
    their patches first; Inkling's audio: ids of its codebooks; Inkling 2's vision: merge windows
    channels last and their grid in tokens; Inkling's vision: each patch's frames."""
    from wqk.derive.build import build
    from wqk.derive.inputs import B, T, forward_inputs, input_variants
    from wqk.derive.shrink import WIDTH, tiny_config

    clip = forward_inputs(build(tiny_config("unlimited_ocr_vision_encoder")))
    assert clip["patch_embeds"].shape[:2] == (B, WIDTH) and clip["patch_embeds"].ndim == 4
    encoder = forward_inputs(build(tiny_config("deepseek_ocr2_encoder")))
    assert encoder["num_patches"] == T // 2 and encoder["inputs_embeds"].shape[1] == T
    audio = tiny_config("inkling_audio")
    ids = forward_inputs(build(audio))["audio_input_ids"]
    assert ids.shape == (B, T, audio.num_codebooks) and int(ids.max()) < audio.codebook_size
    inkling2 = [v for v in input_variants(build(tiny_config("inkling2_vision"))) if "image_grid_thw" in v]
    assert [v["pixel_values"].ndim for v in inkling2] == [2, 4]
    inkling = input_variants(build(tiny_config("inkling_vision")))
    assert any(v["pixel_values"].ndim == 5 for v in inkling)


@pytest.mark.parametrize("model_type", ["pvt", "deepseek_ocr2_encoder", "unlimited_ocr_vision_encoder"])
def test_staged_and_fed_towers_derive(model_type):
    """PVT's first stage of one head: its query rows read as ungated (a gated query projection is
    twice as wide); the OCR encoders on the inputs their towers hand them."""
    d = derive(model_type)
    assert d.ok, (d.category, d.reason)


def test_a_composites_parts_get_the_states_their_signature_names():
    """SAM 3's DETR encoder and decoder and its mask decoder, each on its own: the states and
    feature maps (one level of side x side = tokens) their required inputs name, at the config's
    width, and the optional ones the composite passes beside them (the levels' position
    embeddings, the prompt); the decoder's text and vision cross-attentions alternate layer by
    layer; the mask decoder's only attention is cross-attention, a record of that stack alone."""
    from wqk.derive.build import build, model_class
    from wqk.derive.inputs import T, forward_inputs
    from wqk.derive.shrink import WIDTH, tiny_config

    config = tiny_config("sam3_mask_decoder")
    inputs = forward_inputs(build(config, model_class(config)))
    assert inputs["decoder_queries"].shape[-1] == inputs["prompt_features"].shape[-1] == WIDTH
    assert [tuple(m.shape[1:]) for m in inputs["backbone_features"]] == [(WIDTH, 3, 3)] and 3 * 3 == T
    assert derive("sam3_detr_encoder").ok
    assert derive("sam3_detr_decoder").ok
    assert_cross_only(derive("sam3_mask_decoder"))


def test_rotations_and_qk_norms_the_forward_computes_its_own_way():
    """RoFormer's rotary from a frozen [sin | cos] table (kept as built, made sin 0, cos 1 while
    tracing, then the fixed formula over the head); Phi-MoE's frequencies recomputed in each forward
    (its positions made 0); NanoChat's QK-norm without a gain (blocks marked qk_norm_gain_folded)."""
    roformer = derive("roformer")
    assert roformer.ok and roformer.record.rope.layout == "interleaved", roformer.reason
    assert derive("phimoe").ok
    nanochat = derive("nanochat")
    assert nanochat.ok and nanochat.record.attention[0].qk_norm_unit, nanochat.reason


def test_kv_producer_is_the_last_earlier_layer_of_the_same_kind():
    from wqk.adapters.common import kv_producer

    types = ["s", "s", "f", "s", "f", "s", "f"]  # the last 3 reuse: layers 4 (f) and 5 (s), 6 (f)
    assert [kv_producer(types, 3, i) for i in range(7)] == [None, None, None, None, 2, 3, 2]
    assert [kv_producer(types, 0, i) for i in range(7)] == [None] * 7
    assert kv_producer(types, 7, 6) is None  # every layer reuses another model's (Gemma 4's assistant)
    assert kv_producer(None, 3, 6) is None


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_layers_that_reuse_an_earlier_layers_keys_read_that_layers_tensors(tmp_path):
    """Gemma 3n's and Gemma 4's last num_kv_shared_layers layers reuse the keys of the last earlier
    layer of their kind (Gemma 4's hold no k_proj at all): the derivation finds the count in the
    config (Attention.kv_shared), and the reader reads those layers' key weight, QK-norm gain and
    pre-norm gain from that layer. Without it, a Gemma 4 checkpoint with shared layers (E2B, E4B)
    has no key weight where the record looks."""
    import transformers

    from wqk.errors import MissingTensor

    gemma3n = derive("gemma3n_text")
    assert gemma3n.ok, gemma3n.reason
    assert [(a.stack, a.kv_shared) for a in gemma3n.record.attention] == [("decoder", "num_kv_shared_layers")]
    fields = transformers.Gemma4TextConfig().to_dict()
    plain = derive("gemma4_text", dict(fields)).record
    assert plain.attention[0].kv_shared is None
    shared = derive("gemma4_text", dict(fields, num_kv_shared_layers=10))
    assert shared.ok and shared.record.attention[0].kv_shared == "num_kv_shared_layers", shared.reason
    assert shared.record.tiny.config["layer_types"][-2:] == ["full_attention"] * 2  # its last layer as the real one's
    config = dict(shared.record.tiny.config, num_hidden_layers=8, num_kv_shared_layers=2)
    config["layer_types"] = config["layer_types"][:6] + ["sliding_attention", "full_attention"]
    full = next(iter(config["per_layer_config"].values()))  # the full-attention layers' own head width
    config["per_layer_config"] = {"5": full, "7": full}
    torch.manual_seed(0)
    model = transformers.Gemma4ForCausalLM(transformers.Gemma4TextConfig.from_dict(config))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()  # norm gains of their own (initialised all alike)
    model.save_pretrained(tmp_path)
    ckpt = open_checkpoint(str(tmp_path))
    with pytest.raises(MissingTensor, match="layers.6.self_attn.k_proj"):
        list(read_blocks(ckpt, plain))
    blocks = {b.layer: b for b in with_extras(ckpt, read_blocks(ckpt, shared.record), shared.record)}
    assert sorted(blocks) == list(range(8))
    for layer, producer in ((6, 4), (7, 5), (5, 5)):
        assert torch.equal(blocks[layer].k, blocks[producer].k) and torch.equal(
            blocks[layer].k_gain, blocks[producer].k_gain
        )
    assert not torch.equal(blocks[6].q, blocks[4].q) and not torch.equal(blocks[6].k_gain, blocks[6].q_gain)


def test_layouts_and_rotations_of_their_own_are_read_or_refused_by_name():
    """FSMT's time-first [T, B, E] projections read batch-major; V-JEPA 2's 3-d rotary computed in
    its attention from its own positions undone while tracing (left out of the record), its video
    filed as vision."""
    assert derive("fsmt").ok
    vjepa2 = derive("vjepa2")
    assert vjepa2.ok and vjepa2.record.rope is None, vjepa2.reason
    assert vjepa2.facts["modality"] == "vision"  # its main input: pixel_values_videos
    assert derive("mlcd_vision_model").ok  # its class token's learned angle, beside the rotary's call


def test_angles_handed_to_an_attention_as_a_cos_sin_pair_are_undone_while_tracing():
    """LightGlue computes its rotary's angles from each keypoint's coordinates (a learned map, no
    inv_freq) and hands them to its attentions as position_embeddings=(cos, sin): while tracing
    without rotation the attention sees cos 1 and sin 0; a pair that is no rotation (DETR-like
    position tensors) reaches it as it was."""
    from wqk.derive.verified import no_rotation

    class ToyAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = torch.nn.Linear(4, 4)

        def forward(self, x, position_embeddings=None):
            self.seen = position_embeddings
            return x

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = ToyAttention()

        def forward(self, x, pair):
            return self.attn(x, position_embeddings=pair)

    model, angles = Toy(), torch.rand(2, 3, 4) * 3
    rotary, other = (angles.cos(), angles.sin()), (torch.rand(2, 3, 4), torch.rand(2, 3, 4))
    with no_rotation(model):
        model(torch.zeros(2, 3, 4), rotary)
        assert torch.equal(model.attn.seen[0], torch.ones(2, 3, 4))
        assert torch.equal(model.attn.seen[1], torch.zeros(2, 3, 4))
        model(torch.zeros(2, 3, 4), other)
        assert model.attn.seen[0] is other[0] and model.attn.seen[1] is other[1]
    model(torch.zeros(2, 3, 4), rotary)  # the hook is gone afterwards
    assert model.attn.seen[1] is rotary[1]


def test_a_cache_of_a_modules_outputs_by_its_inputs_misses_in_the_tiny_model():
    """OmDet-Turbo keeps its text encoder's embeddings per prompt in an LRU cache: a second forward
    of the same prompt would skip the encoder (its attention never ran). The built model's caches
    miss; its other attributes stay."""
    from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboLRUCache

    from wqk.derive.build import _uncached

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].cache, model[0].other = OmDetTurboLRUCache(4), {"key": 1}
    model[0].cache.put("key", 1)
    assert model[0].cache.has("key")
    _uncached(model)
    assert not model[0].cache.has("key") and model[0].other == {"key": 1}


def test_a_class_that_inherits_input_ids_is_filed_by_the_modality_it_declares():
    """Granite Speech's encoder and the vision towers of Llama 4 or Qwen2-VL inherit the main input
    name "input_ids" and declare their modality (input_modalities): that one, where it is one; a
    main input that names its modality wins; several declared modalities leave the name's, and so
    does a class that names "input_ids" itself below a base that declares images (AIMv2's text
    model) or audio (Canary's decoder)."""
    from transformers.models.aimv2.modeling_aimv2 import Aimv2TextModel
    from transformers.models.canary.modeling_canary import CanaryDecoder
    from transformers.models.granite_speech.modeling_granite_speech import GraniteSpeechCTCEncoder
    from transformers.models.llama4.modeling_llama4 import Llama4VisionModel

    from wqk.derive.run import declared_modality

    def model(main, declared):
        return type("M", (), {"main_input_name": main, "input_modalities": declared})()

    assert declared_modality(GraniteSpeechCTCEncoder) == "audio"
    assert declared_modality(Llama4VisionModel) == "vision"
    assert declared_modality(Aimv2TextModel) == declared_modality(CanaryDecoder) == "text"
    assert declared_modality(model("input_ids", ("image", "video"))) == "vision"
    assert declared_modality(model("input_ids", ("image", "text"))) == "text"
    assert declared_modality(model("input_features", "text")) == "audio"
    assert declared_modality(model("input_ids", ())) == "text"


def test_channel_attention_is_left_out_beside_attention_between_tokens_and_refused_alone():
    """DaViT's channel attention (q and k transposed: a softmax over logits between channels, no
    form of two tokens): left out, and named, where the forward attends between tokens too
    (Florence 2's spatial windows); a forward of channel attention alone is refused by name."""
    from wqk.derive.calls import ChannelAttention

    class Channels(_TwoHeads):
        def forward(self, x):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(x))
            return torch.softmax(q.transpose(-1, -2) @ k, dim=-1)

    class Tokens(_TwoHeads):
        def forward(self, x):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(x))
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1)

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.channel_attn, self.window_attn = Channels(), Tokens()

        def forward(self, x, memory):
            return self.channel_attn(x), self.window_attn(x)

    class Alone(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.channel_attn = Channels()

        def forward(self, x, memory):
            return self.channel_attn(x)

    left_out = []
    (call,) = _two_input_calls(Both(), left_out)
    assert call.q.projection.weight == "0.window_attn.q_proj.weight" and left_out == ["0.channel_attn"]
    with pytest.raises(ChannelAttention, match="attention over channels"):
        _two_input_calls(Both())  # no list to name them in: refused
    with pytest.raises(ChannelAttention, match="attention over channels"):
        _two_input_calls(Alone(), [])


@pytest.mark.slow  # a derivation
def test_florences_window_attention_is_read_and_its_channel_attention_named():
    florence = derive("florence_vision")
    assert florence.ok, (florence.category, florence.reason)
    assert [a.weight for a in florence.record.attention] == ["blocks.{i}.{j}.spatial_block.window_attn.qkv.weight"]
    channel = florence.facts["attention over channels (left out)"]
    assert channel and all(n.endswith("channel_block.channel_attn") for n in channel), channel


def test_pooled_queries_are_refused_by_name():
    """Hiera's max-pooled queries: not bilinear, the reason naming its mechanism."""
    hiera = derive("hiera")
    assert hiera.category == "not bilinear" and "pooled" in hiera.reason, hiera.reason


def test_grouped_1x1_convolutions_are_read_as_block_diagonal_projections():
    """SqueezeBERT's queries and keys are grouped 1x1 convolutions (q_groups, k_groups: weights
    stored [out, in / groups, 1]): the tiny config gives each count of its own, the record names
    both keys, and the reader expands each weight to the block-diagonal matrix it is, which the
    logits test inside derive checks against the model's own scores."""
    from wqk.derive.shrink import tiny_config

    tiny = tiny_config("squeezebert")
    assert (tiny.q_groups, tiny.k_groups) == (2, 3)
    squeezebert = derive("squeezebert")
    assert squeezebert.ok, squeezebert.reason
    assert squeezebert.record.attention[0].groups == ("q_groups", "k_groups")


def test_a_grouped_weight_is_the_block_diagonal_matrix_of_its_convolution():
    """_block_diagonal against torch's own grouped convolution, and a count that does not divide
    the outputs named as a corrupt checkpoint."""
    import types

    from wqk.adapters.reader import _block_diagonal
    from wqk.errors import CorruptCheckpoint

    torch.manual_seed(0)
    conv = torch.nn.Conv1d(12, 6, 1, groups=3, bias=False).double()
    x = torch.randn(2, 12, 5, dtype=torch.float64)
    site = types.SimpleNamespace(name=lambda weight, part: f"layer.{part}", attention=types.SimpleNamespace(weight="w"))
    ckpt = types.SimpleNamespace(model_id="m", config={"q_groups": 3, "k_groups": 4})
    matrix = _block_diagonal(ckpt, site, conv.weight.detach()[..., 0], "q_groups", "query")
    assert matrix.shape == (6, 12)
    assert torch.allclose(torch.einsum("oi,bit->bot", matrix, x), conv(x), rtol=0, atol=1e-12)
    with pytest.raises(CorruptCheckpoint, match="k_groups = 4"):
        _block_diagonal(ckpt, site, conv.weight.detach()[..., 0], "k_groups", "key")


class _MergedAttention(torch.nn.Module):
    """Self- and cross-attention under one softmax: the keys of x, then those of memory, through
    the same k_proj (T5Gemma 2's decoder) or a projection of their own."""

    def __init__(self, own_cross: bool):
        super().__init__()
        self.q_proj, self.k_proj = torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False)
        self.cross_k_proj = torch.nn.Linear(8, 8, bias=False) if own_cross else None

    def forward(self, x, memory):
        q = self.q_proj(x).view(2, -1, 2, 4).transpose(1, 2)
        keys = torch.cat([self.k_proj(x), (self.cross_k_proj or self.k_proj)(memory)], 1)
        k = keys.view(2, -1, 2, 4).transpose(1, 2)
        return torch.softmax(q @ k.transpose(-1, -2), -1)


def _merged_calls(own_cross: bool):
    return _two_input_calls(_MergedAttention(own_cross))


def _two_input_calls(attention: torch.nn.Module, channels: list | None = None):
    """The attention calls of two forwards of a module of (x: 5 tokens, memory: 3), width 8
    (channels: attention_calls' list of the modules of attention over channels)."""
    from wqk.derive.calls import attention_calls
    from wqk.derive.trace import tracing

    torch.manual_seed(0)
    model = torch.nn.Sequential(attention).double()
    g = torch.Generator().manual_seed(1)
    traces = []
    for _ in range(2):
        x, memory = (torch.randn(2, t, 8, generator=g, dtype=torch.float64) for t in (5, 3))
        with tracing(model) as trace:
            model[0](x, memory)
        traces.append(trace)
    return attention_calls(*traces, channels)


class _TemperedAttention(torch.nn.Module):
    """Two heads of 4 with an RMS QK-norm, each query then scaled by temperature(x, positions)."""

    def __init__(self, temperature):
        super().__init__()
        self.q_proj, self.k_proj = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.q_norm, self.k_norm = torch.nn.RMSNorm(4), torch.nn.RMSNorm(4)
        self.temperature = temperature
        with torch.no_grad():
            for norm in (self.q_norm, self.k_norm):
                norm.weight.uniform_(0.5, 1.5)

    def forward(self, x, memory=None):
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, 2, 4)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, 2, 4)).transpose(1, 2)
        q = q * self.temperature(x, torch.arange(t, dtype=x.dtype))[:, None, :, None]
        return torch.softmax(q @ k.transpose(-1, -2) / 2, dim=-1)


def test_a_queries_factor_of_its_position_after_the_qk_norm_is_a_temperature():
    """Beam's NoPE layers scale each normed query by (1 + (p + 1) / 2048) ** 0.1: a positive factor
    of its position alone, left out of the form as the norm's own scaling is; the logits test
    multiplies it in (Beam's record is verified so). A factor that depends on the tokens is no
    temperature: refused."""

    def by_position(x, p):
        return ((1 + (p + 1) / 8) ** 0.5).expand(x.shape[0], -1)

    def by_content(x, p):
        return 1 + x[..., 0].abs()

    (call,) = _two_input_calls(_TemperedAttention(by_position))
    assert call.q.norm.name == "0.q_norm" and call.k.temperature is None
    assert torch.allclose(call.q.temperature, by_position(torch.zeros(1, 5), torch.arange(5.0))[0].double())
    with pytest.raises(Underivable, match="queries of the attention product are no projection's outputs"):
        _two_input_calls(_TemperedAttention(by_content))


class _TwoHeads(torch.nn.Module):
    """q_proj and k_proj of width 8, read as 2 heads of 4 (a toy attention's forward is its own)."""

    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    @staticmethod
    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], -1, 2, 4).transpose(1, 2)


def test_keys_of_one_token_in_two_sequences_name_no_projection():
    """SegFormer's tiny grid reduced to one key token: two rows, where any column is a multiple of
    any other plus a constant, so a match would be chance (and the logits test vacuous, one key a
    row): refused as the tiny forward's, not read as keys scaled per column."""

    class OneKey(_TwoHeads):
        def forward(self, x, memory):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(memory[:, :1]))
            return torch.softmax(q @ k.transpose(-1, -2), dim=-1)

    with pytest.raises(Underivable, match=r"1 token\(s\) of 2 sequence\(s\): too few") as e:
        _two_input_calls(OneKey())
    assert e.value.category == "forward"


def test_logits_masked_by_the_content_are_closed_positions_the_others_fit():
    """EoMT keeps its queries off the patches outside the masks they predict (-1e9, from the
    content: masked in one forward, open in the other): those positions are closed in both, and
    the logits left open are the form."""
    from wqk.derive.calls import open_positions

    class ContentMasked(_TwoHeads):
        def forward(self, x, memory):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(x))
            masked = (x[..., 0] > 1.0)[:, None, None, :] & ~torch.eye(5, dtype=torch.bool)
            return torch.softmax((q @ k.transpose(-1, -2)).masked_fill(masked, -1e9), dim=-1)

    (call,) = _two_input_calls(ContentMasked())
    assert call.q.projection.weight == "0.q_proj.weight" and call.k.projection.weight == "0.k_proj.weight"
    assert bool((call.softmax.scores < -1e6).any())  # some logits were masked by the content
    scores, other = torch.zeros(1, 3), torch.zeros(1, 3)
    scores[0, 1], other[0, 2] = -1e9, -1e4  # masked by the content in one forward; an open logit of -1e4
    assert open_positions(scores, other).tolist() == [[True, False, True]]


def test_self_and_cross_attention_under_one_softmax_scores_the_self_part():
    """T5Gemma 2's decoder: its queries' own keys, then the encoder's through the same k_proj, under
    one softmax: the self-attention part is the call's product, its decoder autoregressive. The
    other keys, through the same k_proj or a cross projection of their own, are extra logits: the
    self part's form is the same either way."""
    for own_cross in (False, True):
        (call,) = _merged_calls(own_cross)
        assert call.product.out.shape[-1] == 5 and call.product.k.shape[-2] == 5 and not call.cross
        assert call.k.projection.weight == "0.k_proj.weight" and call.extra_logits == 3 and call.key_offset == 0
    t5gemma2 = derive("t5gemma2_decoder")
    assert t5gemma2.ok, t5gemma2.reason
    assert [(a.stack, a.weight) for a in t5gemma2.record.attention] == [("decoder", "layers.{i}.self_attn.{p}.weight")]
    assert t5gemma2.record.objectives == {"decoder": "autoregressive"}


def test_a_norm_whose_input_is_already_centred_leaves_centring_to_the_other_layers():
    """A LayerNorm fed another norm's output (IDEFICS's vision layer 0, after pre_layrnorm) fits as
    an RMSNorm as well as a LayerNorm: norm_kind says None (undecided), not whichever fit rounding
    favours, and the merge of layers takes the others' answer."""
    from wqk.derive.infer import norm_kind
    from wqk.derive.trace import ModuleCall

    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(16).double().requires_grad_(False)
    norm.weight.uniform_(0.5, 1.5)
    norm.bias.normal_()
    x = torch.randn(3, 5, 16, dtype=torch.float64) + 0.7
    for inputs, centred in ((x, True), (x - x.mean(-1, keepdim=True), None)):
        call = ModuleCall(0, "norm", norm, (inputs,), {}, None, output=norm(inputs).detach())
        assert norm_kind(call) == (0.0, centred)
    rms = torch.nn.RMSNorm(16, eps=1e-6).double().requires_grad_(False)
    call = ModuleCall(0, "norm", rms, (x,), {}, None, output=rms(x).detach())
    assert norm_kind(call) == (0.0, False)


def test_frozen_constant_parameters_are_drawn_and_frozen_tables_kept():
    """IDEFICS freezes its towers: their norm gains, all ones as built, would be equal bytes, and the
    saved names matched by content would name another layer's norm. A frozen table the class
    computes (a sinusoid) is kept as built."""
    from wqk.derive.build import randomised

    model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.LayerNorm(8), torch.nn.Embedding(4, 8)).double()
    table = torch.sin(torch.arange(32, dtype=torch.float64)).reshape(4, 8)
    with torch.no_grad():
        model[2].weight.copy_(table)
    for p in model.parameters():
        p.requires_grad_(False)
    randomised(model)
    gains = [model[i].weight for i in (0, 1)]
    assert all(len(set(g.tolist())) == 8 for g in gains) and not torch.equal(*gains)
    assert not torch.equal(model[0].bias, torch.zeros(8))
    assert torch.equal(model[2].weight, table)


def test_attention_code_is_found_by_softmax_calls_and_modules_not_by_docstrings():
    """BROS and Perceiver build nn.Softmax(dim=-1); a docstring's "scores before SoftMax" (Mamba 2's
    language-model head) is no attention."""
    from wqk.derive.build import ATTENDS, has_attention_source

    assert ATTENDS.search("probs = nn.Softmax(dim=-1)(scores)")
    assert ATTENDS.search("probs = F.softmax(scores, dim=-1)") and ATTENDS.search("scores.softmax(-1)")
    assert not ATTENDS.search("Prediction scores (before SoftMax).") and not ATTENDS.search("log_softmax(x)")
    assert has_attention_source("bros") and has_attention_source("perceiver")
    assert not has_attention_source("mamba2")


class _OuterSoftmax(torch.nn.Module):
    """A softmax module with a child module (I-BERT's IntSoftmax holds a QuantAct)."""

    def __init__(self):
        super().__init__()
        self.act = torch.nn.Identity()

    def forward(self, x):
        return self.act(torch.nn.functional.softmax(x, dim=-1))


class _Prefixed(torch.nn.Module):
    """Keys of another input before the queries' own: through a projection of their own, and only the
    last 2 of them (DiffusionGemma's sliding layers: the encoder's cached keys, the window's last), or
    through the same projection over both inputs concatenated (IDEFICS 2's perceiver)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.q_proj, self.k_proj = torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False)
        self.other_k_proj = torch.nn.Linear(8, 8, bias=False)
        self.softmax = _OuterSoftmax()

    def forward(self, x, memory):
        q = self.q_proj(x).view(2, -1, 2, 4).transpose(1, 2)
        if self.kind == "window":
            keys = torch.cat([self.other_k_proj(memory)[:, -2:], self.k_proj(x)], 1)
        elif self.kind == "concatenated":
            keys = self.k_proj(torch.cat([memory, x], 1))
        else:
            keys = self.k_proj(x)
        k = keys.view(2, -1, 2, 4).transpose(1, 2)
        return self.softmax(q @ k.transpose(-1, -2))


def _prefixed_calls(kind: str):
    return _two_input_calls(_Prefixed(kind))


def test_a_softmax_in_a_module_of_its_own_reads_the_product_of_the_module_around_it():
    (call,) = _prefixed_calls("self")
    assert call.product.out.shape[-1] == 5 and not call.cross and call.extra_logits == 0
    assert call.q.projection.weight == "0.q_proj.weight" and call.k.projection.weight == "0.k_proj.weight"


def test_another_inputs_keys_before_the_queries_own_are_extra_logits_before_the_self_part():
    """The self part found after the other keys, which are a part of another projection's outputs:
    2 extra logits before the queries' own 5 keys (key_offset). One projection over both inputs
    concatenated stays cross-attention (a perceiver resampler's, as its composite scores it)."""
    (window,) = _prefixed_calls("window")
    assert window.product.out.shape[-1] == 5 and window.product.k.shape[-2] == 5 and not window.cross
    assert window.k.projection.weight == "0.k_proj.weight" and window.key_offset == 2
    assert window.extra_logits == 2 and window.mask == "full"
    (concatenated,) = _prefixed_calls("concatenated")
    assert concatenated.cross and concatenated.key_offset == 0 and concatenated.product.out.shape[-1] == 8


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_diffusion_gemmas_decoder_scores_its_self_part_after_the_encoders_cached_keys():
    """DiffusionGemma's decoder: the encoder's cached keys (a sliding layer's: the window's last)
    before the canvas's own, under one softmax. Its layers run twice: causal over the prompt (a
    decoder stack, autoregressive) and bidirectional over the canvas (an encoder stack, its self
    part after the prompt's keys)."""
    d = derive("diffusion_gemma")
    assert d.ok, d.reason
    stacks = [(a.stack, a.weight) for a in d.record.attention]
    assert ("encoder", "decoder.layers.{i}.self_attn.{p}.weight") in stacks
    assert ("decoder", "decoder.layers.{i}.self_attn.{p}.weight") in stacks
    assert d.record.objectives == {"decoder": "autoregressive", "encoder": "bidirectional"}


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_idefics_names_each_layers_own_norm():
    """IDEFICS's frozen towers: before their constant gains were drawn, the vision layers' norms were
    named after the text model's first (equal bytes) and both stacks lost their pre-norm gain."""
    d = derive("idefics")
    assert d.ok, d.reason
    norms = {a.stack: (a.norm, a.norm_centred) for a in d.record.attention}
    assert norms["encoder"] == ("vision_model.encoder.layers.{i}.layer_norm1.weight", True)
    assert norms["decoder"] == ("layers.{i}.input_layernorm.weight", False)


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_types_refused_for_their_inputs_or_sizes_derive():
    """I-BERT (its softmax in a module of its own), BROS (boxes in, its box-position term zeroed),
    Perceiver (its latents' sizes shrunk, its inputs as states) and Voxtral Realtime's text model
    (the time conditioning its composite makes)."""
    for model_type in ("ibert", "bros", "perceiver", "voxtral_realtime_text"):
        d = derive(model_type)
        assert d.ok, (model_type, d.reason)
    assert "bbox_embeddings.bbox_projection.weight" in derive("bros").facts.get("position tables zeroed", [])


def test_inputs_of_several_layers_states_a_pooling_index_and_a_time_conditioning():
    """Molmo 2's adapter: image features of its two ViT layers concatenated, and the indices of the
    patches each token pools; a DFlash draft model (Muse Glimmer's assistant): its target's states
    at two layers as its context, and a mask over the context and its own tokens; Voxtral Realtime's
    text model: the time conditioning its composite embeds, passed to its layers."""
    from wqk.derive.build import build
    from wqk.derive.inputs import POOL, forward_inputs
    from wqk.derive.shrink import tiny_config

    config = tiny_config("molmo2_adapter")
    adapter = forward_inputs(build(config))
    assert adapter["image_features"].shape[-1] == config.hidden_size * len(config.vision_feature_layer) == 192
    index = adapter["pooled_patches_idx"]
    assert index.shape[1] == POOL and int(index.max()) < adapter["image_features"].shape[:2].numel()
    config = tiny_config("muse_glimmer_assistant")
    draft = forward_inputs(build(config))
    assert draft["context_hidden_states"].shape[-1] == config.hidden_size * len(config.target_layer_ids)
    tokens = draft["context_hidden_states"].shape[1] + draft["noise_embeds"].shape[1]
    assert draft["attention_mask"].shape == (draft["noise_embeds"].shape[0], tokens)
    config = tiny_config("voxtral_realtime_text")
    assert forward_inputs(build(config))["t_cond"].shape == (1, config.hidden_size)
    assert "t_cond" not in forward_inputs(build(tiny_config("llama")))


@pytest.mark.slow  # derivations of several seconds each: the full suite's
def test_attention_that_pools_or_drafts_or_reads_banded_chunks_is_derived_or_refused_by_name():
    """Molmo 2: its adapter's attention over the patches each token pools (queries their mean) lets the
    whole model derive; Muse Glimmer's assistant attends from its own tokens to its context's and
    its own under one projection: cross-attention alone, as IDEFICS 2's perceiver; Longformer's
    softmax reads its q.k product laid out in bands of its sliding window, unbanded (its tokens
    padded to whole windows), as LED's encoder's; a softmax over a q.k product laid out in a way
    no unbanding reads is dot-product attention the derivation cannot pair with keys (layout),
    not `no attention`."""
    molmo = derive("molmo2")
    assert molmo.ok, molmo.reason
    assert "vision_backbone.image_pooling_2d.{p}.weight" in [a.weight for a in molmo.record.attention]
    assert_cross_only(derive("muse_glimmer_assistant"))
    longformer = derive("longformer")
    assert longformer.ok, (longformer.category, longformer.reason)
    assert [(a.stack, a.weight, a.qk) for a in longformer.record.attention] == [
        ("encoder", "encoder.layer.{i}.attention.self.{p}.weight", ("query", "key"))
    ]
    # its hint: a band 2 tokens a side over the 9 tokens (the default 512 would hold them all: no band tested)
    assert set(longformer.record.tiny.config["attention_window"]) == {4}
    led = derive("led")
    assert led.ok and {a.stack for a in led.record.attention} == {"encoder", "decoder", "cross"}, led.reason
    encoder = [a.weight for a in led.record.attention if a.stack == "encoder"]
    assert encoder == ["encoder.layers.{i}.self_attn.longformer_self_attn.{p}.weight"]

    class HeadsAmongTokens(_TwoHeads):
        def forward(self, x, memory):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(x))
            return torch.softmax((q @ k.transpose(-1, -2)).transpose(1, 2), dim=-1)  # [B, T, H, T]

    with pytest.raises(Underivable, match=r"0\.q_proj\.weight and 0\.k_proj\.weight rearranged") as e:
        _two_input_calls(HeadsAmongTokens())
    assert e.value.category == "layout"

    class Plain(_TwoHeads):
        def forward(self, x, memory):
            q, k = self.heads(self.q_proj(x)), self.heads(self.k_proj(memory))
            scores = q @ k.transpose(-1, -2)
            return torch.softmax(scores, dim=-1), torch.softmax(scores.transpose(-1, -2), dim=-1)

    class Beside(torch.nn.Module):  # LED's encoder beside its decoder: one attention read, one not
        def __init__(self, other):
            super().__init__()
            self.plain, self.other = Plain(), other

        def forward(self, x, memory):
            return self.plain(x, memory), self.other(x, memory)

    with pytest.raises(Underivable, match=r"0\.other\.q_proj\.weight and 0\.other\.k_proj\.weight rearranged"):
        _two_input_calls(Beside(HeadsAmongTokens()))
    # a module a call read, whose other softmax is over the same logits transposed (Grounding DINO's
    # fusion: the text's over the image's): nothing of it left unread
    calls = _two_input_calls(Beside(Plain()))
    assert [c.call.name for c in calls] == ["0.plain", "0.other"]


def test_a_sliding_windows_bands_are_unbanded_into_the_product_of_the_whole_queries_and_keys():
    """Longformer's scores [B, T, H, 2w + 1] (column j: key t - w + j) from overlapping chunks of its
    queries and keys: the trace holds them as [B, H, T, T], each logit of the band in its key's place
    and every one outside it closed, with the product of the whole (prescaled) queries and keys."""
    import transformers

    from wqk.derive.shrink import tiny_config
    from wqk.derive.trace import tracing

    config = tiny_config("longformer")
    config.attention_window = [4] * config.num_hidden_layers  # w = 2: three chunks of 16 tokens
    model = transformers.LongformerModel(config).double().eval()
    ids = torch.randint(3, 50, (2, 16), generator=torch.Generator().manual_seed(0))
    with tracing(model) as trace:
        model(input_ids=ids)
    softmax = trace.softmaxes[0]
    h, t = config.num_attention_heads, 16
    assert softmax.scores.shape == (2, h, t, t)
    q, k = (p.out for p in trace.projections[:2])  # the first layer's query and key, [T, B, d] time first
    heads = [x.transpose(0, 1).reshape(2, t, h, -1).transpose(1, 2) for x in (q, k)]
    whole = heads[0] @ heads[1].transpose(-1, -2) / heads[0].shape[-1] ** 0.5
    offset = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    band = offset.abs() <= 2
    assert torch.allclose(softmax.scores[..., band], whole[..., band])
    assert bool(torch.isinf(softmax.scores[..., ~band]).all())
    assert torch.allclose(softmax.product.out, whole)
