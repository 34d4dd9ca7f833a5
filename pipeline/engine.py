"""Wires the stages in order, in two phases, into one :class:`Trace`.

``prepare(chunk, settings)`` runs the fast phase — query analysis, both legs,
union, D's fusion, F in union order — and returns a trace that can be drawn at
once, with the model stages marked "pending". ``complete(prepared)`` runs the
model phase on the same objects — F's reranker, then each validator — reusing
the fast results (nothing is recomputed). ``run`` is both. The CLI, the batch
runner, the evaluation and the dashboard all call these.

The engine owns the loaded KB and its indexes (heavy, shared, never mutated);
models come from a :class:`ModelHub` that several engines may share.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.bm25_index import BM25Index
from pipeline.chunk import prepare_chunk
from pipeline.evidence import fact_term
from pipeline.features import ChunkFacts, FeatureBuilder
from pipeline.kb import index as kb_index
from pipeline.kb.store import KBStore, ensure_builtin, open_kb
from pipeline.models import trained
from pipeline.models.base import Cancelled, Embedder, Reranker, Validator
from pipeline.models.hub import ModelHub
from pipeline.models.learned import LearnedRanker
from pipeline.models.provision import ModelError
from pipeline.settings import CHEAP_RERANKERS, POLICIES, TRAINED, AltName, Settings
from pipeline.stages import scope
from pipeline.stages.bm25 import BM25Retriever
from pipeline.stages.calibrated import Calibrated
from pipeline.stages.classorder import ClassPagesUp
from pipeline.stages.classuse import ClassUses, class_names
from pipeline.stages.dense import DenseRetriever, trace_embedding
from pipeline.stages.dimension import DimensionOrder
from pipeline.stages.fusion import Fusion
from pipeline.stages.legacy import LegacyFirst
from pipeline.stages.pagevotes import VOTE_K, PageVotes
from pipeline.stages.parts import merge_bm25, merge_embedding, parts
from pipeline.stages.query import QueryAnalysis
from pipeline.stages.renames import Renames
from pipeline.stages.rerank import Prior, Rerank
from pipeline.stages.results import (
    EmbeddingResult,
    Ordered,
    QueryResult,
    RankedItem,
    RuleResult,
    UnionResult,
    ValidateResult,
)
from pipeline.stages.union import Union
from pipeline.stages.validate import Validate, VerdictCache
from pipeline.trace import (
    AlternativeTrace,
    ChunkInfo,
    FinalItem,
    FusionTrace,
    KBInfo,
    ProgressEvent,
    RecordRef,
    RerankTrace,
    Trace,
    ValidateTrace,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[ProgressEvent], None]
Cancel = Callable[[], bool]


def _quiet(event: ProgressEvent) -> None:
    pass


def _never() -> bool:
    return False


@dataclass
class Prepared:
    """The fast phase's outcome: a drawable trace plus what the model phase builds on."""

    chunk: ChunkInfo
    settings: Settings
    query: QueryResult
    trace: Trace
    unions: dict[AltName, UnionResult] = field(default_factory=dict)  # F's reranker reads its union
    facts: ChunkFacts | None = None  # what the features need from the chunk: Engine.facts computes it once
    renames: RuleResult | None = None  # the Godot 3 renames the chunk uses: Engine.renames finds them once
    classes: RuleResult | None = None  # the engine classes the chunk uses: Engine.class_uses finds them once
    pieces: list[tuple[ChunkInfo, QueryResult]] | None = None  # a long chunk's functions: Engine._pieces
    # the model phase's Cancel, once it starts: the background read of Qwen's prefix stops on it too
    prime_stops: list[Cancel] = field(default_factory=list)

    @property
    def needs_models(self) -> bool:
        return bool(self.trace.pending)


