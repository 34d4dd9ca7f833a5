"""After D's fusion and F's reranker: docs sections about the other dimension move below the rest.

A 2D chunk's ranking often holds 3D tutorial sections that share its calls
(`Input.is_action_pressed`, `move_and_slide`), and back. The validator already vetoes
them (pipeline/stages/calibrated.py); here they also stop taking the slots of the top 8
and of the page ranking. Both read one rule, ``features.other_dimension``: a docs section
(tutorial or class page) whose dimension disagrees with the code's; labels and API
mappings keep their place. Order is
otherwise kept. Chosen on the dev set's tune half (page nDCG@10: F 0.774 → 0.792,
D 0.718 → 0.735); bench/NOTES.md has the test half.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.features import ChunkFacts, FeatureBuilder, other_dimension
from pipeline.stages.results import Ordered, RankedItem


@dataclass(frozen=True)
class DimensionOrder:
    features: FeatureBuilder

    def _away(self, facts: ChunkFacts, record_id: str) -> bool:
        record = self.features.store.get(record_id)
        return other_dimension(record, self.features.agreement(facts, record))

    def run(self, items: Sequence[RankedItem], facts: ChunkFacts) -> Ordered:
        """``items`` with the other dimension's docs sections last; code of one dimension only."""
        if facts.is_2d == facts.is_3d:  # neither or both: nothing to disagree with
            return Ordered(list(items), [])
        away = [self._away(facts, it.candidate.record_id) for it in items]
        return Ordered.moving(items, away, to_top=False, what=("docs section about the other dimension (2D vs 3D)",
                                                              "docs sections about the other dimension (2D vs 3D)"))
