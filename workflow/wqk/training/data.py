"""The training data: the corpus as token ids (memory-mapped), cut into sequences, drawn in
batches, masked for the bidirectional objective."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import WqkError

if TYPE_CHECKING:
    import torch

MLM_PROBABILITY = 0.15


def load_tokens(corpus: str | os.PathLike, tok):
    """The corpus as one id sequence (paragraphs, each followed by [SEP]), memory-mapped.

    A .npy file is the token file of `wqk corpus --tokenizer` (written with this tokenizer);
    any other file is read as text (paragraphs at blank lines) and tokenised in chunks into
    a temporary .npy file, mapped and then unlinked: the mapping outlives the name, and
    neither the text nor its ids are ever held in memory as a whole."""
    import tempfile

    from .corpus import file_paragraphs, read_tokens, write_tokens

    path = Path(corpus)
    if path.suffix == ".npy":
        tokens = read_tokens(path)
    else:
        with tempfile.TemporaryDirectory(prefix="wqk-tokens-") as tmp:
            write_tokens(file_paragraphs(path), tok, Path(tmp) / "tokens.npy")
            tokens = read_tokens(Path(tmp) / "tokens.npy")
    vocab_size = tok.get_vocab_size()
    if (vocab_size - 1).bit_length() > tokens.dtype.itemsize * 8:
        raise WqkError(f"{path}: {tokens.dtype} token ids cannot hold the {vocab_size} ids of the tokenizer")
    return tokens


def chunk(tokens, seq_len: int):
    """Non-overlapping sequences of seq_len tokens: an [n, seq_len] view of the ids (no copy)."""
    n = len(tokens) // seq_len
    if n < 1:
        raise WqkError(f"corpus has {len(tokens)} tokens, fewer than one sequence of {seq_len}")
    return tokens[: n * seq_len].reshape(n, seq_len)


def batch_of(data, rows) -> torch.Tensor:
    """Rows of the [n, seq_len] id array (rows: a tensor of row numbers), as int64 ids; only
    those rows are read from the memory map, and their pages are then let go (release)."""
    import numpy as np
    import torch

    batch = torch.from_numpy(np.asarray(data[rows.numpy()], dtype=np.int64))
    release(data)
    return batch


def release(data) -> None:
    """Take the token file's pages out of this process's resident set (madvise
    MADV_DONTNEED over the whole mapping; a no-op for an array in memory). They stay in the
    page cache, so reading them again costs no disk read. Without this, random batches map
    page after page (and, on a fault, the cached pages around it) until the process's RSS
    counts the whole file: clean, reclaimable pages, but what RSS-based memory limits see.
    About 0.25 ms for a 52 GB mapping."""
    import mmap

    mm = getattr(data, "_mmap", None)  # numpy.memmap's mapping, shared by its views
    if mm is not None and hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_DONTNEED)


def mask_tokens(input_ids, generator, *, mask_id: int, vocab_size: int, special_ids: list[int]):
    """BERT masking as transformers' DataCollatorForLanguageModeling, from an explicit generator:
    15% of non-special tokens are predicted; of those 80% -> [MASK], 10% -> random, 10% kept."""
    import torch

    labels = input_ids.clone()
    prob = torch.full(labels.shape, MLM_PROBABILITY)
    special = torch.isin(labels, torch.tensor(special_ids))
    prob.masked_fill_(special, 0.0)
    masked = torch.bernoulli(prob, generator=generator).bool()
    labels[~masked] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & masked
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & masked & ~replaced
    inputs[randomised] = torch.randint(vocab_size, labels.shape, generator=generator)[randomised]
    return inputs, labels


def draw_batch(data, batch_size: int, batches, masks=None, **masking):
    """One batch of input ids and labels: batch_size rows drawn with the generator `batches`;
    with the generator `masks`, BERT-masked (mask_tokens, its keywords in masking), else the
    labels are the ids (BertLMHeadModel shifts them for next-token prediction)."""
    import torch

    input_ids = batch_of(data, torch.randint(data.shape[0], (batch_size,), generator=batches))
    if masks is None:
        return input_ids, input_ids
    return mask_tokens(input_ids, masks, **masking)
