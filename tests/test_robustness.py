"""Robustness: bad input, bad JSONL, damaged caches, a validator timeout, concurrent runs, interrupted writes.

Each test states the exact behaviour: a clear error, a notice, a rebuilt cache
equal to a fresh one, never a wrong result. No test here runs Qwen: the
validator gets a fake model object; real-KB tests use the session ``engine``
(built-in KB + MiniLM) with the validator off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import atomic
from pipeline.batch import ResultLine, ResultsLog, SettingsSummary, plan, process_chunk, split_source
from pipeline.bm25_index import ARRAYS_FILE, META_FILE, BM25Index
from pipeline.chunk import MAX_CHUNK_BYTES, InputError, prepare_chunk
from pipeline.evidence import LIST_CODE_CHARS, MODEL_CODE_CHARS, code_facts, collect, for_lists, sanitize_for_model
from pipeline.kb import index as kb_index
from pipeline.kb.load import MAX_LINE_BYTES, load_bytes, load_jsonl
from pipeline.kb.store import open_kb
from pipeline.kb.views import bm25_terms, embed_text
from pipeline.models.qwen import Timeout, YesNo
from pipeline.models.validator import Judgement, QwenValidator
from pipeline.records import record_line
from pipeline.settings import Settings
from pipeline.stages.validate import Validate, VerdictCache
from pipeline.trace import FinalItem

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
CHUNKS = FIX / "chunks"
SMALL_KB = FIX / "user_kb" / "small.jsonl"
# The pipeline without any Qwen: BM25 + MiniLM legs, F in union order.
NO_QWEN = Settings(alternatives=("D", "F"), reranker="none", run_validator=False)
EMPTY = "The chunk is empty; paste some GDScript code or pick an example."
NUL_BINARY = "The input looks like a binary file (it contains NUL bytes); give GDScript source text."


@pytest.fixture
def tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private GDPOC_CACHE, so damaging caches never touches the shared one."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("GDPOC_CACHE", str(cache))
    return cache


def finals(trace: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: [it.model_dump() for it in alt.final] for name, alt in trace.alternatives.items()}


# =========================================================================== input


@pytest.mark.parametrize(("name", "message"), [
    ("empty.gd", EMPTY),
    ("whitespace.gd", EMPTY),
    ("binary.bin", NUL_BINARY),
])
def test_unusable_input_is_refused_with_a_clear_message(engine, name: str, message: str) -> None:
    data = (CHUNKS / name).read_bytes()
    with pytest.raises(InputError) as exc:
        prepare_chunk(data)
    assert str(exc.value) == message
    with pytest.raises(InputError) as exc:  # the engine refuses it the same way, before any stage runs
        engine.run(data, NO_QWEN)
    assert str(exc.value) == message


def test_control_character_soup_is_refused() -> None:
    with pytest.raises(InputError) as exc:
        prepare_chunk(bytes(range(1, 32)) * 20)
    assert str(exc.value) == "The input looks like a binary file (many control characters); give GDScript source text."


def test_latin1_input_is_decoded_losslessly_with_a_notice(engine) -> None:
    raw = (CHUNKS / "latin1.gd").read_bytes()
    notice = "The input is not valid UTF-8 (byte 0xe9 on line 1); it was read as Latin-1 so no byte is lost."
    info = prepare_chunk(raw)
    assert info.notices == [notice]
    assert info.text.encode("latin-1") == raw  # every byte is still there
    assert "Café" in info.text
    trace = engine.run(raw, NO_QWEN)
    assert trace.chunk.notices == [notice] and trace.chunk.language == "gdscript"
    assert trace.alternatives["D"].final


def five_mb() -> bytes:
    line = 'func f():\n\tprint("a line of padding to make the file big")\n'
    return (line * (5 * 1024 * 1024 // len(line) + 1)).encode()


def test_five_mb_input_is_refused_or_truncated_with_a_notice(engine) -> None:
    data = five_mb()
    size = len(data)
    with pytest.raises(InputError) as exc:
        prepare_chunk(data, truncate=False)
    assert str(exc.value) == (
        f"The chunk is {size:,} bytes, over the {MAX_CHUNK_BYTES:,}-byte limit; split it "
        "(e.g. `python -m pipeline batch`, which splits files by function) or pass --truncate.")
    info = prepare_chunk(data)
    kept = info.text.encode()
    assert len(kept) <= MAX_CHUNK_BYTES and data.startswith(kept) and kept.endswith(b"\n")
    assert info.notices == [
        f"The chunk was {size:,} bytes; only its first {len(kept):,} bytes ({info.text.count(chr(10))} lines) "
        f"were used, the limit being {MAX_CHUNK_BYTES:,}."]
    trace = engine.run(data, Settings(alternatives=("D",), run_validator=False))  # the engine truncates too
    assert trace.chunk.notices == info.notices and trace.chunk.sha256 == info.sha256


def test_five_mb_file_is_split_by_batch_into_chunks_under_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.gd"
    big.write_bytes(five_mb())
    chunks = plan([big]).chunks
    assert len(chunks) == five_mb().count(b"func f")  # one chunk per function, none lost
    assert all(len(c.text.encode()) <= MAX_CHUNK_BYTES for c in chunks)


@pytest.mark.parametrize(("source", "language"), [
    ((CHUNKS / "unity_player.cs").read_bytes(), "csharp"),
    (b"import math\n\n\ndef step(pos, vel, dt):\n    return pos + vel * dt * math.cos(0)\n", "python"),
])
def test_other_languages_run_and_are_named(engine, source: bytes, language: str) -> None:
    trace = engine.run(source, NO_QWEN)
    assert trace.chunk.language == language
    for alt in trace.alternatives.values():
        assert alt.status == "ok" and alt.final
        assert all(it.verdict == "not_run" and it.accepted is None for it in alt.final)


# =========================================================================== JSONL


def rec(id_: str, **extra: Any) -> dict[str, Any]:
    return {"id": id_, "kind": "label_prototype", "label": id_, "description": "d", "prototype_code": "pass",
            **extra}


def jsonl(*rows: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def test_malformed_fixture_numbers_each_error_and_keeps_good_lines() -> None:
    path = FIX / "bad" / "malformed.jsonl"
    result = load_jsonl([path])
    assert [r.id for r in result.records] == [
        "bad:docs:area-coin", "bad:api:rand-range", "bad:label:coin-pickup", "bad:docs:timer-signal"]
    assert [i.line for i in result.errors] == [2, 4, 5, 7, 9, 10]
    assert all(str(i).startswith(f"{path}:{i.line}: ") for i in result.errors)


def test_wrong_types_are_line_numbered_errors() -> None:
    data = jsonl(rec("ok:1"),
                 rec("bad:terms", match_terms="jump"),  # a string where a list is expected
                 {**rec("x"), "id": 123},
                 rec("bad:kind", kind=7),
                 None,
                 "just a string",
                 rec("ok:2"))
    result = load_bytes(data, "types.jsonl")
    assert [r.id for r in result.records] == ["ok:1", "ok:2"]
    reasons = {i.line: i.reason for i in result.errors}
    assert sorted(reasons) == [2, 3, 4, 5, 6]
    assert reasons[2].startswith("invalid record: ") and "match_terms" in reasons[2]
    assert reasons[3].startswith("invalid record: ") and "id" in reasons[3]
    assert reasons[4].startswith("invalid record: ")
    assert reasons[5] == "expected a JSON object, got NoneType"
    assert reasons[6] == "expected a JSON object, got str"


def test_a_3mb_field_is_refused_by_line_and_the_rest_loads() -> None:
    huge = json.dumps(rec("huge", description="x" * 3_000_000)).encode()
    result = load_bytes(jsonl(rec("a"), huge, rec("b")), "huge.jsonl")
    assert [r.id for r in result.records] == ["a", "b"]
    assert [str(i) for i in result.errors] == [
        f"huge.jsonl:2: line is {len(huge):,} bytes, over the {MAX_LINE_BYTES:,}-byte limit"]


def test_duplicate_ids_keep_the_first_and_name_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_bytes(jsonl(rec("same", label="first"), rec("other"), rec("same", label="second")))
    result = load_jsonl([path])
    assert [(r.id, getattr(r, "label", None)) for r in result.records] == [("same", "first"), ("other", "other")]
    assert [str(i) for i in result.errors] == [f"{path}:3: duplicate id 'same' (first at {path}:1); kept the first"]


def test_an_empty_kb_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n  \n")
    with pytest.raises(ValueError) as exc:
        open_kb([empty])
    assert str(exc.value) == f"the KB is empty: no valid records in {empty}"
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"{nope\n")
    with pytest.raises(ValueError) as exc:
        open_kb([broken])
    assert str(exc.value).startswith(f"the KB is empty: no valid records in {broken}\n  {broken}:1: invalid JSON")


# =========================================================================== caches


@pytest.mark.parametrize(("target", "damage"), [
    (ARRAYS_FILE, "truncate"),
    (ARRAYS_FILE, "empty"),
    (META_FILE, "truncate"),
    (META_FILE, "garbage"),
])
def test_damaged_bm25_cache_is_detected_and_rebuilt(tmp_cache: Path, caplog: pytest.LogCaptureFixture,
                                                    target: str, damage: str) -> None:
    store = open_kb([SMALL_KB])
    fresh = BM25Index.build([bm25_terms(r) for r in store.records])
    query = fresh.vocab  # every term: every weight takes part in the comparison
    kb_index.open_bm25(store)
    path = kb_index._bm25_dir(store) / target
    good = path.read_bytes()
    path.write_bytes({"truncate": good[: len(good) // 2], "empty": b"", "garbage": b"\x00{not json"}[damage])
    with caplog.at_level(logging.WARNING, logger="pipeline.kb.index"):
        rebuilt = kb_index.open_bm25(store)
    assert "rebuilding" in caplog.text
    assert np.array_equal(rebuilt.scores(query), fresh.scores(query))
    assert path.read_bytes() == good  # the cache on disk is whole again
    assert np.array_equal(BM25Index.load(path.parent).scores(query), fresh.scores(query))


class FakeEmbedder:
    """Deterministic unit vectors from the text's hash: the vector cache logic without a real model."""

    name = "fake-embedder"
    path = "/nonexistent/fake-embedder-v1"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Any, *, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        self.calls += 1
        rows = []
        for t in texts:
            v = np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:16].astype(np.float32) - 127.5
            rows.append(v / np.linalg.norm(v))
        return np.vstack(rows).astype(np.float32)


