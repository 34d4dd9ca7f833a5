"""The accept model: a calibrated probability that a judged record is direct evidence for the chunk.

Two logistic models share one feature set: ``p0`` reads only what costs nothing (the
deterministic evidence, the record's kind, its dimension, its rank), ``p1`` adds Qwen's
yes/no margin and its PMI correction (the margin the record gets for an empty chunk taken
away: a record Qwen likes whatever the code says is no evidence). Each is Platt-scaled on
out-of-fold scores, so p is a probability, and linear in log-odds, so each feature's
contribution to p is exact: weight × standardised value.

Qwen is asked only where it can change the decision: when ``p0`` lies in the band where,
on the training data, adding Qwen's features moved some candidate across the threshold.
Below it the record is rejected without Qwen ("decided without Qwen: p = 0.03").
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.evidence import Evidence, strip_comments
from pipeline.features import GODOT3, ChunkFacts, dimension_agreement
from pipeline.models.provision import ModelError
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype

ACCEPT_VERSION = 6
FREE: dict[str, str] = {  # name -> what it says, for the validator panel
    "coverage": "rarity-weighted share of the code's facts in the record",
    "facts": "facts found in both texts", "api_facts": "API calls or patterns found in both",
    "rarest_fact": "rarity (IDF) of the rarest shared fact", "only_in_code": "facts only in the code",
    "only_in_record": "API symbols only in the record", "kind_tutorial": "a tutorial section",
    "kind_class": "a class-reference section", "kind_api": "an API mapping", "kind_label": "a label prototype",
    "dimension_conflict": "2D code vs 3D record (or back)", "dimension_agrees": "same dimension as the code",
    "class_used": "the record's class is used by the code",
    "class_rule": "the class-use rule finds the record's class: named, or defining a member the code uses",
    "rank": "rank in the ranking",
    "rank_score": "ranking score, scaled to the judged list",
    "foreign_code": "the code is not GDScript and the record is Godot documentation",
    "legacy_code": "the code is Godot 3 and the record is Godot 4 material (not a migration note or Godot 3 label)",
    "label_terms": "share of a label's match terms found literally in the code",
    "page_rows": "records of the same page in the judged list",
}
LLM: dict[str, str] = {"margin": "Qwen's yes − no margin",
                       "pmi_margin": "Qwen's margin minus its margin for an empty chunk"}


def page_rows(doc_paths: Sequence[str | None], top_k: int) -> list[float]:
    """For each judged record, how many of the top ``top_k`` are on its page, itself included (a record
    without a page, a label or an API mapping, is a page of its own: 1)."""
    # Several sections of one page in the judged list: the ranking agrees on that page (bench/NOTES.md).
    on_page = Counter(p for p in doc_paths[:top_k] if p)
    return [float(on_page[p] + (n >= top_k)) if p else 1.0 for n, p in enumerate(doc_paths)]


def rank_scores(scores: Sequence[float], top_k: int) -> list[float]:
    """Each ranking score scaled to [0, 1] over the top ``top_k``, as the accept model was fitted (one that
    ranks past them, a label judged by scope, is clipped and does not move the others' scale)."""
    lo, hi = (min(scores[:top_k]), max(scores[:top_k])) if scores[:top_k] else (0.0, 0.0)
    return [min(max((s - lo) / (hi - lo), 0.0), 1.0) if hi > lo else 1.0 for s in scores]


def free_features(record: AnyRecord, ev: Evidence, chunk: ChunkFacts, rank: int, rank_score: float,
                  rarity: float, code: str = "", *, same_page: float) -> dict[str, float]:
    """What costs nothing: evidence, kind, dimension and rank (``rarity``: IDF of the rarest shared fact;
    ``same_page``: the record's entry of :func:`page_rows`)."""
    source = record.source
    is_class_doc = isinstance(record, DocsChunk) and source.startswith("class/")
    cls = source.removeprefix("class/") if source.startswith("class/") else None
    api = sum(1 for it in ev.items if it.field == "source_pattern" or ("." in it.text and it.text[:1].isupper()))
    return {
        "coverage": ev.coverage, "facts": float(len(ev.items)), "api_facts": float(api), "rarest_fact": rarity,
        "only_in_code": float(len(ev.only_in_code)), "only_in_record": float(len(ev.only_in_record)),
        "kind_tutorial": float(isinstance(record, DocsChunk) and not is_class_doc),
        "kind_class": float(is_class_doc), "kind_api": float(isinstance(record, ApiMapping)),
        "kind_label": float(isinstance(record, LabelPrototype)),
        "dimension_conflict": float(bool(ev.conflicts)), "dimension_agrees": dimension_agreement(chunk, record),
        "class_used": float(cls in chunk.classes) if cls else 0.0,
        "class_rule": float(cls in chunk.used_classes) if cls else 0.0, "rank": float(rank), "rank_score": rank_score,
        "foreign_code": float(chunk.foreign and not isinstance(record, LabelPrototype)),
        "legacy_code": float(chunk.legacy and not source.startswith("migrating/") and not godot3_label(record)),
        "label_terms": label_terms(record, code), "page_rows": same_page,
    }


def godot3_label(record: AnyRecord) -> bool:
    """A label whose own prototype is Godot 3 code: the one kind of label that fits Godot 3 code."""
    return isinstance(record, LabelPrototype) and bool(GODOT3.search(strip_comments(record.prototype_code)))


def label_terms(record: AnyRecord, code: str) -> float:
    """A label's own test of fit: how many of its match terms the code contains, as a share (0 for other kinds)."""
    if not isinstance(record, LabelPrototype) or not record.match_terms:
        return 0.0
    bare = strip_comments(code)
    return sum(1 for t in record.match_terms if t in bare) / len(record.match_terms)


@dataclass(frozen=True)
class Linear:
    """sigmoid(a · (b + Σ w·(x − μ)/σ) + c): a logistic model, Platt-scaled."""

    names: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    intercept: float
    platt: tuple[float, float]

    def contributions(self, x: dict[str, float]) -> dict[str, float]:
        a = self.platt[0]
        return {n: a * w * (x[n] - m) / s for n, m, s, w in zip(self.names, self.mean, self.scale, self.weights,
                                                                strict=True)}

    def base(self) -> float:
        return self.platt[0] * self.intercept + self.platt[1]

    def p(self, x: dict[str, float]) -> tuple[float, dict[str, float]]:
        parts = self.contributions(x)
        z = self.base() + sum(parts.values())
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0))), parts

    def calibrate(self, score: np.ndarray) -> np.ndarray:
        """p for raw logistic scores (intercept + Σ w·z), as :meth:`p` computes it: the fit's out-of-fold p."""
        a, b = self.platt
        return 1.0 / (1.0 + np.exp(-np.clip(a * score + b, -50.0, 50.0)))


