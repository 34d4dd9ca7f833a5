"""Wires the stages in order: ``Engine.run(chunk, settings) -> Trace``.

The engine owns the loaded KB, indexes and models (heavy, shared, never
mutated); a run only reads them. The CLI and the dashboard both call it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.bm25_index import BM25Index
from pipeline.chunk import prepare_chunk
from pipeline.evidence import fact_term
from pipeline.kb import index as kb_index
from pipeline.kb.store import KBStore, ensure_builtin, open_kb
from pipeline.models import provision
from pipeline.models.base import Embedder, Reranker
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.models.provision import ModelError
from pipeline.models.qwen import QwenGGUF
from pipeline.models.registry import RERANKER_ENV
from pipeline.models.reranker import FlagEmbeddingReranker, QwenYesNoReranker
from pipeline.models.validator import QwenValidator
from pipeline.settings import Settings
from pipeline.stages.bm25 import BM25Retriever
from pipeline.stages.dense import DenseRetriever
from pipeline.stages.fusion import Fusion, ranked_trace
from pipeline.stages.query import QueryAnalysis
from pipeline.stages.rerank import Rerank
from pipeline.stages.results import LegResult, QueryResult, RankedResult, UnionResult
from pipeline.stages.union import Union
from pipeline.stages.validate import Validate, VerdictCache
from pipeline.trace import AlternativeTrace, ChunkInfo, FinalItem, KBInfo, StageTrace, Trace

log = logging.getLogger(__name__)


class _UnionOrder:
    """Reranker stand-in that keeps the union order (reranker "none" or unavailable)."""

    name = "none (union order)"

    def score(self, query: str, docs: Sequence[str], *, progress: object = None) -> list[float]:
        return [-float(i) for i in range(len(docs))]

# (stage or step name, done, total): how the CLI and the app show progress.
ProgressFn = Callable[[str, int, int], None]


def _quiet(step: str, done: int, total: int) -> None:
    pass


@dataclass
class Engine:
    store: KBStore
    bm25: BM25Index
    embedders: dict[str, Embedder] = field(default_factory=dict)
    vectors: dict[str, kb_index.VectorIndex] = field(default_factory=dict)
    qwens: dict[str, QwenGGUF] = field(default_factory=dict)
    bge: dict[str, FlagEmbeddingReranker] = field(default_factory=dict)
    verdicts: VerdictCache | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, kb: Sequence[Path] | None = None, progress: ProgressFn = _quiet) -> Engine:
        if not kb:
            ensure_builtin()  # a fresh clone: build the built-in KB (~4 s) before opening it
        store = open_kb(kb)
        bm25 = kb_index.open_bm25(store, lambda d, t: progress("bm25 index", d, t))
        return cls(store, bm25)

    def kb_info(self) -> KBInfo:
        return KBInfo(name=self.store.name, content_hash=self.store.content_hash,
                      counts=self.store.counts, issues=self.store.issues[:200])

    def dense(self, model: str | None, progress: ProgressFn = _quiet) -> tuple[Embedder, kb_index.VectorIndex]:
        """The embedder and the KB's vectors for it, computed once (resumable) and shared."""
        key = model or ""
        with self._lock:
            if key not in self.vectors:
                emb = SentenceTransformerEmbedder(model)
                self.vectors[key] = kb_index.open_vectors(self.store, emb, lambda d, t: progress("embeddings", d, t))
                self.embedders[key] = emb
        return self.embedders[key], self.vectors[key]

    def qwen(self, key: str, path: str | None = None) -> QwenGGUF:
        """One loaded GGUF per model, shared by every run and session (it has its own lock)."""
        with self._lock:
            ident = path or key
            if ident not in self.qwens:
                self.qwens[ident] = QwenGGUF(path or provision.model_path(key))
            return self.qwens[ident]

    def validator(self, s: Settings) -> QwenValidator:
        v = QwenValidator(self.qwen(s.validator_model), s.validator_model, s.margin_threshold)
        v.model.load()
        return v

    def reranker(self, s: Settings) -> Reranker:
        if s.reranker == "bge":
            path = s.reranker_model or os.environ.get(RERANKER_ENV)
            if not path:
                raise ModelError(f"no bge-reranker folder configured; set {RERANKER_ENV} or the reranker model "
                                 "setting (no bge weights ship with this project)")
            with self._lock:
                if path not in self.bge:
                    self.bge[path] = FlagEmbeddingReranker(path)
                return self.bge[path]
        is_gguf = bool(s.reranker_model and s.reranker_model.endswith(".gguf"))
        model = self.qwen("qwen-0.5b", s.reranker_model if is_gguf else None)
        model.load()
        return QwenYesNoReranker(model, Path(s.reranker_model).name if is_gguf and s.reranker_model
                                 else "qwen-0.5b")

    def term_weight(self, fact: str) -> float:
        """Rarity of a code fact in the KB (BM25 idf): `screen_size` says more than `velocity`."""
        ids = self.bm25.term_ids
        term = fact_term(fact)
        for t in (term, term.rsplit(".", 1)[-1]):
            if t in ids:
                return max(float(self.bm25.idf[ids[t]]), 0.1)
        return 1.0

    # --- stages -----------------------------------------------------------
    def query(self, chunk: ChunkInfo) -> QueryResult:
        return QueryAnalysis().run(chunk)

    def retrieve(self, chunk: ChunkInfo, query: QueryResult, bm25_k: int, dense_k: int, model: str | None,
                 progress: ProgressFn = _quiet) -> tuple[LegResult, LegResult, list[StageTrace]]:
        bm = BM25Retriever(self.store, self.bm25, bm25_k)
        b = bm.run(query)
        traces = [bm.trace(b, query)]
        try:
            emb, vec = self.dense(model, progress)
            dr = DenseRetriever(self.store, vec, emb, dense_k)
            d = dr.run(chunk)
            traces.append(dr.trace(d))
        except Exception as exc:
            log.warning("embedding leg failed: %s", exc)
            d = LegResult("embedding", [], 0.0, str(model or "default"))
            traces.append(StageTrace(name="embedding", status="error", message=f"embedding leg unavailable: {exc}"))
        return b, d, traces

    def union(self, b: LegResult, d: LegResult) -> tuple[UnionResult, StageTrace]:
        u = Union(self.store)
        res = u.run(b, d)
        return res, u.trace(res)

    def final_items(self, ranked: RankedResult, k: int) -> list[FinalItem]:
        out = []
        for it in ranked.items[:k]:
            r = self.store.get(it.candidate.record_id)
            out.append(FinalItem(rank=it.rank, record_id=r.id, kind=r.kind, doc_path=getattr(r, "doc_path", None),
                                 source=getattr(r, "source", ""), section=getattr(r, "section", None),
                                 score=it.score, group=[m for m in it.candidate.members if m != r.id]))
        return out

    # --- alternatives -----------------------------------------------------
    def run_d(self, chunk: ChunkInfo, query: QueryResult, s: Settings, progress: ProgressFn,
              cancelled: Callable[[], bool] | None = None) -> AlternativeTrace:
        alt = AlternativeTrace(name="D")
        b, d, legs = self.retrieve(chunk, query, s.d_bm25_k, s.d_dense_k, s.embedder, progress)
        alt.stages.extend(legs)
        union, ut = self.union(b, d)
        alt.stages.append(ut)
        fused = Fusion(s.fusion, s.alpha, s.rrf_k).run(union)
        alt.stages.append(ranked_trace(fused, self.store.get))
        alt.final = self.final_items(fused, s.final_k)
        self.validate(alt, chunk, s, progress, cancelled)
        return alt

    def validate(self, alt: AlternativeTrace, chunk: ChunkInfo, s: Settings, progress: ProgressFn,
                 cancelled: Callable[[], bool] | None) -> None:
        if not s.run_validator:
            alt.stages.append(StageTrace(name="validate", status="skipped", message="validation turned off"))
            return
        validator, why = None, ""
        if s.accept_policy != "evidence_only" and s.validator_top_k > 0:
            try:
                validator = self.validator(s)
            except ModelError as exc:
                why = f"validator unavailable: {exc}"
        if self.verdicts is None:
            self.verdicts = VerdictCache()
        stage = Validate(self.store, validator, top_k=s.validator_top_k, policy=s.accept_policy,
                         timeout_s=s.timeout_s, cache=self.verdicts, unavailable=why, weight=self.term_weight)
        alt.final, trace = stage.run(chunk, alt.final, lambda d, t, what: progress(f"validate {alt.name}", d, t),
                                     cancelled)
        alt.stages.append(trace)

    def run_f(self, chunk: ChunkInfo, query: QueryResult, s: Settings, progress: ProgressFn,
              cancelled: Callable[[], bool] | None = None) -> AlternativeTrace:
        alt = AlternativeTrace(name="F")
        b, d, legs = self.retrieve(chunk, query, s.f_bm25_k, s.f_dense_k, s.f_embedder or s.embedder, progress)
        alt.stages.extend(legs)
        union, ut = self.union(b, d)
        alt.stages.append(ut)
        try:
            stage = Rerank(self.store, self.reranker(s) if s.reranker != "none" else _UnionOrder(), s.rerank_top_n)
            ranked = stage.run(chunk, union, lambda d, t: progress("rerank F", d, t))
            alt.stages.append(ranked_trace(ranked, self.store.get))
        except ModelError as exc:
            # The reranker is missing: keep F usable on the union order and say so.
            ranked = Rerank(self.store, _UnionOrder(), s.rerank_top_n).run(chunk, union)
            st = ranked_trace(ranked, self.store.get)
            st.status, st.message = "error", f"reranker unavailable, union order kept: {exc}"
            alt.stages.append(st)
        alt.final = self.final_items(ranked, s.final_k)
        self.validate(alt, chunk, s, progress, cancelled)
        return alt

    def run(self, data: bytes | str | ChunkInfo, settings: Settings | None = None,
            progress: ProgressFn = _quiet, cancelled: Callable[[], bool] | None = None) -> Trace:
        s = settings or Settings()
        chunk = data if isinstance(data, ChunkInfo) else prepare_chunk(data)
        q = self.query(chunk)
        trace = Trace(chunk=chunk, kb=self.kb_info(), settings=s.model_dump(), query=QueryAnalysis.trace(q))
        for name in s.alternatives:
            runner = self.run_d if name == "D" else self.run_f
            trace.alternatives[name] = runner(chunk, q, s, progress, cancelled)
        return trace
