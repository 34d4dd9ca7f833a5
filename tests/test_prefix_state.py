"""A constant prompt start's KV cache, saved to disk and read back by a new model instance.

Qwen 0.5B (the small GGUF) keeps this fast; the code path is the 1.5B validator's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.models import provision
from pipeline.models.qwen import QwenGGUF
from pipeline.models.validator import _evidence_code, _evidence_head

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()


@pytest.mark.model
def test_a_fresh_model_reads_the_constant_start_from_disk_and_answers_the_same(tmp_path: Path) -> None:
    path = provision.model_path("qwen-0.5b")
    first = QwenGGUF(path, n_ctx=1024)
    head = first.tokenize(_evidence_head())
    tokens = head + first.tokenize(_evidence_code(REFERENCE) + "Direct match? yes or no.")
    assert first.warm(head, tmp_path) == "evaluated"
    assert first.warm(head, tmp_path) == "in memory"
    evaluated = first.yes_no(tokens)
    first.close()
    [saved] = list(tmp_path.glob("*.kv"))

    second = QwenGGUF(path, n_ctx=1024)
    assert second.warm(head, tmp_path) == "from disk"
    restored = second.yes_no(tokens)
    assert restored.reused_tokens == len(head)  # only the code and the question were evaluated
    assert restored.margin == pytest.approx(evaluated.margin, abs=0.05)
    assert restored.top == evaluated.top

    # A truncated or altered file is evaluated again, never loaded
    data = saved.read_bytes()
    for bad in (data[: len(data) // 2], data[:-1] + bytes([data[-1] ^ 0xFF])):
        saved.write_bytes(bad)
        second.llm.reset()
        assert second.warm(head, tmp_path) == "evaluated"
        assert second.yes_no(tokens).margin == pytest.approx(evaluated.margin, abs=0.05)
    # a different start never matches another's file
    second.llm.reset()
    assert second.warm(head[:-1], tmp_path) == "evaluated"
    second.close()
