"""Training experiments: corpora, tokenizer, BERT-style encoder/decoder training, summaries.

spec (the settings of a run, defined once) and grid (the workflow's runs) need no torch;
train is the loop, over data, model, run_folder and step_scores."""
