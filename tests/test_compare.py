"""The Compare page's computations (pipeline/ui/compare.py) on a real D-and-F trace of the small user KB.

The trace is real (KB, BM25, MiniLM, union, fusion, evidence, validate stage); only the two Qwen models are
replaced by the protocol fakes of tests/fakes.py, so the decisions are known in advance.
"""

from __future__ import annotations

import pytest

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.validate import VerdictCache
from pipeline.trace import PIPELINE_ORDER, Trace
from pipeline.ui.compare import agreement, latency_frame, model_usage, shift_rows
from tests.fakes import DASH_CHUNK, DASH_RECORDS, RULES, SMALL_KB, FakeHub, OverlapReranker


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    engine = Engine.open([SMALL_KB], hub=FakeHub())
    engine.verdicts = VerdictCache(tmp_path_factory.mktemp("verdicts"))
    return engine.run(DASH_CHUNK, Settings(**RULES, validator_top_k=6))


def test_agreement_splits_the_accepted_records(trace: Trace) -> None:
    d, f = trace.alternatives["D"], trace.alternatives["F"]
    acc_d = {it.record_id for it in d.final if it.accepted}
    acc_f = {it.record_id for it in f.final if it.accepted}
    assert acc_d and acc_d <= DASH_RECORDS and acc_f <= DASH_RECORDS
    ag = agreement(d, f)
    assert set(ag.both) == acc_d & acc_f
    assert set(ag.only_d) == acc_d - acc_f and set(ag.only_f) == acc_f - acc_d
    assert not set(ag.both) & set(ag.only_d)


def test_agreement_counts_a_merged_duplicate_as_the_same_record(trace: Trace) -> None:
    d, f = trace.alternatives["D"], trace.alternatives["F"]
    first = next(it for it in d.final if it.accepted)
    twin = f.model_copy(deep=True)
    for it in twin.final:  # F accepted only a record that D's choice absorbed as a duplicate
        it.accepted = False
    twin.final[0] = twin.final[0].model_copy(update={"record_id": "user:twin", "group": [first.record_id],
                                                    "accepted": True})
    ag = agreement(d, twin)
    assert first.record_id in ag.both and ag.only_f == []


def test_shift_rows_pair_d_fusion_ranks_with_f_reranker_ranks(trace: Trace) -> None:
    d, f = trace.alternatives["D"], trace.alternatives["F"]
    assert f.rerank is not None and f.rerank.reranker == OverlapReranker.name
    rows = shift_rows(d, f)
    fused = {r.record_id: r.rank for r in d.fusion.rows}
    reranked = {r.record_id: r.rank for r in f.rerank.rows}
    assert {r.record_id for r in rows} == set(fused) | set(reranked)  # the small KB: everything is in a top 15
    for r in rows:
        assert (r.before, r.after) == (fused.get(r.record_id), reranked.get(r.record_id))
    assert len(shift_rows(d, f, top=1)) in (1, 2)  # D's first and F's first (the same record or two)


def test_latency_frame_has_every_stage_in_pipeline_order(trace: Trace) -> None:
    lat = latency_frame(trace)
    for name, alt in trace.alternatives.items():
        mine = lat[lat["alternative"] == name]
        assert list(mine["stage"]) == [s.name for s in alt.stages]
        assert list(mine["order"]) == sorted(mine["order"]) == [PIPELINE_ORDER.index(s.name) for s in alt.stages]
        assert list(mine["seconds"]) == pytest.approx([s.ms / 1000 for s in alt.stages])


def test_model_usage_counts_what_each_model_was_sent(trace: Trace) -> None:
    usage = model_usage(trace)
    f_rerank = usage[(usage["alternative"] == "F") & (usage["stage"] == "rerank")].iloc[0]
    assert f_rerank["candidates sent"] == str(trace.alternatives["F"].rerank.scored)
    for name, alt in trace.alternatives.items():
        v = alt.validation
        row = usage[(usage["alternative"] == name) & (usage["stage"] == "validate")].iloc[0]
        n = v.lists + v.lists_cached
        lists = f" + {n} evidence lists ({v.lists_cached} from cache)" if n else ""
        assert row["candidates sent"] == f"{v.judged + v.cached} ({v.cached} from cache){lists}"
        assert v.judged + v.cached == min(6, len(alt.final))
