"""Every model type of the installed transformers derived from its own forward, against the
expected outcome (tests/derived_types.json, written by tests/derived_types.py).

A type expected to derive must derive: `derive` returns a record only after the logits test on
its tiny model (every attention call's scores are the blocks' form, read back through the
generic reader), so each such test is that logits test. A type expected to be refused must be
refused in the same category. Types with a hand-written record are the hand records' business
(tests/test_records.py) and are skipped here, named.
"""

from __future__ import annotations

import pytest
import transformers

from derived_types import expected
from wqk.adapters import UnsupportedModelType, get_record
from wqk.derive import derive
from wqk.tiny import tiny_class

# each test's freed memory back to the system (conftest.release_memory)
pytestmark = pytest.mark.usefixtures("release_memory")

EXPECTED = expected()


def refused_by_name() -> dict:
    from wqk.adapters import _REFUSED, _load_all

    _load_all()
    return _REFUSED


TYPES = sorted(EXPECTED["types"])


def test_the_expectations_are_of_the_installed_transformers():
    assert EXPECTED["transformers"] == transformers.__version__, "rewrite them: python tests/derived_types.py"
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert set(TYPES) == set(CONFIG_MAPPING_NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", TYPES)
def test_every_model_type_derives_as_expected(model_type):
    want = EXPECTED["types"][model_type]
    if want == "hand":
        pytest.skip(f"{model_type}: a hand-written record (tests/test_records.py, tests/test_derive.py)")
    refused = refused_by_name()
    if model_type in refused:  # Reformer, DeepSeek-V2/V3: known, refused with their reason, not derived
        assert want == "refused: not bilinear"
        with pytest.raises(UnsupportedModelType, match="not scored"):
            get_record(model_type)
        return
    result = derive(model_type)
    got = "derived" if result.ok else f"refused: {result.category}"
    assert got == want, f"{model_type}: {result.category}: {result.reason}"
    if result.ok:  # `wqk tiny` builds it: its class found where transformers does not export it
        assert tiny_class(model_type, tiny=result.record.tiny).__name__ == result.record.tiny.architecture
