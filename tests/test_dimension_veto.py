"""The calibrated policy rejects a docs section of the other dimension whatever its p (real KB records)."""

from __future__ import annotations

from pipeline.engine import Engine
from pipeline.stages.calibrated import dimension_veto

SPAWN_3D = "docs:first_3d_game/spawning_mobs#spawning-monsters-spawning-monsters-randomly-p4"


def test_a_3d_page_is_vetoed_for_2d_code_and_a_label_keeps_its_p(engine: Engine) -> None:
    page, label = engine.store.get(SPAWN_3D), engine.store.get("label:character_movement_3d")
    assert "other dimension" in (dimension_veto(page, {"dimension_agrees": -1.0}) or "")
    assert dimension_veto(page, {"dimension_agrees": 0.0}) is None  # mixed or unknown code: p decides
    assert dimension_veto(page, {"dimension_agrees": 1.0}) is None
    # a label's prototype may be written in one dimension; labels are judged by their match terms, not pages
    assert dimension_veto(label, {"dimension_agrees": -1.0}) is None


def test_the_other_dimension_moves_below_the_rest_in_d_and_f(engine: Engine) -> None:
    from pipeline.config import FIXTURES
    from pipeline.evaluate import system_rankings
    from pipeline.settings import Settings

    code = (FIXTURES / "reference_chunk.gd").read_text()
    on = engine.run(code, Settings(run_validator=False))
    off = engine.run(code, Settings(run_validator=False, dimension_order=False))
    for name in ("D", "F"):
        pages, before = system_rankings(on)[name], system_rankings(off)[name]
        moved = on.alternatives[name].ranking.moved_down
        assert moved and "other dimension" in on.alternatives[name].ranking.message
        # the 3D tutorial's first page drops (it sat higher without the step) and leaves the top 10
        first_3d = [next(n for n, p in enumerate(r) if "first_3d_game" in p) for r in (pages, before)]
        assert first_3d[0] > first_3d[1] and first_3d[0] >= 10
        assert pages[0] == "getting_started/first_2d_game/03.coding_the_player.rst"
