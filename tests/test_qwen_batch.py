"""Evidence lists decoded side by side (QwenGGUF.complete_many) are the lists decoded one at a time.

Batched and single decodes round differently (about 1e-2 in a logit), so where two tokens tie within
that, greedy may pick either: the 0.5B here ties ',' and ']}' within 0.07 on a one-fact list. A list
may therefore differ only at such a tie, which the test measures on the one-at-a-time path.
Qwen 0.5B (the small GGUF) keeps this fast; the code path is the 1.5B validator's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.evidence import for_model
from pipeline.models import provision
from pipeline.models.qwen import SEQUENCES, QwenGGUF
from pipeline.models.validator import _evidence_code, _evidence_head, _forced_end, list_grammar

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()
FACTS = [
    ["Input.is_action_pressed", "$AnimatedSprite2D.play", "position.clamp"],
    ["velocity.normalized", "screen_size"],
    ["Vector2.ZERO", "move_and_slide", "$AnimatedSprite2D.stop", "velocity.length"],
    ["is_on_floor"],
    ["position.clamp", "Vector2.ZERO"],
]


def _whole(code: str) -> str:
    """A code part as long as the code: the lists' own prompt keeps only the lines that show its facts."""
    return f"{for_model(code)[0]}```\n"


def _tail(lm: QwenGGUF, n: int) -> list[int]:
    facts = "\n".join(f"{i + 1}. {f}" for i, f in enumerate(FACTS[n % len(FACTS)]))
    return lm.tokenize(f"RECORD (docs_chunks) page {n}\nFACTS FOUND IN BOTH:\n{facts}\n"
                       '<|im_end|>\n<|im_start|>assistant\n{"evidence": [')


def _gap(lm: QwenGGUF, prompt: list[int], a: str, b: str) -> float:
    """The logit gap, on the one-at-a-time path, between the two tokens where lists ``a`` and ``b`` part."""
    n = next(i for i in range(min(len(a), len(b)) + 1) if i == len(a) or i == len(b) or a[i] != b[i])
    lm.yes_no(prompt + (lm.tokenize(a[:n]) if n else []))
    logits = lm._logits()
    ta, tb = lm.tokenize(a[n:])[0], lm.tokenize(b[n:])[0]
    return abs(float(logits[ta] - logits[tb]))


@pytest.mark.model
def test_lists_side_by_side_are_the_lists_one_at_a_time_and_leave_only_the_prefix() -> None:
    import llama_cpp

    lm = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=2048)
    prefix = lm.tokenize(_evidence_head()) + lm.tokenize(_evidence_code(REFERENCE))
    tails = [_tail(lm, n) for n in range(SEQUENCES + 2)]  # more than one context's sequences: two groups
    grammars = [list_grammar(range(1, len(FACTS[n % len(FACTS)]) + 1)) for n in range(len(tails))]
    alone = [lm.complete(prefix + t, g, max_tokens=32) for t, g in zip(tails, grammars, strict=True)]
    assert lm.sequences == SEQUENCES
    together = lm.complete_many(prefix, tails, grammars, max_tokens=32)
    assert all(t.endswith("]}") for t in together)
    # each list names only its own facts (the one-fact record's list at most "1")
    assert all(int(n) <= len(FACTS[k % len(FACTS)]) for k, t in enumerate(together) for n in re.findall(r"\d+", t))
    # the other sequences are gone; sequence 0 holds the prefix, and the next call reuses it
    mem = llama_cpp.llama_get_memory(lm.llm.ctx)
    assert [llama_cpp.llama_memory_seq_pos_max(mem, s) for s in range(1, SEQUENCES)] == [-1] * (SEQUENCES - 1)
    assert lm.yes_no(prefix + tails[1]).reused_tokens == len(prefix)
    # the "]}" the grammar forces after a 4th item is appended without a decode step: the same lists
    closed = lm.complete_many(prefix, tails, grammars, max_tokens=32, forced=_forced_end)
    assert any(_forced_end(t.removesuffix("]}")) for t in closed)  # some lists did end that way
    for lists in (together, closed):
        ties = [_gap(lm, prefix + t, a, b) for t, a, b in zip(tails, alone, lists, strict=True) if a != b]
        assert len(ties) <= 2 and all(g < 0.25 for g in ties), ties
    # a list cut by max_tokens stops where complete stops it
    assert lm.complete_many(prefix, tails[:3], grammars[:3], max_tokens=2) == [
        lm.complete(prefix + t, g, max_tokens=2) for t, g in zip(tails[:3], grammars[:3], strict=True)]


