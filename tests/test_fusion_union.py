"""Union and fusion on hand-made legs: provenance, merging, and the known normalisation traps."""

from __future__ import annotations

import pytest

from pipeline.kb.store import KBStore
from pipeline.records import ApiMapping, DocsChunk
from pipeline.stages.fusion import Fusion
from pipeline.stages.results import LegHit, LegResult
from pipeline.stages.union import Union


def _doc(i: str, section: str, path: str = "tutorials/a.rst") -> DocsChunk:
    return DocsChunk(id=i, doc_path=path, source="a", title="A", section=section)


@pytest.fixture()
def store() -> KBStore:
    recs = [_doc("d1", "S1"), _doc("d1b", "S1"), _doc("d2", "S2"), _doc("d3", "S3", "tutorials/b.rst"),
            ApiMapping(id="api:X.y", source_api="X.y", source_pattern=r"X\.y")]
    return KBStore("t", recs, "h")


def _legs() -> tuple[LegResult, LegResult]:
    bm25 = LegResult("bm25", [LegHit("d1", 1, 12.0), LegHit("d2", 2, 6.0), LegHit("api:X.y", 3, 0.5)], 0.1)
    dense = LegResult("embedding", [LegHit("d1b", 1, 0.9), LegHit("d3", 2, 0.8), LegHit("d2", 3, 0.4)], 0.1)
    return bm25, dense


def test_union_merges_same_section_and_keeps_provenance(store: KBStore) -> None:
    res = Union(store).run(*_legs())
    by_key = {c.key: c for c in res.candidates}
    s1 = by_key["tutorials/a.rst#S1"]
    assert s1.members == ["d1", "d1b"] and s1.provenance == "both"
    assert (s1.bm25_rank, s1.dense_rank) == (1, 1)
    assert by_key["tutorials/a.rst#S2"].provenance == "both"
    assert by_key["tutorials/b.rst#S3"].provenance == "embedding"
    assert by_key["api:X.y"].provenance == "bm25"
    assert res.merged == [("d1", "d1b")]
    assert [c.union_rank for c in res.candidates] == [1, 2, 3, 4]


def test_rrf_uses_one_based_ranks(store: KBStore) -> None:
    ranked = Fusion("rrf", rrf_k=60).run(Union(store).run(*_legs()))
    top = ranked.items[0]
    assert top.candidate.key == "tutorials/a.rst#S1"
    assert top.score == pytest.approx(2 / 61)
    assert ranked.explain["max_possible"] == pytest.approx(2 / 61)
    s3 = next(i for i in ranked.items if i.candidate.key.endswith("#S3"))
    assert s3.breakdown["bm25_contribution"] == 0.0
    assert s3.breakdown["embedding_contribution"] == pytest.approx(1 / 62)


def test_minmax_floor_keeps_a_weak_keyword_leg_small(store: KBStore) -> None:
    """A best BM25 score near zero must not be stretched to 1.0 by min-max."""
    weak = LegResult("bm25", [LegHit("d1", 1, 0.02), LegHit("d2", 2, 0.01)], 0.1)
    dense = LegResult("embedding", [LegHit("d3", 1, 0.9)], 0.1)
    ranked = Fusion("minmax", alpha=0.5).run(Union(store).run(weak, dense))
    d1 = next(i for i in ranked.items if i.candidate.record_id == "d1")
    assert d1.breakdown["bm25_norm"] < 0.01
    assert ranked.items[0].candidate.record_id == "d3"


def test_convex_weights_and_zscore(store: KBStore) -> None:
    u = Union(store).run(*_legs())
    only_bm25 = Fusion("minmax", alpha=1.0).run(u)
    assert only_bm25.items[0].candidate.record_id == "d1"
    assert all(i.breakdown["embedding_contribution"] == 0 for i in only_bm25.items)
    z = Fusion("zscore", alpha=0.5).run(u)
    assert z.items[0].candidate.key == "tutorials/a.rst#S1"
    for it in z.items:
        assert it.score == pytest.approx(it.breakdown["bm25_contribution"] + it.breakdown["embedding_contribution"])


def test_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="rrf, minmax, zscore"):
        Fusion("borda")
