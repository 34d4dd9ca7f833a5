"""Small protocols the stages talk to, so model backends swap without touching stages.

Test fakes implement these structurally: nothing here needs the real llama.cpp,
torch or FlagEmbedding classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from pipeline.evidence import Evidence
    from pipeline.models.validator import Judgement
    from pipeline.records import AnyRecord
    from pipeline.trace import Verdict

ProgressFn = Callable[[int, int], None]  # (done, total)


class Timeout(Exception):
    """A model call ran past its deadline."""


class Cancelled(Exception):
    """The user pressed Cancel; raised at the next safe point of a model call."""


@dataclass(frozen=True)
class YesNo:
    margin: float  # max(logit yes, Yes) - max(logit no, No)
    top: str  # the token the model would have sampled first, decoded
    prompt_tokens: int
    reused_tokens: int
    ms: float


@runtime_checkable
class Embedder(Protocol):
    name: str  # identifies the model in caches and traces

    def encode(self, texts: Sequence[str], *, progress: ProgressFn | None = None) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        ...


@runtime_checkable
class Reranker(Protocol):
    name: str

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        """One relevance score per doc; higher is more relevant. ``progress`` may raise :class:`Cancelled`."""
        ...


class LogitLM(Protocol):
    """What a yes/no judge needs from a causal LM (QwenGGUF, or a fake in tests)."""

    @property
    def path(self) -> Path:
        """The model file: its name is part of every cache key."""
        ...

    def load(self) -> None: ...

    def tokenize(self, text: str) -> list[int]: ...

    def yes_no(self, tokens: list[int], *, deadline: float | None = None,
               cancelled: Callable[[], bool] | None = None) -> YesNo:
        """The yes − no logit margin after ``tokens``; raises Timeout or Cancelled."""
        ...

    def complete(self, tokens: list[int], grammar: str, *, max_tokens: int = 24,
                 deadline: float | None = None, cancelled: Callable[[], bool] | None = None) -> str:
        """A greedy continuation under a GBNF grammar; raises Cancelled once ``cancelled()`` says so."""
        ...


class Validator(Protocol):
    """The direct-evidence judge of the validate stage."""

    name: str  # shown in the trace
    prompt_version: str
    evidence_version: str  # of the evidence-only prompt: part of its cache key
    threshold: float

    @property
    def fingerprint(self) -> str:
        """Model, model file and prompt version: what a cached verdict depends on (not the threshold)."""
        ...

    def judge(self, code: str, record: AnyRecord, ev: Evidence, *, timeout_s: float = 30.0,
              cancelled: Callable[[], bool] | None = None, evidence: bool | None = None) -> Judgement:
        """The yes/no margin; the evidence list when ``evidence`` (None: when the verdict is "yes")."""
        ...

    def evidence_for(self, code: str, record: AnyRecord, ev: Evidence, *, timeout_s: float = 30.0,
                     cancelled: Callable[[], bool] | None = None) -> list[dict[str, object]]:
        """Only the evidence list (numbers of shared facts or short strings, each checked literally)."""
        ...

    def evidence_many(self, code: str, pairs: list[tuple[AnyRecord, Evidence]], *, timeout_s: float = 30.0,
                      cancelled: Callable[[], bool] | None = None) -> list[list[dict[str, object]]]:
        """``evidence_for`` for each (record, evidence) of one chunk, in one pass where the model allows it;
        raises Cancelled once ``cancelled()`` says so (reading a long chunk takes a minute)."""
        ...

    def prime(self, code: str, cancelled: Callable[[], bool] | None = None, evidence_only: bool = False) -> None:
        """Load the model and read ``code``'s shared prompt prefix ahead of the calls that reuse it
        (``evidence_only``: the evidence-list prompt's, when Qwen gives no verdict)."""
        ...

    def verdict_for(self, margin: float, ev: Evidence) -> tuple[Verdict, float]:
        """Re-decide a (cached) margin under this validator's threshold: (verdict, judge score)."""
        ...