def test_a_list_is_closed_without_decoding_only_where_the_grammar_leaves_no_choice() -> None:
    assert _forced_end('1,2,3,4') == "]}"
    assert _forced_end('1,"move_down",3,"a, b"') == "]}"
    for open_list in ("1,2,3", "1,2,3,", '1,2,3,"4', "1,2,3,4,", ""):
        assert _forced_end(open_list) == ""


@pytest.mark.model
def test_a_prompt_past_the_context_fails_at_once_with_a_clear_error() -> None:
    # llama.cpp filled its cache and then failed "to find a memory slot" batch after batch; the
    # evidence list of a huge chunk waited minutes for nothing. Now it is refused before any decode.
    from pipeline.models.provision import ModelError

    lm = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=512)
    prefix = lm.tokenize(_whole(REFERENCE * 8))
    assert len(prefix) > 512
    grammar = list_grammar([1, 2])
    with pytest.raises(ModelError, match="exceed"):
        lm.complete(prefix, grammar, max_tokens=32)
    with pytest.raises(ModelError, match="exceeds the context"):
        lm.complete_many(prefix, [_tail(lm, 0), _tail(lm, 1)], grammar, max_tokens=32)


@pytest.mark.model
def test_a_loaded_model_does_not_wait_for_the_lock_a_background_read_holds() -> None:
    # The dashboard reads a chunk's prefix in the background while it holds the model's lock; the validate
    # stage only needs the model to exist, and its decisions waited ~10 s for that read to end.
    import threading

    lm = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=512)
    lm.load()
    held, release = threading.Event(), threading.Event()

    def reader() -> None:
        with lm.lock:
            held.set()
            release.wait(60)

    t = threading.Thread(target=reader)
    t.start()
    try:
        assert held.wait(10)
        done = threading.Event()
        threading.Thread(target=lambda: (lm.load(), done.set()), daemon=True).start()
        assert done.wait(10), "load() of a loaded model waited for the lock"
    finally:
        release.set()
        t.join()
    lm.close()
    assert not lm._ready and lm._llm is None  # closed: the next load() takes the lock and loads again


@pytest.mark.model
def test_cancel_stops_reading_a_long_prompt_and_writing_lists() -> None:
    # A 300-line paste: Qwen read its 2,500-token prefix for a minute or more, and Cancel waited for it.
    from pipeline.models.base import Cancelled

    lm = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=2048)
    prefix = lm.tokenize(_evidence_head()) + lm.tokenize(_whole(REFERENCE * 3))
    grammar = list_grammar([1, 2, 3])
    asked: list[int] = []

    def after(n: int):  # says "cancel" from its n-th question on
        return lambda: asked.append(1) is None and len(asked) >= n

    for call in (lambda c: lm.complete(prefix + _tail(lm, 0), grammar, max_tokens=32, cancelled=c),
                 lambda c: lm.complete_many(prefix, [_tail(lm, 0), _tail(lm, 1)], grammar, max_tokens=32,
                                            cancelled=c)):
        lm.llm.reset()  # nothing of the prefix in the cache: the read itself must stop
        asked.clear()
        with pytest.raises(Cancelled):
            call(after(2))
        assert lm.llm.n_tokens < len(prefix), "the whole prefix was read before the cancel was seen"
    # not cancelled: the same calls still write their lists
    assert lm.complete(prefix + _tail(lm, 0), grammar, max_tokens=32, cancelled=lambda: False).endswith("]}")
