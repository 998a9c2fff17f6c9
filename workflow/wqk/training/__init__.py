"""Training experiments: corpora, tokenizer, BERT-style encoder/decoder training, summaries."""
