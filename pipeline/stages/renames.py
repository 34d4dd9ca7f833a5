"""Stage 1c: for Godot 3 code, the Godot 3 → 4 rename mappings whose pattern the code uses.

Neither leg finds them reliably: BM25 drowns `get_tree().change_scene(` in common terms,
and both embedders were trained on (or for) Godot 4 text. Yet a rename mapping's
``source_pattern`` is a regex that either matches the code or does not: about 2 ms for
all 168 (the code stripped of comments once). So for Godot 3 code (``ChunkFacts.legacy``) the matches
join the union as a third provenance, ``rule``; stages/legacy.py then puts them first,
and the validator accepts them on that match (stages/calibrated.py, ``rename_rule``).
Godot 4 code gets no rule hits. Measured on the dev set's tune half (bench/NOTES.md,
"Godot 3 renames join the union").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

from pipeline.evidence import pattern_in
from pipeline.features import ChunkFacts
from pipeline.gdlex import strip_comments
from pipeline.kb.migrating import SOURCE
from pipeline.kb.store import KBStore
from pipeline.records import ApiMapping
from pipeline.stages.results import RuleHit, RuleResult
from pipeline.trace import RecordRef


@dataclass
class Renames:
    store: KBStore
    name = "renames"

    @cached_property
    def mappings(self) -> list[ApiMapping]:
        return [r for r in self.store.records if isinstance(r, ApiMapping) and r.source == SOURCE]

    def run(self, code: str, facts: ChunkFacts) -> RuleResult:
        """The renames ``code`` uses, in KB order; none unless the code is Godot 3 (GDScript, not another language)."""
        t0 = time.perf_counter()
        hits: list[RuleHit] = []
        if facts.godot3:
            bare = strip_comments(code)
            for record in self.mappings:
                use = pattern_in(bare, record) if record.source_pattern else None
                if use is not None:
                    hits.append(RuleHit(RecordRef.of(record), len(hits) + 1, use))
        return RuleResult(hits, (time.perf_counter() - t0) * 1000)
