"""Run settings: one frozen object, so (chunk, settings) keys every cache."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FusionMethod = Literal["rrf", "minmax", "zscore"]
AcceptPolicy = Literal["qwen_and_evidence", "qwen_only", "evidence_only"]
RerankerBackend = Literal["qwen", "bge", "none"]


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    alternatives: tuple[Literal["D", "F"], ...] = ("D", "F")
    # Top-k per leg: the design's values (D 50/50, F 80/80).
    d_bm25_k: int = Field(50, ge=1, le=1000)
    d_dense_k: int = Field(50, ge=1, le=1000)
    f_bm25_k: int = Field(80, ge=1, le=1000)
    f_dense_k: int = Field(80, ge=1, le=1000)
    fusion: FusionMethod = "rrf"
    # Weight of BM25 in every fusion mode (RRF weights 2α and 2(1−α)). 0.85 measured best on the dev
    # set (BENCHMARKS.md): MiniLM is a text model, so the keyword leg leads and embeddings break ties.
    alpha: float = Field(0.85, ge=0.0, le=1.0)
    rrf_k: int = Field(60, ge=1)
    final_k: int = Field(20, ge=1, le=200)
    embedder: str | None = None  # sentence-transformers folder; None = MiniLM from its package
    f_embedder: str | None = None  # F's code embedder; None = same as D's
    reranker: RerankerBackend = "qwen"
    reranker_model: str | None = None  # bge folder, or a GGUF path for qwen; None = default
    rerank_top_n: int = Field(30, ge=1, le=200)
    run_validator: bool = True
    validator_model: Literal["qwen-1.5b", "qwen-0.5b"] = "qwen-1.5b"
    validator_top_k: int = Field(8, ge=0, le=50)
    accept_policy: AcceptPolicy = "qwen_and_evidence"
    margin_threshold: float | None = None  # None = the calibrated default for the model
    timeout_s: float = Field(30.0, gt=0)

    def cache_key(self) -> str:
        return self.model_dump_json()
