"""The classes the code uses join the union by rule, and their class pages follow the top pages.

Real KB, no model: stages/classuse.py reads the class reference's api_mapping records, and
stages/classorder.py only re-orders what the ranking holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.classorder import ClassPagesUp
from pipeline.stages.classuse import ClassUses
from tests.fakes import ranked_items

ROOT = Path(__file__).resolve().parent.parent
FAST = Settings(run_validator=False)


@pytest.fixture(scope="module")
def uses(engine: Engine) -> ClassUses:
    return ClassUses(engine.store)


def _found(uses: ClassUses, code: str) -> dict[str, str]:
    return {u.name: u.use for u in uses.uses(code)}


def test_named_classes_and_the_classes_that_define_the_members_used(uses: ClassUses) -> None:
    code = ("extends CharacterBody2D\n\n@onready var nav: NavigationAgent2D = $Nav\n"
            "@onready var btn := $B as Button\n\nfunc _physics_process(delta: float) -> void:\n"
            "\tglobal_position += velocity * delta\n"
            "\tbtn.pressed.connect(queue_free)\n\tif nav.is_navigation_finished():\n\t\tmove_and_slide()\n"
            "\t$AnimatedSprite2D.play(\"run\")\n")
    found = _found(uses, code)
    assert found["CharacterBody2D"] == "extends CharacterBody2D"
    assert found["NavigationAgent2D"] == "nav: NavigationAgent2D"
    assert found["Button"] == "as Button"
    # members resolve through the Inherits chain to the class that defines them
    assert found["Node2D"] == "global_position (defined in Node2D, which CharacterBody2D inherits)"
    assert found["BaseButton"] == "btn.pressed (defined in BaseButton, which Button inherits)"
    assert found["AnimatedSprite2D"] == "$AnimatedSprite2D.play"
    # what every script uses says nothing: Node (queue_free), Object, Variant types
    assert "Node" not in found and "Vector2" not in found and "Object" not in found


def test_a_function_cut_from_its_file_reads_the_files_base_and_members(uses: ClassUses) -> None:
    context = ("extends CharacterBody2D\n@onready var nav: NavigationAgent2D = $Nav\n"
               "@onready var hurt: Timer = $Hurt\nvar fade := create_tween()\n")
    code = ("func _physics_process(delta: float) -> void:\n\tglobal_position = nav.get_next_path_position()\n"
            "\tmove_and_slide()\n\tfade.tween_property(self, \"modulate\", Color.RED, 0.2)\n")
    assert _found(uses, code) == {}  # alone, its names mean nothing
    found = {u.name: u.use for u in uses.uses(code, context)}
    assert found == {
        "NavigationAgent2D": "nav.get_next_path_position",
        "Tween": "fade.tween_property",  # typed by what the file's `create_tween()` returns
        "Node2D": "global_position (defined in Node2D, which CharacterBody2D inherits; "
                  "the file extends CharacterBody2D)",
        "CharacterBody2D": "move_and_slide (the file extends CharacterBody2D)",
    }  # the file's own declarations are not uses: no CharacterBody2D by name, no Timer (`hurt` is unused here)


def test_one_line_class_name_constants_and_overridden_virtuals(uses: ClassUses) -> None:
    code = ("class_name Star extends Node2D\n\nfunc _draw() -> void:\n\tdraw_circle(Vector2.ZERO, 4.0, Color.RED)\n\n"
            "func pop() -> void:\n\tcreate_tween().set_trans(Tween.TRANS_BACK)\n")
    found = _found(uses, code)
    assert found["Node2D"] == "class_name Star extends Node2D"
    assert found["Tween"] == "Tween.TRANS_BACK"  # a constant names its class too
    # overriding a virtual uses the class that declares it; the script's own funcs (pop) are not members
    assert found["CanvasItem"] == "_draw (defined in CanvasItem, which Node2D inherits)"


def test_what_a_chain_returns_names_the_classes_its_later_links_use(uses: ClassUses) -> None:
    code = ("extends Node2D\n\nconst POP: PackedScene = preload(\"res://pop.tscn\")\n\nfunc _ready() -> void:\n"
            "\tawait get_tree().create_timer(0.5).timeout\n\tvar tween := create_tween()\n"
            "\ttween.tween_property(self, \"scale\", Vector2.ONE, 0.2).set_trans(Tween.TRANS_BACK)\n"
            "\tvar space := get_world_2d().direct_space_state\n\tspace.intersect_ray(query)\n")
    # the return types of the class reference's signatures type each later link, and `var x :=` of a chain;
    # a constant's type counts though its name is upper case
    expected = {"SceneTree": "get_tree().create_timer", "SceneTreeTimer": "get_tree().create_timer().timeout",
                "PropertyTweener": "tween.tween_property().set_trans", "World2D": "get_world_2d().direct_space_state",
                "PhysicsDirectSpaceState2D": "space.intersect_ray", "PackedScene": "POP: PackedScene"}
    found = _found(uses, code)
    assert {name: found.get(name) for name in expected} == expected
    # a call's arguments, however long, are skipped; a call left open ends the chain without a guess
    long_args = "extends Node\nfunc f():\n\tget_tree().create_timer(" + "(" * 250 + "1" + ")" * 251 + ".timeout\n"
    assert _found(uses, long_args).keys() == {"SceneTree", "SceneTreeTimer"}
    assert _found(uses, "extends Node\nfunc f():\n\tget_tree().create_timer(" + "(" * 500 + "1).timeout").keys() == {
        "SceneTree"}
    # a link no class defines ends it too: the chain's type is unknown, not the type before the link
    assert _found(uses, "extends Node\nfunc f():\n\tvar spawn := $Marker2D.spawn_point\n"
                        "\tspawn.global_position = Vector2.ZERO\n") == {}


def test_the_reference_chunk_uses_input_and_animatedsprite2d(uses: ClassUses) -> None:
    found = _found(uses, (ROOT / "fixtures" / "reference_chunk.gd").read_text())
    assert found == {"Input": "Input.is_action_pressed", "AnimatedSprite2D": "$AnimatedSprite2D.play"}


def test_comments_strings_and_other_languages_name_nothing(engine: Engine, uses: ClassUses) -> None:
    assert _found(uses, '# extends Camera3D\nfunc f():\n\tprint("Input.is_action_pressed and Timer.new()")\n') == {}
    code = "public class Player : MonoBehaviour {\n  void Update() { var t = Input.GetAxis(\"Horizontal\"); }\n}\n"
    prepared = engine.prepare(code, FAST)
    assert engine.class_uses(prepared).hits == []


def test_class_pages_follow_the_top_pages_in_their_own_order() -> None:
    items = ranked_items([None, "t/a.rst", "t/a.rst", "t/b.rst", "t/c.rst", "classes/x.rst", "t/d.rst", "classes/y.rst",
                    "classes/x.rst"])
    out = ClassPagesUp(2).run(items, {"classes/x.rst", "classes/y.rst", "classes/z.rst"})
    # the label and both pages above stay; x's best record, then y's, follow; the rest keeps its order
    assert [it.candidate.record_id for it in out.items] == ["r1", "r2", "r3", "r4", "r6", "r8", "r5", "r7", "r9"]
    assert [it.rank for it in out.items] == list(range(1, 10))
    assert out.moved == ["r6", "r8"] and "2 class pages" in out.message
    # a class page already among the top pages stays, and nothing else moves
    same = ClassPagesUp(2).run(items, {"t/a.rst"})
    assert same.items == items and same.moved == [] and same.message == ""


def test_the_engine_moves_the_class_pages_and_says_so(engine: Engine) -> None:
    code = ("extends CharacterBody2D\n\n@onready var nav: NavigationAgent2D = $NavigationAgent2D\n\n"
            "func _physics_process(_delta: float) -> void:\n\tif nav.is_navigation_finished():\n\t\treturn\n"
            "\tvelocity = global_position.direction_to(nav.get_next_path_position()) * 120.0\n\tmove_and_slide()\n")
    on = engine.run(code, FAST)
    off = engine.run(code, Settings(run_validator=False, class_pages=False))
    for name in ("D", "F"):
        alt, base = on.alternatives[name], off.alternatives[name]
        stage = alt.fusion if name == "D" else alt.rerank
        assert stage is not None and "class page" in stage.message and stage.moved_up
        pages = list(dict.fromkeys(r.doc_path for r in alt.final if r.doc_path))
        before = list(dict.fromkeys(r.doc_path for r in base.final if r.doc_path))
        assert pages[:2] == before[:2]  # the top pages keep their place
        wanted = {f"classes/class_{c}.rst" for c in ("characterbody2d", "navigationagent2d", "node2d")}
        assert wanted <= set(pages[2:5]), pages[:8]
        union = alt.union
        assert union is not None and any(r.rule == "extends CharacterBody2D" for r in union.rows)