def vectors_root(emb: FakeEmbedder) -> Path:
    from pipeline import config

    return config.cache_dir() / "vectors" / kb_index._model_key(emb)


@pytest.mark.parametrize("drop_text_cache", [False, True])
def test_truncated_vector_matrix_is_recomputed(tmp_cache: Path, caplog: pytest.LogCaptureFixture,
                                               drop_text_cache: bool) -> None:
    store = open_kb([SMALL_KB])
    emb = FakeEmbedder()
    expected = emb.encode([embed_text(r) for r in store.records])
    first = kb_index.open_vectors(store, emb)
    assert np.array_equal(first.matrix, expected)
    (npy,) = vectors_root(emb).glob("*.npy")
    npy.write_bytes(npy.read_bytes()[:-40])
    if drop_text_cache:
        import shutil

        shutil.rmtree(vectors_root(emb) / "texts")
    emb.calls = 0
    with caplog.at_level(logging.WARNING, logger="pipeline.kb.index"):
        again = kb_index.open_vectors(store, emb)
    assert "recomputing" in caplog.text
    assert np.array_equal(again.matrix, expected)
    assert emb.calls == (1 if drop_text_cache else 0)  # resumable: per-text vectors are reused when present
    assert np.array_equal(np.load(npy), expected)  # rewritten whole


