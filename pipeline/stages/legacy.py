"""After D's fusion and F's reranker: for Godot 3 code, the 3 → 4 renames it uses go first.

F's learned ranker was trained on the docs' own code, which is Godot 4: it never saw a
`KinematicBody2D`, a `yield(` or an `.instance()`, and it ranks the migration page low
for the code that needs it most. The rename mappings of ``upgrading_to_godot_4.rst``
whose pattern the code matches (stages/renames.py, which finds them only for Godot 3
GDScript) move to the top, in their order; everything else keeps its order below them.
Measured on the dev set's tune half (bench/NOTES.md, "Godot 3 renames first").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.stages.results import Ordered, RankedItem, RuleResult


@dataclass(frozen=True)
class LegacyFirst:
    def run(self, items: Sequence[RankedItem], renames: RuleResult) -> Ordered:
        """``items`` with the renames the code uses (``renames``, the rename rule's hits) first."""
        uses = {h.ref.record_id for h in renames.hits}
        up = [it.candidate.record_id in uses for it in items]
        return Ordered.moving(items, up, to_top=True, what=("Godot 3 → 4 rename mapping the Godot 3 code uses",
                                                           "Godot 3 → 4 rename mappings the Godot 3 code uses"))
