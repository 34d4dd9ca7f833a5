"""Typed results passed between stages (the trace is built from these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Provenance = Literal["bm25", "embedding", "both"]


@dataclass(frozen=True)
class QueryResult:
    terms: list[str]  # token stream, with repeats
    kinds: dict[str, str]  # term -> why it is a term
    surface: dict[str, str]  # term -> how it is spelled in the chunk
    parser: str
    ms: float


@dataclass(frozen=True)
class LegHit:
    record_id: str
    rank: int  # 1-based
    score: float
    matched: dict[str, float] = field(default_factory=dict)  # BM25: term -> contribution


@dataclass(frozen=True)
class LegResult:
    leg: Literal["bm25", "embedding"]
    hits: list[LegHit]
    ms: float
    model: str = ""


@dataclass(frozen=True)
class UnionCandidate:
    key: str  # doc_path#section for docs chunks, else the record id
    record_id: str  # representative record: the best-ranked member
    members: list[str]  # every record id merged into this candidate
    provenance: Provenance
    bm25_rank: int | None
    bm25_score: float | None
    dense_rank: int | None
    dense_score: float | None
    union_rank: int  # order by best leg rank: the "before" of later rank shifts


@dataclass(frozen=True)
class UnionResult:
    candidates: list[UnionCandidate]
    merged: list[tuple[str, str]]  # (kept record id, merged record id) pairs
    ms: float


@dataclass(frozen=True)
class RankedItem:
    candidate: UnionCandidate
    score: float
    rank: int  # 1-based, after this stage
    before: int  # rank before this stage (the union order)
    breakdown: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RankedResult:
    stage: str  # "fusion" | "rerank"
    items: list[RankedItem]
    ms: float
    method: str
    explain: dict[str, object] = field(default_factory=dict)
