"""The run trace: one typed, JSON-serialisable object per run, filled in stage by stage.

Every stage writes typed rows (pydantic, ``extra="forbid"``), one name per
quantity: ``similarity`` is the embedding leg's cosine wherever it shows up,
``bm25_score`` the keyword leg's raw score, ``score`` the score a stage ranks
by. The CLI prints the trace, the dashboard only renders it, and a misspelt
attribute is an error where it is written or read, never a silent blank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pipeline.records import AnyRecord, ApiMapping, DocsChunk, Kind
from pipeline.settings import AltName, Settings

# One verdict vocabulary for the judge, the final item and the dashboard.
Verdict = Literal["yes", "no", "not_run", "error", "timeout", "unparsable", "cancelled"]
# "pending": a model stage the fast phase scheduled and the model phase has not run yet.
Status = Literal["ok", "skipped", "error", "not_run", "pending"]
Provenance = Literal["bm25", "embedding", "both", "rule"]  # rule: a Godot 3 rename or a class the code uses
StageName = Literal["query", "bm25", "embedding", "union", "fusion", "rerank", "validate"]
PIPELINE_ORDER: tuple[StageName, ...] = ("bm25", "embedding", "union", "fusion", "rerank", "validate")


class Row(BaseModel):
    """A trace row: frozen, and a field it does not declare is an error, not a new column."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RecordRef(Row):
    """What every row says about its record; built in one place, :meth:`of`."""

    record_id: str
    kind: Kind
    source: str = ""
    section: str | None = None  # docs chunks only
    doc_path: str | None = None
    api: str | None = None  # API mappings only: source_api

    @classmethod
    def of(cls, src: AnyRecord | RecordRef, **fields: Any) -> Self:
        """The summary of a record (or of another row's record) plus this row's own fields."""
        if isinstance(src, RecordRef):
            base = {name: getattr(src, name) for name in RecordRef.model_fields}
        else:
            base = {"record_id": src.id, "kind": src.kind, "source": src.source, "doc_path": src.doc_path,
                    "section": src.section if isinstance(src, DocsChunk) else None,
                    "api": src.source_api if isinstance(src, ApiMapping) else None}
        return cls(**base, **fields)

    @property
    def name(self) -> str:
        """``source › section`` (an API mapping: ``source › member``): how a person recognises the record."""
        src = self.source or self.record_id
        if self.api:  # one class page holds many mappings: name the member
            return f"{src} › {self.api.removeprefix(src.removeprefix('class/') + '.')}"
        return f"{src} › {self.section}" if self.section else src


# --- rows, one model per stage -----------------------------------------------------------------
class QueryTermRow(Row):
    term: str  # index form (lower-cased)
    as_written: str  # spelling in the chunk
    kind: str  # why it is a term
    count: int


class MatchedTerm(Row):
    term: str
    as_written: str
    contribution: float  # this term's share of the BM25 score


class BM25Row(RecordRef):
    rank: int
    score: float  # BM25
    matched: list[MatchedTerm] = Field(default_factory=list)


class EmbeddingRow(RecordRef):
    rank: int
    similarity: float  # cosine


class UnionRow(RecordRef):
    union_rank: int
    provenance: Provenance
    bm25_rank: int | None = None
    bm25_score: float | None = None
    embedding_rank: int | None = None
    similarity: float | None = None
    members: list[str] = Field(default_factory=list)  # every record id merged into this candidate
    rule: str | None = None  # the code a rule matched: a Godot 3 rename (renames.py) or a class use (classuse.py)


class RankedRow(RecordRef):
    """A row of a stage that re-orders the union: rank after, rank before (union order), and the move."""

    rank: int
    before: int
    shift: int  # places moved up (+) or down (−)
    provenance: Provenance
    score: float  # what this stage ranks by


class FusionRow(RankedRow):
    bm25_score: float | None = None  # raw leg values (None: not found by that leg)
    bm25_rank: int | None = None
    bm25_norm: float | None = None  # min-max / z-score modes only
    bm25_contribution: float = 0.0
    similarity: float | None = None
    embedding_rank: int | None = None
    embedding_norm: float | None = None
    embedding_contribution: float = 0.0


class Contribution(Row):
    """One feature's share of a learned score: its value, and what it added (+) or took away (−)."""

    feature: str
    value: float
    contribution: float


