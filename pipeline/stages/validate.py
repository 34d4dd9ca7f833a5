"""Stage 4: the direct-evidence validator over the top-k of a ranking.

Deterministic evidence is always computed; the Qwen judge runs on the top-k
(default 8). Verdicts are cached on disk by (model, prompt version, code hash,
record hash), so D and F never judge the same pair twice. The accept policy is
recorded in the trace and switchable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pipeline import config
from pipeline.evidence import collect, sanitize_for_model
from pipeline.kb.store import KBStore
from pipeline.models.validator import Judgement, QwenValidator
from pipeline.records import record_line
from pipeline.trace import ChunkInfo, FinalItem, StageTrace

log = logging.getLogger(__name__)

POLICIES = {
    "qwen_and_evidence": "accept when Qwen says yes, at least one evidence item is verified in both texts, "
                         "and the record is not of the other dimension (2D vs 3D)",
    "qwen_only": "accept when Qwen says yes",
    "evidence_only": "accept when deterministic matching finds at least one shared string/API/pattern (no model)",
}
ProgressFn = Callable[[int, int, str], None]


class VerdictCache:
    def __init__(self, folder: Path | None = None) -> None:
        import diskcache

        self._cache = diskcache.Cache(str(folder or config.cache_dir() / "verdicts"))

    @staticmethod
    def key(validator: QwenValidator, code: str, record_json: str) -> str:
        # The threshold is not part of the key: cached margins are re-decided under new settings.
        parts = [validator.key, validator.model.path.name, validator.prompt_version,
                 hashlib.sha256(sanitize_for_model(code).encode()).hexdigest(),
                 hashlib.sha256(record_json.encode()).hexdigest()]
        return "|".join(parts)

    def get(self, key: str) -> Judgement | None:
        """A damaged or ill-typed entry is a miss, never a wrong verdict."""
        try:
            raw = self._cache.get(key)
            if not isinstance(raw, str):
                return None
            j = Judgement(**json.loads(raw))
        except Exception as exc:
            log.warning("verdict cache entry unusable (%s); judging again", exc)
            return None
        ok = (j.verdict in ("yes", "no") and isinstance(j.margin, int | float) and not isinstance(j.margin, bool)
              and isinstance(j.evidence, list) and all(isinstance(e, dict) for e in j.evidence))
        if not ok:
            log.warning("verdict cache entry %s has the wrong shape; judging again", key[:40])
        return j if ok else None

    def set(self, key: str, j: Judgement) -> None:
        if j.verdict in ("yes", "no"):  # timeouts and errors are retried next time
            self._cache.set(key, json.dumps(j.to_dict()))


def decide(policy: str, j: Judgement | None, n_det: int, conflicts: list[str] | None = None) -> bool:
    if policy == "evidence_only":
        return n_det > 0 and not conflicts
    if j is None or j.verdict != "yes":
        return False
    if policy == "qwen_only":
        return True
    # A 2D record is no direct evidence for 3D code (and vice versa), whatever the model says.
    if conflicts:
        return False
    return any(e.get("verified") for e in j.evidence) or (n_det > 0 and not j.evidence)


class Validate:
    name = "validate"

    def __init__(self, store: KBStore, validator: QwenValidator | None, *, top_k: int = 8,
                 policy: str = "qwen_and_evidence", timeout_s: float = 30.0,
                 cache: VerdictCache | None = None, unavailable: str = "",
                 weight: Callable[[str], float] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown accept policy {policy!r}; choose one of {', '.join(POLICIES)}")
        self.store, self.validator, self.top_k, self.policy = store, validator, top_k, policy
        self.timeout_s, self.cache, self.unavailable = timeout_s, cache, unavailable
        self.weight = weight

    def run(self, chunk: ChunkInfo, final: list[FinalItem], progress: ProgressFn | None = None,
            cancelled: Callable[[], bool] | None = None) -> tuple[list[FinalItem], StageTrace]:
        t0 = time.perf_counter()
        rows: list[dict[str, object]] = []
        out: list[FinalItem] = []
        todo = final[: self.top_k]
        stats = {"judged": 0, "cached": 0, "prompt_tokens": 0, "reused_tokens": 0}
        for n, item in enumerate(final):
            record = self.store.get(item.record_id)
            ev = collect(chunk.text, record, weight=self.weight)
            row: dict[str, object] = {"rank": item.rank, "record_id": item.record_id, "source": item.source,
                                      "section": item.section, "kind": item.kind,
                                      "deterministic": [{"n": e.n, "text": e.text, "field": e.field}
                                                        for e in ev.items],
                                      "only_in_code": ev.only_in_code, "only_in_record": ev.only_in_record,
                                      "conflicts": ev.conflicts, "coverage": ev.coverage}
            j: Judgement | None = None
            in_scope = n < self.top_k  # by position: equal items further down are not in scope
            if in_scope and self.policy != "evidence_only" and self.validator is not None:
                if progress:
                    progress(n, len(todo), item.source or item.record_id)
                key = VerdictCache.key(self.validator, chunk.text, record_line(record)) if self.cache else ""
                j = self.cache.get(key) if self.cache else None
                if j is not None and j.margin is not None:
                    stats["cached"] += 1
                    row["cached"] = True
                    j.verdict, j.score = self.validator.verdict_for(j.margin, ev)
                    j.threshold, j.coverage = self.validator.threshold, ev.coverage
                else:
                    try:
                        j = self.validator.judge(chunk.text, record, ev, timeout_s=self.timeout_s,
                                                 cancelled=cancelled)
                    except Exception as exc:
                        log.warning("validator failed on %s: %s", item.record_id, exc)
                        j = Judgement("error", message=str(exc))
                    stats["judged"] += 1
                    stats["prompt_tokens"] += j.prompt_tokens - j.reused_tokens
                    stats["reused_tokens"] += j.reused_tokens
                    if self.cache:
                        self.cache.set(key, j)
                row.update(j.to_dict())
            accepted = decide(self.policy, j, len(ev.items), ev.conflicts) if in_scope and (
                j is not None or self.policy == "evidence_only") else (False if in_scope else None)
            verdict = j.verdict if j else ("not_run" if self.policy != "evidence_only" or not in_scope
                                           else ("yes" if ev.items else "no"))
            evidence = [str(e["text"]) for e in (j.evidence if j else []) if e.get("verified")] or (
                ev.texts[:6] if accepted else [])
            row.update(accepted=accepted, verdict=verdict,
                       disagreement=_disagreement(j, len(ev.items), ev.conflicts) if j else None)
            rows.append(row)
            out.append(item.model_copy(update={"verdict": verdict if verdict in (
                "yes", "no", "not_run", "error", "timeout") else "error", "accepted": accepted,
                "evidence": evidence}))
        status = "ok" if self.validator is not None or self.policy == "evidence_only" else "error"
        trace = StageTrace(
            name="validate", status=status, message=self.unavailable if status == "error" else "",
            ms=(time.perf_counter() - t0) * 1000,
            params={"top_k": self.top_k, "policy": self.policy, "policy_text": POLICIES[self.policy],
                    "model": self.validator.name if self.validator else None,
                    "threshold": self.validator.threshold if self.validator else None,
                    "prompt_version": self.validator.prompt_version if self.validator else None,
                    "timeout_s": self.timeout_s},
            candidates=rows, explain=stats)
        return out, trace


def _disagreement(j: Judgement, n_det: int, conflicts: list[str] | None = None) -> str | None:
    if j.verdict == "yes" and conflicts:
        return f"Qwen says yes, but {conflicts[0]}"
    if j.verdict == "yes" and n_det == 0:
        return "Qwen says yes, but no shared string/API/pattern was found"
    if j.verdict == "no" and n_det >= 3:
        return f"Qwen says no, though {n_det} shared strings/APIs were found"
    if j.verdict == "yes" and j.evidence and not any(e.get("verified") for e in j.evidence):
        return "Qwen says yes, but none of its evidence is in both texts"
    return None
