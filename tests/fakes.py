"""Test doubles that implement the model protocols (LogitLM, Reranker) and a hub that hands them out, and
ranked lists built by hand for the rules that re-order a ranking.

They stand in for the Qwen GGUFs only; everything else (KB, BM25, MiniLM, evidence, stages) is real.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.models.base import Cancelled, ProgressFn, Reranker, YesNo
from pipeline.models.hub import ModelHub
from pipeline.models.learned import LearnedRanker
from pipeline.models.validator import QwenValidator
from pipeline.settings import Settings
from pipeline.stages.results import RankedItem, UnionCandidate
from pipeline.trace import RecordRef

ROOT = Path(__file__).resolve().parents[1]
SMALL_KB = ROOT / "fixtures" / "user_kb" / "small.jsonl"
DASH_CHUNK = """func _physics_process(delta):
\tif Input.is_action_just_pressed("dash") and _dash_left <= 0.0:
\t\tstart_dash()
\tvelocity.y += gravity * delta
\tmove_and_slide()
"""
DASH_RECORDS = {"user:api:player-dash", "user:docs:dash-ability", "user:label:dash-ability"}


class ScriptedLM:
    """A LogitLM that says yes (margin 5) to prompts naming start_dash, no (−5) to the rest."""

    path = Path("/nonexistent/scripted.gguf")

    def __init__(self) -> None:
        self.calls = 0
        self.last = ""

    def load(self) -> None:
        pass

    def tokenize(self, text: str) -> list[int]:
        self.last = text
        return [ord(c) for c in text[-64:]]

    def yes_no(self, tokens: list[int], *, deadline: float | None = None,
               cancelled: Callable[[], bool] | None = None) -> YesNo:
        self.calls += 1
        record = self.last.rsplit("RECORD (", 1)[-1]
        return YesNo(5.0 if "start_dash" in record else -5.0, "yes", len(tokens), 0, 1.0)

    def complete(self, tokens: list[int], grammar: str, max_tokens: int = 24, *,
                 deadline: float | None = None, cancelled: Callable[[], bool] | None = None) -> str:
        if cancelled is not None and cancelled():
            raise Cancelled
        return "1]}"


class OverlapReranker:
    """Deterministic Reranker: how many of the query's identifiers a document contains."""

    name = "term overlap (test)"

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        terms = {t.lower() for t in re.findall(r"[A-Za-z_]\w{3,}", query)}
        out = []
        for i, doc in enumerate(docs):
            words = {t.lower() for t in re.findall(r"[A-Za-z_]\w{3,}", doc)}
            out.append(float(len(terms & words)))
            if progress:
                progress(i + 1, len(docs))
        return out


# What the fake hub stands in for: the Qwen reranker (a term-overlap scorer) and the rule-based accept policy
# (the small KB has no trained ranker or accept model; those are tested in test_training and test_validator).
RULES: dict[str, str] = {"reranker": "qwen", "accept_policy": "qwen_and_evidence"}


class FakeHub(ModelHub):
    """The real hub, except the Qwen models: a scripted LM judges and a term-overlap scorer reranks."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = ScriptedLM()

    def validator(self, s: Settings) -> QwenValidator:
        return QwenValidator(self.lm, s.validator_model, s.margin_threshold)

    def reranker(self, s: Settings, kb_hash: str) -> Reranker | LearnedRanker:
        return OverlapReranker() if s.reranker == "qwen" else super().reranker(s, kb_hash)


def ranked_items(pages: list[str | None]) -> list[RankedItem]:
    """A ranking of records r1, r2, … on these pages, in this order (None: a label, which has no page)."""
    out = []
    for n, page in enumerate(pages, start=1):
        rid = f"r{n}"
        ref = RecordRef(record_id=rid, kind="label_prototype" if page is None else "docs_chunk", source=rid,
                        doc_path=page)
        cand = UnionCandidate(rid, ref, [rid], "bm25", n, 1.0, None, None, n)
        out.append(RankedItem(cand, n, 1.0 / n))
    return out
