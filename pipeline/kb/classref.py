"""Parse the generated class reference (``classes/class_*.rst``) into ``ClassDoc``s.

The files come from Godot's ``make_rst.py``, so the layout is fixed: a title,
an ``**Inherits:**`` line, a brief paragraph, "Description"/"Tutorials"
sections, summary tables (ignored: the same data is repeated in full below),
then "... Descriptions" sections whose items each start with a
``.. rst-class:: classref-<kind>`` line followed by one signature line and the
description, and end at a ``classref-item-separator``. Items are delimited by
that ``rst-class`` line rather than by the ``.. _class_X_method_y:`` target,
because overloaded constructors and operators share (or lack) a target.

Records are made from the parsed classes by :mod:`pipeline.kb.class_records`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pipeline.kb import rsttext as rt

MemberKind = Literal[
    "method", "property", "signal", "constant", "enum", "theme_property", "annotation", "constructor", "operator"
]


@dataclass(frozen=True)
class Member:
    cls: str
    name: str
    kind: MemberKind
    signature: str  # rendered, e.g. "void play(name: StringName = &\"\", custom_speed: float = 1.0)"
    description: str  # rendered prose; code examples are in code_blocks, not here
    code_blocks: tuple[str, ...] = ()  # GDScript examples from the description (never C#)
    enum: str | None = None  # for enum values: the enum they belong to
    accessors: tuple[str, ...] = ()  # property setter/getter names
    qualifiers: tuple[str, ...] = ()  # "const", "static", "virtual", "vararg", "required", "bitfield"
    target: str = ""  # RST label, e.g. "class_Button_theme_color_font_color"


@dataclass(frozen=True)
class ClassDoc:
    name: str
    doc_path: str
    inherits: list[str]  # nearest ancestor first
    brief: str
    description: str
    members: list[Member]
    code_blocks: tuple[str, ...] = ()  # GDScript examples in the class description
    tutorials: tuple[str, ...] = ()  # titles of linked tutorials

    @property
    def source(self) -> str:
        return f"class/{self.name}"


# --- blocks of prose and code ---------------------------------------------------

# Every class file defines these as :abbr: tooltips; the signature needs only the word,
# and "constructor"/"operator" only repeat what the member kind says.
_SUBSTITUTIONS = {
    "void": "void",
    "const": "const",
    "virtual": "virtual",
    "required": "required",
    "static": "static",
    "vararg": "vararg",
    "bitfield": "BitField",
    "constructor": "",
    "operator": "",
}
render_inline = rt.Inline(_SUBSTITUTIONS)
"""RST inline markup -> plain text (``:ref:`Vector2<class_Vector2>``` -> ``Vector2``)."""

_DROP_DIRECTIVES = {"container", "rst-class", "table", "toctree", "meta", "image", "figure", "only"}
_CODE_DIRECTIVES = {"code-block", "code", "sourcecode"}


def _gdscript(body: Sequence[str]) -> list[str]:
    """The block as code, unless it is C# or shader code."""
    block = rt.code_text(body)
    return [] if rt.looks_like_csharp(block) else [block]


def _tabs(block: list[str]) -> list[str]:
    """GDScript bodies of the ``.. code-tab:: gdscript`` entries in a ``.. tabs::`` block."""
    out: list[str] = []
    i = 0
    while i < len(block):
        d = rt.directive(block[i])
        if d and d.name == "code-tab":
            body, i = rt.indented_block(block, i + 1, d.column)
            if d.arg.lower() == "gdscript" and body:
                out.append(rt.code_text(body))
        else:
            i += 1
    return out