class RerankRow(RankedRow):
    reranker_score: float | None = None  # None: beyond the reranked top N, kept in union order
    contributions: list[Contribution] = Field(default_factory=list)  # the learned ranker's largest, by size
    prior: float | None = None  # learned ranker: weight × z(RRF prior); score = z(reranker_score) + prior


class FactRow(Row):
    """A string/API/pattern found literally in both texts (deterministic)."""

    n: int
    text: str
    field: str  # the record field it matched


class EvidenceRow(Row):
    """One item of the judge's evidence, checked literally against both texts."""

    text: str
    field: str
    verified: bool


# How the accept model decided (ValidateRow.how): the panel says it in these words, the row's note adds p.
WITHOUT_QWEN = "decided without Qwen"
ASKED = "Qwen asked"
UNAVAILABLE = "Qwen unavailable, decided on the free features"
# What asking Qwen for the evidence list after the decision gave (ValidateRow.listing).
LISTED = "Qwen listed the evidence"
LIST_EMPTY = "Qwen's evidence list came back empty, so the shared facts are shown"
LIST_PENDING = "being written now: the shared facts stand in until it is done"
LIST_CANCELLED = "cancelled before Qwen wrote it, so the shared facts are shown"


class ValidateRow(RecordRef):
    rank: int
    # deterministic evidence (always computed)
    facts: list[FactRow] = Field(default_factory=list)
    only_in_code: list[str] = Field(default_factory=list)
    only_in_record: list[str] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    coverage: float = 0.0
    # the judge (None/empty when it did not run on this candidate)
    margin: float | None = None  # yes − no logit margin
    judge_score: float | None = None  # margin + evidence prior: what the threshold applies to
    threshold: float | None = None
    model_token: str = ""
    evidence: list[EvidenceRow] = Field(default_factory=list)
    raw: str = ""
    prompt_tokens: int = 0
    reused_tokens: int = 0
    ms: float = 0.0
    message: str = ""
    cached: bool = False
    # the accept model (policy "calibrated")
    p: float | None = None  # calibrated probability that the record is direct evidence
    p_threshold: float | None = None
    contributions: list[Contribution] = Field(default_factory=list)  # to p's log-odds, largest first
    asked_qwen: bool | None = None  # False: decided without Qwen (it could not change the decision)
    how: str = ""  # "decided without Qwen", "Qwen asked", "Qwen unavailable, decided on the free features"
    notes: list[str] = Field(default_factory=list)  # scope, a veto, Qwen's error: neither p nor the way again
    listing: str = ""  # Qwen's evidence list asked after the decision: how that went; "" if not asked
    note: str = ""  # all of the above in one line (the JSON, the p chart's tooltip, the HTML report)
    rule: str = ""  # accepted by a rule whatever its p (a Godot 3 rename, a class the code uses), in words
    # the decision
    in_scope: bool = True  # within the validator's top k
    verdict: Verdict = "not_run"
    accepted: bool | None = None
    disagreement: str | None = None

    @property
    def verified_evidence(self) -> list[EvidenceRow]:
        return [e for e in self.evidence if e.verified]


# --- stage traces ------------------------------------------------------------------------------
RowT = TypeVar("RowT", bound=Row)


class StageTrace(BaseModel, Generic[RowT]):
    """One stage's outcome: status, time, the stage's own parameters (typed fields) and its rows."""

    model_config = ConfigDict(extra="forbid")

    name: StageName
    status: Status = "ok"
    message: str = ""  # why a stage was skipped, failed or is pending, in words a user can act on
    ms: float = 0.0
    rows: list[RowT] = Field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.rows)


class QueryTrace(StageTrace[QueryTermRow]):
    name: Literal["query"] = "query"
    parser: str = ""
    n_terms: int = 0  # with repeats


class BM25Trace(StageTrace[BM25Row]):
    name: Literal["bm25"] = "bm25"
    k: int = 0
    scorer: str = ""


class EmbeddingTrace(StageTrace[EmbeddingRow]):
    name: Literal["embedding"] = "embedding"
    k: int = 0
    model: str = ""


class MergedPair(Row):
    kept: str  # the best-ranked record id of the candidate
    merged: str  # a record id merged into it (same page section)


