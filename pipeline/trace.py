"""The run trace: one JSON-serialisable object per run, appended to stage by stage.

The CLI prints it and the dashboard only renders it. Stage rows are plain
dicts so every stage can explain itself in its own columns; the final ranking
has a fixed shape that later stages keep.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["yes", "no", "not_run", "error", "timeout", "unparsable"]
Status = Literal["ok", "skipped", "error", "not_run"]


class StageTrace(BaseModel):
    name: str
    status: Status = "ok"
    message: str = ""  # why a stage was skipped or failed, in words a user can act on
    ms: float = 0.0
    params: dict[str, Any] = Field(default_factory=dict)
    candidates: list[dict[str, Any]] = Field(default_factory=list)
    explain: dict[str, Any] = Field(default_factory=dict)


class FinalItem(BaseModel):
    rank: int
    record_id: str
    kind: str
    doc_path: str | None
    source: str
    section: str | None = None
    score: float
    verdict: Verdict = "not_run"
    evidence: list[str] = Field(default_factory=list)
    accepted: bool | None = None
    group: list[str] = Field(default_factory=list)  # other record ids merged into this candidate


class AlternativeTrace(BaseModel):
    name: Literal["D", "F"]
    status: Status = "ok"
    message: str = ""
    stages: list[StageTrace] = Field(default_factory=list)
    final: list[FinalItem] = Field(default_factory=list)

    def stage(self, name: str) -> StageTrace | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def ms(self) -> float:
        return sum(s.ms for s in self.stages)


class ChunkInfo(BaseModel):
    text: str
    sha256: str
    n_bytes: int
    n_lines: int
    language: str  # best guess: "gdscript", "csharp", "python", "unknown"
    notices: list[str] = Field(default_factory=list)  # e.g. truncation, decoding repairs


class KBInfo(BaseModel):
    name: str
    content_hash: str
    counts: dict[str, int]
    issues: list[str] = Field(default_factory=list)


class Trace(BaseModel):
    version: int = 1
    chunk: ChunkInfo
    kb: KBInfo
    settings: dict[str, Any]
    query: StageTrace | None = None  # shared by D and F
    alternatives: dict[str, AlternativeTrace] = Field(default_factory=dict)