def test_vector_matrix_with_nan_or_wrong_rows_is_recomputed(tmp_cache: Path) -> None:
    store = open_kb([SMALL_KB])
    emb = FakeEmbedder()
    expected = kb_index.open_vectors(store, emb).matrix
    (npy,) = vectors_root(emb).glob("*.npy")
    for bad in (np.full_like(expected, np.nan), expected[:3]):
        np.save(npy, bad)
        assert np.array_equal(kb_index.open_vectors(store, emb).matrix, expected)


def test_wrong_length_per_text_vector_entry_is_a_miss(tmp_cache: Path) -> None:
    import diskcache

    store = open_kb([SMALL_KB])
    emb = FakeEmbedder()
    expected = kb_index.open_vectors(store, emb).matrix
    with diskcache.Cache(str(vectors_root(emb) / "texts")) as cache:
        cache.set(next(iter(cache)), np.zeros(3, np.float32).tobytes() + b"\x01")
    for npy in vectors_root(emb).glob("*.npy"):
        npy.unlink()
    assert np.array_equal(kb_index.open_vectors(store, emb).matrix, expected)


def test_vector_progress_counts_work_so_the_longest_texts_first_do_not_skew_the_eta(tmp_cache: Path) -> None:
    texts = ["x" * 2000] * 2 + ["y" * 10 + str(i) for i in range(8)]  # 2 capped texts, 8 short ones
    events: list[tuple[int, int]] = []
    kb_index.encode_cached(texts, FakeEmbedder(), lambda d, t: events.append((d, t)), chunk=2)
    done = [d for d, _ in events]
    assert events[0] == (0, 10) and events[-1] == (10, 10) and done == sorted(done)
    # The two long texts are encoded first: about 87 % of the work, so the bar reads 9 of 10, not 2.
    first = (2 * kb_index.encode_cost(texts[0])) / sum(kb_index.encode_cost(t) for t in texts)
    assert done[1] == round(10 * first) == 9
    events.clear()
    kb_index.encode_cached(texts, FakeEmbedder(), lambda d, t: events.append((d, t)), chunk=2)
    assert events == [(10, 10)]  # all cached: one event, complete


