"""The validate stage under policy "calibrated": the accept model decides, Qwen only where it can change that.

For every candidate in scope the free features give p0. When the accept model has no
LLM feature (Qwen's margin did not improve it on the tune sets), p0 is the decision for
every candidate. Otherwise, below the model's band Qwen cannot change the decision (on
the training data no Qwen answer moved such a candidate across the threshold): the
record is rejected without Qwen, and the row says so; above it Qwen is asked, once per
(chunk, record) and once per record for an empty chunk (both cached), and the full model
gives p. A record is accepted when p reaches the threshold and a fact is shared, or, for
Godot 3 code, when it is a 3 → 4 rename whose pattern the code uses — with Qwen's
evidence list, under its grammar and checked literally, for every accept.
Candidates are judged in phases so that Qwen's prompt prefix is reused back to back.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.accept import AcceptModel, free_features, page_rows, rank_scores
from pipeline.evidence import Evidence, collect
from pipeline.features import ChunkFacts, other_dimension
from pipeline.kb.migrating import SOURCE as MIGRATING
from pipeline.models.base import Cancelled
from pipeline.records import AnyRecord, ApiMapping
from pipeline.stages.results import Check, ValidateResult, note_parts
from pipeline.stages.scope import UsedClasses, used_class
from pipeline.trace import (
    ASKED,
    LIST_CANCELLED,
    LIST_EMPTY,
    LIST_PENDING,
    LISTED,
    UNAVAILABLE,
    WITHOUT_QWEN,
    ChunkInfo,
    Contribution,
    FinalItem,
)

if TYPE_CHECKING:
    from pipeline.models.validator import Judgement
    from pipeline.stages.validate import Stats, Validate

SHOWN = 8  # contributions kept per row, largest first


def rename_rule(record: AnyRecord, ev: Evidence, facts: ChunkFacts) -> str | None:
    """Why a Godot 3 → 4 rename mapping is accepted whatever its p: the Godot 3 code uses its old spelling.

    Its ``source_pattern`` matching the code is the direct evidence the validator asks for, by definition;
    the accept model saw two such rows on the tune half, too few to weigh them (bench/NOTES.md)."""
    if not (facts.godot3 and isinstance(record, ApiMapping) and record.source == MIGRATING):
        return None
    use = next((i.text for i in ev.items if i.field == "source_pattern"), None)
    return f"accepted by the rename rule: the Godot 3 code uses `{use}`, which Godot 4 renamed" if use else None


def class_rule(record: AnyRecord, ev: Evidence, code: str, used: UsedClasses | None) -> str | None:
    """Why a class-reference record is accepted whatever its p (``Settings.class_accepts``): the code uses the
    class (pipeline/stages/classuse.py), and the record shares a string or API with the code."""
    found = used_class(record, code, used) if used else None
    if found is None or not ev.items:
        return None
    return f"accepted by the class-use rule: the code uses {found[0]} (`{found[1]}`)"


def dimension_veto(record: AnyRecord, x: dict[str, float]) -> str | None:
    """Why a docs section of the other dimension (a 3D page for 2D code, or back) is rejected whatever its p.

    The rule policies veto a 2D/3D conflict the evidence names; p only weighs the page's dimension, and a 3D
    tutorial that shares a spawner's calls can outweigh it (the rule: ``features.other_dimension``).
    """
    if other_dimension(record, x.get("dimension_agrees", 0.0)):
        return "p reaches the threshold, but the page is about the other dimension (2D vs 3D)"
    return None


@dataclass
class _Pending:
    n: int
    item: FinalItem
    record: AnyRecord
    ev: Evidence
    free: dict[str, float]
    judgement: Judgement | None = None
    cached: bool = False
    empty: float | None = None


def _contributions(x: dict[str, float], parts: dict[str, float]) -> tuple[Contribution, ...]:
    top = sorted(parts, key=lambda n: -abs(parts[n]))[:SHOWN]
    return tuple(Contribution(feature=n, value=round(x[n], 4), contribution=round(parts[n], 4)) for n in top)


@dataclass
class Calibrated:
    model: AcceptModel
    facts: ChunkFacts  # the chunk's classes and dimension (pipeline.features)

    def run(self, stage: Validate, chunk: ChunkInfo, final: list[FinalItem],
            progress: Callable[[int, int, str], None] | None, cancelled: Callable[[], bool] | None,
            on_decided: Callable[[ValidateResult], None] | None = None) -> ValidateResult:
        """``on_decided`` gets the decisions before Qwen writes the accepted records' evidence lists (most of a
        cold run's time), so a page can show them while it waits; not called when every list is cached."""
        from pipeline.stages.validate import Stats, decided

        t0 = time.perf_counter()
        stats = Stats()
        within = stage.in_scope(chunk, final)
        scaled = rank_scores([it.score for it in final], stage.top_k)
        same_page = page_rows([it.doc_path for it in final], stage.top_k)
        checks: dict[int, Check] = {}  # by position in ``final``
        pending: list[_Pending] = []
        for n, item in enumerate(final):
            if not within.judged[n]:
                continue
            record = stage.store.get(item.record_id)
            ev = collect(chunk.text, record, weight=stage.weight)
            rarity = max((stage.weight(i.text) for i in ev.items), default=0.0) if stage.weight else 0.0
            # rank is clipped to the top k the model was fitted on: a label judged past it (scope) would
            # otherwise sit far outside the fitted range (rank 40 against 1-8)
            rank = min(item.rank, stage.top_k) if stage.top_k else item.rank
            x0 = free_features(record, ev, self.facts, rank, scaled[n], rarity, chunk.text,
                               same_page=same_page[n])
            p0, parts = self.model.free.p(x0)
            rule = rename_rule(record, ev, self.facts) or (
                None if dimension_veto(record, x0) else class_rule(record, ev, chunk.text, stage.classes))
            if rule:  # no Qwen verdict needed; Qwen still lists the evidence below
                checks[n] = Check(item, ev, True, "not_run", True, p=p0, p_threshold=self.model.threshold,
                                  contributions=_contributions(x0, parts), asked_qwen=False, how=WITHOUT_QWEN,
                                  notes=note_parts(within.notes[n]), rule=rule)
            elif p0 < self.model.ask_above or stage.validator is None or not self.model.uses_llm:
                final_p0 = stage.validator is None or not self.model.uses_llm  # else: below the band, rejected
                accepted = final_p0 and p0 >= self.model.threshold and bool(ev.items)
                veto = dimension_veto(record, x0) if accepted else None
                checks[n] = Check(item, ev, True, "not_run", accepted and not veto, p=p0,
                                  p_threshold=self.model.threshold, contributions=_contributions(x0, parts),
                                  asked_qwen=False, how=WITHOUT_QWEN if stage.validator is not None else UNAVAILABLE,
                                  notes=note_parts(within.notes[n], veto or ""))
            else:
                pending.append(_Pending(n, item, record, ev, x0))
        self._ask(stage, chunk, pending, stats, progress, cancelled)
        for p in pending:
            checks[p.n] = self._decide(stage, chunk, p, stats)
        unjudged = {n: Check(it, collect(chunk.text, stage.store.get(it.record_id), weight=stage.weight), False,
                             "not_run", None, notes=note_parts(within.notes[n]))
                    for n, it in enumerate(final) if n not in checks}

        def result(now: dict[int, Check]) -> ValidateResult:
            ordered = [now[n] if n in now else unjudged[n] for n in range(len(final))]
            return ValidateResult(ordered, [decided(c) for c in ordered], (time.perf_counter() - t0) * 1000,
                                  stats.judged, stats.cached, stats.prompt_tokens, stats.reused_tokens,
                                  self.model.name, within.n - len(pending), lists=stats.lists,
                                  lists_cached=stats.lists_cached, lists_ms=stats.lists_ms)

        todo = self._to_list(stage, checks)
        if on_decided is not None and any(not stage.evidence_in_cache(chunk.text, stage.store.get(
                checks[n].item.record_id)) for n in todo):  # Qwen has lists to write: show the decisions first
            on_decided(result({**checks, **{n: dataclasses.replace(checks[n], listing=LIST_PENDING)
                                            for n in todo}}))
        self._evidence(stage, chunk, checks, todo, stats, progress, cancelled)
        return result(checks)

    def _ask(self, stage: Validate, chunk: ChunkInfo, pending: list[_Pending], stats: Stats,
             progress: Callable[[int, int, str], None] | None, cancelled: Callable[[], bool] | None) -> None:
        """Qwen on every pending record for this chunk, then on each for an empty chunk (two prefixes)."""
        v = stage.validator
        assert v is not None
        total = 2 * len(pending)
        for i, p in enumerate(pending):
            if progress:
                progress(i, total, p.item.source or p.item.record_id)
            p.judgement, p.cached = stage.judge_cached(v, chunk.text, p.record, p.ev, stats, cancelled)
        for i, p in enumerate(pending):
            if progress:
                progress(len(pending) + i, total, f"{p.item.source or p.item.record_id} (empty chunk)")
            empty_ev = collect("", p.record)
            j, _ = stage.judge_cached(v, "", p.record, empty_ev, stats, cancelled)
            p.empty = j.margin
        if progress and total:
            progress(total, total, "")

    @staticmethod
    def _to_list(stage: Validate, checks: dict[int, Check]) -> list[int]:
        """The records accepted without Qwen's verdict, whose evidence lists Qwen is to write."""
        if stage.validator is None:
            return []
        return [n for n, c in sorted(checks.items()) if c.accepted and c.judgement is None]

    @staticmethod
    def _evidence(stage: Validate, chunk: ChunkInfo, checks: dict[int, Check], todo: list[int], stats: Stats,
                  progress: Callable[[int, int, str], None] | None, cancelled: Callable[[], bool] | None = None
                  ) -> None:
        """Qwen's evidence list for the records ``todo`` (one prefix, decoded side by side)."""
        from pipeline.models.validator import Judgement

        if not todo:
            return
        if progress:
            progress(0, len(todo), f"evidence lists of {len(todo)} accepted record(s), side by side")
        pairs = [(stage.store.get(checks[n].item.record_id), checks[n].evidence) for n in todo]
        try:
            lists = stage.evidence_cached_many(chunk.text, pairs, stats, cancelled)
        except Cancelled:  # the decisions stand; the rows say why their lists are missing
            for n in todo:
                checks[n] = dataclasses.replace(checks[n], listing=LIST_CANCELLED)
            return
        for n, (items, cached) in zip(todo, lists, strict=True):
            c = checks[n]
            # an empty list is a failed call or no item Qwen would vouch for: the shared facts stand in
            said = LISTED if items else LIST_EMPTY
            checks[n] = dataclasses.replace(c, judgement=Judgement("not_run", evidence=items), cached=cached,
                                            listing=said)
        if progress:
            progress(len(todo), len(todo), "")

    def _decide(self, stage: Validate, chunk: ChunkInfo, p: _Pending, stats: Stats) -> Check:
        from pipeline.stages.validate import disagreement

        j = p.judgement
        assert j is not None
        if j.margin is None or p.empty is None:  # timeout, error, cancelled: no probability
            return Check(p.item, p.ev, True, j.verdict, None if j.verdict == "cancelled" else False, j, p.cached,
                         asked_qwen=True, how=ASKED, notes=(j.message or f"Qwen: {j.verdict}",))
        x = {**p.free, "margin": j.margin, "pmi_margin": j.margin - p.empty}
        prob, parts = self.model.full.p(x)
        accepted = prob >= self.model.threshold and bool(p.ev.items)
        veto = dimension_veto(p.record, p.free) if accepted else None
        accepted = accepted and not veto
        if accepted and not j.evidence and stage.validator is not None:  # Qwen's list, for every accept
            t0 = time.perf_counter()
            j.evidence = stage.validator.evidence_for(chunk.text, p.record, p.ev, timeout_s=stage.timeout_s)
            stats.lists_ms += (time.perf_counter() - t0) * 1000
            stats.lists += 1
        note = ("" if accepted or prob < self.model.threshold
                else veto or "p reaches the threshold, but no fact is shared")
        return Check(p.item, p.ev, True, j.verdict, accepted, j, p.cached, disagreement(j, p.ev), prob,
                     self.model.threshold, _contributions(x, parts), True, ASKED, note_parts(note))
