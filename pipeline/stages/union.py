"""Stage 2: union of both legs — duplicates merged, provenance kept.

Records of the same ``doc_path`` + section are one candidate: a BM25 hit and an
embedding hit on the same tutorial section must not compete with each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord, DocsChunk
from pipeline.stages.results import LegHit, LegResult, UnionCandidate, UnionResult
from pipeline.trace import StageTrace


def group_key(record: AnyRecord) -> str:
    if isinstance(record, DocsChunk):
        return f"{record.doc_path}#{record.section}"
    return record.id


@dataclass
class _Group:
    members: list[str] = field(default_factory=list)
    best: tuple[int, str] | None = None  # (rank, record id) of the best hit on either leg
    legs: dict[str, LegHit] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, int]:
        return (min(h.rank for h in self.legs.values()), -len(self.legs))


class Union:
    name = "union"

    def __init__(self, store: KBStore) -> None:
        self.store = store

    def run(self, bm25: LegResult, dense: LegResult) -> UnionResult:
        t0 = time.perf_counter()
        groups: dict[str, _Group] = {}
        merged: list[tuple[str, str]] = []
        for leg in (bm25, dense):
            for hit in leg.hits:
                g = groups.setdefault(group_key(self.store.get(hit.record_id)), _Group())
                if hit.record_id not in g.members:
                    if g.members:
                        merged.append((g.members[0], hit.record_id))
                    g.members.append(hit.record_id)
                if leg.leg not in g.legs or hit.rank < g.legs[leg.leg].rank:
                    g.legs[leg.leg] = hit
                if g.best is None or hit.rank < g.best[0]:
                    g.best = (hit.rank, hit.record_id)

        candidates = []
        ordered = sorted(groups.items(), key=lambda kv: (*kv[1].sort_key(), kv[0]))
        for n, (key, g) in enumerate(ordered, start=1):
            b, e = g.legs.get("bm25"), g.legs.get("embedding")
            assert g.best is not None
            candidates.append(UnionCandidate(
                key=key, record_id=g.best[1], members=list(g.members),
                provenance="both" if b and e else ("bm25" if b else "embedding"),
                bm25_rank=b.rank if b else None, bm25_score=b.score if b else None,
                dense_rank=e.rank if e else None, dense_score=e.score if e else None, union_rank=n,
            ))
        return UnionResult(candidates, merged, (time.perf_counter() - t0) * 1000)

    def trace(self, result: UnionResult) -> StageTrace:
        rows = []
        for c in result.candidates:
            r = self.store.get(c.record_id)
            rows.append({"union_rank": c.union_rank, "record_id": c.record_id, "kind": r.kind,
                         "source": getattr(r, "source", ""), "section": getattr(r, "section", None),
                         "provenance": c.provenance, "bm25_rank": c.bm25_rank, "bm25_score": c.bm25_score,
                         "embedding_rank": c.dense_rank, "similarity": c.dense_score, "members": c.members})
        counts = {p: sum(1 for c in result.candidates if c.provenance == p) for p in ("bm25", "embedding", "both")}
        return StageTrace(name="union", ms=result.ms, candidates=rows,
                          explain={"provenance_counts": counts, "n_candidates": len(rows),
                                   "merged": [{"kept": a, "merged": b} for a, b in result.merged]})
