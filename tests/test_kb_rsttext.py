"""The shared RST toolkit (pipeline/kb/rsttext.py), on real snippets of the Godot docs corpus."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from pipeline.kb import api_patterns, class_records, classref, migrating, rst
from pipeline.kb import rsttext as rt

READERS: tuple[ModuleType, ...] = (rst, classref, migrating, class_records, api_patterns)


def _lines(docs_root: Path, rel: str) -> list[str]:
    return (docs_root / rel).read_text(encoding="utf-8").split("\n")


def _line(docs_root: Path, rel: str, needle: str) -> str:
    return next(ln for ln in _lines(docs_root, rel) if needle in ln)


def _directive_bodies(lines: list[str], name: str, arg: str) -> list[str]:
    """Code of every ``.. name:: arg`` directive, read with the toolkit."""
    out: list[str] = []
    for i, line in enumerate(lines):
        d = rt.directive(line)
        if d and d.name == name and d.arg.lower() == arg:
            body, _ = rt.indented_block(lines, i + 1, d.column)
            out.append(rt.code_text(body))
    return out


# --- one tab width, one copy of each helper ---------------------------------------------


def test_one_tab_width() -> None:
    assert rt.TAB_WIDTH == 8  # docutils' tab stops
    assert rt.indent("\tx") == rt.indent("   \tx") == rt.indent("        x") == 8
    assert rt.indent("        \tx") == 16
    # Tabs after the common indentation are code, not indentation: they stay.
    assert rt.dedent(["\tif x:", "\t\ty = 2", "", "\tpass  "]) == ["if x:", "\ty = 2", "", "pass"]


def test_readers_keep_no_copy_of_a_toolkit_helper() -> None:
    toolkit = {name.lstrip("_") for name, obj in vars(rt).items() if inspect.isfunction(obj)}
    # Names the readers' own copies had before the toolkit existed.
    toolkit |= {"dedent_lines", "not_gdscript", "body", "role", "inline_sub", "plain", "link_text"}
    for module in READERS:
        source = inspect.getsource(module)
        assert not re.search(r"expandtabs|\b_?TAB(?:_WIDTH)?\s*=", source), module.__name__
        functions = {
            name.lstrip("_")
            for name, obj in vars(module).items()
            if inspect.isfunction(obj) and obj.__module__ == module.__name__
        }
        assert not functions & toolkit, (module.__name__, functions & toolkit)


def test_tab_indented_code_and_directive_bodies(docs_root: Path) -> None:
    # A code-block indented with one tab (physics interpolation page).
    rel = "tutorials/physics/interpolation/physics_interpolation_introduction.rst"
    blocks = _directive_bodies(_lines(docs_root, rel), "code-block", "gdscript")
    assert "fraction = 0.02 / 0.10\nfraction = 0.2" in blocks
    records = rst.parse_page((docs_root / rel).read_text(encoding="utf-8"), rel)
    assert "fraction = 0.02 / 0.10\nfraction = 0.2" in [b for r in records for b in r.code_blocks]
    # Class files indent the "contribute" container's body with a tab; the container is dropped whole.
    rel = "classes/class_editornode3dgizmo.rst"
    cls = classref.parse_class((docs_root / rel).read_text(encoding="utf-8"), rel)
    action = next(m for m in cls.members if m.name == "_begin_handle_action")
    assert action.description == ""


# --- headings -------------------------------------------------------------------------


def test_headings_of_a_class_file(docs_root: Path) -> None:
    found = rt.headings(_lines(docs_root, "classes/class_animatedsprite2d.rst"))
    # The file's many "----" item separators follow a blank line: transitions, not headings.
    assert [(h.title, h.char, h.level) for h in found] == [
        ("AnimatedSprite2D", "=", 0),
        ("Description", "-", 1),
        ("Tutorials", "-", 1),
        ("Properties", "-", 1),
        ("Methods", "-", 1),
        ("Signals", "-", 1),
        ("Property Descriptions", "-", 1),
        ("Method Descriptions", "-", 1),
    ]


def test_headings_of_tutorial_pages(docs_root: Path) -> None:
    lines = _lines(docs_root, "tutorials/migrating/upgrading_to_godot_4.rst")
    spans = rt.section_spans(lines)
    assert len(spans) == 20
    levels = {h.char: h.level for h, _ in spans}
    assert levels == {"=": 0, "-": 1, "~": 2}
    titles = [h.title for h, _ in spans]
    table = titles.index("Automatically renamed nodes and resources")
    assert titles[table + 1] == "Manually renaming methods, properties, signals and constants"
    heading, end = spans[table]
    assert lines[heading.start] == heading.title and end == spans[table + 1][0].start
    assert lines[heading.body].strip() == "" and lines[heading.body - 1].startswith("~~~")
    assert rt.section_spans(["Text without any heading."]) == []
    # "3D\n==": an underline shorter than its title, accepted as docutils does (with a warning).
    found = rt.headings(_lines(docs_root, "tutorials/3d/index.rst"))
    assert [(h.title, h.level) for h in found] == [("3D", 0), ("Rendering", 1), ("Optimization", 1), ("Tools", 1)]


# --- roles and inline markup ---------------------------------------------------------------


def test_label_symbols() -> None:
    assert rt.label_symbol("class_AnimatedSprite2D_method_play") == "AnimatedSprite2D.play"
    assert rt.label_symbol("class_Node_private_method__ready") == "Node._ready"
    assert rt.label_symbol("class_Control_theme_font_size_font_size") == "Control.font_size"
    assert rt.label_symbol("class_Vector2_constructor_Vector2") == "Vector2"
    assert rt.label_symbol("class_@GlobalScope_method_clamp") == "@GlobalScope.clamp"
    # Sphinx labels are case-insensitive; the caller spells a lower-case class.
    assert rt.label_symbol("class_parallax2d_property_scroll_scale", {"parallax2d": "Parallax2D"}.get) == (
        "Parallax2D.scroll_scale"
    )
    assert rt.label_symbol("doc_gdscript") is None
    assert rt.label_text("doc_c_sharp_differences") == "c sharp differences"


def test_role_rendering() -> None:
    assert rt.render_role("ref", "the play method <class_AnimatedSprite2D_method_play>") == "the play method"
    assert rt.render_role("ref", "class_Input") == "Input"
    assert rt.render_role("ref", "🔗<class_Node_method_get_child>") == ""  # the class reference's permalink
    assert rt.render_role("doc", "Audio buses <../tutorials/audio/audio_buses>") == "Audio buses"
    assert rt.render_role("doc", "../tutorials/audio/audio_buses") == "audio buses"
    assert rt.render_role("abbr", "SSAO (Screen-Space Ambient Occlusion)") == "SSAO (Screen-Space Ambient Occlusion)"
    assert rt.render_role("kbd", "Ctrl + Shift + R") == "Ctrl + Shift + R"


def test_inline_on_real_lines(docs_root: Path) -> None:
    plain = rt.Inline({})
    line = _line(docs_root, "tutorials/2d/2d_parallax.rst", "The backbone of the parallax effect")
    assert plain(line) == "The backbone of the parallax effect is the scroll_scale property."
    # The quote form of a role, as written in the migration page's grid table.
    line = _line(docs_root, "tutorials/migrating/upgrading_to_godot_4.rst", ":ref:'class_Camera3D'")
    assert "Camera's pyramid shape was moved to Camera3D." in plain(line)
    # Class-reference signatures: substitutions, escapes, roles and the permalink.
    line = _line(docs_root, "classes/class_animatedsprite2d.rst", "**get_playing_speed**")
    assert classref.render_inline(line) == "float get_playing_speed() const"


def test_inline_fixes_on_real_lines(docs_root: Path) -> None:
    # Literal text is kept verbatim: the spaces are the point of these sentences.
    rel = "tutorials/scripting/gdscript/gdscript_documentation_comments.rst"
    page = rst.parse_page((docs_root / rel).read_text(encoding="utf-8"), rel)
    assert [r.section for r in page if "for example @tutorial  :, it won't" in r.content] == [
        "GDScript documentation comments > Documenting a script > Tags"
    ]
    line = _line(docs_root, "classes/class_textserver.rst", "the second segment of the following text")
    assert "following text test  \\n  next, is next if the flag is set, and   next if" in classref.render_inline(line)
    # Bold with an escaped asterisk, and the default role, leave no markup behind.
    line = _line(docs_root, "classes/class_editorsettings.rst", "Linux/\\*BSD:")
    assert classref.render_inline(line) == "Linux/*BSD:"
    line = _line(docs_root, "classes/class_resourceimporterimagefont.rst", "for both `a` and `b`")
    assert classref.render_inline(line).endswith("for both a and b characters.")
    # The migration notes keep code in backticks but drop emphasis.
    note = rt.Inline({}, literal="`{}`")
    assert note("The ``Engine.editor_hint`` property was removed in favor of the *method*.") == (
        "The `Engine.editor_hint` property was removed in favor of the method."
    )


# --- GDScript or C# -------------------------------------------------------------------------


def test_csharp_and_shader_detection(docs_root: Path) -> None:
    lines = _lines(docs_root, "tutorials/2d/2d_movement.rst")
    csharp = _directive_bodies(lines, "code-tab", "csharp")
    gdscript = _directive_bodies(lines, "code-tab", "gdscript gdscript")
    assert csharp and gdscript and len(csharp) == len(gdscript)
    assert all(rt.looks_like_csharp(c) for c in csharp)
    assert not any(rt.looks_like_csharp(g) for g in gdscript)
    # A sky shader in a bare literal block of the Cubemap page.
    shader = _line(docs_root, "classes/class_cubemap.rst", "shader_type sky;")
    assert rt.looks_like_csharp(shader + "\n    uniform float exposure : hint_range(0, 128) = 1.0;")
    # GDScript whose comments quote JavaScript ("# new ArrayBuffer(10)") stays GDScript.
    rel = "classes/class_javascriptobject.rst"
    cls = classref.parse_class((docs_root / rel).read_text(encoding="utf-8"), rel)
    assert any("# new ArrayBuffer(10)" in b for b in cls.code_blocks)


@pytest.mark.parametrize(
    ("line", "text"),
    [("Here's the output::", "Here's the output:"), ("See the code below ::", "See the code below"), ("::", "")],
)
def test_literal_marker(line: str, text: str) -> None:
    assert rt.strip_literal_marker(line) == text
