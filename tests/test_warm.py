"""The demo warmer (pipeline/warm.py): disk trace cache, the user-run pause, and warming itself.

The engine is real (small user KB, BM25, MiniLM, union, fusion, evidence, validate stage); only the two Qwen
models are the protocol fakes of tests/fakes.py, so a warm pass takes seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.validate import VerdictCache
from pipeline.warm import Example, TraceCache, builtin_examples, complete, run_key, user_run, user_run_active, warm
from tests.fakes import DASH_CHUNK, SMALL_KB, FakeHub

ROOT = Path(__file__).resolve().parents[1]
OTHER_CHUNK = "func _ready():\n\t$AnimatedSprite2D.play(\"run\")\n\t$Timer.start()\n"
SETTINGS = Settings(validator_top_k=4)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    eng = Engine.open([SMALL_KB], hub=FakeHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    return eng


class Busy:
    """A scripted user-run flag: true on the given call numbers (1-based), false otherwise."""

    def __init__(self, true_on: set[int]) -> None:
        self.true_on, self.calls = true_on, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls in self.true_on


def test_the_user_run_lock_is_seen_by_this_and_other_processes() -> None:
    probe = [sys.executable, "-c", "from pipeline.warm import user_run_active; print(user_run_active())"]
    assert not user_run_active()
    with user_run(), user_run():  # two sessions running at once share it
        assert user_run_active()
        out = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
        assert out.stdout.strip() == "True"
    assert not user_run_active()


def test_builtin_examples_are_the_dashboard_list() -> None:
    examples = builtin_examples()
    assert examples[0].title.startswith("Reference") and "_process" in examples[0].code
    assert len(examples) >= 6 and len({e.title for e in examples}) == len(examples)
    assert any(e.title.startswith("Edge case: Latin-1") for e in examples)


def test_trace_cache_keeps_only_finished_traces(engine: Engine, tmp_path: Path) -> None:
    cache = TraceCache(tmp_path)
    prepared = engine.prepare(DASH_CHUNK, SETTINGS)
    key = run_key(prepared.chunk, SETTINGS, engine.store.content_hash)
    assert not complete(prepared.trace) and not cache.put(key, prepared.trace)  # model stages pending
    cancelled = engine.complete(engine.prepare(DASH_CHUNK, SETTINGS), cancelled=lambda: True)
    assert not complete(cancelled) and not cache.put(key, cancelled)
    full = engine.run(DASH_CHUNK, SETTINGS)
    assert complete(full) and cache.put(key, full) and key in cache
    assert cache.get(key) == full
    cache._cache.set(key, '{"version": 2, "broken": true}')  # an older layout or a damaged entry: a miss
    assert cache.get(key) is None


def test_warm_runs_each_example_once_and_redoes_one_a_user_run_interrupted(engine: Engine, tmp_path: Path) -> None:
    cache = TraceCache(tmp_path)
    examples = [Example("dash", DASH_CHUNK), Example("sprite", OTHER_CHUNK)]
    said: list[str] = []
    sleeps: list[float] = []
    # Call 1: before the first example (free); call 2: inside its model phase -> it is cut short and redone.
    busy = Busy({2})
    report = warm(engine, examples, SETTINGS, cache, busy=busy, sleep=sleeps.append, echo=said.append)
    assert report.done == ["dash", "sprite"] and not report.failed and not report.cached
    assert any("paused for a user run during dash" in s for s in said)
    for ex in examples:
        from pipeline.chunk import prepare_chunk

        trace = cache.get(run_key(prepare_chunk(ex.code), SETTINGS, engine.store.content_hash))
        assert trace is not None and complete(trace)
        assert all(a.validation is not None and a.validation.status == "ok" for a in trace.alternatives.values())
    calls = busy.calls
    again = warm(engine, examples, SETTINGS, cache, busy=busy, sleep=sleeps.append, echo=said.append)
    assert again.cached == ["dash", "sprite"] and not again.done
    assert busy.calls == calls, "a cached example runs nothing"
    assert sleeps == []


def test_warm_waits_while_a_user_run_is_going(engine: Engine, tmp_path: Path) -> None:
    sleeps: list[float] = []
    busy = Busy({1, 2, 3})  # a user run is going when the warmer starts
    report = warm(engine, [Example("dash", DASH_CHUNK)], SETTINGS, TraceCache(tmp_path), busy=busy,
                  sleep=sleeps.append, echo=lambda s: None)
    assert report.pauses == 3 and len(sleeps) == 3 and report.done == ["dash"]


def test_an_option_left_off_keeps_the_cache_key_it_had_before_it_existed() -> None:
    # keys of runs cached before Settings.class_accepts existed had no such field
    assert "class_accepts" not in Settings().cache_key()
    on = Settings(class_accepts=True)
    assert '"class_accepts":true' in on.cache_key() and on.cache_key() != Settings().cache_key()