class _Block:
    """Collects a description's paragraphs and GDScript code blocks."""

    def __init__(self) -> None:
        self.paras: list[str] = []
        self.code: list[str] = []
        self.current: list[str] = []

    def flush(self) -> None:
        if self.current:
            # Lines join into one paragraph, except "- " list items, which start a new line.
            text = self.current[0]
            for ln in self.current[1:]:
                text += ("\n" if ln.startswith("- ") else " ") + ln
            self.paras.append(render_inline(text))
            self.current.clear()

    def directive(self, d: rt.Directive, body: list[str]) -> None:
        arg = d.arg.lower()
        if d.name == "tabs":
            self.code.extend(_tabs(body))
        elif d.name in _CODE_DIRECTIVES:
            if body and arg in ("", "gdscript", "gd"):
                self.code.extend(_gdscript(body))
            elif body and arg == "text":
                self.paras.append(rt.code_text(body))
        elif d.name not in _DROP_DIRECTIVES and body:  # note, warning, seealso...: keep the text
            inner, inner_code = render_block(rt.dedent(body))
            self.paras.append(f"{d.name.capitalize()}: {inner}" if inner else "")
            self.code.extend(inner_code)


def render_block(lines: list[str]) -> tuple[str, list[str]]:
    """Rendered prose (paragraphs separated by blank lines) and GDScript code blocks."""
    out = _Block()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        d = rt.directive(line)
        if not stripped or d or stripped.startswith(".. "):
            out.flush()  # a blank line, a directive, or a comment or label
            if d:
                body, i = rt.indented_block(lines, i + 1, d.column)
                out.directive(d, body)
            else:
                i += 1
        elif stripped.endswith("::"):
            # "Paragraph::" introduces a literal block; a lone "::" renders to nothing.
            if stripped != "::":
                out.current.append(rt.strip_literal_marker(stripped))
            out.flush()
            body, i = rt.indented_block(lines, i + 1, rt.indent(line))
            if body:
                out.code.extend(_gdscript(body))
        else:
            out.current.append(stripped)
            i += 1
    out.flush()
    return "\n\n".join(p for p in out.paras if p), out.code


# --- class files --------------------------------------------------------------