class UnionTrace(StageTrace[UnionRow]):
    name: Literal["union"] = "union"
    provenance_counts: dict[Provenance, int] = Field(default_factory=dict)
    merged: list[MergedPair] = Field(default_factory=list)
    rules_ms: float = 0.0  # the rules' matching (stages/renames.py, stages/classuse.py); ms is the merge


class NormStats(Row):
    """How one leg's scores were normalised (min-max: lo/hi/span; z-score: mean/std)."""

    lo: float | None = None
    hi: float | None = None
    span: float | None = None
    mean: float | None = None
    std: float | None = None


class FusionTrace(StageTrace[FusionRow]):
    name: Literal["fusion"] = "fusion"
    method: Literal["rrf", "minmax", "zscore"] = "rrf"
    alpha: float = 0.5
    rrf_k: int | None = None
    max_possible: float | None = None  # RRF: rank 1 on both legs
    bm25_norm: NormStats | None = None
    embedding_norm: NormStats | None = None
    bm25_floor: float | None = None  # min-max: a weak best BM25 score is not stretched to 1
    moved_down: list[str] = Field(default_factory=list)  # other-dimension docs sections (stages/dimension.py)
    moved_up: list[str] = Field(default_factory=list)  # class pages the code uses, Godot 3 renames, page votes


class RerankTrace(StageTrace[RerankRow]):
    name: Literal["rerank"] = "rerank"
    reranker: str = ""
    top_n: int = 0
    scored: int = 0  # candidates the reranker actually scored
    bias: float | None = None  # the learned ranker's score before any feature (the contributions add to it)
    moved_down: list[str] = Field(default_factory=list)  # other-dimension docs sections (stages/dimension.py)
    moved_up: list[str] = Field(default_factory=list)  # class pages the code uses, Godot 3 renames, page votes


class ValidateTrace(StageTrace[ValidateRow]):
    name: Literal["validate"] = "validate"
    top_k: int = 0
    label_fit: float | None = None  # labels holding this share of their match terms are judged past top_k
    policy: str = ""
    policy_text: str = ""
    model: str | None = None
    threshold: float | None = None
    prompt_version: str | None = None
    timeout_s: float = 0.0
    judged: int = 0
    cached: int = 0
    prompt_tokens: int = 0  # evaluated after KV reuse
    reused_tokens: int = 0
    accept_model: str | None = None  # policy "calibrated": the model that decided
    p_threshold: float | None = None
    skipped: int = 0  # candidates decided without Qwen: calls saved
    lists: int = 0  # evidence lists Qwen was asked for now, for accepted records (most of a cold run's time)
    lists_cached: int = 0
    lists_ms: float = 0.0
    list_lines_left: int = 0  # chunk lines the lists' prompt left out: they show none of its facts
    class_accepts: bool = False  # Settings.class_accepts: the class records of the classes the code uses

    @property
    def scope_text(self) -> str:
        """What the validator judges, in words: the top k, and the labels that fit the code."""
        extra = (f", and any label with {self.label_fit:.0%} of its match terms in the code"
                 if self.label_fit is not None and self.label_fit <= 1 else "")
        if self.class_accepts:
            extra += ", and the class records of the classes the code uses (accepted on that evidence)"
        return f"the top {self.top_k}{extra}"

    @property
    def lists_text(self) -> str:
        """Where the time went when Qwen wrote evidence lists rather than verdicts (" …"), or ""."""
        if not self.lists:
            return ""
        left = (f" For them Qwen read only the lines that show the chunk's facts ({self.list_lines_left:,} other "
                "line(s) left out)." if self.list_lines_left else "")
        return (f" Qwen was then asked for the evidence lists of {self.lists} accepted record(s): "
                f"{self.lists_ms / 1000:.1f} s of this stage's {self.ms / 1000:.1f} s.{left}")

    @property
    def writing_lists(self) -> int:
        """Accepted records whose evidence lists Qwen is writing now: the decisions are shown before them
        (the stage is then still pending, with its rows)."""
        return sum(1 for r in self.rows if r.listing == LIST_PENDING) if self.status == "pending" else 0

    @property
    def judged_rows(self) -> list[ValidateRow]:
        """The candidates in the validator's scope (judged, or cancelled before their turn)."""
        return [r for r in self.rows if r.in_scope]


AnyStage = QueryTrace | BM25Trace | EmbeddingTrace | UnionTrace | FusionTrace | RerankTrace | ValidateTrace


