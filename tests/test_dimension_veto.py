"""The calibrated policy rejects a docs section of the other dimension whatever its p (real KB records)."""

from __future__ import annotations

from pipeline.engine import Engine
from pipeline.stages.calibrated import other_dimension

SPAWN_3D = "docs:first_3d_game/spawning_mobs#spawning-monsters-spawning-monsters-randomly-p4"


def test_a_3d_page_is_vetoed_for_2d_code_and_a_label_keeps_its_p(engine: Engine) -> None:
    page, label = engine.store.get(SPAWN_3D), engine.store.get("label:character_movement_3d")
    assert "other dimension" in (other_dimension(page, {"dimension_agrees": -1.0}) or "")
    assert other_dimension(page, {"dimension_agrees": 0.0}) is None  # mixed or unknown code: p decides
    assert other_dimension(page, {"dimension_agrees": 1.0}) is None
    # a label's prototype may be written in one dimension; labels are judged by their match terms, not pages
    assert other_dimension(label, {"dimension_agrees": -1.0}) is None
