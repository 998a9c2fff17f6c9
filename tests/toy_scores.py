"""Small synthetic score tables and catalogues for the aggregation and figure tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

SCORE_COLUMNS = [
    "model", "provenance", "model_type", "synthetic", "stack", "layer", "n_layers", "scope", "head",
    "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim", "symmetry", "directionality", "fro_norm", "E_r",
    "E_c", "reason",
]  # fmt: skip


def scores(model: str, layers: dict[str, list[tuple[float, float]]], n_heads: int = 2, seed: int = 0,
           d: int = 8, head_dim: int = 4, n_kv_heads: int | None = None) -> pd.DataFrame:  # fmt: skip
    """Scores rows: layers[stack] = [(symmetry, directionality) per layer]; each head gets the
    layer value plus a known offset (+-0.1 for two heads) so head medians are known too."""
    rng = np.random.default_rng(seed)
    rows = []
    for stack, values in layers.items():
        for layer, (sym, dire) in enumerate(values):
            base = dict(model=model, provenance="toy", model_type="toy", synthetic=False, stack=stack,
                        layer=layer, n_layers=len(values), n_heads=n_heads, n_kv_heads=n_kv_heads or n_heads,
                        d_q=d, d_k=d, head_dim=head_dim, fro_norm=1.0, E_r=0.0, E_c=0.0, reason=None)  # fmt: skip
            rows.append(base | dict(scope="layer", head=None, symmetry=sym, directionality=dire))
            offsets = np.linspace(-0.1, 0.1, n_heads) if n_heads > 1 else [0.0]
            for h, off in enumerate(offsets):
                noise = 0.0 if seed == 0 else rng.normal(0, 0.01)
                rows.append(base | dict(scope="head", head=h, symmetry=sym + off + noise, directionality=dire - off))
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    for c in ("layer", "n_layers", "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim"):
        df[c] = df[c].astype("int32")
    df["head"] = df["head"].astype("Int32")
    return df


CATALOGUE_HEADER = [
    "slug", "model_id", "source", "family", "modality", "n_params", "figure", "synthetic",
    "objective_encoder", "objective_decoder", "objective_cross", "notes",
]  # fmt: skip


def catalogue(entries: list[dict]) -> pd.DataFrame:
    from wqk import slug

    rows = []
    for e in entries:
        row = {c: "" for c in CATALOGUE_HEADER}
        row |= {"slug": slug(e["model_id"]), "source": e["model_id"], "synthetic": "false"} | {
            k: str(v) for k, v in e.items()
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=CATALOGUE_HEADER)


def toy_world(seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A few models: two text encoders, two text decoders (one synthetic), a T5-like
    encoder-decoder, an audio encoder-decoder; no vision model (empty panel)."""
    rng = np.random.default_rng(seed)

    def vals(n, sym, dire):
        return [(float(sym + rng.normal(0, 0.05)), float(dire + rng.normal(0, 0.05))) for _ in range(n)]

    frames = [
        scores("toy/enc-small", {"encoder": vals(4, 0.5, -0.05)}, seed=seed),
        scores("toy/enc-large", {"encoder": vals(8, 0.4, 0.0)}, seed=seed),
        scores("toy/dec-small", {"decoder": vals(4, 0.1, -0.5)}, seed=seed),
        scores("toy/dec-tiny-random", {"decoder": vals(2, 0.0, 0.0)}, seed=seed),
        scores(
            "toy/t5",
            {"encoder": vals(6, 0.35, -0.05), "decoder": vals(6, 0.05, -0.2), "cross": vals(6, 0.0, 0.0)},
            seed=seed,
        ),
        scores("toy/whisper", {"encoder": vals(4, 0.45, -0.1), "decoder": vals(4, 0.15, -0.2)}, seed=seed),
    ]
    frames[3]["synthetic"] = True
    cat = catalogue([
        dict(model_id="toy/enc-small", family="BERT", modality="text", n_params=4e6, figure="language",
             objective_encoder="bidirectional"),
        dict(model_id="toy/enc-large", family="BERT", modality="text", n_params=3.4e8, figure="language",
             objective_encoder="bidirectional"),
        dict(model_id="toy/dec-small", family="GPT", modality="text", n_params=1.2e8, figure="language",
             objective_decoder="autoregressive"),
        dict(model_id="toy/dec-tiny-random", family="GPT", modality="text", n_params=2e4, figure="language",
             objective_decoder="autoregressive", synthetic="true"),
        dict(model_id="toy/t5", family="T5", modality="text", n_params=6e7, figure="language,encdec",
             objective_encoder="bidirectional", objective_decoder="autoregressive"),
        dict(model_id="toy/whisper", family="Whisper", modality="audio", n_params=3.9e7, figure="audio,encdec",
             objective_encoder="bidirectional", objective_decoder="autoregressive"),
    ])  # fmt: skip
    return pd.concat(frames, ignore_index=True), cat


SPECTRA = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
ROTARY_OFFSETS = (0, 1, 4, 16, 64)


def atlas_world(per_group: int = 160, paper_every: int = 40, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A hub atlas in small: per_group text encoders, text decoders and T5-like
    encoder-decoders (2 layers of 2 heads each), scores scattered around their objective's,
    spectra on the heads, rotary symmetry on the decoders, one synthetic decoder; every paper_every-th model of a group is one
    the paper plotted (catalogue paper_stacks: its self-attention stacks)."""
    rng = np.random.default_rng(seed)
    kinds = {  # stacks (symmetry, directionality) centres; the catalogue's objectives
        "enc": ({"encoder": (0.5, 0.0)}, dict(objective_encoder="bidirectional")),
        "dec": ({"decoder": (0.1, -0.4)}, dict(objective_decoder="autoregressive")),
        "s2s": ({"encoder": (0.4, -0.05), "decoder": (0.05, -0.2), "cross": (0.0, 0.0)},
                dict(objective_encoder="bidirectional", objective_decoder="autoregressive")),
    }  # fmt: skip
    frames, entries, paper = [], [], []
    for kind, (centres, objectives) in kinds.items():
        for i in range(per_group + (kind == "dec")):
            model, synthetic = f"atlas/{kind}-{i:04d}", kind == "dec" and i == per_group
            values = {s: [(float(sym + rng.normal(0, 0.15)), float(d + rng.normal(0, 0.1))) for _ in range(2)]
                      for s, (sym, d) in centres.items()}  # fmt: skip
            frames.append(scores(model, values))
            frames[-1]["synthetic"] = synthetic
            paper.append("" if synthetic or i % paper_every else ",".join(s for s in centres if s != "cross"))
            entries.append(dict(model_id=model, family=kind, modality="text", n_params=int(10 ** rng.uniform(6.5, 10.5)),
                                figure="language", synthetic=str(synthetic).lower(), **objectives))  # fmt: skip
    s = pd.concat(frames, ignore_index=True)
    head = (s["scope"] == "head").to_numpy()
    for c in SPECTRA:
        v = rng.uniform(1, 8, len(s)) if c.endswith("rank") else rng.uniform(0, 1, len(s))
        s[c] = np.where(head, v, np.nan)
    rotary = s["stack"].eq("decoder").to_numpy()
    for d in ROTARY_OFFSETS:
        s[f"rotary_symmetry_d{d}"] = np.where(rotary, s["symmetry"] * np.exp(-d / rng.uniform(4, 40, len(s))), np.nan)
    cat = catalogue(entries)
    cat["paper_stacks"] = paper
    return s, cat
