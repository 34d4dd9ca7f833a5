"""The engine's two phases, the typed trace and F's rerank stage, on the small user KB with real MiniLM.

No Qwen runs here: the validator gets a scripted LM through the LogitLM protocol and the reranker is a
deterministic term-overlap scorer through the Reranker protocol (the real FlagEmbedding path is in
tests/test_reranker_bge.py, the real Qwen judge in tests/test_validator.py).
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.engine import Engine
from pipeline.models.registry import RERANKER_ENV
from pipeline.settings import Settings
from pipeline.stages import bm25, dense, fusion, query, union
from pipeline.stages.rerank import UNION_ORDER, Rerank
from pipeline.stages.validate import VerdictCache
from pipeline.trace import BM25Row, ProgressEvent, RecordRef, RerankRow, Trace
from tests.fakes import DASH_CHUNK, DASH_RECORDS, RULES, SMALL_KB, FakeHub, OverlapReranker, ScriptedLM


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    eng = Engine.open([SMALL_KB], hub=FakeHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))  # never the shared cache
    return eng


def lm(engine: Engine) -> ScriptedLM:
    assert isinstance(engine.hub, FakeHub)
    return engine.hub.lm


# --- the typed trace -----------------------------------------------------------------------------
def test_rows_refuse_a_misspelt_field_on_write_and_on_read() -> None:
    row = BM25Row(record_id="r", kind="docs_chunk", rank=1, score=2.0)
    with pytest.raises(ValidationError, match="scor"):
        BM25Row(record_id="r", kind="docs_chunk", rank=1, scor=2.0)
    with pytest.raises(AttributeError):
        attrgetter("scoer")(row)  # a misspelt read fails loudly, it is never a blank column
    with pytest.raises(ValidationError):
        RerankRow(record_id="r", kind="docs_chunk", rank=1, before=1, shift=0, provenance="bm25", score=0.0,
                  reranker_scor=1.0)


def test_two_mappings_of_one_class_page_have_different_names(engine) -> None:
    # both read "class/AnimatedSprite2D" in every table and chart before
    play, stop = (RecordRef.of(engine.store.get(f"api:AnimatedSprite2D.{m}")) for m in ("play", "stop"))
    assert (play.name, stop.name) == ("class/AnimatedSprite2D › play", "class/AnimatedSprite2D › stop")


def test_record_ref_of_a_record_and_of_a_row(small: Engine) -> None:
    doc = small.store.get("user:docs:dash-ability")
    ref = RecordRef.of(doc)
    assert (ref.record_id, ref.kind, ref.source, ref.doc_path) == (
        "user:docs:dash-ability", "docs_chunk", "team/dash_ability", "tutorials/physics/using_character_body_2d.rst")
    assert ref.section == "Team notes: dash ability > Implementation"
    assert ref.name == "team/dash_ability › Team notes: dash ability > Implementation"
    api = RecordRef.of(small.store.get("user:api:player-dash"))
    assert api.section is None and api.name == f"team/player_api › {api.api}" and api.api
    assert api.name == "team/player_api › Player.start_dash"
    row = BM25Row.of(ref, rank=3, score=1.5)
    assert RecordRef.of(row) == ref and row.rank == 3


# --- two phases ----------------------------------------------------------------------------------
def test_fast_phase_is_drawable_and_the_model_phase_recomputes_nothing(small: Engine,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    prepared = small.prepare(DASH_CHUNK, Settings(**RULES, validator_top_k=3))
    trace = prepared.trace
    assert trace.pending == {"D", "F"} and prepared.needs_models
    for alt in trace.alternatives.values():
        assert [s.name for s in alt.stages if s.status == "pending"] == (
            ["validate"] if alt.name == "D" else ["rerank", "validate"])
        assert alt.final and all(it.verdict == "not_run" for it in alt.final)
    f_union = [r.record_id for r in trace.alternatives["F"].union.rows]
    assert [it.record_id for it in trace.alternatives["F"].final] == f_union[: len(trace.alternatives["F"].final)]
    fast = {n: (a.bm25, a.embedding, a.union, a.fusion) for n, a in trace.alternatives.items()}

    def recomputed(*_a: object, **_k: object) -> None:
        raise AssertionError("the model phase re-ran a fast stage")

    for cls in (query.QueryAnalysis, bm25.BM25Retriever, dense.DenseRetriever, union.Union, fusion.Fusion):
        monkeypatch.setattr(cls, "run", recomputed)
    events: list[ProgressEvent] = []
    done = small.complete(prepared, events.append)

    assert done is trace and not done.pending
    for name, alt in done.alternatives.items():
        assert all(a is b for a, b in zip((alt.bm25, alt.embedding, alt.union, alt.fusion), fast[name], strict=True))
        assert alt.validation is not None and alt.validation.status == "ok"
    f = done.alternatives["F"]
    assert f.rerank is not None and f.rerank.status == "ok" and f.rerank.reranker == OverlapReranker.name
    assert {e.stage for e in events} == {"rerank", "validate"} and {e.alternative for e in events} == {"D", "F"}
    last = {(e.stage, e.alternative): e for e in events}
    assert all(e.done == e.total for e in last.values())
    assert last[("validate", "D")].label == "validate D"


def test_validator_decisions_reach_the_final_list(small: Engine) -> None:
    trace = small.run(DASH_CHUNK, Settings(**RULES, alternatives=("D",), validator_top_k=4))
    d = trace.alternatives["D"]
    accepted = {it.record_id for it in d.final if it.accepted}
    assert accepted and accepted <= DASH_RECORDS
    assert all(it.verdict == "not_run" and it.accepted is None for it in d.final[4:])
    v = d.validation
    assert v is not None and v.policy_text.startswith("accept when Qwen says yes")
    for row in v.judged_rows:
        assert row.verdict in ("yes", "no") and row.margin in (5.0, -5.0)
        assert (row.accepted is True) == (row.record_id in accepted)
        if row.accepted:
            assert row.verified_evidence and row.facts  # accepted on evidence found in both texts


def test_json_round_trip_of_a_complete_trace(small: Engine) -> None:
    trace = small.run(DASH_CHUNK, Settings(**RULES, validator_top_k=3))
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert again.alternatives["F"].rerank == trace.alternatives["F"].rerank
    assert isinstance(again.alternatives["D"].bm25.rows[0], BM25Row)


def test_cancel_stops_judging_and_leaves_nothing_pending(small: Engine, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = lm(small)
    monkeypatch.setattr(small, "verdicts", VerdictCache(tmp_path))  # a cold cache: every verdict is judged
    before = scripted.calls
    trace = small.run(DASH_CHUNK, Settings(**RULES, alternatives=("D",), validator_top_k=4),
                      cancelled=lambda: scripted.calls > before)
    rows = trace.alternatives["D"].validation.judged_rows
    assert scripted.calls == before + 1
    assert rows[0].verdict in ("yes", "no") and rows[0].accepted is not None
    assert [(r.verdict, r.accepted) for r in rows[1:]] == [("cancelled", None)] * 3
    assert not trace.pending


def test_cancel_before_the_reranker_keeps_the_union_order(small: Engine) -> None:
    trace = small.run(DASH_CHUNK, Settings(**RULES, alternatives=("F",), run_validator=False), cancelled=lambda: True)
    f = trace.alternatives["F"]
    assert f.rerank is not None and f.rerank.status == "not_run" and "cancelled" in f.rerank.message
    assert [r.rank for r in f.rerank.rows] == [r.union_rank for r in f.union.rows]


# --- F's rerank stage ------------------------------------------------------------------------------
def test_rerank_stage_orders_by_score_and_keeps_the_tail_in_union_order(small: Engine) -> None:
    prepared = small.prepare(DASH_CHUNK, Settings(**RULES, alternatives=("F",), run_validator=False))
    u = prepared.unions["F"]
    assert len(u.candidates) >= 4
    stage = Rerank(small.store, OverlapReranker(), top_n=3)
    seen: list[tuple[int, int]] = []
    result = stage.run(prepared.chunk, u, lambda d, t: seen.append((d, t)))
    trace = stage.trace(result)
    assert seen[-1] == (3, 3) and trace.scored == 3 and trace.reranker == OverlapReranker.name
    head, tail = trace.rows[:3], trace.rows[3:]
    scores = [r.reranker_score for r in head]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
    assert {r.before for r in head} == {1, 2, 3}
    assert [r.before for r in tail] == list(range(4, len(u.candidates) + 1))
    assert all(r.reranker_score is None and r.rank == r.before for r in tail)
    assert all(r.shift == r.before - r.rank for r in trace.rows)
    # The candidate naming start_dash (the chunk's one distinctive call) wins the overlap.
    assert head[0].record_id in DASH_RECORDS


def test_f_without_a_reranker_keeps_the_union_order_and_says_so(small: Engine) -> None:
    prepared = small.prepare(DASH_CHUNK, Settings(alternatives=("F",), run_validator=False, reranker="none"))
    assert not prepared.needs_models  # nothing for the model phase to do
    f = prepared.trace.alternatives["F"]
    assert f.rerank is not None and f.rerank.status == "skipped" and "union order" in f.rerank.message
    assert f.rerank.reranker == UNION_ORDER and f.rerank.scored == 0
    assert [it.record_id for it in f.final] == [r.record_id for r in f.union.rows][: len(f.final)]
    assert all(r.reranker_score is None and r.shift == 0 for r in f.rerank.rows)


def test_f_with_an_unavailable_reranker_keeps_the_union_order_with_a_notice(small: Engine,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RERANKER_ENV, raising=False)
    trace = small.run(DASH_CHUNK, Settings(alternatives=("F",), run_validator=False, reranker="bge"))
    f = trace.alternatives["F"]
    assert f.rerank is not None and f.rerank.status == "error"
    assert f.rerank.message.startswith("reranker unavailable, union order kept") and RERANKER_ENV in f.rerank.message
    assert [it.record_id for it in f.final] == [r.record_id for r in f.union.rows][: len(f.final)]


# --- settings ---------------------------------------------------------------------------------------
def test_cost_estimates_follow_the_settings() -> None:
    s = Settings(validator_top_k=8, rerank_top_n=30, reranker="qwen", accept_policy="qwen_and_evidence")
    assert s.judge_seconds() == 24.0 and s.rerank_seconds() == 30 * 1.9
    assert s.estimate_seconds(2) == 2 * (1.0 + 30 * 1.9 + 24.0 * 2)
    # the calibrated policy: Qwen reads the lines that show the facts (at most LIST_CODE_CHARS), then writes lists
    cal = Settings()
    short, mid, long, huge = (cal.judge_seconds(n) for n in (500, 2000, 8000, 80_000))
    assert 5 < short < 12 < mid == long == huge
    quick = s.model_copy(update={"reranker": "none", "run_validator": False})
    assert quick.estimate_seconds(2) == 2.0 and not quick.needs_models
    assert Settings(accept_policy="evidence_only").judge_seconds() == 0.0
    assert Settings.parse_alternatives("Both") == ("D", "F")
    with pytest.raises(ValueError, match="D, F or both"):
        Settings.parse_alternatives("X")