def test_verdict_cache_round_trip_and_garbage_is_a_miss(tmp_cache: Path) -> None:
    cache = VerdictCache()
    j = Judgement("yes", margin=2.5, threshold=1.6, score=2.5, evidence=[{"text": "move_and_slide", "n": 1}])
    cache.set("good", j)
    assert cache.get("good") == j
    good_raw = cache._cache.get("good")
    for key, raw in {"bytes": b"\x00\x01", "text": "not json", "list": "[1, 2]", "number": 42,
                     "unknown field": json.dumps({"verdict": "yes", "bogus": 1}),
                     "torn": good_raw[: len(good_raw) // 2]}.items():
        cache._cache.set(key, raw)
        assert cache.get(key) is None, key
    assert cache.get("never set") is None
    cache.set("t", Judgement("timeout", message="no answer within 30 s"))
    assert cache.get("t") is None  # timeouts and errors are retried, never cached


@pytest.mark.parametrize("raw", [json.dumps({"verdict": "yes", "margin": "abc"}),
                                 json.dumps({"verdict": 5, "margin": [1], "evidence": "x"})])
def test_verdict_cache_entry_with_wrong_types_is_a_miss(tmp_cache: Path, raw: str) -> None:
    cache = VerdictCache()
    cache._cache.set("k", raw)
    assert cache.get("k") is None


# =========================================================================== validator timeout


class FakeQwen:
    """The parts of QwenGGUF the validator uses; ``yes_no`` times out or answers with a fixed margin."""

    def __init__(self, *, timeout: bool, margin: float = 5.0) -> None:
        self.path = Path("/nonexistent/fake-qwen.gguf")
        self.timeout, self.margin = timeout, margin
        self.calls = 0

    def load(self) -> None:
        pass

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) % 256 for c in text]

    def yes_no(self, tokens: list[int], *, deadline: float | None = None,
               cancelled: Callable[[], bool] | None = None) -> YesNo:
        self.calls += 1
        if self.timeout:
            raise Timeout
        return YesNo(self.margin, "yes", len(tokens), 0, 1.0)

    def complete(self, tokens: list[int], grammar: str, max_tokens: int = 24, *,
                 deadline: float | None = None, cancelled: Callable[[], bool] | None = None) -> str:
        return "1]}"


REFERENCE = (FIX / "reference_chunk.gd").read_text()


def test_validator_timeout_is_a_timeout_verdict(engine) -> None:
    record = engine.store.records[0]
    v = QwenValidator(FakeQwen(timeout=True), "qwen-1.5b")
    j = v.judge(REFERENCE, record, collect(REFERENCE, record), timeout_s=2.0)
    assert (j.verdict, j.message, j.margin) == ("timeout", "no answer within 2 s", None)


