"""Issue 2/5 acceptance on the real KB: the reference chunk through D (no validator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.trace import Trace

REF = Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd"


@pytest.fixture(scope="module")
def trace(engine: Engine):
    return engine.run(REF.read_bytes(), Settings(alternatives=("D",), run_validator=False))


def test_d_top_two_docs_are_coding_the_player_movement_and_clamp(trace) -> None:
    docs = [it for it in trace.alternatives["D"].final if it.kind == "docs_chunk"]
    top2 = docs[:2]
    assert all(it.source == "first_2d_game/coding_the_player" for it in top2), [d.source for d in docs[:5]]
    blocks = {it.record_id for it in top2}
    assert blocks == {"docs:first_2d_game/coding_the_player#coding-the-player-p3",
                      "docs:first_2d_game/coding_the_player#coding-the-player-p4"}
    ranks = {it.source: it.rank for it in reversed(trace.alternatives["D"].final)}
    third_d = ranks.get("first_3d_game/player_movement_code", 10**6)
    assert third_d > max(it.rank for it in top2)


def test_bm25_explains_matched_terms_as_written(trace) -> None:
    bm25 = trace.alternatives["D"].bm25
    row = next(r for r in bm25.rows if r.record_id.endswith("coding-the-player-p3"))
    written = {m.as_written for m in row.matched}
    assert {"Input.is_action_pressed", "AnimatedSprite2D"} <= written
    clamp_row = next(r for r in bm25.rows if r.record_id.endswith("coding-the-player-p4"))
    assert "clamp" in {m.as_written for m in clamp_row.matched}
    assert all(m.contribution > 0 for m in row.matched)
    assert sum(m.contribution for m in row.matched) == pytest.approx(row.score, rel=1e-6)


def test_trace_shape_and_provenance(trace) -> None:
    d = trace.alternatives["D"]
    assert [s.name for s in d.stages] == ["bm25", "embedding", "union", "fusion", "validate"]
    assert d.validation.status == "skipped" and d.rerank is None
    assert d.bm25.count == 50 and d.embedding.count == 50
    union = d.union
    counts = union.provenance_counts
    assert counts["both"] > 0 and sum(counts.values()) == union.count
    p3 = next(r for r in union.rows if r.record_id.endswith("coding-the-player-p3"))
    assert p3.provenance == "both" and p3.bm25_rank and p3.embedding_rank and p3.similarity
    # One name per quantity: the union's similarity is the embedding leg's, and fusion reports the same value.
    emb = {r.record_id: r.similarity for r in d.embedding.rows}
    fused = {r.record_id: r for r in d.fusion.rows}
    assert p3.similarity == emb[p3.record_id] == fused[p3.record_id].similarity
    assert len(d.final) == 20 and [it.rank for it in d.final] == list(range(1, 21))
    assert all(it.verdict == "not_run" and it.accepted is None for it in d.final)


def test_real_trace_round_trips_through_json(trace) -> None:
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert again.settings == trace.settings and again.alternatives["D"].fusion.max_possible is not None
