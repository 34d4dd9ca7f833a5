"""Stage 4: the direct-evidence validator over the top-k of a ranking.

Deterministic evidence is always computed; the judge runs on the top-k
(default 8). Verdicts are cached on disk by (model, prompt version, code hash,
record hash), so D and F never judge the same pair twice. The accept policy is
recorded in the trace and switchable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline import config
from pipeline.evidence import MODEL_CODE_CHARS, Evidence, collect, for_lists, for_model, sanitize_for_model
from pipeline.kb.store import KBStore
from pipeline.models.base import Cancelled, Validator
from pipeline.models.validator import Judgement
from pipeline.records import AnyRecord, record_line
from pipeline.settings import POLICIES, AcceptPolicy
from pipeline.stages import scope
from pipeline.stages.calibrated import Calibrated
from pipeline.stages.results import Check, ValidateResult, note_parts
from pipeline.trace import ChunkInfo, EvidenceRow, FactRow, FinalItem, ValidateRow, ValidateTrace

log = logging.getLogger(__name__)

JudgeProgress = Callable[[int, int, str], None]  # (done, total, what is being judged)


class VerdictCache:
    def __init__(self, folder: Path | None = None) -> None:
        import diskcache

        self._cache = diskcache.Cache(str(folder or config.cache_dir() / "verdicts"))

    @staticmethod
    def key(validator: Validator, code: str, record_json: str) -> str:
        # The threshold is not part of the key: cached margins are re-decided under new settings.
        return "|".join([validator.fingerprint, hashlib.sha256(sanitize_for_model(code).encode()).hexdigest(),
                         hashlib.sha256(record_json.encode()).hexdigest()])

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

    def get_evidence(self, key: str) -> list[dict[str, object]] | None:
        """Qwen's evidence list for a record accepted without its verdict (policy "calibrated")."""
        try:
            raw = self._cache.get("evidence|" + key)
            items = json.loads(raw) if isinstance(raw, str) else None
        except Exception as exc:
            log.warning("evidence cache entry unusable (%s); asking again", exc)
            return None
        ok = isinstance(items, list) and all(isinstance(e, dict) for e in items)
        return items if ok else None

    def set_evidence(self, key: str, items: list[dict[str, object]]) -> None:
        self._cache.set("evidence|" + key, json.dumps(items))

    @staticmethod
    def _primed_key(validator: Validator, code: str) -> str:
        return f"primed|{validator.fingerprint}|{validator.evidence_version}|" + hashlib.sha256(
            sanitize_for_model(code).encode()).hexdigest()

    def primed(self, validator: Validator, code: str) -> bool:
        """Whether a validate stage already ran Qwen through this chunk (its answers are then cached)."""
        try:
            return self._cache.get(self._primed_key(validator, code)) is not None
        except Exception:
            return False

    def mark_primed(self, validator: Validator, code: str) -> None:
        self._cache.set(self._primed_key(validator, code), 1)


def decide(policy: AcceptPolicy, j: Judgement | None, ev: Evidence) -> bool:
    if policy == "evidence_only":
        return bool(ev.items) and not ev.conflicts
    if j is None or j.verdict != "yes":
        return False
    if policy == "qwen_only":
        return True
    # A 2D record is no direct evidence for 3D code (and vice versa), whatever the model says.
    if ev.conflicts:
        return False
    return any(e.get("verified") for e in j.evidence) or (bool(ev.items) and not j.evidence)


def disagreement(j: Judgement, ev: Evidence) -> str | None:
    n_det = len(ev.items)
    if j.verdict == "yes" and ev.conflicts:
        return f"Qwen says yes, but {ev.conflicts[0]}"
    if j.verdict == "yes" and n_det == 0:
        return "Qwen says yes, but no shared string/API/pattern was found"
    if j.verdict == "no" and n_det >= 3:
        return f"Qwen says no, though {n_det} shared strings/APIs were found"
    if j.verdict == "yes" and j.evidence and not any(e.get("verified") for e in j.evidence):
        return "Qwen says yes, but none of its evidence is in both texts"
    return None


