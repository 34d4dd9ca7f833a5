"""Text reranker backends: Qwen yes/no logits, Qwen query likelihood (PMI), and bge via FlagEmbedding.

Both score (query, document) pairs pointwise; higher is more relevant.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from pipeline.config import cache_dir
from pipeline.evidence import sanitize_for_model
from pipeline.models.base import LogitLM, ProgressFn
from pipeline.models.provision import ModelError
from pipeline.models.qwen import QwenGGUF

RERANK_SYSTEM = ("Judge whether the Document is the right reference for the Query code. "
                 "Answer only \"yes\" or \"no\".")
DOC_CHARS = 900  # bounds the per-candidate prompt: time is ~linear in prompt tokens here


RERANK_PROMPT_VERSION = "r1"


class QwenYesNoReranker:
    """score = logit("yes") − logit("no") after the document, as Qwen3-Reranker does.

    Scores are cached on disk by (model, prompt version, query, document): a re-run, or the
    evaluation page, does not pay 30 model calls again.
    """

    def __init__(self, model: LogitLM, key: str, cache_folder: Path | None = None) -> None:
        self.model, self.key = model, key
        self.name = f"Qwen yes/no reranker ({key})"
        import diskcache

        self._cache = diskcache.Cache(str(cache_folder or cache_dir() / "rerank"))

    def _key(self, query: str, doc: str) -> str:
        h = hashlib.sha256(f"{sanitize_for_model(query)}\x00{doc[:DOC_CHARS]}".encode()).hexdigest()
        return f"{self.model.path.name}|{RERANK_PROMPT_VERSION}|{h}"

    def _prefix(self, query: str) -> str:
        return (f"<|im_start|>system\n{RERANK_SYSTEM}<|im_end|>\n<|im_start|>user\n"
                f"<Query>\n{sanitize_for_model(query)[:1800]}\n")

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        prefix = self._prefix(query)
        out = []
        for i, doc in enumerate(docs):
            key = self._key(query, doc)
            cached = self._cache.get(key)
            if isinstance(cached, float):
                out.append(cached)
            else:
                prompt = prefix + f"<Document>\n{doc[:DOC_CHARS]}<|im_end|>\n<|im_start|>assistant\n"
                margin = self.model.yes_no(self.model.tokenize(prompt)).margin
                self._cache.set(key, margin)
                out.append(margin)
            if progress:
                progress(i + 1, len(docs))
        return out


class FlagEmbeddingReranker:
    """bge-reranker (v2-m3 or base) from a local folder through FlagEmbedding's FlagReranker."""

    def __init__(self, path: str | Path, use_fp16: bool = False, max_length: int = 512) -> None:
        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise ModelError(f"no reranker model in {self.path} (config.json missing); point "
                             "GDPOC_BGE_RERANKER or the setting at a local bge-reranker folder")
        self.name = f"bge reranker ({self.path.name})"
        self.use_fp16, self.max_length = use_fp16, max_length
        self._model = None
        self._lock = threading.Lock()

    def load(self) -> None:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from FlagEmbedding import FlagReranker
            except ImportError as exc:
                raise ModelError("FlagEmbedding is not installed (it needs transformers<5); fix: `make install`") \
                    from exc
            try:
                self._model = FlagReranker(str(self.path), use_fp16=self.use_fp16, devices="cpu",
                                           max_length=self.max_length)
            except Exception as exc:
                raise ModelError(f"cannot load the reranker from {self.path}: {exc}") from exc

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        self.load()
        assert self._model is not None
        if not docs:
            return []
        with self._lock:
            scores = self._model.compute_score([[query, d] for d in docs], batch_size=16)
        if progress:
            progress(len(docs), len(docs))
        return [float(s) for s in (scores if isinstance(scores, list) else [scores])]


PMI_PROMPT_VERSION = "p1"
PMI_DOC_TOKENS = 128  # the document tokens whose likelihood is read: time is linear in them


class QwenPMIReranker:
    """score = log P(document | code) − log P(document | empty code): query likelihood, PMI-corrected.

    The code sits in the shared prefix; the document's tokens are read, not generated, so one
    forward pass per document gives its log-likelihood. The empty-code term depends only on the
    document and is cached, so a document that Qwen finds likely whatever the code is no evidence.
    Its model keeps every position's logits (``logits_all``), so it is its own GGUF context.
    """

    def __init__(self, model: QwenGGUF, key: str, cache_folder: Path | None = None) -> None:
        import diskcache

        self.model, self.key = model, key
        self.name = f"Qwen PMI reranker ({key})"
        self._cache = diskcache.Cache(str(cache_folder or cache_dir() / "rerank"))

    def close(self) -> None:
        self.model.close()

    def _prefix(self, code: str) -> list[int]:
        text = ("<|im_start|>user\nGodot 4 GDScript:\n```gdscript\n"
                f"{sanitize_for_model(code)[:1800]}```\nThe Godot documentation that explains this code:\n")
        return self.model.tokenize(text)[: self.model.n_ctx // 2]

    def _key(self, code: str, doc: str) -> str:
        h = hashlib.sha256(f"{sanitize_for_model(code)}\x00{doc[:DOC_CHARS]}".encode()).hexdigest()
        return f"{self.model.path.name}|{PMI_PROMPT_VERSION}|{h}"

    def _cached(self, code: str, doc: str, doc_tokens: list[int]) -> float:
        key = self._key(code, doc)
        hit = self._cache.get(key)
        if isinstance(hit, float):
            return hit
        value = self.model.loglik(self._prefix(code), doc_tokens)
        self._cache.set(key, value)
        return value

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        toks = [self.model.tokenize(d[:DOC_CHARS])[:PMI_DOC_TOKENS] or [0] for d in docs]  # loads the model
        with self.model.lock:  # the code's prefix, reused back to back, then every document's prior
            cond = []
            for i, (d, t) in enumerate(zip(docs, toks, strict=True)):
                cond.append(self._cached(query, d, t))
                if progress:
                    progress(i + 1, 2 * len(docs))
            out = []
            for i, (d, t) in enumerate(zip(docs, toks, strict=True)):
                out.append(cond[i] - self._cached("", d, t))
                if progress:
                    progress(len(docs) + i + 1, 2 * len(docs))
        return out
