"""Train what is missing, in order: data → query encoder → learned ranker (→ cross-encoder on request).

Each step is cached by (KB hash, recipe hash), written to a scratch folder and renamed
when complete (a killed run resumes from the trainer's checkpoints), and reports
progress with an ETA. ``budget`` caps every model's training (steps or minutes): tests
run the real code on a tiny budget, into their own cache folder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.bm25_index import BM25Index
from pipeline.kb import index as kb_index
from pipeline.kb.store import KBStore
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.train import accept as accept_table
from pipeline.train import adapter, biencoder, crossencoder, defaults, ltr
from pipeline.train.budget import Budget, Progress
from pipeline.train.data import ensure_data, load_queries
from pipeline.train.recipe import building, is_complete, read_done

log = logging.getLogger(__name__)
Say = Callable[[str], None]


@dataclass
class TrainReport:
    steps: dict[str, dict] = field(default_factory=dict)  # kind -> DONE info (+ "seconds", "cached")

    def line(self, kind: str) -> str:
        d = self.steps.get(kind, {})
        how = "cached" if d.get("cached") else f"{d.get('seconds', 0):.0f} s"
        return f"{kind:<14} {how}"


def _step(kind: str, kb_hash: str, budget: Budget, report: TrainReport, say: Say,
          build: Callable[[Path], dict]) -> Path:
    target = defaults.folder(kind, kb_hash, budget)
    if is_complete(target):
        report.steps[kind] = {**read_done(target), "cached": True}
        return target
    say(f"training {kind} → {target}")
    t0 = time.perf_counter()
    with building(target) as scratch:
        build(scratch)
    report.steps[kind] = {**read_done(target), "seconds": round(time.perf_counter() - t0, 1)}
    return target


def query_encoder_path(kb_hash: str, budget: Budget | None = None, kind: str = "query_map") -> str | None:
    """A trained query encoder, if it trained and beat MiniLM on the validation pages (else None)."""
    f = defaults.ready(kind, kb_hash, budget)
    if f is None:
        return None
    d = read_done(f)
    better = d["selected"] if "selected" in d else d.get("val_ndcg@10", 0) > d.get("val_ndcg@10_base", 0)
    return str(f / "model") if better else None


def train_all(store: KBStore, bm25: BM25Index, *, budget: Budget | None = None, cross_encoder: bool = False,
              mnrl: bool = False, progress: Progress | None = None, say: Say = log.info) -> TrainReport:
    report = TrainReport()
    budget = defaults.env_budget() if budget is None else budget
    r = defaults.recipes(budget)
    base = SentenceTransformerEmbedder(None)
    vectors = kb_index.open_vectors(store, base, lambda d, t: progress and progress("embedding index", d, t))
    kb = store.content_hash

    t0, cached = time.perf_counter(), defaults.ready("data", kb, budget) is not None
    data_dir = ensure_data(store, r.data, bm25, vectors, base, progress)  # cached and atomic itself
    report.steps["data"] = {**read_done(data_dir), "cached": cached, "seconds": round(time.perf_counter() - t0, 1)}
    queries = load_queries(data_dir)
    _step("query_map", kb, budget, report, say, lambda out: adapter.train(
        out, queries, store, vectors, base, base.path, r.query_map, progress))
    if mnrl:  # the MNRL fine-tune of the whole query tower: measured against the map, not the default
        _step("query_encoder", kb, budget, report, say, lambda out: biencoder.train(
            base.path, base.fingerprint, out, queries, store, r.query_encoder, progress))
    encoder_path = query_encoder_path(kb, budget)
    f_embedder = SentenceTransformerEmbedder(encoder_path) if encoder_path else base
    _step("ranker", kb, budget, report, say, lambda out: ltr.train(
        out, queries, store, bm25, vectors, f_embedder, r.ranker, progress))
    if accept_table.TABLE.is_file():
        _step("accept", kb, budget, report, say, lambda out: accept_table.train(out, r.accept))
    else:
        say(f"no accept table at {accept_table.TABLE}: the validator keeps its rule-based policy "
            "(`python -m pipeline train accept-table` collects one)")
    if cross_encoder:
        # From MiniLM itself: the shipped tuned leg is a query map (a module on top of MiniLM), not a
        # checkpoint a CrossEncoder can start from.
        _step("cross_encoder", kb, budget, report, say, lambda out: crossencoder.train(
            base.path, out, queries, store, r.cross_encoder, progress))
    return report
