"""Small protocols the stages talk to, so model backends swap without touching stages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

ProgressFn = Callable[[int, int], None]  # (done, total)


@runtime_checkable
class Embedder(Protocol):
    name: str  # identifies the model in caches and traces

    def encode(self, texts: Sequence[str], *, progress: ProgressFn | None = None) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        ...


@runtime_checkable
class Reranker(Protocol):
    name: str

    def score(self, query: str, docs: Sequence[str], *, progress: ProgressFn | None = None) -> list[float]:
        """One relevance score per doc; higher is more relevant."""
        ...
