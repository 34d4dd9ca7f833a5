"""For Godot 3 code, the Godot 3 → 4 renames it uses go first in F's ranking (real KB, real ranker)."""

from __future__ import annotations

from pipeline.config import FIXTURES
from pipeline.engine import Engine
from pipeline.evaluate import load_set, system_rankings
from pipeline.kb.migrating import MIGRATION_DOC
from pipeline.settings import Settings


def test_godot3_code_puts_the_renames_it_uses_first(engine: Engine) -> None:
    # the tune half's Godot 3 chunk: `.instance()`, `yield(`, string connect; the learned ranker, trained
    # on Godot 4 docs code, put the migration page 41st before this step
    chunk = next(c for c in load_set(split="tune") if c.id == "dev-26-godot3-signals-yield-instance")
    on = engine.run(chunk.code, Settings(run_validator=False, alternatives=("F",)))
    off = engine.run(chunk.code, Settings(run_validator=False, alternatives=("F",), legacy_first=False))
    stage = on.alternatives["F"].ranking
    assert stage.moved_up and all(r.startswith("rename:") for r in stage.moved_up)
    assert "the Godot 3 code uses moved to the top" in stage.message
    assert [r.record_id for r in stage.rows[: len(stage.moved_up)]] == stage.moved_up
    assert system_rankings(on)["F"][0] == MIGRATION_DOC
    assert system_rankings(off)["F"].index(MIGRATION_DOC) >= 10
    assert not off.alternatives["F"].ranking.moved_up


def test_godot4_code_keeps_its_order(engine: Engine) -> None:
    code = (FIXTURES / "reference_chunk.gd").read_text()
    on = engine.run(code, Settings(run_validator=False))
    off = engine.run(code, Settings(run_validator=False, legacy_first=False))
    for name in ("D", "F"):
        assert not on.alternatives[name].ranking.moved_up
        assert system_rankings(on)[name] == system_rankings(off)[name]
