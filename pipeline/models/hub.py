"""One place that loads models and shares them: Qwen GGUFs, embedders, rerankers.

A hub is cheap to create and loads nothing until asked. Several engines (the
built-in KB and an uploaded one) take the same hub, so they share one loaded
Qwen; every model object guards itself with its own lock.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pipeline import config
from pipeline.accept import AcceptModel
from pipeline.models import provision, trained
from pipeline.models.base import Embedder, Reranker
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.models.learned import LearnedRanker
from pipeline.models.qwen import QwenGGUF
from pipeline.models.registry import RERANKER_ENV
from pipeline.models.reranker import FlagEmbeddingReranker, QwenPMIReranker, QwenYesNoReranker
from pipeline.models.validator import QwenValidator
from pipeline.settings import Settings


class ModelHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._qwens: dict[str, QwenGGUF] = {}
        self._embedders: dict[str, SentenceTransformerEmbedder] = {}
        self._flag: dict[str, FlagEmbeddingReranker] = {}
        self._learned: dict[str, LearnedRanker] = {}
        self._accept: dict[str, AcceptModel] = {}
        self._pmi: dict[str, QwenPMIReranker] = {}

    def qwen(self, key: str, path: str | None = None) -> QwenGGUF:
        """One GGUF object per file, shared by every run and session (it has its own lock)."""
        ident = path or key
        with self._lock:
            if ident not in self._qwens:
                self._qwens[ident] = QwenGGUF(path or provision.model_path(key))
            return self._qwens[ident]

    def embedder(self, path: str | None = None) -> Embedder:
        """A sentence-transformers embedder (the default MiniLM for None); it loads on first use."""
        key = path or ""
        with self._lock:
            if key not in self._embedders:
                self._embedders[key] = SentenceTransformerEmbedder(path)
            return self._embedders[key]

    def flag_reranker(self, path: str) -> FlagEmbeddingReranker:
        """A cross-encoder folder loaded through FlagEmbedding (bge, or a trained one)."""
        with self._lock:
            if path not in self._flag:
                self._flag[path] = FlagEmbeddingReranker(path)
            return self._flag[path]

    def learned_ranker(self, folder: Path | str) -> LearnedRanker:
        key = str(folder)
        with self._lock:
            if key not in self._learned:
                self._learned[key] = LearnedRanker(folder)
            ranker = self._learned[key]
        ranker.load()  # a missing or corrupt model is a ModelError now, not in the middle of a run
        return ranker

    def accept_model(self, kb_hash: str) -> AcceptModel:
        """The calibrated accept model trained for this KB; ModelError (with the fix) when missing or corrupt."""
        folder = trained.accept(kb_hash)
        with self._lock:
            if str(folder) not in self._accept:
                self._accept[str(folder)] = AcceptModel.load(folder)
            return self._accept[str(folder)]

    def validator(self, s: Settings) -> QwenValidator:
        """The judge ``s`` asks for, loaded; raises ModelError with the fix when the model is missing."""
        model = self.qwen(s.validator_model)
        model.load()
        return QwenValidator(model, s.validator_model, s.margin_threshold,
                             prefix_states=config.prefix_state_dir())

    def reranker(self, s: Settings, kb_hash: str) -> Reranker | LearnedRanker:
        """F's reranker for ``s`` (call only when ``s.reranker`` is not "none"); ModelError names the fix."""
        if s.reranker == "learned":
            return self.learned_ranker(s.reranker_model or trained.ranker(kb_hash))
        if s.reranker == "bge":
            path = s.reranker_model or os.environ.get(RERANKER_ENV) or str(trained.cross_encoder(kb_hash))
            return self.flag_reranker(path)
        gguf = s.reranker_model if s.reranker_model and s.reranker_model.endswith(".gguf") else None
        if s.reranker == "qwen-pmi":  # its own context: it keeps every position's logits, in a small window
            path = Path(gguf) if gguf else provision.model_path("qwen-0.5b")
            with self._lock:
                if str(path) not in self._pmi:
                    self._pmi[str(path)] = QwenPMIReranker(QwenGGUF(path, n_ctx=1024, logits_all=True),
                                                           path.name if gguf else "qwen-0.5b")
                return self._pmi[str(path)]
        model = self.qwen("qwen-0.5b", gguf)
        model.load()
        return QwenYesNoReranker(model, Path(gguf).name if gguf else "qwen-0.5b")