def final_items(ranked: Sequence[RankedItem], k: int, keep: Callable[[RecordRef], bool] = lambda _: False
                ) -> list[FinalItem]:
    """The top ``k``, then any item further down that ``keep`` wants judged (a label that fits the code)."""
    return [FinalItem.of(it.candidate.ref, rank=it.rank, score=it.score,
                         group=[m for m in it.candidate.members if m != it.candidate.record_id])
            for n, it in enumerate(ranked) if n < k or keep(it.candidate.ref)]


@dataclass
class Engine:
    store: KBStore
    bm25: BM25Index
    hub: ModelHub = field(default_factory=ModelHub)
    verdicts: VerdictCache | None = None
    vectors: dict[str, kb_index.VectorIndex] = field(default_factory=dict)  # per embedder, for this KB
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _features: FeatureBuilder | None = None
    _renames: Renames | None = None  # the rename rule, holding this KB's Godot 3 -> 4 mappings
    _class_uses: ClassUses | None = None  # the class-use rule, holding this KB's engine classes
    _priming: threading.Event | None = None

    @classmethod
    def open(cls, kb: Sequence[Path] | None = None, progress: ProgressFn = _quiet,
             hub: ModelHub | None = None) -> Engine:
        """The built-in KB (built first if missing) or the JSONL files ``kb``, with the BM25 index."""
        if not kb:
            ensure_builtin()
        return cls.for_store(open_kb(kb), progress, hub)

    @classmethod
    def for_store(cls, store: KBStore, progress: ProgressFn = _quiet, hub: ModelHub | None = None) -> Engine:
        """An engine over an already loaded KB (e.g. an upload), sharing ``hub``'s models."""
        bm25 = kb_index.open_bm25(store, lambda d, t: progress(ProgressEvent("bm25 index", d, t)))
        return cls(store, bm25, hub or ModelHub())

    def kb_info(self) -> KBInfo:
        return KBInfo(name=self.store.name, content_hash=self.store.content_hash,
                      counts=self.store.counts, issues=self.store.issues[:200])

    # --- models -----------------------------------------------------------------------------
    def dense(self, model: str | None, progress: ProgressFn = _quiet) -> tuple[Embedder, kb_index.VectorIndex]:
        """The embedder and this KB's vectors for it, computed once (resumable) and shared."""
        key = model or ""
        with self._lock:
            embedder = self.hub.embedder(model)
            if key not in self.vectors:
                self.vectors[key] = kb_index.open_vectors(
                    self.store, embedder, lambda d, t: progress(ProgressEvent("embedding index", d, t)))
        return embedder, self.vectors[key]

    def validator(self, s: Settings) -> Validator:
        return self.hub.validator(s)

    def reranker(self, s: Settings) -> Reranker | LearnedRanker:
        return self.hub.reranker(s, self.store.content_hash)

    @property
    def features(self) -> FeatureBuilder:
        """Candidate features for the learned ranker (built once per engine: it indexes class pages)."""
        with self._lock:
            if self._features is None:
                self._features = FeatureBuilder(self.store, self.bm25)
            return self._features

    def resolve_embedder(self, model: str | None) -> tuple[str | None, str]:
        """The folder an embedder setting means, and a notice when it had to fall back to MiniLM."""
        if model != TRAINED:
            return model, ""
        try:
            return trained.query_encoder(self.store.content_hash), ""
        except ModelError as exc:
            return None, f"{exc}; using all-MiniLM-L6-v2"

    def term_weight(self, fact: str) -> float:
        """Rarity of a code fact in the KB (BM25 idf): `screen_size` says more than `velocity`."""
        ids = self.bm25.term_ids
        term = fact_term(fact)
        for t in (term, term.rsplit(".", 1)[-1]):
            if t in ids:
                return max(float(self.bm25.idf[ids[t]]), 0.1)
        return 1.0

    # --- fast phase -------------------------------------------------------------------------
    def prepare(self, data: bytes | str | ChunkInfo, settings: Settings | None = None,
                progress: ProgressFn = _quiet, prime: bool = False) -> Prepared:
        """The fast phase. ``prime``: read Qwen's prompt prefix meanwhile (interactive runs; not batches)."""
        s = settings or Settings()
        chunk = data if isinstance(data, ChunkInfo) else prepare_chunk(data)
        stops: list[Cancel] = []
        if prime:
            self.prime(chunk, s, stops)
        qa = QueryAnalysis()
        q = qa.run(chunk)
        trace = Trace(chunk=chunk, kb=self.kb_info(), settings=s, query=qa.trace(q))
        prepared = Prepared(chunk, s, q, trace, prime_stops=stops)
        for name in s.alternatives:
            trace.alternatives[name] = self._fast(prepared, name, progress)
        return prepared

    def _embedding(self, chunk: ChunkInfo, k: int, model: str | None, progress: ProgressFn) -> EmbeddingResult:
        model, notice = self.resolve_embedder(model)
        try:
            emb, vec = self.dense(model, progress)
            result = DenseRetriever(self.store, vec, emb, k).run(chunk)
            return dataclasses.replace(result, notice=notice) if notice else result
        except Exception as exc:  # BM25 still works; the embedding panel says why it is empty
            log.warning("embedding leg failed: %s", exc)
            return DenseRetriever.unavailable(k, model or "default", str(exc))

    def _fast(self, prepared: Prepared, name: AltName, progress: ProgressFn) -> AlternativeTrace:
        s, chunk = prepared.settings, prepared.chunk
        if name == "D":
            k_b, k_e, model = s.d_bm25_k, s.d_dense_k, s.embedder
        else:
            k_b, k_e, model = s.f_bm25_k, s.f_dense_k, s.f_embedder or s.embedder
        alt = AlternativeTrace(name=name)
        bm = BM25Retriever(self.store, self.bm25, k_b)
        pieces = self._pieces(prepared)
        if pieces:  # a long chunk: each function searched on its own, hits merged (pipeline/stages/parts.py)
            b = merge_bm25([bm.run(q) for _, q in pieces], k_b)
            found = []
            for n, (piece, _) in enumerate(pieces):  # ~30-70 ms a function: a 2,000-line file takes seconds
                progress(ProgressEvent("functions", n, len(pieces), name, "embedding each function"))
                found.append(self._embedding(piece, k_e, model, progress))
            progress(ProgressEvent("functions", len(pieces), len(pieces), name))
            e = merge_embedding(found, k_e)
        else:
            b = bm.run(prepared.query)
            e = self._embedding(chunk, k_e, model, progress)
        alt.bm25 = bm.trace(b)
        alt.embedding = trace_embedding(e)
        union = Union()
        u = prepared.unions[name] = union.run(b, e, self.rules(prepared))
        alt.union = union.trace(u)
        ranked: Sequence[RankedItem]
        if name == "D":
            fusion = Fusion(s.fusion, s.alpha, s.rrf_k)
            fused = fusion.run(u)
            ordered, raised = self._reorder(prepared, fused.items, name)
            fused = dataclasses.replace(fused, items=raised.items)
            alt.fusion, ranked = fusion.trace(fused), fused.items
            self._note_moved(alt.fusion, ordered, raised)
        else:
            rerank = Rerank(self.store, None, s.rerank_top_n)
            kept = (rerank.union_order(u, "pending", "the reranker runs next; the union order is shown meanwhile")
                    if s.reranks else rerank.union_order(u, "skipped", "reranker turned off: F keeps the union order"))
            alt.rerank, ranked = rerank.trace(kept), kept.items
        alt.final = final_items(ranked, s.final_k, self._fitting_label(prepared))
        alt.validation = (ValidateTrace(status="pending", message="the validator runs next")
                          if s.run_validator else ValidateTrace(status="skipped", message="validation turned off"))
        return alt

    @staticmethod
    def _pieces(prepared: Prepared) -> list[tuple[ChunkInfo, QueryResult]]:
        """A long chunk's functions and their query analyses, once for both alternatives ([] if not cut)."""
        if prepared.pieces is None:
            s = prepared.settings
            cut = parts(prepared.chunk, s.long_lines) if s.long_chunks == "per_function" else []
            prepared.pieces = [(p, QueryAnalysis().run(p)) for p in cut]
        return prepared.pieces

    def prime(self, chunk: ChunkInfo, s: Settings, stops: Sequence[Cancel] = ()) -> threading.Thread | None:
        """Load Qwen and read the chunk's shared prompt prefix in the background, while retrieval runs.

        Skipped when Qwen has already been through this chunk (its answers are cached) or will not run.
        It stops when the run ends or once any of ``stops`` (filled in later: the run's Cancel) says so.
        """
        if not s.judges:
            return None
        if self.verdicts is None:
            self.verdicts = VerdictCache()
        try:
            validator = self.validator(s)
        except ModelError:
            return None  # the validate stage reports it
        if self.verdicts.primed(validator, chunk.text):
            return None

        done = self._priming = threading.Event()  # set when the run no longer needs the head start
        evidence_only = s.accept_policy == "calibrated" and not self._accept_uses_llm()

        def work() -> None:
            try:
                validator.prime(chunk.text, cancelled=lambda: done.is_set() or any(f() for f in stops),
                                evidence_only=evidence_only)
            except Cancelled:
                pass
            except Exception as exc:  # only a head start: the stage itself reports real failures
                log.warning("priming Qwen failed: %s", exc)

        thread = threading.Thread(target=work, name="qwen-prime", daemon=True)
        thread.start()
        return thread

    def _accept_uses_llm(self) -> bool:
        """Whether the calibrated policy asks Qwen for verdicts (else only for evidence lists)."""
        try:
            return self.hub.accept_model(self.store.content_hash).uses_llm
        except ModelError:
            return True  # the rule-based fallback judges with Qwen

    # --- model phase ------------------------------------------------------------------------
    def complete(self, prepared: Prepared, progress: ProgressFn = _quiet, cancelled: Cancel | None = None,
                 on_alternative: Callable[[AltName], None] | None = None,
                 on_update: Callable[[], None] | None = None) -> Trace:
        """Run the pending model stages of ``prepared.trace`` in place; ``on_alternative`` after each one,
        ``on_update`` when a stage still running has something to show (the validator's decisions before
        Qwen's evidence lists)."""
        stop = cancelled or _never
        if cancelled is not None:
            prepared.prime_stops.append(cancelled)
        alts = prepared.trace.alternatives
        if prepared.settings.reranker in CHEAP_RERANKERS:  # F's ranking in a moment, not after D's Qwen work
            for alt in alts.values():
                if alt.rerank is not None and alt.rerank.status == "pending":
                    self._rerank(prepared, alt, progress, stop)
                    if on_update is not None:
                        on_update()
        for name, alt in alts.items():
            if alt.rerank is not None and alt.rerank.status == "pending":
                self._rerank(prepared, alt, progress, stop)
            if alt.validation is not None and alt.validation.status == "pending":
                self._validate(prepared, alt, progress, stop, on_update)
            if on_alternative is not None:
                on_alternative(name)
        if self._priming is not None:  # a prefix nobody will read is not worth finishing
            self._priming.set()
        return prepared.trace

    def _rerank(self, prepared: Prepared, alt: AlternativeTrace, progress: ProgressFn, stop: Cancel) -> None:
        s, union = prepared.settings, prepared.unions[alt.name]
        stage = Rerank(self.store, None, s.rerank_top_n, self.features, Prior(s.f_prior_weight, s.alpha, s.rrf_k))

        def tick(done: int, total: int) -> None:
            progress(ProgressEvent("rerank", done, total, alt.name))
            if stop():
                raise Cancelled

        ordered = raised = Ordered([], [])
        try:
            if stop():
                raise Cancelled
            stage.reranker = self.reranker(s)
            result = stage.run(prepared.chunk, union, tick, self.facts(prepared))
            ordered, raised = self._reorder(prepared, result.items, alt.name)
            result = dataclasses.replace(result, items=raised.items)
        except ModelError as exc:  # the reranker is missing: keep F usable on the union order and say so
            result = stage.union_order(union, "error", f"reranker unavailable, union order kept: {exc}")
        except Cancelled:
            result = stage.union_order(union, "not_run", "cancelled: the union order is kept")
        alt.rerank = stage.trace(result)
        self._note_moved(alt.rerank, ordered, raised)
        alt.final = final_items(result.items, s.final_k, self._fitting_label(prepared))

    def _reorder(self, prepared: Prepared, items: Sequence[RankedItem], name: AltName) -> tuple[Ordered, Ordered]:
        """After fusion or the reranker, each if turned on: the other dimension's docs sections below the rest
        (pipeline/stages/dimension.py), the class pages of the classes the code uses after its top pages
        (stages/classorder.py), for Godot 3 code the renames it uses first (stages/legacy.py), then on a long
        file the pages that several sections support (stages/pagevotes.py). Returns (moved down, moved up),
        the second with every upward rule's moves."""
        s, facts = prepared.settings, self.facts(prepared)
        ordered = DimensionOrder(self.features).run(items, facts) if s.dimension_order else Ordered(list(items), [])
        classes = Ordered(ordered.items, [])
        if s.class_pages:
            pages = {h.ref.doc_path for h in self.class_uses(prepared).hits if h.ref.doc_path}
            classes = ClassPagesUp(s.class_pages_after).run(ordered.items, pages)
        raised = (LegacyFirst().run(classes.items, self.renames(prepared)) if s.legacy_first
                  else Ordered(classes.items, []))
        up = classes.then(raised)
        if s.page_votes and self._pieces(prepared):
            up = up.then(PageVotes(k=VOTE_K[name], shown=s.final_k).run(up.items, fixed=set(ordered.moved)))
        return ordered, up

    def rules(self, prepared: Prepared) -> RuleResult | None:
        """What joins the union by rule, each if turned on: the Godot 3 renames, then the classes the code uses."""
        s = prepared.settings
        parts = [r for r in (self.renames(prepared) if s.renames else None,
                             self.class_uses(prepared) if s.class_pages else None) if r is not None]
        if not parts:
            return None
        hits = [dataclasses.replace(h, rank=n) for n, h in enumerate((h for r in parts for h in r.hits), start=1)]
        return RuleResult(hits, sum(r.ms for r in parts))

    def class_uses(self, prepared: Prepared) -> RuleResult:
        """The engine classes the chunk uses (pipeline/stages/classuse.py), found once for D and F."""
        if prepared.classes is None:
            prepared.classes = self.class_rule.run(prepared.chunk.text, self.facts(prepared), prepared.chunk.context)
        return prepared.classes

    @property
    def class_rule(self) -> ClassUses:
        """The class-use rule over this KB's engine classes (built on first use)."""
        if self._class_uses is None:
            self._class_uses = ClassUses(self.store)
        return self._class_uses

    def accept_facts(self, prepared: Prepared) -> ChunkFacts:
        """The chunk's facts with the classes the class-use rule finds, as the accept model reads them."""
        return dataclasses.replace(self.facts(prepared), used_classes=class_names(self.class_uses(prepared)))

    def renames(self, prepared: Prepared) -> RuleResult:
        """The Godot 3 → 4 renames the chunk uses (pipeline/stages/renames.py), found once: the union and
        the renames-first order read them, in D and in F."""
        if prepared.renames is None:
            if self._renames is None:
                self._renames = Renames(self.store)
            prepared.renames = self._renames.run(prepared.chunk.text, self.facts(prepared))
        return prepared.renames

    def facts(self, prepared: Prepared) -> ChunkFacts:
        """The chunk's facts (pipeline/features.py), computed once: dimension order, ranker and validator read them."""
        if prepared.facts is None:
            prepared.facts = self.features.chunk_facts(prepared.chunk.text, prepared.query.terms)
        return prepared.facts

    @staticmethod
    def _note_moved(stage: FusionTrace | RerankTrace, ordered: Ordered, raised: Ordered) -> None:
        stage.moved_down, stage.moved_up = ordered.moved, raised.moved
        stage.message = "; ".join(filter(None, [stage.message, ordered.message, raised.message]))

    def _fitting_label(self, prepared: Prepared) -> Callable[[RecordRef], bool]:
        """Labels the validator's scope takes wherever they rank (pipeline/stages/scope.py)."""
        s, code = prepared.settings, prepared.chunk.text
        if not s.run_validator:
            return lambda _: False
        return lambda ref: scope.label_fits(self.store, ref, code, s.label_fit) is not None

    def _validate(self, prepared: Prepared, alt: AlternativeTrace, progress: ProgressFn, stop: Cancel,
                  on_update: Callable[[], None] | None = None) -> None:
        if stop():
            alt.validation = ValidateTrace(status="not_run", message="cancelled before validation")
            return
        stage = self.validation_stage(prepared)

        def tick(done: int, total: int, what: str) -> None:
            progress(ProgressEvent("validate", done, total, alt.name, what))

        def decided(partial: ValidateResult) -> None:  # shown while Qwen writes the evidence lists
            shown = stage.trace(partial)
            shown.status = "pending"
            shown.message = "; ".join(filter(None, [f"decided: Qwen is now writing the evidence lists of "
                                                    f"{shown.writing_lists} accepted record(s)", shown.message]))
            alt.validation, alt.final = shown, partial.final
            assert on_update is not None
            on_update()

        result = stage.run(prepared.chunk, alt.final, tick, stop, decided if on_update is not None else None)
        alt.validation, alt.final = stage.trace(result), result.final
        if stage.validator is not None and stage.cache is not None and not stop():
            stage.cache.mark_primed(stage.validator, prepared.chunk.text)

    def validation_stage(self, prepared: Prepared) -> Validate:
        """The validate stage for this chunk and settings: its validator, policy and accept model."""
        s = prepared.settings
        validator, why = None, ""
        if s.judges:
            try:
                validator = self.validator(s)
            except ModelError as exc:
                why = f"validator unavailable: {exc}"
        if self.verdicts is None:
            self.verdicts = VerdictCache()
        policy, accept = s.accept_policy, None
        if policy == "calibrated":
            try:
                model = self.hub.accept_model(self.store.content_hash)
                accept = Calibrated(model, self.accept_facts(prepared))
            except ModelError as exc:  # the rules still decide; the panel says why
                policy = "qwen_and_evidence"
                why = "; ".join(filter(None, [why, f"accept model unavailable ({exc}): the rule-based policy "
                                                  f"\"{POLICIES[policy].label}\" decided"]))
        classes = None
        if s.class_accepts and accept is not None:  # another language: the rule finds no class, so none counts
            chunk = prepared.chunk
            classes = scope.UsedClasses(
                {h.ref.source.removeprefix("class/"): h.use for h in self.class_uses(prepared).hits},
                self.class_rule.member_uses(chunk.text, chunk.context))
        return Validate(self.store, validator, top_k=s.validator_top_k, label_fit=s.label_fit, policy=policy,
                        timeout_s=s.timeout_s, cache=self.verdicts, unavailable=why, weight=self.term_weight,
                        accept=accept, classes=classes)

    def run(self, data: bytes | str | ChunkInfo, settings: Settings | None = None,
            progress: ProgressFn = _quiet, cancelled: Cancel | None = None, prime: bool = False) -> Trace:
        """Both phases: the complete trace."""
        return self.complete(self.prepare(data, settings, progress, prime), progress, cancelled)
