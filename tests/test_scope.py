"""The validator's scope: the top k, and labels that fit the code wherever the ranking put them."""

from __future__ import annotations

from pathlib import Path

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages import scope
from pipeline.trace import FinalItem, RecordRef

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()
FITS = "label:player_input_movement_2d"  # 9 of its 10 match terms are in the reference chunk
OTHER = "label:character_movement_3d"  # the 3D walk: few of its terms


def _final(engine: Engine, ids: list[str]) -> list[FinalItem]:
    return [FinalItem.of(engine.store.get(rid), rank=n, score=1.0 / n) for n, rid in enumerate(ids, start=1)]


def test_a_fitting_label_is_judged_past_the_top_k_and_others_are_not(engine: Engine) -> None:
    fits, other = (RecordRef.of(engine.store.get(rid)) for rid in (FITS, OTHER))
    assert scope.label_fits(engine.store, fits, REFERENCE, 0.5) is not None
    assert scope.label_fits(engine.store, other, REFERENCE, 0.5) is None
    assert scope.label_fits(engine.store, fits, "", 0.5) is None  # nothing in an empty chunk
    docs = [r.id for r in engine.store.records if r.kind == "docs_chunk"][:5]
    assert scope.label_fits(engine.store, RecordRef.of(engine.store.get(docs[0])), REFERENCE, 0.0) is None
    final = _final(engine, [*docs[:3], OTHER, docs[3], FITS, docs[4]])
    s = scope.run(engine.store, REFERENCE, final, top_k=3, label_fit=0.5)
    assert s.judged == [True, True, True, False, False, True, False]
    assert "judged past the top 3: 90%" in s.notes[5]
    off = scope.run(engine.store, REFERENCE, final, top_k=3, label_fit=2.0)  # above 1: the top k only
    assert off.judged == [True, True, True, False, False, False, False]


def test_f_judges_the_reference_label_its_ranker_left_below_the_top_8(engine: Engine) -> None:
    # evidence_only needs no model: the scope is the same under every policy
    trace = engine.run(REFERENCE, Settings(alternatives=("F",), accept_policy="evidence_only"))
    f = trace.alternatives["F"]
    row = next(r for r in f.validation.rows if r.record_id == FITS)
    assert row.rank > f.validation.top_k and row.in_scope and row.accepted, row
    assert "judged past the top 8" in row.note
    assert FITS in {it.record_id for it in f.final}  # kept in the final JSONL past final_k when needed
    assert "any label with 50% of its match terms" in f.validation.scope_text
    # turned off, the label is neither judged nor kept past final_k
    off = engine.run(REFERENCE, Settings(alternatives=("F",), accept_policy="evidence_only", label_fit=2.0))
    rows = {r.record_id: r for r in off.alternatives["F"].validation.rows}
    assert FITS not in rows or not rows[FITS].in_scope


USES = scope.UsedClasses({"AnimatedSprite2D": "$AnimatedSprite2D.play", "Input": "Input.is_action_pressed"})


def test_the_classes_the_code_uses_are_judged_past_the_top_k_but_not_their_uncalled_members(engine: Engine) -> None:
    page = "class:AnimatedSprite2D#methods-1"
    called, uncalled = "api:AnimatedSprite2D.stop", "api:AnimatedSprite2D.play_backwards"
    node3d = next(r.id for r in engine.store.records if r.source == "class/Node3D")
    stop = ("AnimatedSprite2D", "AnimatedSprite2D.stop(")  # the mapping's own pattern's match
    for rid, want in ((page, ("AnimatedSprite2D", "$AnimatedSprite2D.play")), (called, stop),
                      (uncalled, None), (node3d, None)):
        assert scope.used_class(engine.store.get(rid), REFERENCE, USES) == want, rid
    assert scope.used_class(engine.store.get(page), REFERENCE, scope.UsedClasses({})) is None
    docs = [r.id for r in engine.store.records if r.kind == "docs_chunk"][:3]
    final = _final(engine, [*docs[:2], node3d, uncalled, page, called])
    s = scope.run(engine.store, REFERENCE, final, top_k=2, label_fit=2.0, classes=USES)
    assert s.judged == [True, True, False, False, True, True]
    assert s.notes[4] == "judged past the top 2: the code uses AnimatedSprite2D"
    off = scope.run(engine.store, REFERENCE, final, top_k=2, label_fit=2.0)  # Settings.class_accepts off
    assert off.judged == [True, True, False, False, False, False]


def test_a_member_used_on_a_typed_name_counts_though_its_pattern_does_not_match(engine: Engine) -> None:
    # `bar.max_value`, bar a TextureProgressBar: the rule finds Range.max_value; the mapping's pattern wants
    # the class spelled out
    code = "extends Node3D\n@onready var bar: TextureProgressBar = $Bar\n\nfunc hit(hp):\n\tbar.max_value = hp\n"
    rule = engine.class_rule
    members = rule.member_uses(code)
    assert members.get("api:Range.max_value") == "bar.max_value (defined in Range, which TextureProgressBar inherits)"
    used = scope.UsedClasses({u.name: u.use for u in rule.uses(code)}, members)
    record = engine.store.get("api:Range.max_value")
    assert scope.used_class(record, code, scope.UsedClasses(used.classes)) is None  # the pattern alone: no
    assert scope.used_class(record, code, used) == ("Range", members["api:Range.max_value"])
    assert scope.used_class(engine.store.get("api:Range.min_value"), code, used) is None  # never touched
