"""Stage 2: union of both legs — duplicates merged, provenance kept.

Records of the same ``doc_path`` + section are one candidate: a BM25 hit and an
embedding hit on the same tutorial section must not compete with each other.
For Godot 3 code, the rename mappings the code uses (stages/renames.py) join too:
a leg's hit keeps its provenance and notes the match, the others come after the
legs' hits as provenance ``rule``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipeline.stages.results import (
    BM25Hit,
    BM25Result,
    EmbeddingHit,
    EmbeddingResult,
    RuleHit,
    RuleResult,
    UnionCandidate,
    UnionResult,
)
from pipeline.trace import MergedPair, RecordRef, UnionRow, UnionTrace


def group_key(ref: RecordRef) -> str:
    if ref.kind == "docs_chunk":
        return f"{ref.doc_path}#{ref.section}"
    return ref.record_id


@dataclass
class _Group:
    members: list[str] = field(default_factory=list)
    best: tuple[int, RecordRef] | None = None  # (rank, record) of the best hit on either leg
    bm25: BM25Hit | None = None
    embedding: EmbeddingHit | None = None
    rule: RuleHit | None = None

    def add(self, hit: BM25Hit | EmbeddingHit | RuleHit, merged: list[tuple[str, str]]) -> None:
        if isinstance(hit, RuleHit):  # rules come after both legs and only mark their record
            if self.best is None:
                self.best = (hit.rank, hit.ref)
                self.members.append(hit.ref.record_id)
            self.rule = hit
            return
        rid = hit.ref.record_id
        if rid not in self.members:
            if self.members:
                merged.append((self.members[0], rid))
            self.members.append(rid)
        if isinstance(hit, BM25Hit):
            if self.bm25 is None or hit.rank < self.bm25.rank:
                self.bm25 = hit
        elif self.embedding is None or hit.rank < self.embedding.rank:
            self.embedding = hit
        if self.best is None or hit.rank < self.best[0]:
            self.best = (hit.rank, hit.ref)

    def sort_key(self) -> tuple[int, int, int]:
        ranks = [h.rank for h in (self.bm25, self.embedding) if h is not None]
        if not ranks:  # found by a rule alone: after every leg hit, in the rule's order
            return (1, self.rule.rank if self.rule else 0, 0)
        return (0, min(ranks), -len(ranks))

    def candidate(self, key: str, union_rank: int) -> UnionCandidate:
        b, e = self.bm25, self.embedding
        assert self.best is not None
        return UnionCandidate(
            key=key, ref=self.best[1], members=list(self.members),
            provenance="both" if b and e else ("bm25" if b else ("embedding" if e else "rule")),
            bm25_rank=b.rank if b else None, bm25_score=b.score if b else None,
            embedding_rank=e.rank if e else None, similarity=e.similarity if e else None, union_rank=union_rank,
            rule=self.rule.use if self.rule else None)


class Union:
    name = "union"

    def run(self, bm25: BM25Result, embedding: EmbeddingResult, rules: RuleResult | None = None) -> UnionResult:
        t0 = time.perf_counter()
        groups: dict[str, _Group] = {}
        merged: list[tuple[str, str]] = []
        hits: list[BM25Hit | EmbeddingHit | RuleHit] = [*bm25.hits, *embedding.hits, *(rules.hits if rules else [])]
        for hit in hits:
            groups.setdefault(group_key(hit.ref), _Group()).add(hit, merged)
        ordered = sorted(groups.items(), key=lambda kv: (*kv[1].sort_key(), kv[0]))
        candidates = [g.candidate(key, n) for n, (key, g) in enumerate(ordered, start=1)]
        return UnionResult(candidates, merged, (time.perf_counter() - t0) * 1000, rules.ms if rules else 0.0)

    def trace(self, result: UnionResult) -> UnionTrace:
        rows = [UnionRow.of(c.ref, union_rank=c.union_rank, provenance=c.provenance, bm25_rank=c.bm25_rank,
                            bm25_score=c.bm25_score, embedding_rank=c.embedding_rank, similarity=c.similarity,
                            members=c.members, rule=c.rule)
                for c in result.candidates]
        counts = {p: sum(1 for c in result.candidates if c.provenance == p)
                  for p in ("bm25", "embedding", "both", "rule")}
        return UnionTrace(ms=result.ms, rules_ms=result.rules_ms, rows=rows, provenance_counts=counts,
                          merged=[MergedPair(kept=a, merged=b) for a, b in result.merged])
