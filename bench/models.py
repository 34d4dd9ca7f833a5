"""Model stages: validator per candidate (naive vs optimised), reranker per candidate, D and F end to end.

python -m bench.models  -> bench/results/models.json
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench.common import save
from pipeline.chunk import prepare_chunk
from pipeline.engine import Engine
from pipeline.evidence import collect
from pipeline.models.validator import QwenValidator
from pipeline.records import record_line
from pipeline.settings import AltName, Settings
from pipeline.stages.validate import Validate

REF = Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd"
NAIVE_SYSTEM = "You are a careful code reviewer for Godot 4 GDScript."


def naive_prompt(code: str, record_json: str) -> str:
    """The baseline: the whole record as JSON, free-form JSON answer, no shared prefix."""
    return (f"<|im_start|>system\n{NAIVE_SYSTEM}<|im_end|>\n<|im_start|>user\nRETRIEVED JSONL:\n{record_json}\n"
            f"SOURCE_CODE:\n{code}\nLook at SOURCE_CODE and the retrieved JSONL: is there a direct string / API "
            "call / pattern match inside the JSONL that corresponds to SOURCE_CODE? First decide yes or no. "
            'Answer as JSON {"verdict": "yes"|"no", "evidence": ["..."]}.<|im_end|>\n<|im_start|>assistant\n')


def main(n_naive: int = 3) -> dict[str, object]:
    engine = Engine.open()
    engine.dense(None)
    chunk = prepare_chunk(REF.read_bytes())
    s = Settings(alternatives=("D",), run_validator=False)
    final = engine.run(chunk, s).alternatives["D"].final
    qwen = engine.hub.qwen("qwen-1.5b")
    validator = QwenValidator(qwen, "qwen-1.5b")
    llm = qwen.llm
    out: dict[str, object] = {}

    naive = []
    for it in final[:n_naive]:
        rec = engine.store.get(it.record_id)
        prompt = naive_prompt(chunk.text, record_line(rec)[:6000])
        toks = qwen.tokenize(prompt)
        llm.reset()  # the naive baseline reuses nothing
        t0 = time.perf_counter()
        res = llm.create_completion(prompt=toks, max_tokens=80, temperature=0.0)
        naive.append({"ms": (time.perf_counter() - t0) * 1000, "prompt_tokens": len(toks),
                      "completion_tokens": res["usage"]["completion_tokens"]})

    stage = Validate(engine.store, validator, top_k=8, cache=None, weight=engine.term_weight)
    llm.reset()
    t0 = time.perf_counter()
    trace = stage.trace(stage.run(chunk, final))
    total = (time.perf_counter() - t0) * 1000
    rows = [r for r in trace.rows if r.ms]
    per = [r.ms for r in rows]
    evidence_ms = statistics.median(
        _time(lambda it=it: collect(chunk.text, engine.store.get(it.record_id), weight=engine.term_weight))
        for it in final[:8])
    out["validator"] = {
        "model": validator.name,
        "naive_per_candidate_ms": statistics.median(x["ms"] for x in naive),
        "naive_samples": naive,
        "optimised_per_candidate_ms": statistics.median(per),
        "optimised_first_ms": per[0], "optimised_rest_median_ms": statistics.median(per[1:]),
        "optimised_total_top8_ms": total,
        "new_prompt_tokens_median": statistics.median(r.prompt_tokens - r.reused_tokens for r in rows),
        "reused_tokens_median": statistics.median(r.reused_tokens for r in rows),
        "ratio_naive_over_optimised": statistics.median(x["ms"] for x in naive) / statistics.median(per),
        "deterministic_evidence_ms": evidence_ms,
    }

    import tempfile

    from pipeline.models.reranker import QwenYesNoReranker

    cold = Path(tempfile.mkdtemp(prefix="bench-rerank-"))  # an empty score cache: time the model, not the disk
    reranker = QwenYesNoReranker(engine.hub.qwen("qwen-0.5b"), "qwen-0.5b", cache_folder=cold)
    docs = [f"doc {i}" for i in range(2)]
    reranker.score(chunk.text, docs)  # load + prefix
    u = engine.run(chunk, Settings(alternatives=("F",), run_validator=False, reranker="none"))
    from pipeline.kb.views import embed_text

    union = u.alternatives["F"].union
    ids = [r.record_id for r in (union.rows if union else [])[:30]]
    t0 = time.perf_counter()
    reranker.score(chunk.text, [embed_text(engine.store.get(i)) for i in ids])
    rr = (time.perf_counter() - t0) * 1000
    out["reranker"] = {"name": reranker.name, "candidates": len(ids), "total_ms": rr, "per_candidate_ms": rr / len(ids)}

    from pipeline.stages.validate import VerdictCache

    engine.verdicts = VerdictCache(Path(tempfile.mkdtemp(prefix="bench-verdicts-")))  # a cold cache
    e2e = {}
    runs: list[tuple[str, tuple[AltName, ...]]] = [
        ("D cold verdict cache", ("D",)), ("F after D (reuses verdicts)", ("F",)), ("both, cached", ("D", "F"))]
    for label, alts in runs:
        t0 = time.perf_counter()
        tr = engine.run(chunk, Settings(alternatives=alts))
        e2e[label] = {"ms": (time.perf_counter() - t0) * 1000,
                      "stages": {a: {st.name: round(st.ms) for st in t.stages} for a, t in tr.alternatives.items()},
                      "accepted": {a: [i.record_id for i in t.final if i.accepted] for a, t in tr.alternatives.items()}}
    out["end_to_end"] = e2e
    save("models", out)
    return out


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


if __name__ == "__main__":
    print(json.dumps(main(), indent=1, default=str))
