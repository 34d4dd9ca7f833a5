"""Features of (chunk, union candidate) pairs: what the trace already knows, as numbers.

The learned ranker (F's default reranker) and the accept model read these; the
dashboard shows each one's contribution. Every feature is cheap (no model call):
leg scores and ranks, record kind, which query terms the record holds and how
rare they are, the deterministic evidence, and whether the record is about a
class the code uses or about the other dimension (2D vs 3D).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.bm25_index import BM25Index
from pipeline.chunk import guess_language
from pipeline.evidence import Evidence, code_facts, collect, strip_comments
from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype
from pipeline.stages.results import UnionCandidate

FEATURES_VERSION = 1
MISSING_RANK = 200.0  # a leg that did not find the record: a rank past any top-k
_MARK_2D = re.compile(r"\b\w*2D\b|\bVector2i?\b|\bRect2i?\b|\bTransform2D\b")
_MARK_3D = re.compile(r"\b\w*3D\b|\bVector3i?\b|\bBasis\b|\bTransform3D\b|\bAABB\b")
_CLASS_USE = re.compile(r"^\s*extends\s+(\w+)|:\s*([A-Z]\w+)|\b([A-Z]\w+)\.new\(|\bis\s+([A-Z]\w+)", re.M)

# name -> what it means, in words the dashboard shows next to its contribution
FEATURES: dict[str, str] = {
    "bm25_score": "BM25 score", "bm25_rank": "BM25 rank", "bm25_rel": "BM25 score / best BM25 score",
    "similarity": "embedding cosine", "embedding_rank": "embedding rank",
    "sim_rel": "cosine / best cosine", "union_rank": "union rank", "both_legs": "found by both legs",
    "kind_tutorial": "a tutorial section", "kind_class": "a class-reference section",
    "kind_api": "an API mapping", "kind_label": "a label prototype", "page_is_class": "on a class-reference page",
    "terms_matched": "query terms in the record", "terms_share": "share of query terms in the record",
    "terms_idf_share": "share of the query's term rarity in the record",
    "facts": "facts found in both texts", "coverage": "rarity-weighted share of the code's facts in the record",
    "api_facts": "API calls or patterns found in both", "dimension_conflict": "2D code vs 3D record (or back)",
    "class_used": "the record's class is used by the code", "page_class_used": "the page's class is used",
    "classes_used": "classes the code uses", "dimension_agrees": "same dimension (2D/3D) as the code",
    "code_blocks": "code blocks in the record", "migration": "a Godot 3 → 4 migration record",
    "log_length": "log of the record's text length",
}
NAMES = list(FEATURES)


@dataclass(frozen=True)
class ChunkFacts:
    """What the features need from the chunk, computed once per chunk."""

    terms: list[str]  # distinct query terms
    idf_total: float
    classes: set[str]
    is_2d: bool
    is_3d: bool
    foreign: bool = False  # the code is another language (C#, Python, JavaScript), not GDScript
    legacy: bool = False  # the code names a Godot 3 class that Godot 4 renamed (e.g. KinematicBody2D)
    # the classes the class-use rule finds (stages/classuse.py: named, or defining a member the code uses);
    # filled in for the accept model, which reads it (the ranker was trained without it)
    used_classes: frozenset[str] = frozenset()

    @property
    def godot3(self) -> bool:
        """Godot 3 GDScript: what the rename rules are for (pygame's `Sprite` and `.update()` look legacy too)."""
        return self.legacy and not self.foreign


def classes_used(code: str, known: Callable[[str], bool]) -> set[str]:
    """Classes the code names: `Input.x`, `$AnimatedSprite2D`, `extends CharacterBody2D`, `: Timer`, `Tween.new()`."""
    out = set()
    for f in code_facts(code):
        head = f.lstrip("$%").split(".")[0].split("/")[-1]
        if known(head):
            out.add(head)
    for m in _CLASS_USE.finditer(strip_comments(code)):
        out.update(g for g in m.groups() if g and known(g))
    return out


def _dimension(text: str) -> tuple[bool, bool]:
    return bool(_MARK_2D.search(text)), bool(_MARK_3D.search(text))


def _record_dimension(record: AnyRecord) -> tuple[bool, bool]:
    path = (record.doc_path or "").lower()
    code = "\n".join([*_code_of(record), record.source, *(getattr(record, "api_symbols", []) or [])])
    two, three = _dimension(code)
    return two or "2d" in path, three or "3d" in path


def _code_of(record: AnyRecord) -> list[str]:
    if isinstance(record, DocsChunk):
        return list(record.code_blocks)
    if isinstance(record, LabelPrototype):
        return [record.prototype_code]
    return [record.source_api]


def dimension_agreement(chunk: ChunkFacts, record: AnyRecord) -> float:
    """+1 same dimension, −1 the other one, 0 unknown or mixed."""
    return _agreement(chunk, *_record_dimension(record))


def _agreement(chunk: ChunkFacts, r2: bool, r3: bool) -> float:
    if chunk.is_2d == chunk.is_3d or r2 == r3:
        return 0.0
    return 1.0 if (chunk.is_2d and r2) or (chunk.is_3d and r3) else -1.0


def other_dimension(record: AnyRecord, agreement: float) -> bool:
    """A docs section (tutorial or class page) about the other dimension than the code's.

    The validator vetoes it and the rankers put it last (pipeline/stages/dimension.py). Labels and API
    mappings are not pages of one dimension (a label's prototype may happen to be 3D), so they never are.
    """
    return isinstance(record, DocsChunk) and agreement < 0


def _text_length(record: AnyRecord) -> int:
    if isinstance(record, DocsChunk):
        return len(record.content) + sum(len(b) for b in record.code_blocks)
    if isinstance(record, ApiMapping):
        return len(record.description)
    return len(record.description) + len(record.prototype_code)


# Godot 3 syntax that Godot 4 removed (upgrading_to_godot_4.rst): `export(int) var`, `onready var`, `yield(`,
# `.instance()`. With the renamed classes, what marks a chunk as Godot 3 code.
GODOT3 = re.compile(r"^\s*(export\s*\(|onready\s+var\b)|\byield\s*\(|\.instance\(\)", re.M)


class FeatureBuilder:
    """Builds the feature matrix of a union, for one KB (its BM25 index gives term rarity)."""

    def __init__(self, store: KBStore, bm25: BM25Index) -> None:
        self.store, self.bm25 = store, bm25
        self.class_page = {r.source.removeprefix("class/"): r.doc_path for r in store.records
                           if isinstance(r, DocsChunk) and r.source.startswith("class/")}
        self.page_class = {p: c for c, p in self.class_page.items()}
        # Godot 3 class names from the migration page's renames (bare names only: `yield` is not a class)
        old = {r.source_api for r in store.records if isinstance(r, ApiMapping) and r.source.startswith("migrating/")
               and r.source_api.isidentifier() and r.source_api[:1].isupper()}
        self.legacy_classes = old - set(self.class_page)
        self._dims: dict[str, tuple[bool, bool]] = {}  # record id -> (2D, 3D): fixed per record, read per run

    def agreement(self, facts: ChunkFacts, record: AnyRecord) -> float:
        """``dimension_agreement``, with the record's side computed once per KB."""
        dims = self._dims.get(record.id)
        if dims is None:
            dims = self._dims[record.id] = _record_dimension(record)
        return _agreement(facts, *dims)

    def idf(self, term: str) -> float:
        j = self.bm25.term_ids.get(term)
        return float(self.bm25.idf[j]) if j is not None else 0.0

    def chunk_facts(self, code: str, terms: Sequence[str]) -> ChunkFacts:
        distinct = list(dict.fromkeys(terms))
        bare = strip_comments(code)
        two, three = _dimension(bare)
        return ChunkFacts(distinct, sum(self.idf(t) for t in distinct) or 1.0,
                          classes_used(code, self.class_page.__contains__), two, three,
                          guess_language(code) not in ("gdscript", "unknown"),
                          bool(self.legacy_classes & set(re.findall(r"\b[A-Z]\w+", bare))) or bool(GODOT3.search(bare)))

    def matrix(self, code: str, facts: ChunkFacts, candidates: Sequence[UnionCandidate],
               evidence: Callable[[AnyRecord], Evidence] | None = None) -> np.ndarray:
        """One row per candidate, columns in ``NAMES`` order."""
        best_b = max((c.bm25_score or 0.0 for c in candidates), default=0.0) or 1.0
        best_e = max((c.similarity or 0.0 for c in candidates), default=0.0) or 1.0
        term_ids = [(t, self.bm25.term_ids[t]) for t in facts.terms if t in self.bm25.term_ids]
        rows = []
        for c in candidates:
            doc = self.store.by_id[c.record_id]
            record = self.store.records[doc]
            matched = [t for t, j in term_ids if self.bm25.has_term(doc, j)]
            ev = evidence(record) if evidence else collect(code, record)
            rows.append(self._row(c, record, facts, matched, ev, best_b, best_e))
        return np.array(rows, dtype=np.float32).reshape(len(rows), len(NAMES))

    def _row(self, c: UnionCandidate, record: AnyRecord, facts: ChunkFacts, matched: list[str], ev: Evidence,
             best_b: float, best_e: float) -> list[float]:
        source = record.source
        is_class_doc = isinstance(record, DocsChunk) and source.startswith("class/")
        cls = source.removeprefix("class/") if source.startswith("class/") else None
        page_cls = self.page_class.get(record.doc_path or "")
        api = sum(1 for it in ev.items if it.field == "source_pattern" or ("." in it.text and it.text[:1].isupper()))
        values = {
            "bm25_score": c.bm25_score or 0.0, "bm25_rank": float(c.bm25_rank or MISSING_RANK),
            "bm25_rel": (c.bm25_score or 0.0) / best_b,
            "similarity": c.similarity or 0.0, "embedding_rank": float(c.embedding_rank or MISSING_RANK),
            "sim_rel": (c.similarity or 0.0) / best_e, "union_rank": float(c.union_rank),
            "both_legs": float(c.provenance == "both"),
            "kind_tutorial": float(isinstance(record, DocsChunk) and not is_class_doc),
            "kind_class": float(is_class_doc), "kind_api": float(isinstance(record, ApiMapping)),
            "kind_label": float(isinstance(record, LabelPrototype)),
            "page_is_class": float((record.doc_path or "").startswith("classes/")),
            "terms_matched": float(len(matched)), "terms_share": len(matched) / max(len(facts.terms), 1),
            "terms_idf_share": sum(self.idf(t) for t in matched) / facts.idf_total,
            "facts": float(len(ev.items)), "coverage": ev.coverage, "api_facts": float(api),
            "dimension_conflict": float(bool(ev.conflicts)),
            "class_used": float(cls in facts.classes) if cls else 0.0,
            "page_class_used": float(page_cls in facts.classes) if page_cls else 0.0,
            "classes_used": float(len(facts.classes)), "dimension_agrees": self.agreement(facts, record),
            "code_blocks": float(len(record.code_blocks)) if isinstance(record, DocsChunk) else 0.0,
            "migration": float("migrating" in (record.doc_path or "") or source.startswith("migrating")),
            "log_length": math.log1p(_text_length(record)),
        }
        return [values[n] for n in NAMES]