# --- final list and the whole trace ------------------------------------------------------------
class FinalItem(RecordRef):
    model_config = ConfigDict(frozen=False, extra="forbid")

    rank: int
    score: float
    verdict: Verdict = "not_run"
    evidence: list[str] = Field(default_factory=list)
    accepted: bool | None = None
    group: list[str] = Field(default_factory=list)  # other record ids merged into this candidate
    p: float | None = None  # the accept model's probability (policy "calibrated")
    why: list[str] = Field(default_factory=list)  # its largest contributions, e.g. "coverage +1.20"


class AlternativeTrace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: AltName
    status: Status = "ok"
    message: str = ""
    bm25: BM25Trace | None = None
    embedding: EmbeddingTrace | None = None
    union: UnionTrace | None = None
    fusion: FusionTrace | None = None  # D
    rerank: RerankTrace | None = None  # F
    validation: ValidateTrace | None = None  # the "validate" stage (BaseModel already has a ``validate``)
    final: list[FinalItem] = Field(default_factory=list)

    @property
    def stages(self) -> list[AnyStage]:
        """The stages that ran (or are pending), in pipeline order."""
        found = (self.bm25, self.embedding, self.union, self.fusion, self.rerank, self.validation)
        return [s for s in found if s is not None]

    def stage(self, name: StageName) -> AnyStage | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def ranking(self) -> FusionTrace | RerankTrace | None:
        """The stage that re-ordered the union: D's fusion or F's reranker."""
        return self.fusion if self.name == "D" else self.rerank

    @property
    def pending(self) -> bool:
        """Model stages still to run (the fast phase drew this alternative; the model phase follows)."""
        return any(s.status == "pending" for s in self.stages)

    @property
    def ms(self) -> float:
        return sum(s.ms for s in self.stages)


LANGUAGE_NAMES = {"gdscript": "GDScript", "csharp": "C#", "python": "Python", "javascript": "JavaScript"}


class ChunkInfo(BaseModel):
    text: str
    sha256: str
    n_bytes: int
    n_lines: int
    language: str  # best guess: "gdscript", "csharp", "python", "unknown"
    notices: list[str] = Field(default_factory=list)  # e.g. truncation, decoding repairs
    # a batch chunk's file declarations (its `extends`, typed members): the class-use rule reads them
    context: str = ""

    @property
    def lines_text(self) -> str:
        return f"{self.n_lines:,} line{'' if self.n_lines == 1 else 's'}"

    @property
    def language_name(self) -> str:
        """The guess as people write it ("C#", not "csharp")."""
        return LANGUAGE_NAMES.get(self.language, self.language)


class KBInfo(BaseModel):
    name: str
    content_hash: str
    counts: dict[str, int]
    issues: list[str] = Field(default_factory=list)


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # part of every cached run's key (warm.run_key): raise it when what a trace holds or says changes
    # (3: api names; 4: the validator's decision in parts)
    version: int = 4
    chunk: ChunkInfo
    kb: KBInfo
    settings: Settings
    query: QueryTrace | None = None  # shared by D and F
    alternatives: dict[AltName, AlternativeTrace] = Field(default_factory=dict)

    @property
    def pending(self) -> set[AltName]:
        """Alternatives whose model stages have not finished."""
        return {n for n, a in self.alternatives.items() if a.pending}

    def close_pending(self, message: str) -> None:
        """The model phase stopped early: every stage still pending did not run, and says why."""
        for alt in self.alternatives.values():
            for stage in alt.stages:
                if stage.status == "pending":
                    stage.status, stage.message = "not_run", message


# --- progress ----------------------------------------------------------------------------------
# Steps that are not pipeline stages: building the indexes a stage needs.
ProgressStage = StageName | Literal["kb", "bm25 index", "embedding index", "evaluate", "functions"]


@dataclass(frozen=True)
class ProgressEvent:
    """How far a step is: the CLI draws a bar per ``label``, the dashboard a bar per (stage, alternative)."""

    stage: ProgressStage
    done: int
    total: int
    alternative: AltName | None = None
    note: str = ""  # what is being worked on, e.g. the record being judged

    @property
    def label(self) -> str:
        return f"{self.stage} {self.alternative}" if self.alternative else self.stage

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 0.0
