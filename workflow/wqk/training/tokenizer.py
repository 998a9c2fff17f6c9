"""The training tokenizer: a WordPiece trained on the corpus (offline), or bert-base-uncased."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import SourceUnavailable
from .corpus import file_paragraphs

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(corpus: str | os.PathLike | Callable[[], Iterable[str]], vocab_size: int):
    """A BERT-style (uncased) WordPiece tokenizer trained on a corpus, deterministically.

    `corpus`: a text file (paragraphs separated by blank lines), or a function returning a
    fresh iterator of paragraphs (it is read twice), e.g. streamed documents:
    `lambda: corpus.paragraphs(corpus.documents(name))`.

    The `tokenizers` trainer numbers the "##c" continuation symbols in hash-map order, and
    ties between equally frequent merges are broken by those numbers, so two runs can give
    different vocabularies. Declaring every "##c" up front (as extra special tokens, sorted)
    fixes their numbers; the tokenizer is then rebuilt from the vocabulary with only the
    five real special tokens.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    if callable(corpus):
        source = corpus
    else:
        path = Path(corpus)

        def source():
            return file_paragraphs(path)

    normalizer = normalizers.BertNormalizer(lowercase=True, clean_text=True, handle_chinese_chars=True)
    chars: set[str] = set()
    for p in source():
        chars.update(normalizer.normalize_str(p))
    continuations = ["##" + c for c in sorted(chars) if not c.isspace()]

    draft = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    draft.normalizer = normalizer
    draft.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS + continuations,
        show_progress=False,
    )
    draft.train_from_iterator(source(), trainer=trainer)
    vocab = draft.get_vocab(with_added_tokens=True)

    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, clean_text=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(SPECIAL_TOKENS)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def _fast(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=True,
    )


def pretrained(name: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as e:
        raise SourceUnavailable(
            f"tokenizer {name} could not be fetched from the Hugging Face hub ({type(e).__name__}); "
            "it needs the hub: pre-download it (huggingface-cli download "
            f"{name}) and set HF_HUB_OFFLINE=1, or train one offline with --dataset (or --corpus) and --vocab-size"
        ) from e


def build(
    out: str | os.PathLike,
    corpus: str | os.PathLike | Callable[[], Iterable[str]] | None = None,
    vocab_size: int = 8000,
    pretrained_name: str | None = None,
) -> Path:
    """Write the tokenizer folder (tokenizer.json + tokenizer_config.json ...) atomically.

    `corpus`: a text file or a function returning paragraphs (train_wordpiece)."""
    out = Path(out)
    if pretrained_name:
        fast = pretrained(pretrained_name)
    else:
        if corpus is None:
            raise ValueError("either a corpus or a pretrained tokenizer name is needed")
        fast = _fast(train_wordpiece(corpus, vocab_size))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        fast.save_pretrained(tmp)
        if not (tmp / "tokenizer.json").is_file():
            raise SourceUnavailable(f"tokenizer {pretrained_name or corpus}: no fast tokenizer (tokenizer.json)")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load(folder: str | os.PathLike):
    """The `tokenizers.Tokenizer` of a tokenizer folder, without padding or truncation."""
    from tokenizers import Tokenizer

    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise SourceUnavailable(f"no tokenizer.json in {folder}; build it with `wqk tokenizer --out {folder}`")
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.no_truncation()
    return tok
