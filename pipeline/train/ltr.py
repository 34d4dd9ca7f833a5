"""F's learned ranker: LightGBM lambdarank over the features the trace already has.

Trained on the docs' own code: each training crop is run through the real legs and
union, with the records it was cut from hidden (the code a user pastes is never in the
docs verbatim), and every union candidate is labelled by its page: the crop's own page 3,
the class pages of the APIs it calls 1, anything else 0 — the dev set's grading.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence, Set
from pathlib import Path

import numpy as np

from pipeline import atomic
from pipeline.bm25_index import BM25Index
from pipeline.chunk import prepare_chunk
from pipeline.features import FEATURES_VERSION, NAMES, FeatureBuilder
from pipeline.kb.index import VectorIndex
from pipeline.kb.store import KBStore
from pipeline.models.base import Embedder
from pipeline.models.learned import MODEL_FILE
from pipeline.stages.bm25 import BM25Retriever
from pipeline.stages.dense import QUERY_CHARS
from pipeline.stages.query import QueryAnalysis
from pipeline.stages.results import BM25Result, EmbeddingHit, EmbeddingResult, UnionCandidate
from pipeline.stages.union import Union
from pipeline.trace import RecordRef
from pipeline.train.adapter import AdapterRecipe
from pipeline.train.budget import Budget, Progress
from pipeline.train.data import DataRecipe, Query
from pipeline.train.recipe import Recipe, write_done

LABEL_GAIN = [0, 1, 3, 7]  # grades 0..3, as ranx's nDCG weighs them (2^g − 1)


class RankerRecipe(Recipe):
    version: int = 1
    budget: Budget | None = None  # a capped run (tests, --budget) is its own artifact, never the default
    data: DataRecipe = DataRecipe()
    query_encoder: AdapterRecipe | None = AdapterRecipe()  # F's embedding leg while training (None: MiniLM)
    features: int = FEATURES_VERSION
    # the names too: a probe that bumps the version to a number already used elsewhere must not find the
    # other features' ranker "cached" (it would never load, and `models train` would never replace it)
    feature_names: tuple[str, ...] = tuple(NAMES)
    seed: int = 13
    queries: int = 1200  # training crops (a seeded sample of the train split)
    bm25_k: int = 80  # F's legs
    dense_k: int = 80
    trees: int = 150
    learning_rate: float = 0.05
    leaves: int = 15
    min_child_samples: int = 20


def _masked_bm25(result: BM25Result, hide: set[str], k: int) -> BM25Result:
    hits = [h for h in result.hits if h.ref.record_id not in hide][:k]
    return dataclasses.replace(result, hits=[dataclasses.replace(h, rank=n) for n, h in enumerate(hits, start=1)], k=k)


def masked_legs(text: str, store: KBStore, bm25: BM25Index, vectors: VectorIndex, qvec: np.ndarray,
                bm25_k: int, dense_k: int, hide: Set[str] = frozenset()
                ) -> tuple[BM25Result, EmbeddingResult, list[str]]:
    """Both legs for ``text`` as the engine runs them, with the ``hide`` records left out."""
    query = QueryAnalysis().run(prepare_chunk(text))
    b = _masked_bm25(BM25Retriever(store, bm25, bm25_k + len(hide)).run(query), hide, bm25_k)
    found = [(i, s) for i, s in vectors.search(qvec, dense_k + len(hide)) if store.records[i].id not in hide]
    e = EmbeddingResult([EmbeddingHit(RecordRef.of(store.records[i]), n, s) for n, (i, s) in
                         enumerate(found[:dense_k], start=1)], 0.0, dense_k, "")
    return b, e, query.terms


def union_for(text: str, store: KBStore, bm25: BM25Index, vectors: VectorIndex, qvec: np.ndarray,
              bm25_k: int, dense_k: int, hide: Set[str] = frozenset()) -> tuple[list[UnionCandidate], list[str]]:
    """F's union for ``text``, with the ``hide`` records left out of both legs."""
    b, e, terms = masked_legs(text, store, bm25, vectors, qvec, bm25_k, dense_k, hide)
    return Union().run(b, e).candidates, terms


def training_set(queries: Sequence[Query], store: KBStore, bm25: BM25Index, vectors: VectorIndex,
                 embedder: Embedder, recipe: RankerRecipe, progress: Progress | None = None
                 ) -> tuple[np.ndarray, np.ndarray, list[int]]:
    builder = FeatureBuilder(store, bm25)
    xs, ys, groups = [], [], []
    encode = getattr(embedder, "encode_query", embedder.encode)
    for start in range(0, len(queries), 64):
        batch = queries[start : start + 64]
        qvecs = encode([q.text[:QUERY_CHARS] for q in batch])
        for q, qv in zip(batch, qvecs, strict=True):
            cands, terms = union_for(q.text, store, bm25, vectors, qv, recipe.bm25_k, recipe.dense_k,
                                     hide=set(q.positives))
            if not cands:
                continue
            xs.append(builder.matrix(q.text, builder.chunk_facts(q.text, terms), cands))
            ys.append(np.array([q.relevant_pages.get(c.ref.doc_path or "", 0) for c in cands], dtype=np.int32))
            groups.append(len(cands))
        if progress:
            progress("ranker features", min(start + 64, len(queries)), len(queries))
    return np.vstack(xs), np.concatenate(ys), groups


def train(out: Path, queries: Sequence[Query], store: KBStore, bm25: BM25Index, vectors: VectorIndex,
          embedder: Embedder, recipe: RankerRecipe, progress: Progress | None = None) -> dict:
    import lightgbm as lgb

    pool = [q for q in queries if q.split == "train"]
    random.Random(recipe.seed).shuffle(pool)
    n = recipe.queries
    if recipe.budget and recipe.budget.limited:  # a capped run: a few queries per step, 50 for a time budget
        n = min(n, 10 * recipe.budget.steps) if recipe.budget.steps else min(n, 50)
    x, y, groups = training_set(pool[:n], store, bm25, vectors, embedder, recipe, progress)
    model = lgb.LGBMRanker(objective="lambdarank", n_estimators=recipe.trees, learning_rate=recipe.learning_rate,
                           num_leaves=recipe.leaves, min_child_samples=recipe.min_child_samples, subsample=0.8,
                           subsample_freq=1, colsample_bytree=0.8, random_state=recipe.seed, deterministic=True,
                           force_row_wise=True, n_jobs=1, verbose=-1, lambdarank_truncation_level=20,
                           label_gain=LABEL_GAIN)
    model.fit(x, y, group=groups, feature_name=NAMES)
    model.booster_.save_model(str(out / MODEL_FILE))
    gains = model.booster_.feature_importance("gain")
    info = {"kind": "ranker", "recipe": recipe.digest(), "queries": len(groups), "rows": len(y),
            "positives": int((y > 0).sum()), "features": NAMES,
            "importance": {n: round(float(g), 1) for n, g in sorted(zip(NAMES, gains, strict=True),
                                                                     key=lambda kv: -kv[1])}}
    atomic.write_text(out / "features.json", json.dumps({"version": FEATURES_VERSION, "names": NAMES}))
    write_done(out, info)
    return info
