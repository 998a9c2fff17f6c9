"""Put this folder on PYTHONPATH and every Python started refuses to import the packages of
wqk's `models` extra, as the light job env (workflow/envs/analysis.yaml) lacks them. Each
attempt is also appended to the file WQK_REFUSED_LOG names, so that an import caught and
worked around is seen too."""

import os
import sys

MODEL_PACKAGES = ("torch", "transformers", "safetensors", "huggingface_hub", "tokenizers")


class RefuseModelPackages:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in MODEL_PACKAGES:
            return None
        if os.environ.get("WQK_REFUSED_LOG"):
            with open(os.environ["WQK_REFUSED_LOG"], "a") as log:
                log.write(f"{name} <- {' '.join(sys.argv)[:300]}\n")
        raise ImportError(f"refused: {name} (not in the light env)")


sys.meta_path.insert(0, RefuseModelPackages())
