"""Tutorial RST -> DocsChunk parsing, on the real corpus and on small inline pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.kb.rst import parse_page, source_label
from pipeline.kb.symbols import extract_api_symbols
from pipeline.records import DocsChunk

PLAYER_2D = "getting_started/first_2d_game/03.coding_the_player.rst"
PLAYER_3D = "getting_started/first_3d_game/03.player_movement_code.rst"

# A hand-made slice of the class-reference member index.
MEMBERS: dict[str, list[str]] = {
    "clamp": ["Vector2", "Vector2i", "Vector3", "Vector3i", "float", "int"],
    "play": ["AnimatedSprite2D", "AnimationPlayer", "AudioStreamPlayer"],
    "stop": ["AnimatedSprite2D", "AnimationPlayer", "AudioStreamPlayer"],
    "is_action_pressed": ["Input"],
    "flip_h": ["AnimatedSprite2D", "Sprite2D"],
    "normalized": ["Vector2", "Vector3", "Quaternion"],
    "move_and_slide": ["CharacterBody2D", "CharacterBody3D"],
}


def _parse(docs_root: Path, rel: str, members: dict[str, list[str]] | None = None) -> list[DocsChunk]:
    return parse_page((docs_root / rel).read_text(encoding="utf-8"), rel, members)


def _base_section(section: str) -> str:
    return re.sub(r" \(part \d+\)$", "", section)


def _holding(records: list[DocsChunk], needle: str) -> list[tuple[DocsChunk, str]]:
    return [(r, block) for r in records for block in r.code_blocks if needle in block]


@pytest.fixture(scope="module")
def corpus(docs_root: Path) -> list[DocsChunk]:
    pages = sorted(p for top in ("getting_started", "tutorials") for p in (docs_root / top).rglob("*.rst"))
    assert len(pages) == 258
    records: list[DocsChunk] = []
    for page in pages:
        records.extend(parse_page(page.read_text(encoding="utf-8"), page.relative_to(docs_root).as_posix()))
    return records


@pytest.fixture(scope="module")
def player_2d(docs_root: Path) -> list[DocsChunk]:
    return _parse(docs_root, PLAYER_2D, MEMBERS)


# --- source labels -----------------------------------------------------------


@pytest.mark.parametrize(
    ("doc_path", "label"),
    [
        (PLAYER_2D, "first_2d_game/coding_the_player"),
        (PLAYER_3D, "first_3d_game/player_movement_code"),
        ("tutorials/physics/using_character_body_2d.rst", "physics/using_character_body_2d"),
        ("tutorials/migrating/upgrading_to_godot_4.rst", "migrating/upgrading_to_godot_4"),
    ],
)
def test_source_label(doc_path: str, label: str) -> None:
    assert source_label(doc_path) == label


# --- first 2D game: coding the player ----------------------------------------


def test_player_2d_movement_clamp_and_flip_are_separate_blocks(player_2d: list[DocsChunk]) -> None:
    [(movement, movement_code)] = _holding(player_2d, 'Input.is_action_pressed("move_right")')
    assert "$AnimatedSprite2D.stop()" in movement_code
    assert movement_code.startswith("func _process(delta):")

    [(clamp, clamp_code)] = _holding(player_2d, "position = position.clamp(Vector2.ZERO, screen_size)")
    assert clamp_code == "position += velocity * delta\nposition = position.clamp(Vector2.ZERO, screen_size)"
    assert "is_action_pressed" not in clamp_code

    [(flip, _)] = _holding(player_2d, "$AnimatedSprite2D.flip_h = velocity.x < 0")

    assert movement.id != clamp.id
    assert _base_section(movement.section) == _base_section(clamp.section) == "Coding the player"
    assert movement.section != clamp.section
    assert re.fullmatch(r"Coding the player \(part \d+\)", clamp.section)
    assert _base_section(flip.section) == "Coding the player > Choosing animations"
    assert all(r.title == "Coding the player" for r in player_2d)


def test_player_2d_parts_carry_their_lead_in_prose(player_2d: list[DocsChunk]) -> None:
    [(movement, _)] = _holding(player_2d, 'Input.is_action_pressed("move_right")')
    [(clamp, _)] = _holding(player_2d, "position.clamp(")
    assert "You can detect whether a key is pressed using Input.is_action_pressed()" in movement.content
    assert "We can also use clamp() to prevent it from leaving the screen." in clamp.content
    # A part starts right after the previous part's code block.
    assert movement.content.startswith("Now we can use the _process() function")


def test_player_2d_api_symbols(player_2d: list[DocsChunk]) -> None:
    [(movement, _)] = _holding(player_2d, 'Input.is_action_pressed("move_right")')
    [(clamp, _)] = _holding(player_2d, "position.clamp(")
    assert {"Input.is_action_pressed", "AnimatedSprite2D.play", "AnimatedSprite2D.stop"} <= set(movement.api_symbols)
    assert "Vector2.clamp" in clamp.api_symbols
    assert "Vector3.clamp" not in clamp.api_symbols  # Vector3 is not mentioned in that code
    for r in player_2d:
        assert r.api_symbols == sorted(set(r.api_symbols))


def test_player_2d_ids(player_2d: list[DocsChunk]) -> None:
    ids = [r.id for r in player_2d]
    assert len(ids) == len(set(ids))
    assert all(i.startswith("docs:first_2d_game/coding_the_player#coding-the-player") for i in ids)
    assert "docs:first_2d_game/coding_the_player#coding-the-player-p4" in ids


# --- first 3D game ------------------------------------------------------------


def test_player_3d_full_script_is_one_block(docs_root: Path) -> None:
    blocks = [b for r in _parse(docs_root, PLAYER_3D) for b in r.code_blocks]
    full = [b for b in blocks if b.startswith("extends CharacterBody3D") and "$Pivot.basis" in b]
    assert full, "the complete player.gd block is missing"
    script = full[-1]
    assert "$Pivot.basis = Basis.looking_at(direction)" in script
    assert script.endswith("move_and_slide()")
    assert "\n\n" in script  # inner blank lines kept
    assert "public" not in script


# --- whole corpus ---------------------------------------------------------------


def test_corpus_counts(corpus: list[DocsChunk]) -> None:
    # Without the member index; C# is checked over the whole build in test_kb_build.py.
    assert len(corpus) == 2416
    assert sum(len(r.code_blocks) for r in corpus) == 747


def test_corpus_code_is_dedented_and_trimmed(corpus: list[DocsChunk]) -> None:
    for r in corpus:
        for block in r.code_blocks:
            lines = block.split("\n")
            assert block.strip(), r.id
            assert lines[-1].strip(), r.id
            assert any(ln and not ln[0].isspace() for ln in lines), r.id


def test_corpus_ids_unique(corpus: list[DocsChunk]) -> None:
    ids = [r.id for r in corpus]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"docs:[\w./-]+#[\w-]+", i) for i in ids)


def test_corpus_refs_rendered(corpus: list[DocsChunk]) -> None:
    assert [r.id for r in corpus if ":ref:" in r.content] == []
    assert [r.id for r in corpus if re.search(r":(kbd|doc|abbr|menu|ui|button):`", r.content)] == []
    assert [r.id for r in corpus if re.search(r"(?m)^\.\. |\|image\d+\|", r.content)] == []


def test_corpus_records_are_not_empty(corpus: list[DocsChunk]) -> None:
    assert all(r.content or r.code_blocks for r in corpus)
    assert all(len(r.content) <= 6000 for r in corpus if not re.search(r"\(part \d+\)$", r.section))


def test_corpus_skips_shell_and_output_literals(corpus: list[DocsChunk]) -> None:
    blocks = [b for r in corpus for b in r.code_blocks]
    assert not [b for b in blocks if b.lstrip().startswith(("ffmpeg ", "godot --path"))]


def test_corpus_ref_symbols(corpus: list[DocsChunk]) -> None:
    symbols = {s for r in corpus for s in r.api_symbols}
    assert "Node._ready" in symbols  # from class_Node_private_method__ready
    assert "Parallax2D.repeat_size" in symbols  # from the lower-case label class_parallax2d_property_repeat_size


# --- small inline pages -----------------------------------------------------------


PAGE = """\
.. _doc_demo:

=====
Demo
=====

Intro with :ref:`class_Input`, :ref:`the play method <class_AnimatedSprite2D_method_play>`,
``literal``, *em*, **strong**, :kbd:`Ctrl + S` and :ref:`doc_vector_math`.

.. image:: img/x.webp
   :alt: nothing

.. note:: Keep this
          admonition text.

Heading only
------------

Sub
~~~

Code first:

.. tabs::
   .. code-tab:: gdscript GDScript

            var a = 1
        var b = 2

   .. code-tab:: csharp

       public int A = 1;

Then a misspelt tab:

.. tabs::
  .. code-tab :: GDScript

    func f():
        pass

  .. code-tab:: cpp

    int a;

Shell::

    $ godot --version

And a literal::

    print("hi")

.. code-block:: shell

    ls -la

.. highlight:: none

::

    not code

Other
-----

.. |image1| image:: img/y.webp

|image1| Text with :ref:`class_Node_property_name` and |image1|.
"""


def test_inline_page_structure() -> None:
    records = parse_page(PAGE, "tutorials/demo/01.demo.rst")
    sections = [r.section for r in records]
    assert sections[0] == "Demo"
    assert "Demo > Heading only" not in sections  # heading-only section: no record
    assert {s for s in sections if s.startswith("Demo > Heading only > Sub")} == {
        "Demo > Heading only > Sub (part 1)",
        "Demo > Heading only > Sub (part 2)",
        "Demo > Heading only > Sub (part 3)",
    }
    assert sections[-1] == "Demo > Other"  # "-" is level 2 again, "~" level 3
    assert records[0].id == "docs:demo/demo#demo"


def test_inline_page_rendering() -> None:
    intro = parse_page(PAGE, "tutorials/demo/demo.rst")[0]
    assert intro.content.startswith("Intro with Input, the play method, literal, em, strong, Ctrl + S and vector math.")
    assert "Note: Keep this admonition text." in intro.content
    assert "image" not in intro.content and "alt" not in intro.content
    assert intro.api_symbols == ["AnimatedSprite2D.play", "Input"]
    other = parse_page(PAGE, "tutorials/demo/demo.rst")[-1]
    assert other.content == "Text with Node.name and ."
    assert other.api_symbols == ["Node.name"]


def test_inline_page_code_blocks() -> None:
    blocks = [b for r in parse_page(PAGE, "tutorials/demo/demo.rst") for b in r.code_blocks]
    assert blocks == [
        "    var a = 1\nvar b = 2",  # first line deeper than the rest: kept whole
        "func f():\n    pass",
        'print("hi")',
    ]


def test_long_section_is_split_at_paragraphs() -> None:
    para = "Lorem ipsum dolor sit amet. " * 40
    page = "Long\n====\n\n" + "\n\n".join(f"{i} {para}" for i in range(12)) + "\n"
    records = parse_page(page, "tutorials/x/long.rst")
    assert len(records) > 1
    assert all(len(r.content) <= 6000 for r in records)
    assert [r.section for r in records] == [f"Long (part {n})" for n in range(1, len(records) + 1)]
    assert "".join(r.content for r in records).count("Lorem") == 12 * 40


def test_tab_indented_code() -> None:
    page = "T\n=\n\nText:\n\n.. code-block:: gdscript\n\n\tx = 1\n\tif x:\n\t\ty = 2\n\nAfter.\n"
    [record] = parse_page(page, "tutorials/t.rst")
    assert record.code_blocks == ["x = 1\nif x:\n\ty = 2"]
    assert record.content == "Text:\n\nAfter."


# --- symbols -------------------------------------------------------------------------


def test_symbols_rules() -> None:
    assert extract_api_symbols("position = position.clamp(Vector2.ZERO, screen_size)", MEMBERS) == [
        "Vector2.ZERO",
        "Vector2.clamp",
    ]
    assert extract_api_symbols('$Path/To/AnimatedSprite2D.play()\nget_node("AnimatedSprite2D").stop()', MEMBERS) == [
        "AnimatedSprite2D.play",
        "AnimatedSprite2D.stop",
    ]
    # The member index vetoes a node name that is not the class defining the member.
    assert extract_api_symbols("$Pivot.play()", MEMBERS) == []
    assert extract_api_symbols("$Pivot.play()") == ["Pivot.play"]
    # Unresolvable lowercase receivers emit nothing; strings and comments are ignored.
    assert extract_api_symbols('thing.clamp(1)\nvar s = "Input.is_action_pressed" # Vector2.ZERO', MEMBERS) == []


def test_symbols_types() -> None:
    code = (
        "extends CharacterBody3D\n"
        "var sprite: Sprite2D\n"
        "func f(n) -> Vector3:\n"
        "    var b = Area2D.new()\n"
        "    if n is Node3D: return n as Camera3D\n"
        "    move_and_slide()\n"
    )
    assert extract_api_symbols(code) == ["Area2D", "Camera3D", "CharacterBody3D", "Node3D", "Sprite2D", "Vector3"]
    with_classes = extract_api_symbols(code, MEMBERS, classes={"Area2D", "CharacterBody3D"})
    assert with_classes == ["Area2D", "CharacterBody3D", "CharacterBody3D.move_and_slide"]