@dataclass
class Stats:
    judged: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    lists: int = 0  # evidence lists Qwen was asked for now (after the decision; a failed call counts too)
    lists_cached: int = 0
    lists_ms: float = 0.0


class Validate:
    name = "validate"

    def __init__(self, store: KBStore, validator: Validator | None, *, top_k: int = 8,
                 label_fit: float = 2.0, policy: AcceptPolicy = "qwen_and_evidence", timeout_s: float = 30.0,
                 cache: VerdictCache | None = None, unavailable: str = "",
                 weight: Callable[[str], float] | None = None, accept: Calibrated | None = None,
                 classes: scope.UsedClasses | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown accept policy {policy!r}; choose one of {', '.join(POLICIES)}")
        if policy == "calibrated" and accept is None:
            raise ValueError("the calibrated policy needs its accept model (the engine falls back to the rules)")
        self.store, self.validator, self.top_k, self.policy = store, validator, top_k, policy
        self.label_fit = label_fit  # labels that fit the code are judged past top_k (pipeline/stages/scope.py)
        self.timeout_s, self.cache, self.unavailable = timeout_s, cache, unavailable
        self.weight, self.accept = weight, accept
        # class -> the code's use of it (the class-use rule): their class records are judged wherever they rank,
        # and the calibrated policy accepts them on that evidence (Settings.class_accepts; None = off)
        self.classes = classes

    def run(self, chunk: ChunkInfo, final: list[FinalItem], progress: JudgeProgress | None = None,
            cancelled: Callable[[], bool] | None = None,
            on_decided: Callable[[ValidateResult], None] | None = None) -> ValidateResult:
        """``on_decided``: under the accept model, the decisions before Qwen writes their evidence lists."""
        result = self._run(chunk, final, progress, cancelled, on_decided)
        # sanitizing never lengthens code but by its closing newline: a chunk under the bound is not lexed again
        cut = for_model(chunk.text)[1] if self.validator is not None and len(chunk.text) >= MODEL_CODE_CHARS else 0
        list_cut = for_lists(chunk.text)[1] if result.lists else 0
        return dataclasses.replace(result, code_cut=cut, list_cut=list_cut) if cut or list_cut else result

    def _run(self, chunk: ChunkInfo, final: list[FinalItem], progress: JudgeProgress | None,
             cancelled: Callable[[], bool] | None,
             on_decided: Callable[[ValidateResult], None] | None) -> ValidateResult:
        if self.policy == "calibrated" and self.accept is not None:
            return self.accept.run(self, chunk, final, progress, cancelled, on_decided)
        t0 = time.perf_counter()
        stats = Stats()
        within = self.in_scope(chunk, final)
        todo, done = within.n, 0
        checks = []
        for item, judged, note in zip(final, within.judged, within.notes, strict=True):
            record = self.store.get(item.record_id)
            ev = collect(chunk.text, record, weight=self.weight)
            if not judged:  # past the top k (by position: equal items further down are not in scope)
                checks.append(Check(item, ev, False, "not_run", None, notes=note_parts(note)))
                continue
            if progress:
                progress(done, todo, item.source or item.record_id)
            done += 1
            c = self.check(chunk, item, record, ev, stats, cancelled)
            checks.append(dataclasses.replace(c, notes=(*note_parts(note), *c.notes)))
        if progress and todo:
            progress(todo, todo, "")
        out = [decided(c) for c in checks]
        return ValidateResult(checks, out, (time.perf_counter() - t0) * 1000, stats.judged, stats.cached,
                              stats.prompt_tokens, stats.reused_tokens)

    def in_scope(self, chunk: ChunkInfo, final: list[FinalItem]) -> scope.Scope:
        return scope.run(self.store, chunk.text, final, self.top_k, self.label_fit, self.classes)

    def check(self, chunk: ChunkInfo, item: FinalItem, record: AnyRecord, ev: Evidence, stats: Stats,
              cancelled: Callable[[], bool] | None = None) -> Check:
        """One candidate in scope: the policy decides whether (and how) the judge is asked."""
        if self.policy == "evidence_only":
            return Check(item, ev, True, "yes" if ev.items else "no", decide(self.policy, None, ev))
        early = self.decide_without_model(item, ev)
        if early is not None:
            return early
        if self.validator is None:
            return Check(item, ev, True, "not_run", False)
        if cancelled and cancelled():
            return Check(item, ev, True, "cancelled", None)
        j, cached = self._judge(self.validator, chunk, record, ev, stats, cancelled)
        accepted = None if j.verdict == "cancelled" else decide(self.policy, j, ev)
        return Check(item, ev, True, j.verdict, accepted, j, cached, disagreement(j, ev))

    def decide_without_model(self, item: FinalItem, ev: Evidence) -> Check | None:
        """A decision the judge could not change, or None to ask it (the default: always ask).

        The extension point for an accept model that knows when Qwen cannot flip a candidate.
        """
        return None

    def judge_cached(self, validator: Validator, code: str, record: AnyRecord, ev: Evidence, stats: Stats,
                     cancelled: Callable[[], bool] | None) -> tuple[Judgement, bool]:
        return self._judge(validator, ChunkInfo(text=code, sha256="", n_bytes=0, n_lines=0, language="gdscript"),
                           record, ev, stats, cancelled)

    def _evidence_key(self, v: Validator, code: str, record: AnyRecord) -> str:
        return f"{v.evidence_version}|" + VerdictCache.key(v, code, record_line(record)) if self.cache else ""

    def evidence_in_cache(self, code: str, record: AnyRecord) -> bool:
        """Whether Qwen's evidence list for this pair is cached (then asking for it takes no time)."""
        v = self.validator
        return bool(v and self.cache and self.cache.get_evidence(self._evidence_key(v, code, record)) is not None)

    def evidence_cached_many(self, code: str, pairs: list[tuple[AnyRecord, Evidence]], stats: Stats,
                             cancelled: Callable[[], bool] | None = None
                             ) -> list[tuple[list[dict[str, object]], bool]]:
        """Qwen's evidence lists under its grammar, each item checked literally, cached like verdicts.

        For several records of one chunk: the cache misses are asked in one pass (decoded side by side).
        ``stats`` counts the lists asked for and read, as ``_judge`` counts verdicts.
        """
        v = self.validator
        assert v is not None
        keys = [self._evidence_key(v, code, r) for r, _ in pairs]
        hits = [self.cache.get_evidence(k) if self.cache else None for k in keys]
        out: list[tuple[list[dict[str, object]], bool]] = [(h, True) if h is not None else ([], False)
                                                            for h in hits]
        miss = [n for n, h in enumerate(hits) if h is None]
        stats.lists_cached += len(pairs) - len(miss)
        stats.lists += len(miss)  # a failed call counts too: its rows say the list came back empty
        t0 = time.perf_counter()
        try:
            lists = v.evidence_many(code, [pairs[n] for n in miss], timeout_s=self.timeout_s, cancelled=cancelled)
        except Cancelled:
            raise
        except Exception as exc:
            log.warning("evidence lists failed: %s", exc)
            return out
        finally:
            stats.lists_ms += (time.perf_counter() - t0) * 1000
        for n, items in zip(miss, lists, strict=True):
            out[n] = (items, False)
            if self.cache:
                self.cache.set_evidence(keys[n], items)
        return out

    def _judge(self, validator: Validator, chunk: ChunkInfo, record: AnyRecord, ev: Evidence, stats: Stats,
               cancelled: Callable[[], bool] | None) -> tuple[Judgement, bool]:
        key = VerdictCache.key(validator, chunk.text, record_line(record)) if self.cache else ""
        j = self.cache.get(key) if self.cache else None
        if j is not None and j.margin is not None:
            stats.cached += 1
            j.verdict, j.score = validator.verdict_for(j.margin, ev)
            j.threshold, j.coverage = validator.threshold, ev.coverage
            return j, True
        try:
            j = validator.judge(chunk.text, record, ev, timeout_s=self.timeout_s, cancelled=cancelled)
        except Exception as exc:
            log.warning("validator failed on %s: %s", record.id, exc)
            j = Judgement("error", message=str(exc))
        stats.judged += 1
        stats.prompt_tokens += j.prompt_tokens - j.reused_tokens
        stats.reused_tokens += j.reused_tokens
        if self.cache:
            self.cache.set(key, j)
        return j, False

    def trace(self, result: ValidateResult) -> ValidateTrace:
        ok = self.validator is not None or self.policy == "evidence_only" or self.top_k == 0
        v = self.validator
        return ValidateTrace(
            status="ok" if ok else "error", ms=result.ms,
            message="; ".join(filter(None, [self.unavailable, (
                f"the chunk is long: Qwen is shown only its first {MODEL_CODE_CHARS:,} characters, not its last "
                f"{result.code_cut:,} lines (the evidence is still checked against all of it)")
                if result.code_cut else ""])),
            rows=[_row(c) for c in result.checks], top_k=self.top_k, label_fit=self.label_fit, policy=self.policy,
            policy_text=POLICIES[self.policy].description, model=v.name if v else None,
            threshold=v.threshold if v else None, prompt_version=v.prompt_version if v else None,
            timeout_s=self.timeout_s, judged=result.judged, cached=result.cached,
            prompt_tokens=result.prompt_tokens, reused_tokens=result.reused_tokens,
            accept_model=result.accept_model, skipped=result.skipped, class_accepts=self.classes is not None,
            lists=result.lists, lists_cached=result.lists_cached, lists_ms=round(result.lists_ms, 1),
            list_lines_left=result.list_cut, p_threshold=self.accept.model.threshold if self.accept else None)


def decided(c: Check) -> FinalItem:
    """The final item with the decision, its evidence, and (calibrated policy) p and why."""
    # a rule's accept says so first: its p may sit below the threshold
    why = [*([c.rule] if c.rule else []), *(f"{x.feature} {x.contribution:+.2f}" for x in c.contributions[:4])]
    return c.item.model_copy(update={"verdict": c.verdict, "accepted": c.accepted, "evidence": shown(c),
                                     "p": None if c.p is None else round(c.p, 4), "why": why})


def shown(c: Check) -> list[str]:
    """The evidence a final item carries: the judge's verified items, else the shared facts if accepted."""
    verified = [str(e["text"]) for e in (c.judgement.evidence if c.judgement else []) if e.get("verified")]
    return verified or (c.evidence.texts[:6] if c.accepted else [])


def _row(c: Check) -> ValidateRow:
    ev, j = c.evidence, c.judgement
    judged = {} if j is None else {
        "margin": j.margin, "judge_score": j.score, "threshold": j.threshold, "model_token": j.model_token,
        "evidence": [EvidenceRow(text=str(e.get("text", "")), field=str(e.get("field", "")),
                                 verified=bool(e.get("verified"))) for e in j.evidence],
        "raw": j.raw, "prompt_tokens": j.prompt_tokens, "reused_tokens": j.reused_tokens, "ms": j.ms,
        "message": j.message}
    return ValidateRow.of(
        c.item, rank=c.item.rank, facts=[FactRow(n=i.n, text=i.text, field=i.field) for i in ev.items],
        only_in_code=ev.only_in_code, only_in_record=ev.only_in_record, conflicts=ev.conflicts,
        coverage=ev.coverage, cached=c.cached, in_scope=c.in_scope, verdict=c.verdict, accepted=c.accepted,
        disagreement=c.disagreement, p=c.p, p_threshold=c.p_threshold, contributions=list(c.contributions),
        asked_qwen=c.asked_qwen, how=c.how, notes=list(c.notes), listing=c.listing, note=note_text(c),
        rule=c.rule, **judged)


def note_text(c: Check) -> str:
    """The decision in one line (the JSON, the HTML report): the way and p first, then the rule, notes, listing."""
    head = c.how + (f": p = {c.p:.2f}" if c.how and c.p is not None else "")
    return "; ".join(filter(None, [head, c.rule, *c.notes, c.listing]))