def test_a_timing_out_validator_never_accepts_and_the_run_continues(engine, tmp_cache: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQwen(timeout=True)
    v = QwenValidator(fake, "qwen-1.5b")
    monkeypatch.setattr(engine, "validator", lambda s: v)
    monkeypatch.setattr(engine, "verdicts", VerdictCache())  # in tmp_cache
    s = Settings(alternatives=("D",), validator_top_k=3, label_fit=2.0)  # the top 3 only (no label past it)
    trace = engine.run(REFERENCE, s)
    final = trace.alternatives["D"].final
    assert [(it.verdict, it.accepted) for it in final[:3]] == [("timeout", False)] * 3
    assert all(it.verdict == "not_run" and it.accepted is None for it in final[3:])
    assert trace.alternatives["D"].stage("validate").status == "ok"
    assert fake.calls == 3  # each of the top 3 was tried: one timeout does not stop the others
    # Not cached: the next run asks again; in batch the chunk is marked for --retry-errors.
    chunk = split_source(REFERENCE, "reference_chunk.gd")[0]
    line = process_chunk(engine, chunk, s)
    assert fake.calls == 6
    assert line.ok is False and line.alternatives is not None
    d = line.alternatives["D"]
    assert (d.status, d.messages, d.accepted) == ("error", ["validator verdicts: timeout"], [])


class PromptSizes(FakeQwen):
    """A FakeQwen that keeps the length of every prompt it is given."""

    def __init__(self) -> None:
        super().__init__(timeout=False, margin=5.0)
        self.sizes: list[int] = []

    def yes_no(self, tokens: list[int], **kw: Any) -> YesNo:
        self.sizes.append(len(tokens))
        return super().yes_no(tokens, **kw)


def test_a_huge_chunk_is_cut_for_qwen_and_the_trace_says_so(engine) -> None:
    # 2,000 lines (65 KB, the chunk limit): the whole code in the prompt was ~23k tokens for a 4,096-token
    # context, and the evidence list waited minutes on llama.cpp's "failed to find a memory slot".
    body = "".join(f"\tvar v{n} := position.clamp(Vector2.ZERO, screen_size) + Vector2({n}, {n})\n"
                   for n in range(2000))
    code = "extends Area2D\n\nfunc _process(delta):\n" + body
    chunk = prepare_chunk(code)
    item = engine.run(REFERENCE, Settings(alternatives=("D",), run_validator=False)).alternatives["D"].final[0]
    fake = PromptSizes()
    stage = Validate(engine.store, QwenValidator(fake, "qwen-1.5b"), top_k=1, cache=None)
    result = stage.run(chunk, [FinalItem(**item.model_dump())])
    trace = stage.trace(result)
    assert fake.sizes and max(fake.sizes) < MODEL_CODE_CHARS + 2000  # FakeQwen: one token per character
    assert result.code_cut > 500 and "Qwen is shown only its first 8,000 characters" in trace.message
    short = stage.trace(stage.run(prepare_chunk(REFERENCE), [FinalItem(**item.model_dump())]))
    assert "Qwen is shown only" not in short.message  # a chunk that fits is shown whole, with no notice


def test_the_list_prompt_shows_each_fact_of_the_chunk_on_the_first_line_that_holds_it() -> None:
    text, left_out = for_lists(REFERENCE)
    lines, kept = sanitize_for_model(REFERENCE).splitlines(), text.splitlines()
    assert kept == [ln for ln in lines if ln in kept]  # the code's own lines, in its order
    assert all(f.strip('"') in text for f in code_facts(REFERENCE))
    assert "\t\tvelocity.x += 1" not in kept and "func _process(delta):" not in kept  # no fact on them
    assert left_out == len(lines) - len(kept) > 0
    # a long chunk: cut within LIST_CODE_CHARS, the rest counted
    body = "".join(f"\tvar speed_{n} := position.clamp(Vector2.ZERO, screen_size)\n" for n in range(2000))
    text, left_out = for_lists("func _process(delta):\n" + body)
    assert len(text) <= LIST_CODE_CHARS and left_out > 1900
    assert for_lists("var a = 1\nvar b = 2\n") == ("var a = 1\nvar b = 2\n", 0)  # no fact: the first lines


def test_corrupt_verdict_entry_is_judged_again(engine, tmp_cache: Path) -> None:
    item = engine.run(REFERENCE, Settings(alternatives=("D",), run_validator=False)).alternatives["D"].final[0]
    fake = FakeQwen(timeout=False, margin=5.0)
    v = QwenValidator(fake, "qwen-1.5b")
    cache = VerdictCache()
    key = VerdictCache.key(v, REFERENCE, record_line(engine.store.get(item.record_id)))
    cache._cache.set(key, "{\"verdict\": \"no\", \"marg")  # a torn entry
    stage = Validate(engine.store, v, top_k=1, cache=cache)
    chunk = prepare_chunk(REFERENCE)
    result = stage.run(chunk, [FinalItem(**item.model_dump())])
    out, trace = result.final, stage.trace(result)
    assert fake.calls == 1 and out[0].verdict == "yes"  # judged, not read from the torn entry
    assert trace.rows[0].cached is False
    assert cache.get(key) is not None and cache.get(key).margin == 5.0  # repaired by the new verdict


# =========================================================================== concurrency


def test_two_threads_running_at_once_get_their_own_results(engine) -> None:
    chunks = [REFERENCE, (FIX / "chunks" / "godot3_player.gd").read_text()]
    sequential = [finals(engine.run(c, NO_QWEN)) for c in chunks]
    assert sequential[0] != sequential[1]  # so a mix-up between threads would show
    for _round in range(3):
        barrier = threading.Barrier(2)
        results: list[Any] = [None, None]

        def work(i: int, barrier: threading.Barrier = barrier, results: list[Any] = results) -> None:
            barrier.wait()
            try:
                results[i] = finals(engine.run(chunks[i], NO_QWEN))
            except BaseException as exc:  # surfaced below, with the thread's error
                results[i] = exc

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == sequential


# =========================================================================== writes


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


def test_atomic_write_keeps_old_content_when_fsync_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "data.bin"
    atomic.write_bytes(target, b"old content")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        atomic.write_bytes(target, b"new content that never lands")
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]  # no temp file left


