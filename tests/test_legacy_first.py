"""For Godot 3 code, the Godot 3 → 4 renames it uses join the union and go first (real KB, real ranker).

The class-use rule (tests/test_class_pages.py) is off here, so every rule row and every move is a rename's."""

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
    on = engine.run(chunk.code, Settings(run_validator=False, class_pages=False, alternatives=("F",)))
    off = engine.run(chunk.code, Settings(run_validator=False, class_pages=False, alternatives=("F",),
                                          legacy_first=False))
    stage = on.alternatives["F"].ranking
    assert stage.moved_up and all(r.startswith("rename:") for r in stage.moved_up)
    assert "the Godot 3 code uses moved to the top" in stage.message
    assert [r.record_id for r in stage.rows[: len(stage.moved_up)]] == stage.moved_up
    assert system_rankings(on)["F"][0] == MIGRATION_DOC
    assert system_rankings(off)["F"].index(MIGRATION_DOC) >= 10
    assert not off.alternatives["F"].ranking.moved_up


def test_godot4_code_keeps_its_order(engine: Engine) -> None:
    code = (FIXTURES / "reference_chunk.gd").read_text()
    on = engine.run(code, Settings(run_validator=False, class_pages=False))
    off = engine.run(code, Settings(run_validator=False, class_pages=False, legacy_first=False))
    for name in ("D", "F"):
        assert not on.alternatives[name].ranking.moved_up
        assert system_rankings(on)[name] == system_rankings(off)[name]


def test_godot3_renames_join_d_union_as_a_rule(engine: Engine) -> None:
    # before the rename rule, neither of D's legs found a rename for dev-26, and D put the migration page
    # outside its top 10 (D page nDCG@10 0.12 on it)
    chunk = next(c for c in load_set(split="tune") if c.id == "dev-26-godot3-signals-yield-instance")
    on = engine.run(chunk.code, Settings(run_validator=False, class_pages=False, alternatives=("D",)))
    off = engine.run(chunk.code, Settings(run_validator=False, class_pages=False, alternatives=("D",), renames=False))
    union = on.alternatives["D"].union
    rules = [r for r in union.rows if r.rule]
    assert rules and all(r.record_id.startswith("rename:") for r in rules)
    assert union.provenance_counts["rule"] == sum(r.provenance == "rule" for r in rules) > 0
    assert union.rules_ms > 0  # the rule's own time is in the trace
    assert any(r.record_id == "rename:instance" and r.rule == "instance(" for r in rules), rules
    assert system_rankings(on)["D"][0] == MIGRATION_DOC
    assert MIGRATION_DOC not in system_rankings(off)["D"][:10]
    assert not any(r.rule for r in off.alternatives["D"].union.rows)


def test_godot4_code_gets_no_rename_rule(engine: Engine) -> None:
    trace = engine.run((FIXTURES / "reference_chunk.gd").read_text(), Settings(run_validator=False, class_pages=False))
    for name in ("D", "F"):
        union = trace.alternatives[name].union
        assert union.provenance_counts["rule"] == 0 and not any(r.rule for r in union.rows)


def test_other_languages_get_no_rename_rule(engine: Engine) -> None:
    # pygame's `Sprite` and `.update()` look like Godot 3 to ChunkFacts.legacy; the rule is for GDScript only
    code = (FIXTURES / "chunks" / "pygame_player.py").read_text()
    assert engine.features.chunk_facts(code, []).legacy  # the trap this test guards
    trace = engine.run(code, Settings(run_validator=False, class_pages=False))
    for name in ("D", "F"):
        assert not any(r.rule for r in trace.alternatives[name].union.rows)
        assert not trace.alternatives[name].ranking.moved_up