_ITEM_KINDS: dict[str, MemberKind] = {
    "method": "method",
    "property": "property",
    "signal": "signal",
    "enumeration": "enum",
    "enumeration-constant": "constant",
    "constant": "constant",
    "themeproperty": "theme_property",
    "constructor": "constructor",
    "operator": "operator",
    "annotation": "annotation",
}
_ITEM_START = re.compile(r"^\.\. rst-class:: classref-(?P<kind>[\w-]+)\s*$")
_LABEL = re.compile(r"^\.\. _(?P<label>[^:]+):\s*$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_OPERATOR = re.compile(r"\*\*(operator .+)\*\*\\ \(")
_PERMALINK = re.compile(r"\s*:ref:`🔗<[^`]*>`\s*$")
_QUALIFIER = re.compile(r"\|(const|static|virtual|vararg|required|bitfield)\|")
_CLASS_REF = re.compile(r":ref:`([^`<]+)<class_")
_DESCRIPTION_SECTIONS = {
    "Signals",
    "Enumerations",
    "Constants",
    "Annotations",
    "Property Descriptions",
    "Constructor Descriptions",
    "Method Descriptions",
    "Operator Descriptions",
    "Theme Property Descriptions",
}


@dataclass
class _Item:
    """The raw lines of one member item."""

    kind: str  # the classref-<kind> of its rst-class line
    signature: str
    body: list[str]
    accessors: list[str]
    end: int  # index of the line after the item


def _read_item(lines: list[str], i: int, kind: str) -> _Item:
    """The item whose ``rst-class`` line is ``lines[i - 1]``: signature line, setter/getter list, description."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    item = _Item(kind, lines[i] if i < len(lines) else "", [], [], i + 1)
    i += 1
    while i < len(lines):
        sm = _ITEM_START.match(lines[i])
        if sm and sm.group("kind") == "property-setget":
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("- ")):
                item.accessors.extend(_BOLD.findall(lines[i])[:1])
                i += 1
            continue
        if sm or _LABEL.match(lines[i]):
            break  # the next item, or the separator closing this one
        item.body.append(lines[i])
        i += 1
    while item.body and (not item.body[-1].strip() or item.body[-1].strip() == "----"):
        item.body.pop()
    item.end = i
    return item


def _name_and_signature(kind: MemberKind, raw_sig: str) -> tuple[str, str]:
    om = _OPERATOR.search(raw_sig) if kind == "operator" else None
    bm = _BOLD.search(raw_sig)
    name = om.group(1) if om else render_inline(bm.group(1)) if bm else ""
    sig_src = _PERMALINK.sub("", raw_sig)
    if om:
        sig_src = sig_src.replace(f"**{name}**", name)
    signature = re.sub(r"\s+", " ", render_inline(sig_src)).strip()
    if kind == "enum":
        signature = signature.rstrip(":")  # "enum ProcessMode:" introduces the values
    return name, signature


def _parse_members(cls: str, lines: list[str]) -> list[Member]:
    members: list[Member] = []
    enum: str | None = None  # the enum that the enumeration-constant items belong to
    label = ""
    i = 0
    while i < len(lines):
        m = _ITEM_START.match(lines[i])
        lm = _LABEL.match(lines[i])
        if lm or not m or m.group("kind") not in _ITEM_KINDS:
            label = lm.group("label") if lm else label
            i += 1
            continue
        item = _read_item(lines, i + 1, m.group("kind"))
        kind = _ITEM_KINDS[item.kind]
        name, signature = _name_and_signature(kind, item.signature)
        enum = name if kind == "enum" else enum
        description, code = render_block(item.body)
        members.append(
            Member(
                cls=cls,
                name=name,
                kind=kind,
                signature=signature,
                description=description,
                code_blocks=tuple(code),
                enum=enum if item.kind == "enumeration-constant" else None,
                accessors=tuple(item.accessors),
                qualifiers=tuple(dict.fromkeys(_QUALIFIER.findall(item.signature))),
                target=label,
            )
        )
        label = ""
        i = item.end
    return members


def _intro(lines: list[str]) -> tuple[list[str], list[str]]:
    """(inherited classes, brief paragraph lines) from the lines between the title and the first section."""
    inherits: list[str] = []
    intro: list[str] = []
    for line in lines:
        if line.startswith("**Inherits:**"):
            inherits = _CLASS_REF.findall(line)
        elif line.startswith(".. rst-class::"):
            break  # the brief ends where the first section group starts
        elif not line.startswith("**Inherited By:**"):
            intro.append(line)
    return inherits, intro


def parse_class(text: str, doc_path: str) -> ClassDoc:
    """Parse one ``classes/class_*.rst`` file."""
    lines = text.splitlines()
    spans = rt.section_spans(lines)
    title = next((h for h, _ in spans if h.char == "="), None)
    if title is None:
        raise ValueError(f"{doc_path}: no class title")
    sections = [(h, end) for h, end in spans if h.char == "-"]
    inherits, intro = _intro(lines[title.body : sections[0][0].start if sections else len(lines)])
    brief, _ = render_block(intro)

    description = ""
    code: list[str] = []
    tutorials: list[str] = []
    members: list[Member] = []
    for heading, end in sections:
        body = lines[heading.body : end]
        if heading.title == "Description":
            description, code = render_block(body)
        elif heading.title == "Tutorials":
            tutorials = [render_inline(ln[2:].strip()) for ln in body if ln.startswith("- ")]
        elif heading.title in _DESCRIPTION_SECTIONS:
            members.extend(_parse_members(title.title, body))
    return ClassDoc(title.title, doc_path, inherits, brief, description, members, tuple(code), tuple(tutorials))


def member_index(classes: Iterable[ClassDoc]) -> dict[str, list[str]]:
    """Member name -> sorted names of the classes that define it (enum values included)."""
    index: dict[str, set[str]] = {}
    for cls in classes:
        for m in cls.members:
            index.setdefault(m.name, set()).add(cls.name)
    return {k: sorted(v) for k, v in sorted(index.items())}
