"""Typed results passed between stages; quantities are named as in the trace rows (pipeline/trace.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.evidence import Evidence
from pipeline.models.validator import Judgement
from pipeline.trace import Contribution, FinalItem, NormStats, Provenance, RecordRef, Status, Verdict


@dataclass(frozen=True)
class QueryResult:
    terms: list[str]  # token stream, with repeats
    kinds: dict[str, str]  # term -> why it is a term
    surface: dict[str, str]  # term -> how it is spelled in the chunk
    parser: str
    ms: float


@dataclass(frozen=True)
class BM25Hit:
    ref: RecordRef
    rank: int  # 1-based
    score: float
    matched: dict[str, float] = field(default_factory=dict)  # term -> contribution, largest first


@dataclass(frozen=True)
class BM25Result:
    hits: list[BM25Hit]
    ms: float
    k: int
    scorer: str
    surface: dict[str, str]  # the query's spellings, for the matched terms "as written"


@dataclass(frozen=True)
class EmbeddingHit:
    ref: RecordRef
    rank: int
    similarity: float


@dataclass(frozen=True)
class EmbeddingResult:
    hits: list[EmbeddingHit]
    ms: float
    k: int
    model: str
    error: str = ""  # the leg could not run (e.g. no embedder): the union uses BM25 alone
    notice: str = ""  # the leg ran, but not with the model asked for (e.g. the trained one is missing)


@dataclass(frozen=True)
class RuleHit:
    """A record a rule found in the code (stages/renames.py, stages/classuse.py): ``use`` is the code it matched."""

    ref: RecordRef
    rank: int
    use: str


@dataclass(frozen=True)
class RuleResult:
    hits: list[RuleHit]
    ms: float


@dataclass(frozen=True)
class UnionCandidate:
    key: str  # doc_path#section for docs chunks, else the record id
    ref: RecordRef  # the representative record: the best-ranked member
    members: list[str]  # every record id merged into this candidate
    provenance: Provenance
    bm25_rank: int | None
    bm25_score: float | None
    embedding_rank: int | None
    similarity: float | None
    union_rank: int  # order by best leg rank: the "before" of later rank shifts
    rule: str | None = None  # the code a rule matched (stages/renames.py, stages/classuse.py), if one did

    @property
    def record_id(self) -> str:
        return self.ref.record_id


@dataclass(frozen=True)
class UnionResult:
    candidates: list[UnionCandidate]
    merged: list[tuple[str, str]]  # (kept record id, merged record id) pairs
    ms: float
    rules_ms: float = 0.0  # the rules' own time (stages/renames.py, stages/classuse.py), before the merge


@dataclass(frozen=True)
class RankedItem:
    """A union candidate placed by a ranking stage (fusion or rerank)."""

    candidate: UnionCandidate
    rank: int  # 1-based, after this stage
    score: float  # what this stage ranks by

    @property
    def before(self) -> int:
        return self.candidate.union_rank


@dataclass(frozen=True)
class Ordered:
    """A ranking that a rule re-ordered after fusion or the reranker (stages/dimension.py, classorder.py, legacy.py,
    pagevotes.py)."""

    items: list[RankedItem]  # the same items, re-ranked 1..n
    moved: list[str]  # record ids the rule moved, in their old order
    message: str = ""  # what moved, for the panel ("" when nothing did)

    @classmethod
    def moving(cls, items: Sequence[RankedItem], flags: Sequence[bool], *, to_top: bool,
               what: tuple[str, str]) -> Ordered:
        """``items`` with the flagged ones moved to the top (or the bottom), order otherwise kept.

        ``what``: the moved records, in the singular and the plural, for the message."""
        moved = [it for it, f in zip(items, flags, strict=True) if f]
        kept = [it for it, f in zip(items, flags, strict=True) if not f]
        ranked = [dataclasses.replace(it, rank=n) for n, it in enumerate(moved + kept if to_top else kept + moved,
                                                                         start=1)]
        where = "to the top" if to_top else "below the rest"
        return cls(ranked, [it.candidate.record_id for it in moved],
                   f"{len(moved)} {what[len(moved) > 1]} moved {where}" if moved else "")

    def then(self, later: Ordered) -> Ordered:
        """``later`` (a rule run on this one's items) with both rules' moves and messages."""
        return Ordered(later.items, self.moved + [m for m in later.moved if m not in self.moved],
                       "; ".join(filter(None, [self.message, later.message])))


@dataclass(frozen=True)
class FusedItem(RankedItem):
    bm25_norm: float | None = None
    bm25_contribution: float = 0.0
    embedding_norm: float | None = None
    embedding_contribution: float = 0.0


@dataclass(frozen=True)
class FusionResult:
    items: list[FusedItem]
    ms: float
    method: str
    alpha: float
    rrf_k: int | None = None
    max_possible: float | None = None
    bm25_norm: NormStats | None = None
    embedding_norm: NormStats | None = None
    bm25_floor: float | None = None


@dataclass(frozen=True)
class RerankedItem(RankedItem):
    reranker_score: float | None = None  # None: beyond the top N, kept in union order
    contributions: tuple[Contribution, ...] = ()  # the learned ranker only
    prior: float | None = None  # the learned ranker's blend: weight × z(RRF prior); score = z(ranker) + prior


@dataclass(frozen=True)
class RerankResult:
    items: list[RerankedItem]
    ms: float
    reranker: str
    top_n: int
    scored: int
    status: Status = "ok"  # "skipped": turned off; "error": unavailable; "pending": the model phase follows
    message: str = ""
    bias: float | None = None  # the learned ranker's base score


def note_parts(*notes: str) -> tuple[str, ...]:
    """The non-empty notes, in order."""
    return tuple(n for n in notes if n)


@dataclass(frozen=True)
class Check:
    """The validator's look at one candidate: deterministic evidence, the judge (if asked), the decision."""

    item: FinalItem
    evidence: Evidence
    in_scope: bool
    verdict: Verdict
    accepted: bool | None
    judgement: Judgement | None = None
    cached: bool = False
    disagreement: str | None = None
    p: float | None = None  # the accept model's probability (policy "calibrated")
    p_threshold: float | None = None
    contributions: tuple[Contribution, ...] = ()
    asked_qwen: bool | None = None
    how: str = ""  # how the accept model decided: "decided without Qwen", "Qwen asked", …
    notes: tuple[str, ...] = ()  # what else the decision rests on (scope, a veto, Qwen's error), one part each
    listing: str = ""  # the outcome of asking Qwen for the evidence list after the decision; "" if not asked
    rule: str = ""  # the rule that accepted it whatever its p (rename or class use), in words


@dataclass(frozen=True)
class ValidateResult:
    checks: list[Check]
    final: list[FinalItem]  # the input ranking with verdicts, decisions and evidence filled in
    ms: float
    judged: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    accept_model: str | None = None  # policy "calibrated": the model that decided, or None if it was missing
    skipped: int = 0  # candidates decided without Qwen
    code_cut: int = 0  # lines of a very long chunk that Qwen's prompt leaves out (evidence.MODEL_CODE_CHARS)
    list_cut: int = 0  # lines the evidence lists' prompt leaves out: they show none of the chunk's facts
    lists: int = 0  # evidence lists Qwen was asked for now / read from the cache, and the time asking took
    lists_cached: int = 0
    lists_ms: float = 0.0
