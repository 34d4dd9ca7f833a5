"""Class reference (classes/class_*.rst) and Godot 3 -> 4 rename parsing, on the real corpus."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.kb import class_records, classref, migrating
from pipeline.kb.classref import ClassDoc, parse_class
from pipeline.records import ApiMapping, DocsChunk

MIGRATION_DOC = "tutorials/migrating/upgrading_to_godot_4.rst"
# The "**Methods**" list of the manual-rename section has 53 bullets (grep '^- ' between
# **Methods** and **Properties**); all but "Time and date methods ... moved to Time" state
# an old -> new spelling (48 "X's ``a()`` is now ``b()``", plus instance() -> instantiate(),
# OS.get_screen_size() -> DisplayServer.screen_get_size(), Transform2D xform/xform_inv and
# File/Directory -> FileAccess/DirAccess).
METHOD_BULLETS_WITH_RENAMES = 52
CSHARP = re.compile(
    r"using Godot;|public (?:partial )?class|\bGD\.Print|public override void|\bnew [A-Z]\w*\(|;\s*$", re.M
)


@dataclass(frozen=True)
class Corpus:
    classes: list[ClassDoc]
    records: list[DocsChunk | ApiMapping]
    renames: list[ApiMapping]
    parse_seconds: float

    def api(self, api_id: str) -> ApiMapping:
        hits = [r for r in self.records if r.id == api_id and isinstance(r, ApiMapping)]
        assert hits, f"no api mapping {api_id}"
        return hits[0]

    def cls(self, name: str) -> ClassDoc:
        return next(c for c in self.classes if c.name == name)


def _parse_all(docs_root: Path) -> tuple[list[ClassDoc], float]:
    files = sorted((docs_root / "classes").glob("class_*.rst"))
    t0 = time.perf_counter()
    classes = [parse_class(p.read_text(encoding="utf-8"), p.relative_to(docs_root).as_posix()) for p in files]
    return classes, time.perf_counter() - t0


@pytest.fixture(scope="module")
def corpus(docs_root: Path) -> Corpus:
    classes, seconds = _parse_all(docs_root)
    renames = migrating.rename_records((docs_root / MIGRATION_DOC).read_text(encoding="utf-8"), MIGRATION_DOC)
    rmap = migrating.rename_map(renames)
    records = [r for c in classes for r in class_records.class_records(c, rmap)]
    return Corpus(classes, records, renames, seconds)


def _search(pattern: str, code: str) -> bool:
    return re.search(pattern, code) is not None


# --- parsing ----------------------------------------------------------------------


def test_every_class_file_parses_and_index_is_skipped(corpus: Corpus, docs_root: Path) -> None:
    files = list((docs_root / "classes").glob("class_*.rst"))
    assert len(corpus.classes) == len(files) == 1078
    assert all(c.doc_path.startswith("classes/class_") for c in corpus.classes)
    assert len({c.name for c in corpus.classes}) == len(corpus.classes)
    # The tab-indented "contribute" containers ("There is currently no description ...") are dropped whole.
    texts = [c.brief + c.description for c in corpus.classes]
    texts += [m.description for c in corpus.classes for m in c.members]
    assert not [t for t in texts if "There is currently no description" in t]


def test_animatedsprite2d(corpus: Corpus) -> None:
    c = corpus.cls("AnimatedSprite2D")
    assert c.doc_path == "classes/class_animatedsprite2d.rst"
    assert c.inherits == ["Node2D", "CanvasItem", "Node", "Object"]
    assert c.brief.startswith("Sprite node that contains multiple textures")
    assert "SpriteFrames" in c.description and ":ref:" not in c.description
    kinds = {(m.name, m.kind) for m in c.members}
    assert {("play", "method"), ("flip_h", "property"), ("animation_finished", "signal")} <= kinds
    play = next(m for m in c.members if m.name == "play")
    assert play.signature == 'void play(name: StringName = &"", custom_speed: float = 1.0, from_end: bool = false)'
    assert play.description.startswith("Plays the animation with key name.")
    flip_h = next(m for m in c.members if m.name == "flip_h")
    assert flip_h.signature == "bool flip_h = false"
    assert flip_h.accessors == ("set_flip_h", "is_flipped_h")
    speed = next(m for m in c.members if m.name == "get_playing_speed")
    assert speed.signature == "float get_playing_speed() const" and "const" in speed.qualifiers
    # The example in set_frame_and_progress() is a GDScript code-tab.
    example = next(m for m in c.members if m.name == "set_frame_and_progress")
    assert example.code_blocks and "animated_sprite.set_frame_and_progress(" in example.code_blocks[0]


def test_inline_markup_is_rendered(corpus: Corpus) -> None:
    assert classref.render_inline(":ref:`Vector2<class_Vector2>`") == "Vector2"
    assert classref.render_inline("``x``") == "x"
    assert classref.render_inline("|void| **play**\\ (\\ ) |const|") == "void play() const"
    assert classref.render_inline(":ref:`class_FileAccess`") == "FileAccess"
    leftovers = re.compile(r":ref:`|:doc:`|``|\|(?:void|const|virtual|static)\|")
    for c in corpus.classes:
        assert not leftovers.search(c.brief + c.description), c.name
        for m in c.members:
            assert not leftovers.search(m.signature + m.description), (c.name, m.name)


def test_enums_constants_operators_and_theme(corpus: Corpus) -> None:
    node = corpus.cls("Node")
    mode = [m for m in node.members if m.enum == "ProcessMode"]
    assert [m.name for m in mode][:2] == ["PROCESS_MODE_INHERIT", "PROCESS_MODE_PAUSABLE"]
    assert any(m.kind == "enum" and m.name == "ProcessMode" for m in node.members)
    assert any(m.kind == "constant" and m.enum is None and m.name == "NOTIFICATION_ENTER_TREE" for m in node.members)
    vec = corpus.cls("Vector2")
    ops = {m.name for m in vec.members if m.kind == "operator"}
    assert {"operator *", "operator ==", "operator []", "operator unary-"} <= ops
    assert sum(m.kind == "constructor" for m in vec.members) >= 3  # overloads have no target of their own
    button = corpus.cls("Button")
    font_color = next(m for m in button.members if m.kind == "theme_property" and m.name == "font_color")
    assert font_color.target == "class_Button_theme_color_font_color"


def test_gdscript_and_globalscope(corpus: Corpus) -> None:
    gd = corpus.cls("@GDScript")
    assert any(m.kind == "annotation" and m.name == "@export" for m in gd.members)
    clamp = corpus.api("api:@GlobalScope.clamp")
    assert clamp.source == "class/@GlobalScope"
    assert _search(clamp.source_pattern, "speed = clamp(speed, 0.0, 10.0)")
    assert not _search(clamp.source_pattern, "v = v.clamp(a, b)")
    assert not _search(clamp.source_pattern, "x = clampf(x, 0.0, 1.0)")
    export = corpus.api("api:@GDScript.@export")
    assert _search(export.source_pattern, "@export var speed = 400")
    assert not _search(export.source_pattern, "@export_range(0, 10) var speed = 4")
    keys = corpus.api("api:@GlobalScope.Key")
    assert _search(keys.source_pattern, "if event.keycode == KEY_ESCAPE:")


def test_member_index(corpus: Corpus) -> None:
    index = classref.member_index(corpus.classes)
    assert "Vector2" in index["clamp"] and "@GlobalScope" in index["clamp"]
    assert index["clamp"] == sorted(index["clamp"])
    assert {"AnimatedSprite2D", "AnimationPlayer"} <= set(index["play"])
    assert "Node" in index["PROCESS_MODE_INHERIT"]


# --- docs chunks -------------------------------------------------------------------


def test_docs_chunks(corpus: Corpus) -> None:
    chunks = {r.id: r for r in corpus.records if isinstance(r, DocsChunk)}
    desc = chunks["class:AnimatedSprite2D#description"]
    assert desc.source == "class/AnimatedSprite2D" and desc.title == "AnimatedSprite2D"
    assert desc.doc_path == "classes/class_animatedsprite2d.rst"
    assert desc.section == "AnimatedSprite2D > Description"
    assert "AnimatedSprite2D" in desc.api_symbols
    assert "Sprite node that contains multiple textures" in desc.content and "Node2D" in desc.content
    methods = chunks["class:AnimatedSprite2D#methods-1"]
    assert methods.section == "AnimatedSprite2D > Methods (get_playing_speed … stop)"
    assert "AnimatedSprite2D.play" in methods.api_symbols
    assert "void play(" in methods.content
    assert any("set_frame_and_progress" in b for b in methods.code_blocks)
    for chunk in chunks.values():
        assert chunk.title and chunk.section.startswith(chunk.title + " > ")
        if not chunk.id.endswith("#description"):
            assert 1 <= len(chunk.api_symbols) <= class_records.MAX_GROUP_MEMBERS
            # ~3000 chars, unless a single member is longer on its own
            assert len(chunk.content) <= class_records.MAX_GROUP_CHARS or len(chunk.api_symbols) <= 2, chunk.id


def test_no_csharp_in_code_blocks(corpus: Corpus) -> None:
    blocks = [b for r in corpus.records if isinstance(r, DocsChunk) for b in r.code_blocks]
    assert len(blocks) > 500
    # One upstream GDScript example ends a line with a stray ";" (EditorContextMenuPlugin); allow
    # a lone trailing semicolon but no C# syntax.
    code = [re.sub(r"#.*", "", b) for b in blocks]  # GDScript comments may quote JavaScript/C#
    bad = [b for b in code if len(CSHARP.findall(b)) > 1 or re.search(r"using Godot;|GD\.Print|public ", b)]
    assert not bad, bad[:3]


# --- api mappings -------------------------------------------------------------------


def test_ids_are_unique_and_patterns_compile(corpus: Corpus) -> None:
    every = corpus.records + corpus.renames
    counts = Counter(r.id for r in every)
    assert not [i for i, n in counts.items() if n > 1]
    for r in every:
        if isinstance(r, ApiMapping):
            re.compile(r.source_pattern)


def test_animatedsprite2d_play_mapping(corpus: Corpus) -> None:
    play = corpus.api("api:AnimatedSprite2D.play")
    assert play.source_api == "AnimatedSprite2D.play" and play.source == "class/AnimatedSprite2D"
    assert play.doc_path == "classes/class_animatedsprite2d.rst"
    assert {"AnimatedSprite2D", "play", "AnimatedSprite2D.play"} <= set(play.match_terms)
    assert play.required_when_seen_in_code == ["AnimatedSprite2D", "play("]
    assert play.description.startswith("Plays the animation with key name.")
    assert "void AnimatedSprite2D.play(" in play.description
    assert play.before_code is None and play.after_code is None
    for code in [
        "$AnimatedSprite2D.play()",
        'get_node("AnimatedSprite2D").play("walk")',
        "$Player/AnimatedSprite2D.play()",
        "AnimatedSprite2D.play(",
        '%AnimatedSprite2D.play("run")',
        "@onready var anim: AnimatedSprite2D = $Sprite\nfunc _ready():\n\tanim.play()",
        "@onready var sprite = $AnimatedSprite2D\nfunc _ready():\n\tsprite.play()",
        "extends AnimatedSprite2D\nfunc _ready():\n\tplay(&\"walk\")",
    ]:
        assert _search(play.source_pattern, code), code
    for code in [
        '$AnimationPlayer.play("idle")',
        "AnimationPlayer.play(",
        'anim.play("walk")',  # untyped: unknown class
        "var anim: AnimationPlayer\nanim.play()",
        "$AnimatedSprite2D.play_backwards()",
    ]:
        assert not _search(play.source_pattern, code), code


def test_property_signal_and_singleton_mappings(corpus: Corpus) -> None:
    flip = corpus.api("api:AnimatedSprite2D.flip_h")
    assert flip.required_when_seen_in_code == ["AnimatedSprite2D", "flip_h"]
    assert _search(flip.source_pattern, "$AnimatedSprite2D.flip_h = velocity.x < 0")
    assert _search(flip.source_pattern, "extends AnimatedSprite2D\nfunc f():\n\tflip_h = true")
    assert not _search(flip.source_pattern, "$Sprite2D.flip_h = true")

    finished = corpus.api("api:AnimatedSprite2D.animation_finished")
    assert finished.required_when_seen_in_code == ["animation_finished"]
    assert "animation_finished.connect" in finished.match_terms
    assert _search(finished.source_pattern, "$AnimatedSprite2D.animation_finished.connect(_on_done)")
    assert _search(finished.source_pattern, "await $AnimatedSprite2D.animation_finished")

    pressed = corpus.api("api:Input.is_action_pressed")
    assert _search(pressed.source_pattern, 'if Input.is_action_pressed("move_left"):')
    assert not _search(pressed.source_pattern, 'if Input.is_action_just_pressed("jump"):')

    clamp = corpus.api("api:Vector2.clamp")
    assert _search(clamp.source_pattern, "var v: Vector2 = Vector2.ONE\nv = v.clamp(a, b)")
    setting = corpus.api("api:ProjectSettings.display/window/size/viewport_width")
    assert _search(setting.source_pattern, 'ProjectSettings.get_setting("display/window/size/viewport_width")')
    color = corpus.api("api:Button.theme_override_colors/font_color")
    assert _search(color.source_pattern, '$Button.add_theme_color_override("font_color", Color.RED)')
    ready = corpus.api("api:Node._ready")
    assert _search(ready.source_pattern, "func _ready() -> void:")


def test_one_mapping_per_member(corpus: Corpus) -> None:
    apis = {r.id for r in corpus.records if isinstance(r, ApiMapping)}
    c = corpus.cls("AnimatedSprite2D")
    for m in c.members:
        assert f"api:AnimatedSprite2D.{m.name}" in apis
    assert "api:AnimatedSprite2D" in apis  # plus one for the class itself
    assert "api:Node.ProcessMode" in apis and "api:Node.PROCESS_MODE_INHERIT" not in apis  # one per enum


def test_renamed_class_gets_before_code_on_its_class_mapping(corpus: Corpus) -> None:
    # Defined behaviour: the class mapping carries the Godot 3 class name; member
    # mappings do not (KinematicBody2D had no `velocity`), except members renamed by hand.
    body = corpus.api("api:CharacterBody2D")
    assert body.before_code == "KinematicBody2D" and body.after_code == "CharacterBody2D"
    assert "KinematicBody2D" in body.match_terms
    assert corpus.api("api:CharacterBody2D.move_and_slide").before_code is None
    redraw = corpus.api("api:CanvasItem.queue_redraw")
    assert redraw.before_code == "CanvasItem.update" and redraw.after_code == "CanvasItem.queue_redraw"
    assert corpus.api("api:AnimatedSprite2D").before_code == "AnimatedSprite"


# --- renames ----------------------------------------------------------------------------


def test_class_renames(corpus: Corpus) -> None:
    by_id = {r.id: r for r in corpus.renames}
    kb = by_id["rename:KinematicBody2D"]
    assert (kb.source_api, kb.before_code, kb.after_code) == ("KinematicBody2D", "KinematicBody2D", "CharacterBody2D")
    assert kb.match_terms[:2] == ["KinematicBody2D", "CharacterBody2D"]
    assert kb.required_when_seen_in_code == ["KinematicBody2D"]
    assert kb.source == "migrating/upgrading_to_godot_4" and kb.doc_path == MIGRATION_DOC
    assert kb.description.startswith("Godot 3 `KinematicBody2D` was renamed to `CharacterBody2D` in Godot 4.")
    assert _search(kb.source_pattern, "extends KinematicBody2D")
    assert not _search(kb.source_pattern, "extends KinematicBody2DFoo")

    sprite = by_id["rename:AnimatedSprite"]
    assert sprite.after_code == "AnimatedSprite2D"
    assert _search(sprite.source_pattern, "var s: AnimatedSprite = AnimatedSprite.new()")
    assert not _search(sprite.source_pattern, "extends AnimatedSprite2D")
    assert not _search(by_id["rename:KinematicBody"].source_pattern, "extends KinematicBody2D")
    assert by_id["rename:Spatial"].after_code == "Node3D"
    assert by_id["rename:File"].after_code == "FileAccess"
    rmap = migrating.rename_map(corpus.renames)
    assert rmap["KinematicBody2D"] == "CharacterBody2D"
    assert rmap["CanvasItem.update"] == "CanvasItem.queue_redraw"
    table = [r for r in corpus.renames if "Automatically renamed nodes and resources" in r.description]
    assert len(table) == 80  # data rows of the grid table


def test_member_renames(corpus: Corpus) -> None:
    by_id = {r.id: r for r in corpus.renames}
    method_bullets = {
        r.description.split(" must be renamed by hand.) ", 1)[1]
        for r in corpus.renames
        if "> Methods: must be renamed by hand." in r.description
    }
    assert len(method_bullets) >= METHOD_BULLETS_WITH_RENAMES
    update = by_id["rename:CanvasItem.update"]
    assert (update.before_code, update.after_code) == ("update()", "queue_redraw()")
    assert update.required_when_seen_in_code == ["update("]
    assert _search(update.source_pattern, "func _process(d):\n\tupdate()")
    assert not _search(update.source_pattern, "func _process(d):\n\tqueue_redraw()")
    assert {"rename:AStar2D.get_points", "rename:AStar3D.get_points"} <= by_id.keys()
    assert by_id["rename:Transform2D.xform"].after_code == "mat * vec"
    assert by_id["rename:OS.get_screen_size"].after_code == "DisplayServer.screen_get_size()"
    assert by_id["rename:instance"].after_code == "instantiate()"
    hide = by_id["rename:CanvasItem.hide"]  # the signal, not the hide() method
    assert _search(hide.source_pattern, 'connect("hide", self, "_on_hide")')
    assert not _search(hide.source_pattern, "$Sprite.hide()")
    extents = by_id["rename:RectangleShape2D.extents"]
    assert _search(extents.source_pattern, "shape.extents = Vector2(8, 8)")
    assert not _search(extents.source_pattern, "shape.size = Vector2(16, 16)")
    assert by_id["rename:Engine.editor_hint"].required_when_seen_in_code == ["Engine.editor_hint"]
    assert by_id["rename:Color.palegreen"].after_code == "Color.PALE_GREEN"
    for r in corpus.renames:
        re.compile(r.source_pattern)
        assert r.before_code and r.after_code and r.id.startswith("rename:")
