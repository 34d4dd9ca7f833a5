"""After D's fusion and F's reranker: for Godot 3 code, the 3 → 4 renames it uses go first.

F's learned ranker was trained on the docs' own code, which is Godot 4: it never saw a
`KinematicBody2D`, a `yield(` or an `.instance()`, and it ranks the migration page low
for the code that needs it most. When the code is Godot 3 (``ChunkFacts.legacy``), the
rename mappings of ``upgrading_to_godot_4.rst`` whose pattern the code matches move to
the top, in their order; everything else keeps its order below them. Only mappings that
are already in the ranking move: no record is added. Measured on the dev set's tune
half (bench/NOTES.md, "Godot 3 renames first").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.evidence import pattern_use
from pipeline.features import ChunkFacts
from pipeline.kb.migrating import SOURCE
from pipeline.kb.store import KBStore
from pipeline.records import ApiMapping
from pipeline.stages.results import Ordered, RankedItem


@dataclass(frozen=True)
class LegacyFirst:
    store: KBStore

    def _uses(self, code: str, record_id: str) -> bool:
        record = self.store.get(record_id)
        return isinstance(record, ApiMapping) and record.source == SOURCE and pattern_use(code, record) is not None

    def run(self, items: Sequence[RankedItem], facts: ChunkFacts, code: str) -> Ordered:
        """``items`` with the renames ``code`` uses first; unchanged unless the code is Godot 3."""
        if not facts.legacy or facts.foreign:  # another language's `Sprite` or `.update()` is not Godot 3
            return Ordered(list(items), [])
        up = [self._uses(code, it.candidate.record_id) for it in items]
        return Ordered.moving(items, up, to_top=True, what=("Godot 3 → 4 rename mapping the Godot 3 code uses",
                                                           "Godot 3 → 4 rename mappings the Godot 3 code uses"))
