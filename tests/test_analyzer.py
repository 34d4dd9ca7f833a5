"""Tests for pipeline.analyzer: what a GDScript chunk turns into as BM25 terms."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pipeline.analyzer import (
    GDSCRIPT_KEYWORDS,
    PARSER_REGEX,
    PARSER_TREE_SITTER,
    STOP_WORDS,
    _analyze_regex,  # the fallback path, tested directly for parity
    analyze_code,
    analyze_text,
)

REFERENCE = (
    "func _process(delta):\n"
    "\tvar velocity = Vector2.ZERO\n"
    '\tif Input.is_action_pressed("move_right"):\n'
    "\t\tvelocity.x += 1\n"
    "\tif velocity.length() > 0:\n"
    "\t\tvelocity = velocity.normalized() * speed\n"
    "\t\t$AnimatedSprite2D.play()\n"
    "\telse:\n"
    "\t\t$AnimatedSprite2D.stop()\n"
    "\tposition += velocity * delta\n"
    "\tposition = position.clamp(Vector2.ZERO, screen_size)\n"
)

# Starts mid-block, deeper than what follows, with an orphan ``else:``.
PARTIAL = (
    "\t\tvelocity = velocity.normalized() * speed\n"
    "\t\t$AnimatedSprite2D.play()\n"
    "\telse:\n"
    "\t\t$AnimatedSprite2D.stop()\n"
    '\tif Input.is_action_pressed("jump"):\n'
    "\t\tvelocity.y = -400\n"
)

# Starts in the middle of a call.
MID_CALL = '"move_right"):\n\t\tvelocity.x += 1\n\tif Input.is_action_pressed("move_left"):\n\t\tvelocity.x -= 1\n'

CSHARP = """public override void _Process(double delta)
{
    var velocity = Vector2.Zero;
    if (Input.IsActionPressed("move_right"))
    {
        velocity.X += 1;
    }
    Position = Position.Clamp(Vector2.Zero, ScreenSize);
}
"""

# Clean GDScript exercising the less common constructs, for path parity.
PARITY_SNIPPETS = [
    REFERENCE,
    """extends CharacterBody3D
## Doc comment about the Player.
@export var speed := 14.0  # How fast the player moves
@onready var camera = $Pivot/Camera3D
signal hit(damage: int)

func _physics_process(delta: float) -> void:
	var direction = Vector3.ZERO
	if not is_on_floor():
		velocity.y -= gravity * delta
	$Pivot.basis = Basis.looking_at(direction)
	%HealthBar.value = get_node("UI/Score").text.to_int()
	var d = enemy.transform.origin - player.transform.origin
	get_tree().create_timer(1.0).timeout.connect(_on_timeout)
	var path = ^"Sprite2D:modulate"
	var s = &"my_signal"
	var t = \"\"\"multi line
string with words\"\"\"
	move_and_slide()
""",
    """class_name Mob extends RigidBody2D
enum State { IDLE, RUNNING }
const SPEED = 200

func _ready():
	var mob_types = $AnimatedSprite2D.sprite_frames.get_animation_names()
	$AnimatedSprite2D.animation = mob_types[randi() % mob_types.size()]
	self.position.x = 10
	match state:
		State.IDLE:
			print("idle state")
	await get_tree().process_frame
