"""Policy "calibrated" on the small KB with a known accept model: gating, p, contributions, fallbacks."""

from __future__ import annotations

import math

import pytest

from pipeline.accept import FREE, LLM, AcceptModel, Linear
from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.validate import VerdictCache
from pipeline.trace import LIST_CANCELLED, LIST_PENDING, LISTED, Trace
from pipeline.ui.flow import alternative_nodes
from pipeline.ui.views import validate_sent
from tests.fakes import DASH_CHUNK, SMALL_KB, FakeHub, OverlapReranker


def _linear(names: list[str], weights: dict[str, float], intercept: float) -> Linear:
    return Linear(names, [0.0] * len(names), [1.0] * len(names), [weights.get(n, 0.0) for n in names], intercept,
                  (1.0, 0.0))


# p0 rises with shared facts; p1 adds Qwen's margin (the scripted LM says +5 to start_dash records, −5 to the rest).
MODEL = AcceptModel(free=_linear(list(FREE), {"facts": 1.5}, -2.0),
                    full=_linear([*FREE, *LLM], {"facts": 1.0, "margin": 1.0}, -2.0),
                    threshold=0.9, ask_above=0.5, name="test accept model")


class AcceptHub(FakeHub):
    def accept_model(self, kb_hash: str) -> AcceptModel:
        return MODEL


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    eng = Engine.open([SMALL_KB], hub=AcceptHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))  # a cold cache: call counts are exact
    return eng


def test_qwen_is_asked_only_where_it_can_change_the_decision(engine: Engine) -> None:
    hub = engine.hub
    assert isinstance(hub, AcceptHub)
    before = hub.lm.calls
    alt = engine.run(DASH_CHUNK, Settings(alternatives=("D",), reranker="none", validator_top_k=6)).alternatives["D"]
    v = alt.validation
    assert v is not None and v.accept_model == "test accept model" and v.p_threshold == 0.9
    rows = v.judged_rows
    skipped = [r for r in rows if r.asked_qwen is False]
    asked = [r for r in rows if r.asked_qwen]
    assert skipped and asked and v.skipped == len(skipped)
    for r in skipped:  # below the band: rejected on the free features alone, and the row says so
        assert r.p is not None and r.p < MODEL.ask_above and r.accepted is False
        assert r.note == f"decided without Qwen: p = {r.p:.2f}" and r.margin is None
        assert (r.how, r.notes, r.listing) == ("decided without Qwen", [], "")
    # Qwen was asked once per asked record for this chunk and once for an empty chunk
    assert hub.lm.calls - before == 2 * len(asked)
    for r in asked:
        assert r.p is not None and r.margin is not None
        logit = math.log(r.p / (1 - r.p))
        # the contributions add up (with the bias) to p's log-odds exactly
        assert sum(c.contribution for c in r.contributions) + MODEL.full.base() == pytest.approx(logit, abs=1e-3)
        assert r.accepted == (r.p >= 0.9 and bool(r.facts)) and r.how == "Qwen asked"
    accepted = [it for it in alt.final if it.accepted]
    assert accepted and all(it.p is not None and it.p >= 0.9 and it.why for it in accepted)
    assert all(it.evidence for it in accepted)  # Qwen's evidence list, checked literally, for every accept


# A model whose fit found Qwen's margins useless (the shipped one: tests/test_accept.py): p0 decides alone.
FREE_ONLY = AcceptModel(free=MODEL.free, full=MODEL.free, threshold=0.6, ask_above=1.0, name="free-only model")


class FreeOnlyHub(FakeHub):
    def accept_model(self, kb_hash: str) -> AcceptModel:
        return FREE_ONLY


