"""Training data built from the KB itself: docs code blocks → the records that explain them.

Every GDScript block sits in the docs section that explains it, and its API calls
name class-reference members. From that, deterministically:

* queries: crops of 5–30 lines of a page's code (tutorial pages read as one script),
  augmented to look like user code (renamed locals, no comments, ``&"x"``, tabs ↔ spaces);
* positives: the records whose blocks the crop holds (by share of lines), and the
  class-reference records of the APIs it calls;
* hard negatives: BM25/embedding union ranks 5–50 on other pages, plus the 2D/3D twin page;
* a split by page (train / val / test), and no query that is a near-copy of a dev chunk.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from pipeline import atomic, config
from pipeline.evidence import code_facts, strip_comments
from pipeline.kb.store import KBStore
from pipeline.kb.views import embed_text
from pipeline.records import AnyRecord, DocsChunk
from pipeline.train import augment
from pipeline.train.recipe import Recipe, artifact_dir, building, is_complete, write_done

Split = Literal["train", "val", "test"]
Progress = Callable[[str, int, int], None]


class DataRecipe(Recipe):
    version: int = 2
    seed: int = 13
    crops_per_block: tuple[int, int] = (3, 4)
    crop_lines: tuple[int, int] = (5, 30)
    p_rename: float = 0.5
    p_strip_comments: float = 0.6
    p_string_names: float = 0.3
    p_swap_indent: float = 0.3
    split: tuple[float, float] = (0.8, 0.9)  # page hash below the first: train; below the second: val; else test
    neg_ranks: tuple[int, int] = (5, 50)
    n_negatives: int = 8
    near_copy: float = 0.3  # lines shared with a dev chunk, over the shorter of the two, that make a near-copy


class Query(BaseModel):
    qid: str
    split: Split
    page: str  # doc_path of the page the code comes from
    text: str
    primary: str  # the record holding most of the crop's lines
    positives: dict[str, float]  # record id -> share of the crop's lines
    api_records: list[str] = Field(default_factory=list)  # class-reference records of the APIs it calls
    relevant_pages: dict[str, int]  # page -> grade (own page 3, API class pages 1)
    negatives: list[str] = Field(default_factory=list)
    twin: bool = False  # the first negative is the other dimension's (2D/3D twin) best record
    augment: list[str] = Field(default_factory=list)


@dataclass
class _Line:
    text: str
    record: str


def page_split(page: str, recipe: DataRecipe) -> Split:
    h = int(hashlib.sha256(f"page-split-v1:{page}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "train" if h < recipe.split[0] else ("val" if h < recipe.split[1] else "test")


def _norm_lines(code: str) -> set[str]:
    """Code lines that identify a snippet: comments dropped, spacing collapsed, trivial lines ignored."""
    out = set()
    for ln in strip_comments(code).splitlines():
        s = re.sub(r"\s+", " ", ln.strip())
        if len(s.replace(" ", "")) >= 8:
            out.add(s)
    return out


class LeakGuard:
    """No dev-set chunk, nor a near-copy of one, may be a training query."""

    def __init__(self, dev_codes: list[str], share: float) -> None:
        self.dev = [_norm_lines(c) for c in dev_codes]
        self.share = share

    def is_near_copy(self, code: str) -> bool:
        lines = _norm_lines(code)
        if not lines:
            return False
        return any(len(lines & d) >= min(3, len(lines)) and len(lines & d) / min(len(lines), len(d)) >= self.share
                   for d in self.dev if d)


def _page_order(store: KBStore, docs_root: Path) -> dict[str, list[DocsChunk]]:
    """Records with code per page, in reading order (the position of each record's first block in the RST)."""
    pages: dict[str, list[DocsChunk]] = defaultdict(list)
    for r in store.records:
        if isinstance(r, DocsChunk) and r.code_blocks:
            pages[r.doc_path].append(r)
    for page, recs in pages.items():
        try:
            raw = (docs_root / page).read_text(encoding="utf-8")
        except OSError:
            raw = ""

        def pos(r: DocsChunk, raw: str = raw) -> tuple[int, str]:
            first = next((ln.strip() for ln in r.code_blocks[0].splitlines() if ln.strip()), "")
            at = raw.find(first) if first else -1
            return (at if at >= 0 else len(raw), r.id)

        recs.sort(key=pos)
    return dict(pages)


class ApiResolver:
    """Code facts → class-reference records: `Input.is_action_pressed`, `$AnimatedSprite2D.play`, `Timer`."""

    def __init__(self, store: KBStore) -> None:
        self.symbols: dict[str, list[str]] = defaultdict(list)
        self.class_page: dict[str, str] = {}
        for r in store.records:
            if isinstance(r, DocsChunk) and r.source.startswith("class/"):
                for s in r.api_symbols:
                    self.symbols[s].append(r.id)
                self.class_page[r.source.removeprefix("class/")] = r.doc_path

    def resolve(self, code: str) -> tuple[list[str], dict[str, int]]:
        records: dict[str, None] = {}
        pages: dict[str, int] = {}
        for fact in code_facts(code):
            if fact.startswith('"'):
                continue
            f = fact.lstrip("$%")
            head, _, member = f.partition(".")
            head = head.split("/")[-1]
            cls = head if head in self.class_page else None
            if cls is None:
                continue
            sym = f"{cls}.{member}" if member else cls
            for rid in self.symbols.get(sym, []) or self.symbols.get(cls, []):
                records[rid] = None
            pages[self.class_page[cls]] = 1
        for m in re.finditer(r"^\s*extends\s+(\w+)", code, re.M):
            if m.group(1) in self.class_page:
                pages[self.class_page[m.group(1)]] = 1
                for rid in self.symbols.get(m.group(1), []):
                    records[rid] = None
        return list(records), pages


def _augment(code: str, rng: random.Random, recipe: DataRecipe) -> tuple[str, list[str]]:
    done: list[str] = []
    if rng.random() < recipe.p_rename:
        renamed = augment.rename_locals(code, rng)
        if renamed != code:
            code, done = renamed, [*done, "rename"]
    if rng.random() < recipe.p_strip_comments:
        stripped = augment.drop_comments(code)
        if stripped != code:
            code, done = stripped, [*done, "strip_comments"]
    if rng.random() < recipe.p_string_names:
        named = augment.string_names(code, rng)
        if named != code:
            code, done = named, [*done, "string_names"]
    if rng.random() < recipe.p_swap_indent:
        swapped = augment.swap_indentation(code)
        if swapped != code:
            code, done = swapped, [*done, "swap_indent"]
    return code, done


def _streams(page: str, recs: list[DocsChunk]) -> list[tuple[list[_Line], list[tuple[str, int, int]]]]:
    """A page's code as (lines, block spans). Tutorial pages read as one script; class-reference
    examples are unrelated snippets, one stream each."""
    groups = [[(r.id, b)] for r in recs for b in r.code_blocks] if page.startswith("classes/") else \
        [[(r.id, b) for r in recs for b in r.code_blocks]]
    out = []
    for blocks in groups:
        lines: list[_Line] = []
        spans: list[tuple[str, int, int]] = []
        for rid, block in blocks:
            first = len(lines)
            lines.extend(_Line(ln, rid) for ln in block.splitlines())
            spans.append((rid, first, len(lines)))
            lines.append(_Line("", rid))  # a blank line between blocks, as in a script
        out.append((lines, spans))
    return out


def _crops(page: str, recs: list[DocsChunk], recipe: DataRecipe) -> list[tuple[str, dict[str, float]]]:
    """(raw crop, record shares): 3–4 crops of 5–30 lines overlapping each block."""
    out: list[tuple[str, dict[str, float]]] = []
    seen: set[str] = set()
    lo, hi = recipe.crop_lines
    for lines, spans in _streams(page, recs):
        for rid, a0, a1 in spans:
            rng = random.Random(f"{recipe.seed}:{page}:{rid}:{a0}")
            count = rng.randint(*recipe.crops_per_block)
            for a, b in augment.crop_windows(len(lines), (a0, a1), rng, count, lo, hi):
                window = lines[a:b]
                text = augment.dedent_crop([ln.text + "\n" for ln in window])
                code_lines = [ln.record for ln in window if ln.text.strip()]
                if text in seen or len(code_lines) < 2:
                    continue
                seen.add(text)
                shares = {r: round(n / len(code_lines), 3) for r, n in Counter(code_lines).most_common()}
                out.append((text, shares))
    return out


def overlaps(code: str, query: str) -> bool:
    return bool(_norm_lines(code) & _norm_lines(query))


def masked_view(record: AnyRecord, query: str, rng: random.Random) -> str:
    """The record as the model reads it, with the code blocks the query was cut from removed.

    User code is never in the docs verbatim: a model that only learns "this record holds this
    code" learns nothing about real code. Hiding the source block makes it match the code to the
    explanation around it (the inverse cloze task). A record whose blocks the query does not
    overlap loses one block at random, so "has less code" says nothing about relevance.
    """
    if not isinstance(record, DocsChunk) or not record.code_blocks:
        return embed_text(record)
    keep = [b for b in record.code_blocks if not overlaps(b, query)]
    if len(keep) == len(record.code_blocks):
        drop = rng.randrange(len(keep))
        keep = keep[:drop] + keep[drop + 1:]
    return embed_text(record.model_copy(update={"code_blocks": keep}))


def _swap_dimension(text: str) -> str:
    return re.sub(r"([23])([dD])", lambda m: ("3" if m.group(1) == "2" else "2") + m.group(2), text)


def twin_pages(page: str, pages: set[str]) -> list[str]:
    """The other dimension's pages: class_raycast2d ↔ class_raycast3d, navigation_introduction_2d ↔ _3d,
    and for a tutorial series every page of the other series (first_2d_game ↔ first_3d_game)."""
    if not re.search(r"[23][dD]", page):
        return []
    swapped = _swap_dimension(page)
    if swapped != page and swapped in pages:
        return [swapped]
    folder = page.rsplit("/", 1)[0]
    other = _swap_dimension(folder)
    return sorted(p for p in pages if other != folder and p.rsplit("/", 1)[0] == other)


def build_queries(store: KBStore, recipe: DataRecipe, docs_root: Path | None = None,
                  dev_codes: list[str] | None = None) -> tuple[list[Query], dict]:
    """Queries with positives, split and relevance (negatives come from `add_negatives`)."""
    from pipeline.evaluate import DEV_SET, load_set  # the evaluation imports the engine: not at module load

    pages = _page_order(store, docs_root or config.docs_root())
    guard = LeakGuard(dev_codes if dev_codes is not None else [c.code for c in load_set(DEV_SET)], recipe.near_copy)
    resolver = ApiResolver(store)
    queries: list[Query] = []
    leaks = 0
    for page in sorted(pages):
        split = page_split(page, recipe)
        for n, (raw, shares) in enumerate(_crops(page, pages[page], recipe)):
            if guard.is_near_copy(raw):
                leaks += 1
                continue
            rng = random.Random(f"{recipe.seed}:aug:{page}:{n}")
            text, done = _augment(raw, rng, recipe)
            api_records, api_pages = resolver.resolve(text)
            relevant = {**api_pages, page: 3}
            queries.append(Query(qid=f"{page}#{n}", split=split, page=page, text=text,
                                 primary=next(iter(shares)), positives=shares, api_records=api_records,
                                 relevant_pages=relevant, augment=done))
    return queries, {"near_copies_dropped": leaks, "pages_with_code": len(pages)}


def add_negatives(queries: list[Query], store: KBStore, recipe: DataRecipe, bm25, vectors, embedder,
                  progress: Progress | None = None) -> None:
    """Union ranks 5–50 on other pages (BM25 ∥ embedding, by best rank), plus the 2D/3D twin page's best record."""
    from pipeline.analyzer import analyze_code

    doc_path = [getattr(r, "doc_path", None) or "" for r in store.records]
    by_page: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(doc_path):
        by_page[p].append(i)
    all_pages = set(by_page)
    lo, hi = recipe.neg_ranks
    from pipeline.kb.index import encode_cached
    from pipeline.stages.dense import QUERY_CHARS

    all_vecs = encode_cached([q.text[:QUERY_CHARS] for q in queries], embedder,
                             lambda d, t: progress and progress("encode crops", d, t))
    batch = 64
    for start in range(0, len(queries), batch):
        chunk = queries[start : start + batch]
        for q, qv in zip(chunk, all_vecs[start : start + batch], strict=True):
            terms = list(dict.fromkeys(analyze_code(q.text).terms))
            scores = bm25.scores(terms)
            b_top = np.argsort(-scores, kind="stable")[:hi]
            d_top = [i for i, _ in vectors.search(qv, hi)]
            best: dict[int, int] = {}
            for leg in (b_top.tolist(), d_top):
                for rank, i in enumerate(leg, start=1):
                    best[i] = min(best.get(i, rank), rank)
            ordered = sorted(best, key=lambda i: (best[i], i))
            pool = [store.records[i].id for n, i in enumerate(ordered, start=1)
                    if lo <= n <= hi and doc_path[i] not in q.relevant_pages]
            rng = random.Random(f"{recipe.seed}:neg:{q.qid}")
            negs = rng.sample(pool, min(recipe.n_negatives, len(pool)))
            twins = [p for p in twin_pages(q.page, all_pages) if p not in q.relevant_pages]
            if twins:  # the other dimension's best-matching record, always first
                idx = [i for p in twins for i in by_page[p]]
                best_twin = store.records[idx[int(np.argmax(scores[idx]))]].id
                negs = [best_twin, *(n for n in negs if n != best_twin)]
                q.twin = True
            q.negatives = negs
        if progress:
            progress("hard negatives", min(start + batch, len(queries)), len(queries))


def stats(queries: list[Query], extra: dict) -> dict:
    by_split = Counter(q.split for q in queries)
    pages = {s: len({q.page for q in queries if q.split == s}) for s in ("train", "val", "test")}
    lines = sorted(q.text.count("\n") for q in queries)
    return {
        **extra,
        "queries": len(queries), "queries_by_split": dict(by_split), "pages_by_split": pages,
        "median_lines": lines[len(lines) // 2] if lines else 0,
        "augmentations": dict(Counter(a for q in queries for a in q.augment)),
        "with_api_records": sum(1 for q in queries if q.api_records),
        "mean_relevant_pages": round(float(np.mean([len(q.relevant_pages) for q in queries])), 2) if queries else 0,
        "mean_negatives": round(float(np.mean([len(q.negatives) for q in queries])), 2) if queries else 0,
        "with_twin_negative": sum(1 for q in queries if q.negatives and q.twin),
    }


def data_dir(store: KBStore, recipe: DataRecipe) -> Path:
    return artifact_dir("data", store.content_hash, recipe)


def load_queries(folder: Path) -> list[Query]:
    return [Query.model_validate_json(ln) for ln in (folder / "queries.jsonl").read_text().splitlines() if ln]


def ensure_data(store: KBStore, recipe: DataRecipe, bm25, vectors, embedder,
                progress: Progress | None = None) -> Path:
    """The training set for (KB, recipe), built once (deterministic) and cached."""
    folder = data_dir(store, recipe)
    if is_complete(folder):
        return folder
    queries, extra = build_queries(store, recipe)
    add_negatives(queries, store, recipe, bm25, vectors, embedder, progress)
    with building(folder) as tmp:
        atomic.write_text(tmp / "queries.jsonl", "".join(q.model_dump_json() + "\n" for q in queries))
        summary = stats(queries, extra)
        atomic.write_text(tmp / "stats.json", json.dumps(summary, indent=1, sort_keys=True))
        atomic.write_text(tmp / "recipe.json", recipe.model_dump_json(indent=1))
        write_done(tmp, {"kind": "data", "recipe": recipe.digest(), "kb": store.content_hash, **summary})
    return folder