@contextlib.contextmanager
def disk_full_after(n_bytes: int) -> Iterator[None]:
    """Any write past ``n_bytes`` into any file fails with EFBIG, as on a full disk: a real partial write,
    whatever the code under test uses to write."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the default action would kill pytest
    resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_atomic_write_keeps_old_content_when_the_write_fails_midway(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    atomic.write_bytes(target, b"old content")
    with disk_full_after(4096), pytest.raises(OSError):
        atomic.write_bytes(target, b"x" * 100_000)
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]  # the partial temp file is gone
    atomic.write_bytes(target, b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]


def test_failed_cache_writes_leave_no_partial_files(tmp_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_kb([SMALL_KB])
    emb = FakeEmbedder()

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", broken_fsync)
        with pytest.raises(OSError):
            kb_index.open_bm25(store)
        with pytest.raises(OSError):
            kb_index.open_vectors(store, emb)
    folder = kb_index._bm25_dir(store)
    assert not (folder / META_FILE).exists() and not (folder / ARRAYS_FILE).exists()
    assert not list(vectors_root(emb).glob("*.npy")) and leftovers(tmp_cache) == []
    # With a working disk the same calls build complete caches.
    fresh = BM25Index.build([bm25_terms(r) for r in store.records])
    assert np.array_equal(kb_index.open_bm25(store).scores(fresh.vocab), fresh.scores(fresh.vocab))
    assert np.array_equal(BM25Index.load(folder).scores(fresh.vocab), fresh.scores(fresh.vocab))
    assert kb_index.open_vectors(store, emb).matrix.shape == (len(store.records), 16)


def test_batch_output_write_failing_midway_is_cut_back_at_once(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"

    def line(key: str, notes: list[str] | None = None) -> ResultLine:
        return ResultLine(file="a.gd", chunk=0, start_line=1, end_line=2, sha256="0" * 64, key=key, kb="kb",
                          settings=SettingsSummary.of(NO_QWEN), ok=True, alternatives={}, notices=notes)

    first = line("k1")
    with ResultsLog(out) as log:
        log.open()
        log.append(first)
        with disk_full_after(4096), pytest.raises(OSError):
            log.append(line("k2", ["x" * 100_000]))
        assert out.read_text() == first.to_json() + "\n"  # no half line left behind
        log.append(line("k3"))
    with ResultsLog(out) as log:
        state = log.open()
    assert list(state.lines) == ["k1", "k3"] and state.torn is None and not state.bad