def test_a_model_without_qwen_features_decides_on_p_and_asks_qwen_only_for_evidence(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    eng = Engine.open([SMALL_KB], hub=FreeOnlyHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    hub = eng.hub
    assert isinstance(hub, FreeOnlyHub) and not FREE_ONLY.uses_llm
    alt = eng.run(DASH_CHUNK, Settings(alternatives=("D",), reranker="none", validator_top_k=6)).alternatives["D"]
    v = alt.validation
    assert v is not None and v.skipped == len(v.judged_rows) and v.judged == 0
    assert hub.lm.calls == 0  # no yes/no judgement at all
    for r in v.judged_rows:
        assert r.asked_qwen is False and r.note.startswith(f"decided without Qwen: p = {r.p:.2f}")
        assert r.accepted == (r.p >= 0.6 and bool(r.facts))
        if r.accepted:  # Qwen's evidence list (the scripted LM names fact 1), checked literally
            assert r.note.endswith("Qwen listed the evidence") and r.evidence and r.evidence[0].verified
            assert r.listing == "Qwen listed the evidence" and r.listing not in r.notes
    assert any(r.accepted for r in v.judged_rows) and not all(r.accepted for r in v.judged_rows)
    # the lists are where the stage's time went, and the panel says so; a second run reads them from the cache
    n_accepted = sum(bool(r.accepted) for r in v.judged_rows)
    assert (v.lists, v.lists_cached) == (n_accepted, 0) and 0 < v.lists_ms <= v.ms
    assert v.lists_text.startswith(f" Qwen was then asked for the evidence lists of {n_accepted} accepted record(s)")
    again = eng.run(DASH_CHUNK, Settings(alternatives=("D",), reranker="none", validator_top_k=6)
                    ).alternatives["D"].validation
    assert again is not None and (again.lists, again.lists_cached, again.lists_text) == (0, n_accepted, "")
    assert validate_sent(again) == f"0 (0 from cache) + {n_accepted} evidence lists ({n_accepted} from cache)"


def test_the_decisions_are_shown_before_qwen_writes_the_evidence_lists(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    eng = Engine.open([SMALL_KB], hub=FreeOnlyHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    settings = Settings(alternatives=("D",), reranker="none", validator_top_k=6)
    shown: list[Trace] = []

    def run() -> Trace:
        prepared = eng.prepare(DASH_CHUNK, settings)
        return eng.complete(prepared, on_update=lambda: shown.append(prepared.trace.model_copy(deep=True)))

    final = run().alternatives["D"]
    assert len(shown) == 1  # once, between the decisions and the lists
    early = shown[0].alternatives["D"]
    v, done = early.validation, final.validation
    assert v is not None and done is not None and v.status == "pending" and done.status == "ok"
    n = sum(bool(r.accepted) for r in done.judged_rows)
    assert n and v.message.startswith(f"decided: Qwen is now writing the evidence lists of {n} accepted record(s)")
    assert shown[0].pending == {"D"}  # the page keeps waiting for the job
    # the same decisions, p and ranking; only the accepted records' evidence lists were still to come
    assert [(r.record_id, r.accepted, r.p) for r in v.rows] == [(r.record_id, r.accepted, r.p) for r in done.rows]
    assert [(it.record_id, it.accepted) for it in early.final] == [(it.record_id, it.accepted) for it in final.final]
    for r, later in zip(v.rows, done.rows, strict=True):
        if r.accepted:
            assert r.listing == LIST_PENDING and not r.evidence and v.lists == 0
            assert later.listing == LISTED and later.evidence
        else:
            assert r.listing == later.listing == ""
    # the flow overview says what is left: decided, the lists still being written
    node = {n.column: n for n in alternative_nodes(early, settings)}
    validate = node["validate"]
    assert (validate.count_text, validate.time_text) == (f"{len(v.judged_rows)} judged", "evidence lists…")
    assert node["final"].count == n and node["final"].status == "pending"
    # the lists now cached: nothing is left to wait for, so nothing is shown early
    shown.clear()
    assert run().alternatives["D"].validation.lists_cached == n and not shown


def test_an_empty_evidence_list_is_not_reported_as_qwen_listing_evidence(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    eng = Engine.open([SMALL_KB], hub=FreeOnlyHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    eng.hub.lm.complete = lambda *a, **k: "<generation failed: prompt too long>"  # type: ignore[method-assign]
    alt = eng.run(DASH_CHUNK, Settings(alternatives=("D",), reranker="none", validator_top_k=6)).alternatives["D"]
    accepted = [r for r in alt.validation.judged_rows if r.accepted]
    assert accepted
    for r in accepted:
        assert not r.evidence and "Qwen listed the evidence" not in r.note
        assert r.note.endswith("Qwen's evidence list came back empty, so the shared facts are shown")
    assert all(it.evidence for it in alt.final if it.accepted)  # the shared facts stand in


def test_without_an_accept_model_the_rules_decide_and_say_so() -> None:
    eng = Engine.open([SMALL_KB], hub=FakeHub())  # the small KB has no trained accept model
    alt = eng.run(DASH_CHUNK, Settings(alternatives=("D",), reranker="none", validator_top_k=4)).alternatives["D"]
    v = alt.validation
    assert v is not None and v.policy == "qwen_and_evidence" and v.accept_model is None
    assert "accept model unavailable" in v.message and "rule-based policy" in v.message
    assert all(r.p is None for r in v.judged_rows)


class AnyRerankerHub(FreeOnlyHub):
    """Every reranker backend is the term-overlap scorer: only how the engine orders the stages differs."""

    def reranker(self, s: Settings, kb_hash: str) -> OverlapReranker:
        return OverlapReranker()


@pytest.mark.parametrize("backend", ["bge", "qwen"])
def test_a_cheap_reranker_ranks_f_before_ds_validator_runs(backend: str,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """F's list was drawn only after D's Qwen work; a reranker that takes a moment now runs first, and a
    Qwen reranker (a minute) still waits, so D's decisions come first there."""
    eng = Engine.open([SMALL_KB], hub=AnyRerankerHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    prepared = eng.prepare(DASH_CHUNK, Settings(reranker=backend, validator_top_k=6))
    shown: list[tuple[str, str]] = []

    def update() -> None:
        alts = prepared.trace.alternatives
        shown.append((alts["F"].rerank.status, alts["D"].validation.status))

    eng.complete(prepared, on_update=update)
    assert shown, "nothing was published before the run ended"
    assert shown[0] == (("ok", "pending") if backend == "bge" else ("pending", "pending")), shown


def test_the_lists_prompt_leaves_out_the_lines_without_facts_and_the_trace_says_so(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    eng = Engine.open([SMALL_KB], hub=FreeOnlyHub())  # accepts without Qwen's verdict: lists asked on their own
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    settings = Settings(alternatives=("D",), reranker="none", validator_top_k=6)
    short = eng.run(DASH_CHUNK, settings).alternatives["D"].validation
    assert short is not None and short.lists and "(2 other line(s) left out)" in short.lists_text  # func, gravity
    assert not short.message  # expected, not a warning
    filler = "".join(f"\tx += {n}\n" for n in range(200))  # lines that show none of the chunk's facts
    v = eng.run(DASH_CHUNK + filler, settings).alternatives["D"].validation
    assert v is not None and v.lists
    # kept: the Input, start_dash() and move_and_slide() lines; left out: the func line, gravity and the filler
    assert "Qwen read only the lines that show the chunk's facts (202 other line(s) left out)" in v.lists_text


def test_cancel_while_qwen_writes_the_lists_keeps_the_decisions_and_caches_no_list(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import threading

    eng = Engine.open([SMALL_KB], hub=FreeOnlyHub())
    eng.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    settings = Settings(alternatives=("D",), reranker="none", validator_top_k=6)
    pressed = threading.Event()
    # Cancel is pressed the moment the decisions show, while Qwen would be writing the lists
    trace = eng.complete(eng.prepare(DASH_CHUNK, settings), cancelled=pressed.is_set, on_update=pressed.set)
    v = trace.alternatives["D"].validation
    accepted = [r for r in v.judged_rows if r.accepted]
    assert pressed.is_set() and accepted
    assert all(r.listing == LIST_CANCELLED and not r.evidence for r in accepted)
    # the next run writes them: nothing of the cancelled attempt was cached
    again = eng.run(DASH_CHUNK, settings).alternatives["D"].validation
    assert again.lists_cached == 0 and all(r.listing == LISTED for r in again.judged_rows if r.accepted)