""",
]


def test_reference_snippet_terms() -> None:
    a = analyze_code(REFERENCE)
    assert a.parser == PARSER_TREE_SITTER
    expected = {
        "input.is_action_pressed",
        "input",
        "is_action_pressed",
        "animatedsprite2d",
        "animatedsprite2d.play",
        "move_right",
        "clamp",
        "position.clamp",
        "screen_size",
        "vector2.zero",
        "sprite",
        "pressed",
        # more of the promised normalisation
        "velocity",
        "velocity.normalized",
        "animatedsprite2d.stop",
        "is",
        "action",
        "animated",
        "2d",
        "move",
        "right",
        "_process",
        "process",
    }
    assert expected <= set(a.terms), expected - set(a.terms)


def test_reference_snippet_kinds() -> None:
    kinds = analyze_code(REFERENCE).kinds
    assert kinds["animatedsprite2d"] == "node_path"
    assert kinds["input.is_action_pressed"] == "dotted_call"
    assert kinds["animatedsprite2d.play"] == "dotted_call"
    assert kinds["move_right"] == "string"
    assert kinds["velocity"] == "identifier"
    assert kinds["pressed"] == "part"
    assert set(kinds) == set(analyze_code(REFERENCE).terms)


def test_repeats_are_kept() -> None:
    counts = Counter(analyze_code(REFERENCE).terms)
    assert counts["vector2.zero"] == 2
    assert counts["animatedsprite2d"] == 2
    assert counts["velocity"] == 6


def test_keywords_noise_numbers_and_short_tokens_are_dropped() -> None:
    terms = set(analyze_code(REFERENCE).terms)
    for kw in ("var", "func", "if", "else", "self", "true", "false", "null", "return"):
        assert kw not in terms
    assert "x" not in terms  # 1 char
    assert not any(t.isdigit() for t in terms)
    # a keyword as a whole token is dropped, as a part of a name it is kept
    terms = analyze_code("func f():\n\tif self.is_on_floor() and x is Node:\n\t\treturn true\n").terms
    assert "is" in terms and "is_on_floor" in terms
    assert terms.count("is") == 1  # only the part, not the ``is`` operator
    assert "self" not in terms and "and" not in terms


def test_stop_lists_are_small_and_cover_the_brief() -> None:
    must = {
        "var",
        "func",
        "if",
        "else",
        "elif",
        "return",
        "self",
        "pass",
        "and",
        "or",
        "not",
        "in",
        "true",
        "false",
        "null",
        "the",
        "a",
        "of",
        "to",
    }
    assert must <= STOP_WORDS | GDSCRIPT_KEYWORDS
    assert len(STOP_WORDS | GDSCRIPT_KEYWORDS) < 80


def test_snake_and_camel_parts() -> None:
    terms = analyze_code("var body: CharacterBody3D = HTTPRequest.new()\nvar s = $AnimatedSprite2D\n").terms
    for t in (
        "characterbody3d",
        "character",
        "body",
        "3d",
        "httprequest",
        "http",
        "request",
        "animatedsprite2d",
        "animated",
        "sprite",
        "2d",
    ):
        assert t in terms, t
    assert "vector" in analyze_code("var v = Vector2(1, 2)\n").terms


def test_node_paths() -> None:
    a = analyze_code(
        "func _ready():\n"
        "\t$Pivot/Camera3D.current = true\n"
        "\t%UniqueName.show()\n"
        '\tget_node("HUD/ScoreLabel").text = "0"\n'
        '\t$"../Main".start()\n'
    )
    assert a.parser == PARSER_TREE_SITTER
    for t in (
        "pivot",
        "camera3d",
        "camera3d.current",
        "uniquename",
        "uniquename.show",
        "hud",
        "scorelabel",
        "scorelabel.text",
        "main",
        "main.start",
    ):
        assert t in a.terms, t
        assert a.kinds[t] in ("node_path", "dotted_call")
    assert a.kinds["camera3d"] == "node_path"
    assert "pivot/camera3d" not in a.terms


def test_long_chains_give_adjacent_pairs() -> None:
    terms = analyze_code("var o = enemy.transform.origin\n").terms
    for t in ("enemy.transform.origin", "enemy.transform", "transform.origin", "enemy", "transform", "origin"):
        assert t in terms, t
    # a call ends a chain
    terms = analyze_code("var n = velocity.normalized().length\n").terms
    assert "velocity.normalized" in terms and "length" in terms
    assert "velocity.normalized.length" not in terms and "normalized.length" not in terms


def test_modulo_is_not_a_unique_name() -> None:
    terms = analyze_code("var i = randi() % mob_types.size()\n").terms
    assert "mob_types.size" in terms
    assert _analyze_regex("var i = randi() % mob_types.size()\n").terms == terms


@pytest.mark.parametrize("chunk", [PARTIAL, MID_CALL], ids=["orphan-else", "mid-call"])
def test_partial_chunk_falls_back_to_regex(chunk: str) -> None:
    a = analyze_code(chunk)
    assert a.parser == PARSER_REGEX
    for t in ("input", "is_action_pressed", "input.is_action_pressed", "velocity"):
        assert t in a.terms, t
    assert "var" not in a.terms


def test_partial_chunk_keeps_node_paths() -> None:
    terms = analyze_code(PARTIAL).terms
    assert "animatedsprite2d.play" in terms and "animatedsprite2d.stop" in terms
    assert "move_right" in analyze_code(MID_CALL).terms


def test_csharp_falls_back_to_regex() -> None:
    a = analyze_code(CSHARP)
    assert a.parser == PARSER_REGEX
    for t in ("input", "vector2.zero", "position.clamp", "move_right", "velocity"):
        assert t in a.terms, t
    assert "var" not in a.terms


@pytest.mark.parametrize("snippet", PARITY_SNIPPETS)
def test_tree_sitter_and_regex_paths_agree(snippet: str) -> None:
    ts = analyze_code(snippet)
    assert ts.parser == PARSER_TREE_SITTER
    rx = _analyze_regex(snippet)
    assert rx.parser == PARSER_REGEX
    assert ts.terms == rx.terms
    assert ts.kinds == rx.kinds


def test_parity_snippet_constructs() -> None:
    terms = analyze_code(PARITY_SNIPPETS[1]).terms
    # ``a - b.c.d``: the grammar nests this as ``(a - b.c).d``; the chain must survive
    assert "player.transform.origin" in terms
    assert "healthbar.value" in terms and "score.text" in terms
    assert "sprite2d" in terms and "modulate" in terms  # ^"Sprite2D:modulate"
    assert "my_signal" in terms and "multi" in terms
    assert "fast" in terms  # comment words
    assert "hit" in terms and "signal" in terms


def test_non_ascii_text_is_handled() -> None:
    # Multi-byte characters before a node path shift tree-sitter's byte offsets
    # away from str offsets; the chain after $Sprite2D must still be found.
    code = 'func _ready():\n\tvar s = "déjà vu"  # café crème\n\t$Sprite2D.play(s)\n'
    a = analyze_code(code)
    assert a.parser == PARSER_TREE_SITTER
    for t in ("déjà", "café", "crème", "sprite2d.play"):
        assert t in a.terms, t
    assert a.terms == _analyze_regex(code).terms


def test_same_terms_in_another_process() -> None:
    """BM25 indexes are cached on disk and shared: another process, with another hash seed, must agree."""
    script = (
        "import json, sys\n"
        "from pipeline.analyzer import analyze_code, analyze_text\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps([[a.terms, a.kinds, a.parser] for a in map(analyze_code, texts)]"
        " + [analyze_text(t) for t in texts]))\n"
    )
    texts = [REFERENCE, PARTIAL, CSHARP, *PARITY_SNIPPETS]
    res = subprocess.run([sys.executable, "-c", script], input=json.dumps(texts), capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ, "PYTHONHASHSEED": "4242"},
                         timeout=120, check=True)
    here = [[a.terms, a.kinds, a.parser] for a in map(analyze_code, texts)] + [analyze_text(t) for t in texts]
    assert json.loads(res.stdout) == here


def test_analyze_text_same_normalisation() -> None:
    prose = (
        "Use ``Input.is_action_pressed()`` to move the $AnimatedSprite2D.play() of the "
        "CharacterBody3D in 2D, e.g. in _process(). It is 100% done."
    )
    terms = analyze_text(prose)
    for t in (
        "input.is_action_pressed",
        "input",
        "is_action_pressed",
        "is",
        "action",
        "animatedsprite2d",
        "animatedsprite2d.play",
        "characterbody3d",
        "character",
        "3d",
        "2d",
        "_process",
        "process",
        "move",
        "done",
    ):
        assert t in terms, t
    for t in ("the", "of", "in", "to", "it", "100", "e.g", "e", "g"):
        assert t not in terms, t
    assert terms.count("is") == 1  # from is_action_pressed only, not the word "is"
    # an API symbol analysed as text matches what the code side produces
    assert set(analyze_text("AnimatedSprite2D.play")) <= set(analyze_code(REFERENCE).terms)


def test_empty_inputs() -> None:
    assert analyze_text("") == []
    a = analyze_code("")
    assert a.terms == [] and a.kinds == {}


_GDSCRIPT_BLOCK = re.compile(r"^( *)\.\. (?:code-tab|code-block):: gdscript.*\n((?:\1 +.*\n|[ \t]*\n)+)", re.MULTILINE)


def test_paths_agree_on_every_docs_code_block(docs_root: Path) -> None:
    """Every GDScript block of the tutorials that tree-sitter accepts: same terms both ways."""
    blocks = [
        textwrap.dedent(m.group(2)).strip("\n")
        for f in sorted((docs_root / "tutorials").rglob("*.rst"))
        for m in _GDSCRIPT_BLOCK.finditer(f.read_text(encoding="utf-8"))
    ]
    assert len(blocks) == 314  # the corpus is fixed
    parsed = 0
    for code in blocks:
        ts = analyze_code(code)
        if ts.parser != PARSER_TREE_SITTER:
            continue
        parsed += 1
        rx = _analyze_regex(code)
        assert (ts.terms, ts.kinds) == (rx.terms, rx.kinds), code
    assert parsed == 307  # docs code is clean GDScript; 7 blocks are fragments or pseudo-code


def test_region_labels_are_comment_text_on_both_paths() -> None:
    """``#region`` lines are comments to Godot; the grammar gives them their own node type."""
    code = "#region Terrain generation\nfunc build():\n\tpass\n#endregion\n"
    ts = analyze_code(code)
    assert ts.parser == PARSER_TREE_SITTER
    assert (ts.terms, ts.kinds) == (_analyze_regex(code).terms, _analyze_regex(code).kinds)
    assert ts.terms == ["region", "terrain", "generation", "build", "endregion"]


def test_thread_safe() -> None:
    texts = [REFERENCE, *PARITY_SNIPPETS, PARTIAL, CSHARP] * 20
    expected = [analyze_code(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(analyze_code, texts)) == expected