@dataclass(frozen=True)
class AcceptModel:
    free: Linear  # p0: no LLM feature
    full: Linear  # p1: with Qwen's margins
    threshold: float  # accept when p1 ≥ threshold (chosen out of fold for precision ≥ 0.9 on each tune set)
    ask_above: float  # ask Qwen only when p0 ≥ this; below, no Qwen answer moved a training candidate across
    name: str = "accept model"

    @property
    def uses_llm(self) -> bool:
        """False when Qwen's margins did not improve the model on the tune sets: p0 then decides alone."""
        return any(n in LLM for n in self.full.names)

    @classmethod
    def load(cls, folder: Path) -> AcceptModel:
        try:
            d = json.loads((folder / "accept.json").read_text())
            if d.get("version") != ACCEPT_VERSION:
                raise ValueError(f"version {d.get('version')} (this code reads {ACCEPT_VERSION})")
            lin = {k: Linear(**{**d[k], "platt": tuple(d[k]["platt"])}) for k in ("free", "full")}
            return cls(lin["free"], lin["full"], float(d["threshold"]), float(d["ask_above"]),
                       f"accept model ({folder.name})")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"no usable accept model in {folder} ({exc}); train it with "
                             "`python -m pipeline models train`") from exc

    def to_json(self) -> str:
        def lin(m: Linear) -> dict:
            return {"names": m.names, "mean": m.mean, "scale": m.scale, "weights": m.weights,
                    "intercept": m.intercept, "platt": list(m.platt)}

        return json.dumps({"version": ACCEPT_VERSION, "free": lin(self.free), "full": lin(self.full),
                           "threshold": self.threshold, "ask_above": self.ask_above}, indent=1)
