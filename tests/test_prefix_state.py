"""A constant prompt start's KV cache, saved to disk and read back by a new model instance.

Qwen 0.5B (the small GGUF) keeps this fast; the code path is the 1.5B validator's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.models import provision
from pipeline.models.qwen import _KV_MAGIC, QwenGGUF
from pipeline.models.validator import EVIDENCE_LIST_GRAMMAR, _evidence_code, _evidence_head

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()


@pytest.mark.model
def test_a_fresh_model_reads_the_constant_start_from_disk_and_answers_the_same(tmp_path: Path) -> None:
    path = provision.model_path("qwen-0.5b")
    first = QwenGGUF(path, n_ctx=1024)
    head = first.tokenize(_evidence_head())
    tokens = head + first.tokenize(_evidence_code(REFERENCE) + "Direct match? yes or no.")
    listing = head + first.tokenize(_evidence_code(REFERENCE) + "FACTS:\n1. Input.is_action_pressed\n"
                                    "2. position.clamp\nWhich facts match?<|im_end|>\n<|im_start|>assistant\n"
                                    '{"evidence": [')
    assert first.warm(head, tmp_path) == "evaluated"
    assert first.warm(head, tmp_path) == "in memory"
    evaluated = first.yes_no(tokens)
    evaluated_list = first.complete(listing, EVIDENCE_LIST_GRAMMAR)
    first.close()
    [saved] = list(tmp_path.glob("*.kv"))

    second = QwenGGUF(path, n_ctx=1024)
    assert second.warm(head, tmp_path) == "from disk"
    restored = second.yes_no(tokens)
    assert restored.reused_tokens == len(head)  # only the code and the question were evaluated
    assert restored.margin == pytest.approx(evaluated.margin, abs=0.05)
    assert restored.top == evaluated.top
    # generation (the evidence list's path: llama's own prefix match) after a restore
    second.llm.reset()
    assert second.warm(head, tmp_path) == "from disk"
    assert second.complete(listing, EVIDENCE_LIST_GRAMMAR) == evaluated_list

    # Damaged files are evaluated again, never loaded: cut short, a flipped byte in the state, another
    # token list in the header, and a state llama.cpp rejects although its checksum is right
    data = saved.read_bytes()
    body = len(_KV_MAGIC) + 4 + 4 * len(head) + 32
    junk = bytes(64)
    damaged = [data[: len(data) // 2], data[:-1] + bytes([data[-1] ^ 0xFF]),
               data[: len(_KV_MAGIC) + 4] + bytes(4) + data[len(_KV_MAGIC) + 8 :],
               data[: body - 32] + hashlib.sha256(junk).digest() + junk]
    for bad in damaged:
        saved.write_bytes(bad)
        second.llm.reset()
        assert second.warm(head, tmp_path) == "evaluated"
        assert second.yes_no(tokens).margin == pytest.approx(evaluated.margin, abs=0.05)
        assert saved.read_bytes() == data  # and saved anew
    second.close()


@pytest.mark.model
def test_an_old_prompt_start_is_pruned_and_other_models_are_left_alone(tmp_path: Path) -> None:
    import os

    from pipeline.models.qwen import KEPT_STATES

    model = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=1024)
    old = [tmp_path / f"{model.name}-old{i}.kv" for i in range(KEPT_STATES + 1)]
    other = tmp_path / "qwen-1.5b-0123456789.kv"
    for i, p in enumerate([*old, other]):
        p.write_bytes(b"x")
        os.utime(p, ns=(10**18 + i, 10**18 + i))  # old0 is the least recently used
    head = model.tokenize(_evidence_head())
    assert model.warm(head, tmp_path) == "evaluated"
    model.close()
    kept = {p.name for p in tmp_path.glob("*.kv")}
    newest = {p.name for p in old[-(KEPT_STATES - 1) :]}
    assert len(kept) == KEPT_STATES + 1 and newest | {other.name} <= kept, kept
