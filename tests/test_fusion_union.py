"""Union and fusion on hand-made legs: provenance, merging, and the known normalisation traps."""

from __future__ import annotations

import pytest

from pipeline.kb.store import KBStore
from pipeline.records import ApiMapping, DocsChunk
from pipeline.stages.fusion import Fusion
from pipeline.stages.results import BM25Hit, BM25Result, EmbeddingHit, EmbeddingResult, RuleHit, RuleResult
from pipeline.stages.union import Union
from pipeline.trace import FusionRow, RecordRef


def _doc(i: str, section: str, path: str = "tutorials/a.rst") -> DocsChunk:
    return DocsChunk(id=i, doc_path=path, source="a", title="A", section=section)


@pytest.fixture()
def store() -> KBStore:
    recs = [_doc("d1", "S1"), _doc("d1b", "S1"), _doc("d2", "S2"), _doc("d3", "S3", "tutorials/b.rst"),
            ApiMapping(id="api:X.y", source_api="X.y", source_pattern=r"X\.y"),
            ApiMapping(id="rename:Old", source_api="Old", source_pattern=r"\bOld\b")]
    return KBStore("t", recs, "h")


def bm25(store: KBStore, *hits: tuple[str, float]) -> BM25Result:
    return BM25Result([BM25Hit(RecordRef.of(store.get(rid)), n, score) for n, (rid, score) in enumerate(hits, 1)],
                      0.1, len(hits), "test", {})


def embedding(store: KBStore, *hits: tuple[str, float]) -> EmbeddingResult:
    return EmbeddingResult([EmbeddingHit(RecordRef.of(store.get(rid)), n, sim)
                            for n, (rid, sim) in enumerate(hits, 1)], 0.1, len(hits), "test")


def _legs(store: KBStore) -> tuple[BM25Result, EmbeddingResult]:
    return (bm25(store, ("d1", 12.0), ("d2", 6.0), ("api:X.y", 0.5)),
            embedding(store, ("d1b", 0.9), ("d3", 0.8), ("d2", 0.4)))


def test_union_merges_same_section_and_keeps_provenance(store: KBStore) -> None:
    res = Union().run(*_legs(store))
    by_key = {c.key: c for c in res.candidates}
    s1 = by_key["tutorials/a.rst#S1"]
    assert s1.members == ["d1", "d1b"] and s1.provenance == "both"
    assert (s1.bm25_rank, s1.embedding_rank) == (1, 1)
    assert (s1.bm25_score, s1.similarity) == (12.0, 0.9)
    assert by_key["tutorials/a.rst#S2"].provenance == "both"
    assert by_key["tutorials/b.rst#S3"].provenance == "embedding"
    assert by_key["api:X.y"].provenance == "bm25"
    assert res.merged == [("d1", "d1b")]
    assert [c.union_rank for c in res.candidates] == [1, 2, 3, 4]
    trace = Union().trace(res)
    assert trace.provenance_counts == {"bm25": 1, "embedding": 1, "both": 2, "rule": 0}
    assert [(m.kept, m.merged) for m in trace.merged] == [("d1", "d1b")]
    assert trace.rows[0].section == "S1" and trace.rows[0].doc_path == "tutorials/a.rst"


def test_a_rule_marks_a_leg_hit_and_adds_the_rest_after_the_legs(store: KBStore) -> None:
    rules = RuleResult([RuleHit(RecordRef.of(store.get("rename:Old")), 1, "Old"),
                        RuleHit(RecordRef.of(store.get("api:X.y")), 2, "X.y")], 0.1)
    res = Union().run(*_legs(store), rules)
    by_key = {c.key: c for c in res.candidates}
    assert by_key["api:X.y"].provenance == "bm25" and by_key["api:X.y"].rule == "X.y"  # found by BM25 too
    assert by_key["api:X.y"].members == ["api:X.y"]
    last = res.candidates[-1]
    assert (last.key, last.provenance, last.rule, last.bm25_rank, last.embedding_rank) == (
        "rename:Old", "rule", "Old", None, None)
    assert last.union_rank == len(res.candidates) == 5
    assert Union().trace(res).provenance_counts["rule"] == 1
    assert Fusion("rrf").run(res).items[-1].score == 0.0  # no leg rank: fusion gives it nothing


def test_rrf_uses_one_based_ranks(store: KBStore) -> None:
    fusion = Fusion("rrf", rrf_k=60)
    ranked = fusion.run(Union().run(*_legs(store)))
    top = ranked.items[0]
    assert top.candidate.key == "tutorials/a.rst#S1"
    assert top.score == pytest.approx(2 / 61)
    assert ranked.max_possible == pytest.approx(2 / 61)
    s3 = next(i for i in ranked.items if i.candidate.key.endswith("#S3"))
    assert s3.bm25_contribution == 0.0
    assert s3.embedding_contribution == pytest.approx(1 / 62)
    rows = fusion.trace(ranked).rows
    row = next(r for r in rows if r.record_id == "d3")
    assert isinstance(row, FusionRow)
    # The raw leg values keep the names they have in the union: None where a leg did not find it.
    assert (row.bm25_score, row.bm25_rank, row.similarity, row.embedding_rank) == (None, None, 0.8, 2)
    assert [r.shift for r in rows] == [r.before - r.rank for r in rows]


def test_minmax_floor_keeps_a_weak_keyword_leg_small(store: KBStore) -> None:
    """A best BM25 score near zero must not be stretched to 1.0 by min-max."""
    weak = bm25(store, ("d1", 0.02), ("d2", 0.01))
    dense = embedding(store, ("d3", 0.9))
    ranked = Fusion("minmax", alpha=0.5).run(Union().run(weak, dense))
    d1 = next(i for i in ranked.items if i.candidate.record_id == "d1")
    assert d1.bm25_norm is not None and d1.bm25_norm < 0.01
    assert ranked.items[0].candidate.record_id == "d3"
    assert ranked.bm25_floor == 5.0 and ranked.bm25_norm is not None and ranked.bm25_norm.span == 5.0


def test_convex_weights_and_zscore(store: KBStore) -> None:
    u = Union().run(*_legs(store))
    only_bm25 = Fusion("minmax", alpha=1.0).run(u)
    assert only_bm25.items[0].candidate.record_id == "d1"
    assert all(i.embedding_contribution == 0 for i in only_bm25.items)
    z = Fusion("zscore", alpha=0.5).run(u)
    assert z.items[0].candidate.key == "tutorials/a.rst#S1"
    for it in z.items:
        assert it.score == pytest.approx(it.bm25_contribution + it.embedding_contribution)


def test_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="rrf, minmax, zscore"):
        Fusion("borda")
