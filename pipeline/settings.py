"""Run settings: one frozen object, so (chunk, settings) keys every cache.

Also the one home of what the UI and the evaluation say about settings: the
accept policies with their descriptions, and the rough cost of the model stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

AltName = Literal["D", "F"]
FusionMethod = Literal["rrf", "minmax", "zscore"]
AcceptPolicy = Literal["calibrated", "qwen_and_evidence", "qwen_only", "evidence_only"]
RerankerBackend = Literal["learned", "bge", "qwen", "qwen-pmi", "none"]
TRAINED = "trained"  # an embedder setting that means: the code embedder trained here (MiniLM until it is)
ValidatorModel = Literal["qwen-1.5b", "qwen-0.5b"]


@dataclass(frozen=True)
class Policy:
    label: str  # short, for a select box
    description: str  # what it accepts, for the trace and the caption


POLICIES: dict[AcceptPolicy, Policy] = {
    "calibrated": Policy(
        "calibrated p (accept model)",
        "accept when the accept model's calibrated probability p reaches its threshold (chosen out of fold on "
        "the dev set's tune half and the rule tune set, for precision ≥ 0.9 on each) and a fact is shared; "
        "Qwen is asked only where its answer can change the decision"),
    "qwen_and_evidence": Policy(
        "Qwen yes + verified evidence",
        "accept when Qwen says yes, at least one evidence item is verified in both texts, "
        "and the record is not of the other dimension (2D vs 3D)"),
    "qwen_only": Policy("Qwen yes", "accept when Qwen says yes"),
    "evidence_only": Policy(
        "deterministic evidence only (no model)",
        "accept when deterministic matching finds at least one shared string/API/pattern (no model)"),
}
assert set(POLICIES) == set(get_args(AcceptPolicy)), "every accept policy needs its description"

# Rough costs of the model stages on this 2-core CPU (README, BENCHMARKS.md): the dashboard's hints
# and the evaluation page's time estimate both read them here. Cached verdicts and scores are free.
SECONDS_PER_JUDGEMENT: dict[ValidatorModel, float] = {"qwen-1.5b": 3.0, "qwen-0.5b": 1.2}
SECONDS_PER_RERANK_DOC: dict[RerankerBackend, float] = {"learned": 0.002, "bge": 0.04, "qwen": 1.9, "qwen-pmi": 2.0,
                                                        "none": 0.0}
# Rerankers fast enough to run before any alternative's validation: F's list shows while D's Qwen works
CHEAP_RERANKERS: frozenset[RerankerBackend] = frozenset({"learned", "bge"})
SECONDS_FAST_PHASE = 1.0  # query, both legs, union, fusion
# The calibrated policy decides on p; Qwen reads the chunk once (≈40 prompt tokens/s for 1.5B, FINDINGS.md)
# and writes the accepted records' evidence lists side by side (5.6 s for the reference chunk's four, loaded).
READ_TOKENS_PER_S: dict[ValidatorModel, float] = {"qwen-1.5b": 40.0, "qwen-0.5b": 100.0}
SECONDS_EVIDENCE_LISTS: dict[ValidatorModel, float] = {"qwen-1.5b": 6.0, "qwen-0.5b": 3.0}
CHARS_PER_TOKEN = 3.2  # GDScript under Qwen's tokenizer, roughly
TYPICAL_CHUNK_CHARS = 1200  # when no chunk is known yet (the Evaluation page's estimate)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    alternatives: tuple[AltName, ...] = ("D", "F")
    # Top-k per leg: the design's values (D 50/50, F 80/80).
    d_bm25_k: int = Field(50, ge=1, le=1000)
    d_dense_k: int = Field(50, ge=1, le=1000)
    f_bm25_k: int = Field(80, ge=1, le=1000)
    f_dense_k: int = Field(80, ge=1, le=1000)
    fusion: FusionMethod = "rrf"
    # Weight of BM25 in every fusion mode (RRF weights 2α and 2(1−α)). 0.85 measured best on the dev
    # set (BENCHMARKS.md): MiniLM is a text model, so the keyword leg leads and embeddings break ties.
    alpha: float = Field(0.85, ge=0.0, le=1.0)
    rrf_k: int = Field(60, ge=1, le=1000)
    final_k: int = Field(20, ge=1, le=200)
    # A chunk longer than long_lines is searched function by function, the hits merged ("whole": as one query).
    long_chunks: Literal["whole", "per_function"] = "per_function"
    long_lines: int = Field(60, ge=10, le=2000)
    # D's embedding leg: the code query map trained here (MiniLM until it is), like F's. Chosen on the tune sets
    # (2026-12-07: higher on the dev tune half, the rule tune set and a real-file tune set; bench/NOTES.md).
    # None = MiniLM from its package; or a sentence-transformers folder.
    embedder: str | None = TRAINED
    f_embedder: str | None = TRAINED  # F's code embedder: "trained" (default), a folder, or None = same as D's
    # F's reranker: "learned" (LightGBM over the trace's features, trained here), "bge" (a cross-encoder
    # folder through FlagEmbedding: a real bge-reranker or the one trained here), "qwen" (0.5B yes/no logits),
    # "qwen-pmi" (0.5B: log P(record | code) − log P(record | empty code); measured, not the default).
    reranker: RerankerBackend = "learned"
    reranker_model: str | None = None  # a folder (learned, bge) or a GGUF (qwen); None = the default one
    rerank_top_n: int = Field(30, ge=1, le=200)
    f_prior_weight: float = Field(1.0, ge=0.0, le=100.0)  # learned ranker + this × RRF prior (tune half)
    # After fusion and the reranker, docs sections about the other dimension (3D pages for 2D code, or back)
    # move below the rest (pipeline/stages/dimension.py; chosen on the tune half).
    dimension_order: bool = True
    # Then, for Godot 3 code, the Godot 3 → 4 rename mappings it uses go first (pipeline/stages/legacy.py;
    # the learned ranker never saw Godot 3 code; measured on the tune half).
    legacy_first: bool = True
    # For Godot 3 code, the rename mappings whose pattern it uses join the union as provenance "rule" (neither
    # leg finds them reliably; pipeline/stages/renames.py; measured on the tune half).
    renames: bool = True
    # The classes the code uses (named, or defining a member it uses) join the union as "rule", and their class
    # pages move up to follow the first class_pages_after pages (pipeline/stages/classuse.py, classorder.py;
    # chosen on the tune half).
    class_pages: bool = True
    class_pages_after: int = Field(2, ge=0, le=50)
    # Last, on a chunk searched function by function, a page that several of its sections support moves up
    # (pipeline/stages/pagevotes.py; chosen on the real-file tune set).
    page_votes: bool = True
    run_validator: bool = True
    validator_model: ValidatorModel = "qwen-1.5b"
    validator_top_k: int = Field(8, ge=0, le=50)
    # A label holding this share of its match terms in the code is judged wherever it ranks (above 1: only
    # in the top k). Chosen on the tune half (pipeline/stages/scope.py).
    label_fit: float = Field(0.5, ge=0.0, le=2.0)
    accept_policy: AcceptPolicy = "calibrated"
    # With the calibrated policy: accept the class-reference records of the classes the code uses (the class-use
    # rule) wherever they rank in the final list, on the rule's evidence. Off by default: the dev set's labeller
    # graded about half of such pages 0, the rule-graded sets grade them relevant (bench/NOTES.md).
    class_accepts: bool = False
    margin_threshold: float | None = Field(None, ge=-20.0, le=20.0)  # None = the calibrated default
    timeout_s: float = Field(30.0, ge=1.0, le=600.0)

    def cache_key(self) -> str:
        # an option left off keeps the key it had before the option existed: cached runs stay valid
        return self.model_dump_json(exclude=None if self.class_accepts else {"class_accepts"})

    @staticmethod
    def parse_alternatives(text: str) -> tuple[AltName, ...]:
        """``D``, ``F`` or ``both`` (any case), as the command line spells it."""
        choice = text.strip().upper()
        if choice == "BOTH":
            return ("D", "F")
        if choice == "D":
            return ("D",)
        if choice == "F":
            return ("F",)
        raise ValueError(f"--alt must be D, F or both, not {text!r}")

    # --- what the model stages will do and cost ---------------------------------------------------
    @property
    def judges(self) -> bool:
        """Whether a Qwen judge is asked for (evidence-only needs no model)."""
        return self.run_validator and self.accept_policy != "evidence_only" and self.validator_top_k > 0

    @property
    def reranks(self) -> bool:
        return "F" in self.alternatives and self.reranker != "none"

    @property
    def needs_models(self) -> bool:
        """Whether anything beyond the fast phase (query, legs, union, fusion) runs."""
        return self.run_validator or self.reranks

    def judge_seconds(self, code_chars: int | None = None) -> float:
        """Rough seconds for one alternative's validation on cold caches, for a chunk of ``code_chars``."""
        if not self.judges:
            return 0.0
        m = self.validator_model
        if self.accept_policy == "calibrated":  # Qwen reads the lines that show the facts, and writes lists
            from pipeline.evidence import LIST_CODE_CHARS

            chars = min(code_chars or TYPICAL_CHUNK_CHARS, LIST_CODE_CHARS)
            return chars / CHARS_PER_TOKEN / READ_TOKENS_PER_S[m] + SECONDS_EVIDENCE_LISTS[m]
        return SECONDS_PER_JUDGEMENT[m] * self.validator_top_k

    def validation_work(self) -> str:
        """What one alternative's validation does, in words (what :meth:`judge_seconds` estimates)."""
        if self.accept_policy == "calibrated":
            return (f"the accept model decides on the top {self.validator_top_k} candidates, then "
                    f"{self.validator_model} reads the lines that show the chunk's facts and writes each accepted "
                    "record's evidence list")
        return f"{self.validator_model} judges the top {self.validator_top_k} candidates"

    def rerank_count(self, union: int) -> int:
        """How many of a union's ``union`` candidates F's reranker scores: the learned ranker reads features the
        trace already has and scores them all; the model rerankers stop at rerank_top_n."""
        return union if self.reranker == "learned" else min(self.rerank_top_n, union)

    def rerank_seconds(self) -> float:
        return SECONDS_PER_RERANK_DOC[self.reranker] * self.rerank_top_n if self.reranks else 0.0

    def estimate_seconds(self, n_chunks: int = 1, code_chars: int | None = None) -> float:
        per = SECONDS_FAST_PHASE + self.rerank_seconds() + self.judge_seconds(code_chars) * len(self.alternatives)
        return per * n_chunks
