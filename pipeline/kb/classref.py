"""Parse the generated class reference (``classes/class_*.rst``) into records.

The files come from Godot's ``make_rst.py``, so the layout is fixed: a title,
an ``**Inherits:**`` line, a brief paragraph, "Description"/"Tutorials"
sections, summary tables (ignored: the same data is repeated in full below),
then "... Descriptions" sections whose items each start with a
``.. rst-class:: classref-<kind>`` line followed by one signature line and the
description, and end at a ``classref-item-separator``. Items are delimited by
that ``rst-class`` line rather than by the ``.. _class_X_method_y:`` target,
because overloaded constructors and operators share (or lack) a target.

Records: one docs_chunk for the class description, docs_chunks for small groups
of members, and one api_mapping per member (one per enum for enum values, one
per class for constructors, none for operators) plus one per class.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pipeline.records import ApiMapping, DocsChunk

MemberKind = Literal[
    "method", "property", "signal", "constant", "enum", "theme_property", "annotation", "constructor", "operator"
]

MAX_GROUP_MEMBERS = 8
MAX_GROUP_CHARS = 3000
MAX_SENTENCE_CHARS = 300


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


# --- inline markup -----------------------------------------------------------

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

_INLINE = re.compile(
    r"``(?P<lit>.+?)``(?!`)"
    r"|:(?P<role>[a-z]+):`(?P<rtext>[^`]*)`"
    r"|`(?P<ltext>[^`<]*?)\s*<(?P<url>[^`>]*)>`__?"
    r"|\*\*(?P<bold>(?:[^*\\]|\\.)+?)\*\*"
    r"|\|(?P<sub>[a-z]+)\|"
    r"|\\(?P<esc>.?)"  # "\\" at the very end: an escaped line break
    r"|(?<![\w*])\*(?P<it>[^*\s][^*]*?)\*(?![\w*])"
    r"|(?<![\w`])`(?P<dflt>[^`]+?)`(?![\w`])",  # the default role: italic text
    re.S,
)
_ROLE_TARGET = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]*)>$", re.S)


def _role(role: str, body: str) -> str:
    m = _ROLE_TARGET.match(body)
    text, target = (m.group("text"), m.group("target")) if m else ("", body)
    if role == "ref":
        if text == "🔗":
            return ""  # the permalink icon after every signature
        if text:
            return text
        for prefix in ("class_", "enum_", "doc_"):
            if target.startswith(prefix):
                target = target[len(prefix) :]
                break
        return target.replace("_", " ") if body.startswith("doc_") else target
    if role == "doc":
        return text or target.rsplit("/", 1)[-1].replace("_", " ")
    if role == "abbr":
        return re.sub(r"\s*\(.*\)\s*$", "", body, flags=re.S)
    return text or body  # kbd, math, ...


def _inline_sub(m: re.Match[str]) -> str:
    if m.group("lit") is not None:
        return m.group("lit").replace(" ", "\x01")  # protected from the whitespace collapse
    if m.group("dflt") is not None:
        return m.group("dflt")
    if m.group("role") is not None:
        return _role(m.group("role"), m.group("rtext"))
    if m.group("url") is not None:
        return m.group("ltext") or m.group("url")
    if m.group("bold") is not None:
        return render_inline(m.group("bold"))
    if m.group("sub") is not None:
        return _SUBSTITUTIONS.get(m.group("sub"), "")
    if m.group("esc") is not None:
        return "" if m.group("esc") in (" ", "\n") else m.group("esc")
    return render_inline(m.group("it"))


def render_inline(text: str) -> str:
    """RST inline markup -> plain text (``:ref:`Vector2<class_Vector2>``` -> ``Vector2``)."""
    if not any(c in text for c in "`*|\\"):
        return re.sub(r"[ \t]{2,}", " ", text)
    return re.sub(r"[ \t]{2,}", " ", _INLINE.sub(_inline_sub, text)).replace("\x01", " ")


# --- block structure -----------------------------------------------------------

_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\. (?P<name>[\w:-]+)::\s*(?P<arg>.*)$")
_NOT_GDSCRIPT = re.compile(
    r"^\s*(?:using\s+[\w.]+;|public\s|private\s|namespace\s|shader_type\s)"  # C# / shader headers
    r"|\bGD\.\w+\(|\bnew\s+[A-Z]\w*\s*\(|=>\s*\{|\bvoid\s+\w+\s*\("  # C# expressions
    r"|^\s*(?:uniform|varying|float|vec[234]|mat[234]|ivec[234])\s+\w+\s*[=;(]",  # typed shader declarations
    re.M,
)
_DROP_DIRECTIVES = {"container", "rst-class", "table", "toctree", "meta", "image", "figure", "only"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _body(lines: list[str], i: int, min_indent: int) -> tuple[list[str], int]:
    """The indented block starting at ``lines[i]`` (lines indented > ``min_indent``, or blank)."""
    out: list[str] = []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > min_indent):
        out.append(lines[i])
        i += 1
    while out and not out[-1].strip():
        out.pop()
    return out, i


def _dedent_lines(lines: list[str]) -> list[str]:
    width = min((_indent(ln) for ln in lines if ln.strip()), default=0)
    return [ln[width:] if ln.strip() else "" for ln in lines]


def _dedent(lines: list[str]) -> str:
    return "\n".join(_dedent_lines(lines)).strip("\n").expandtabs(4)


def _not_gdscript(code: str) -> bool:
    """C# (or shader code) in a language-less literal block: GDScript must not end
    statements with ``;`` nor use C#-only syntax."""
    stmts = [re.sub(r"#.*", "", ln).strip() for ln in code.splitlines()]
    stmts = [ln for ln in stmts if ln and not ln.startswith("//")]
    if _NOT_GDSCRIPT.search("\n".join(stmts)):
        return True
    return bool(stmts) and sum(ln.endswith(";") for ln in stmts) * 2 > len(stmts)


def _tabs(block: list[str]) -> list[str]:
    """GDScript bodies of the ``.. code-tab:: gdscript`` entries in a ``.. tabs::`` block."""
    out: list[str] = []
    i = 0
    while i < len(block):
        d = _DIRECTIVE.match(block[i])
        if d and d.group("name") == "code-tab":
            body, i = _body(block, i + 1, len(d.group("indent")))
            if d.group("arg").strip().lower() == "gdscript" and body:
                out.append(_dedent(body))
        else:
            i += 1
    return out


def render_block(lines: list[str]) -> tuple[str, list[str]]:
    """Rendered prose (paragraphs separated by blank lines) and GDScript code blocks."""
    paras: list[str] = []
    code: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            text = ""
            for ln in current:
                item = ln.startswith("- ")
                text += ("\n" if item and text else " " if text else "") + ln
            paras.append(render_inline(text).strip())
            current.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        d = _DIRECTIVE.match(line)
        if not stripped:
            flush()
            i += 1
        elif d:
            flush()
            name, arg = d.group("name"), d.group("arg").strip().lower()
            body, i = _body(lines, i + 1, len(d.group("indent")))
            if name == "tabs":
                code.extend(_tabs(body))
            elif name in ("code-block", "code", "sourcecode"):
                if body and arg in ("", "gdscript", "gd"):
                    block = _dedent(body)
                    if not _not_gdscript(block):
                        code.append(block)
                elif body and arg == "text":
                    paras.append(_dedent(body))
            elif name in _DROP_DIRECTIVES or name.startswith("_"):
                pass
            elif body:  # note, warning, seealso...: keep the text
                inner, inner_code = render_block(_dedent_lines(body))
                paras.append(f"{name.capitalize()}: {inner}" if inner else "")
                code.extend(inner_code)
        elif stripped.startswith(".. "):
            flush()  # a comment or a label
            i += 1
        elif stripped.endswith("::"):
            # "Paragraph::" introduces a literal block; a lone "::" renders to nothing.
            if stripped != "::":
                current.append(stripped[:-1])
            flush()
            body, i = _body(lines, i + 1, _indent(line))
            if body:
                block = _dedent(body)
                if not _not_gdscript(block):
                    code.append(block)
        else:
            current.append(stripped)
            i += 1
    flush()
    return "\n\n".join(p for p in paras if p), code


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


def _headings(lines: list[str], char: str) -> list[tuple[str, int]]:
    """(title, index of the title line) for headings underlined with ``char``."""
    out = []
    for i in range(1, len(lines)):
        u = lines[i]
        if u and u[0] == char and u.strip(char) == "":
            t = lines[i - 1].strip()
            if t and not t.startswith("..") and len(u.rstrip()) >= len(t):
                out.append((t, i - 1))
    return out


def _parse_members(cls: str, lines: list[str]) -> list[Member]:
    members: list[Member] = []
    enum: str | None = None
    label = ""
    i = 0
    while i < len(lines):
        m = _ITEM_START.match(lines[i])
        lm = _LABEL.match(lines[i])
        if lm:
            label = lm.group("label")
            i += 1
            continue
        if not m or m.group("kind") not in _ITEM_KINDS:
            i += 1
            continue
        kind = _ITEM_KINDS[m.group("kind")]
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        raw_sig = lines[i] if i < len(lines) else ""
        i += 1
        body: list[str] = []
        accessors: list[str] = []
        while i < len(lines):
            line = lines[i]
            sm = _ITEM_START.match(line)
            if sm and sm.group("kind") == "property-setget":
                i += 1
                while i < len(lines) and (not lines[i].strip() or lines[i].startswith("- ")):
                    accessors.extend(_BOLD.findall(lines[i])[:1])
                    i += 1
                continue
            if sm or _LABEL.match(line):
                break  # the next item, or the separator closing this one
            body.append(line)
            i += 1
        while body and (not body[-1].strip() or body[-1].strip() == "----"):
            body.pop()

        om = _OPERATOR.search(raw_sig) if kind == "operator" else None
        bm = _BOLD.search(raw_sig)
        name = om.group(1) if om else render_inline(bm.group(1)) if bm else ""
        sig_src = _PERMALINK.sub("", raw_sig)
        if om:
            sig_src = sig_src.replace(f"**{name}**", name)
        signature = re.sub(r"\s+", " ", render_inline(sig_src)).strip()
        if kind == "enum":
            signature = signature.rstrip(":")  # "enum ProcessMode:" introduces the values
            enum = name  # the enumeration-constant items that follow belong to it
        description, code = render_block(body)
        members.append(
            Member(
                cls=cls,
                name=name,
                kind=kind,
                signature=signature,
                description=description,
                code_blocks=tuple(code),
                enum=enum if kind == "constant" and m.group("kind") == "enumeration-constant" else None,
                accessors=tuple(accessors),
                qualifiers=tuple(dict.fromkeys(_QUALIFIER.findall(raw_sig))),
                target=label,
            )
        )
        label = ""
    return members


def parse_class(text: str, doc_path: str) -> ClassDoc:
    """Parse one ``classes/class_*.rst`` file."""
    lines = text.splitlines()
    titles = _headings(lines, "=")
    if not titles:
        raise ValueError(f"{doc_path}: no class title")
    name, title_at = titles[0]
    sections = _headings(lines, "-")
    ends = [at for _, at in sections[1:]] + [len(lines)] if sections else []
    bounds = [(t, at + 2, end) for (t, at), end in zip(sections, ends, strict=True)]

    intro_end = sections[0][1] if sections else len(lines)
    inherits: list[str] = []
    intro: list[str] = []
    for line in lines[title_at + 2 : intro_end]:
        if line.startswith("**Inherits:**"):
            inherits = _CLASS_REF.findall(line)
        elif line.startswith("**Inherited By:**"):
            continue
        elif line.startswith(".. rst-class::"):
            break  # the brief ends where the first section group starts
        else:
            intro.append(line)
    brief, _ = render_block(intro)

    description = ""
    code: list[str] = []
    tutorials: list[str] = []
    members: list[Member] = []
    for title, start, end in bounds:
        if title == "Description":
            description, code = render_block(lines[start:end])
        elif title == "Tutorials":
            tutorials = [render_inline(ln[2:].strip()) for ln in lines[start:end] if ln.startswith("- ")]
        elif title in _DESCRIPTION_SECTIONS:
            members.extend(_parse_members(name, lines[start:end]))
    return ClassDoc(name, doc_path, inherits, brief, description, members, tuple(code), tuple(tutorials))


def member_index(classes: Iterable[ClassDoc]) -> dict[str, list[str]]:
    """Member name -> sorted names of the classes that define it (enum values included)."""
    index: dict[str, set[str]] = {}
    for cls in classes:
        for m in cls.members:
            index.setdefault(m.name, set()).add(cls.name)
    return {k: sorted(v) for k, v in sorted(index.items())}


# --- docs chunks ------------------------------------------------------------------

# Section label and id slug for each group of members, in the order they are emitted.
_GROUPS: dict[str, tuple[str, str]] = {
    "signal": ("Signals", "signals"),
    "enum": ("Enumerations", "enumerations"),
    "constant": ("Constants", "constants"),
    "annotation": ("Annotations", "annotations"),
    "property": ("Properties", "properties"),
    "constructor": ("Constructors", "constructors"),
    "method": ("Methods", "methods"),
    "operator": ("Operators", "operators"),
    "theme_property": ("Theme Properties", "theme-properties"),
}


def _group_key(m: Member) -> str:
    return "enum" if m.enum is not None else m.kind


def _symbol(m: Member) -> str:
    return f"{m.cls}.{m.name}"


def _member_text(m: Member) -> str:
    return f"{m.signature}\n{m.description}" if m.description else m.signature


def _groups(members: list[Member]) -> list[list[Member]]:
    """Consecutive runs of at most MAX_GROUP_MEMBERS members and ~MAX_GROUP_CHARS of text."""
    out: list[list[Member]] = []
    size = 0
    for m in members:
        n = len(_member_text(m)) + 2
        if not out or len(out[-1]) >= MAX_GROUP_MEMBERS or (out[-1] and size + n > MAX_GROUP_CHARS):
            out.append([])
            size = 0
        out[-1].append(m)
        size += n
    return out


def _docs_chunks(cls: ClassDoc) -> list[DocsChunk]:
    intro = [cls.brief, cls.description]
    if cls.inherits:
        intro.append(f"{cls.name} inherits: {' < '.join(cls.inherits)}.")
    if cls.tutorials:
        intro.append("Tutorials: " + "; ".join(cls.tutorials) + ".")
    chunks = [
        DocsChunk(
            id=f"class:{cls.name}#description",
            doc_path=cls.doc_path,
            source=cls.source,
            title=cls.name,
            section=f"{cls.name} > Description",
            content="\n\n".join(p for p in intro if p),
            code_blocks=list(cls.code_blocks),
            api_symbols=[cls.name],
        )
    ]
    by_group: dict[str, list[Member]] = {}
    for m in cls.members:
        by_group.setdefault(_group_key(m), []).append(m)
    for key, (label, slug) in _GROUPS.items():
        for n, group in enumerate(_groups(by_group.get(key, [])), start=1):
            names = group[0].name if len(group) == 1 else f"{group[0].name} … {group[-1].name}"
            chunks.append(
                DocsChunk(
                    id=f"class:{cls.name}#{slug}-{n}",
                    doc_path=cls.doc_path,
                    source=cls.source,
                    title=cls.name,
                    section=f"{cls.name} > {label} ({names})",
                    content="\n\n".join(_member_text(m) for m in group),
                    code_blocks=[c for m in group for c in m.code_blocks],
                    api_symbols=list(dict.fromkeys(_symbol(m) for m in group)),
                )
            )
    return chunks


# --- api mappings -----------------------------------------------------------------

# Classes whose virtual callbacks (``_ready``, ``_draw``, ``_gui_input``...) are
# overridden in scripts extending any of their many subclasses, so a bare
# ``func _ready(`` is evidence enough; other classes' virtuals need ``extends X``.
_BASE_CLASSES = {"Object", "Node", "CanvasItem", "Node2D", "Node3D", "Control", "Resource", "RefCounted"}
_THEME_TYPES = {  # target infix -> (override/getter suffix, theme_override_* plural)
    "color": ("color", "colors"),
    "constant": ("constant", "constants"),
    "font_size": ("font_size", "font_sizes"),
    "font": ("font", "fonts"),
    "icon": ("icon", "icons"),
    "style": ("stylebox", "styles"),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(`\"'])")


def first_sentence(text: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    para = text.split("\n\n", 1)[0].replace("\n", " ").strip()
    sentence = _SENTENCE_END.split(para, maxsplit=1)[0]
    if len(sentence) > limit:
        sentence = sentence[: limit - 1].rsplit(" ", 1)[0] + "…"
    return sentence


def _on_instance(cls: str) -> str:
    """An expression that is (very likely) an instance of ``cls``, then the member-access dot.

    Covers the class itself (singletons, static calls: ``Input.``), node paths whose last
    part is the class name (``$AnimatedSprite2D.``, ``$Player/AnimatedSprite2D.``,
    ``%AnimatedSprite2D.``, ``$"../AnimatedSprite2D".``, ``get_node("AnimatedSprite2D").``)
    casts (``(x as AnimatedSprite2D).``) and constructor calls (``Vector2(1, 2).``).
    Kept short: ~21k of these patterns exist and compiling each costs ~0.5 ms.
    """
    return rf"(?<![\w.]){re.escape(cls)}(?:\([^()\n]*\)|[\"']?(?:\s*\))?)\s*\.\s*"


def _typed_vars(cls: str, use: str) -> str:
    """``use`` (a regex ending the match) on a variable typed or initialised as ``cls``
    earlier in the same code: ``var anim: AnimatedSprite2D``, ``func f(anim: AnimatedSprite2D)``,
    ``@onready var anim = $AnimatedSprite2D``, ``var s := Sprite2D.new()``.
    Untyped variables are not matched: that would match every ``x.play(``."""
    c = re.escape(cls)
    init = rf"(?::\s*|:?=\s*(?:[$%]|get_node\w*\(\s*)?[\"']?(?:[\w.%/]*/)?%?){c}(?!\w)"
    return rf"\b(?P<v>[A-Za-z_]\w*)\s*{init}[\s\S]*?(?<![\w.])(?P=v)\s*\.\s*{use}"


def _in_own_script(cls: str, use: str) -> str:
    """``use`` anywhere after ``extends cls`` (a member used from a script extending the class)."""
    return rf"\bextends\s+{re.escape(cls)}(?!\w)[\s\S]*?{use}"


def _member_pattern(m: Member, values: list[Member]) -> tuple[str, list[str]]:
    """(source_pattern, required_when_seen_in_code) for one member's mapping."""
    cls, name = m.cls, m.name
    n = re.escape(name)
    is_global = cls.startswith("@")
    on_ref = _on_instance(cls)
    bare = r"(?<![\w.$%\"'])(?<!func )(?:self\s*\.\s*)?"
    if m.kind == "method":
        if is_global:
            return rf"(?<![\w.])(?<!func ){n}\s*\(", [f"{name}("]
        if "virtual" in m.qualifiers:
            define = rf"\bfunc\s+{n}\s*\("
            if cls in _BASE_CLASSES:
                return define, [f"{name}("]
            return _in_own_script(cls, define), [cls, f"{name}("]
        call = rf"{n}\s*\("
        pattern = "|".join([on_ref + call, _typed_vars(cls, call), _in_own_script(cls, bare + call)])
        return pattern, [cls, f"{name}("]
    if m.kind == "property" and ("/" in name or "{" in name):
        # Settings-style names ("display/window/size/viewport_width", "item_{index}/text")
        # are only ever used as strings: get_setting("..."), set("item_0/text", ...).
        parts = re.split(r"\{\w+\}", name)
        body = r"\d+".join(re.escape(p) for p in parts)
        return rf"[\"']{body}[\"']", [p for p in parts if p]
    if m.kind == "property":
        if is_global:  # singletons: Input, Engine, OS...
            return rf"(?<![\w.$%/\"']){n}\s*\.", [name]
        use = rf"{n}(?!\w)(?!\s*\()"
        # Through an instance, the setter/getter count too ($Sprite2D.set_flip_h(true)).
        acc = "".join(rf"|{re.escape(a)}\s*\(" for a in m.accessors)
        alts = [rf"{on_ref}(?:{use}{acc})", _typed_vars(cls, use), _in_own_script(cls, bare + use)]
        return "|".join(alts), [cls, name]
    if m.kind == "signal":
        return (
            rf"(?<![\w$%\"']){n}\s*\.\s*(?:connect|disconnect|emit|is_connected)\s*\("
            rf"|[\"']{n}[\"']"
            rf"|\bfunc\s+_on_\w*?_{n}\s*\("
            rf"|\bawait\b[^\n]*?(?<![\w$%]){n}(?!\w)"
        ), [name]
    if m.kind == "constant":
        if is_global:
            return rf"(?<![\w.$%\"']){n}(?!\w)", [name]
        return rf"(?<![\w.]){re.escape(cls)}\s*\.\s*{n}(?!\w)|" + _in_own_script(cls, rf"(?<![\w.$%\"']){n}(?!\w)"), [
            cls,
            name,
        ]
    if m.kind == "enum":
        names = [v.name for v in values] or [name]
        alt = "|".join(re.escape(v) for v in sorted(names, key=lambda s: (-len(s), s)))
        qualified = rf"(?:{n}\s*\.\s*)?(?:{alt})(?!\w)"
        prefix = _common_prefix(names)
        required = [prefix] if prefix else [name]
        if is_global:
            return rf"(?<![\w.$%\"']){qualified}|(?<![\w.]){n}\s*\.\s*(?:{alt})(?!\w)", required
        return (
            rf"(?<![\w.]){re.escape(cls)}\s*\.\s*(?:{n}(?!\w)|{qualified})|"
            + _in_own_script(cls, rf"(?<![\w.$%\"']){qualified}")
        ), required if prefix else [cls, name]
    if m.kind == "theme_property":
        suffix, plural = _theme_type(m)
        return (
            rf"\b(?:add_theme_{suffix}_override|get_theme_{suffix}|has_theme_{suffix}(?:_override)?"
            rf"|remove_theme_{suffix}_override)\s*\(\s*&?[\"']{n}[\"']"
            rf"|theme_override_{plural}/{n}(?!\w)"
        ), [name]
    if m.kind == "annotation":
        return rf"(?<![\w@]){n}(?!\w)", [name]
    if m.kind == "constructor":
        return rf"(?<![\w.]){n}\s*\(", [f"{name}("]
    raise ValueError(f"no api mapping for {m.kind} {cls}.{name}")


def _theme_type(m: Member) -> tuple[str, str]:
    infix = m.target.split("_theme_", 1)[1] if "_theme_" in m.target else ""
    for key, value in _THEME_TYPES.items():  # font_size before font: dict order
        if infix.startswith(key + "_"):
            return value
    return ("color", "colors") if m.signature.startswith("Color") else ("constant", "constants")


def _common_prefix(names: list[str]) -> str:
    """Shared ``WORD_`` prefix of enum values (``PROCESS_MODE_``), if distinctive enough."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    k = 0
    while k < min(len(first), len(last)) and first[k] == last[k]:
        k += 1
    prefix = first[:k]
    prefix = prefix[: prefix.rfind("_") + 1] if "_" in prefix else ""
    return prefix if len(prefix) >= 4 else ""


def _inverse_renames(renames: Mapping[str, str] | None) -> dict[tuple[str, str], str]:
    """(lower-cased Godot 4 class, member or "") -> Godot 3 API, first rename on the page winning.

    The migration page names some classes by their Godot 3 name or with odd casing
    (``MultiPlayerAPI``), so classes are resolved through the class renames and compared
    case-insensitively.
    """
    if not renames:
        return {}
    class_renames = {old: new for old, new in renames.items() if "." not in old and "." not in new}
    out: dict[tuple[str, str], str] = {}
    for old, new in renames.items():
        if not re.fullmatch(r"[\w.]+", new):
            continue  # "mat * vec": not an API
        cls, _, member = new.rpartition(".") if "." in new else (new, "", "")
        cls = class_renames.get(cls, cls)
        out.setdefault((cls.lower(), member), old)
    return out


def _qualify(signature: str, cls: str, name: str) -> str:
    """"void play(...)" -> "void AnimatedSprite2D.play(...)" (str search: a regex per member is slow)."""
    at = signature.find(name)
    while at >= 0:
        before = signature[at - 1] if at else " "
        after = signature[at + len(name) : at + len(name) + 1]
        if not (before.isalnum() or before in "_.@") and after in ("", "(", " "):
            return f"{signature[:at]}{cls}.{signature[at:]}"
        at = signature.find(name, at + 1)
    return f"{cls}: {signature}"


def _api_records(cls: ClassDoc, renames: Mapping[str, str] | None) -> list[ApiMapping]:
    inverse = _inverse_renames(renames)
    records: list[ApiMapping] = []
    used: set[str] = set()

    def add(api: str, suffix: str, **fields: object) -> None:
        rid = f"api:{api}"
        if rid in used:  # e.g. a signal and a method of one class sharing a name
            rid = f"api:{api}:{suffix}"
        used.add(rid)
        records.append(ApiMapping(id=rid, source_api=api, source=cls.source, doc_path=cls.doc_path, **fields))  # type: ignore[arg-type]

    if not cls.name.startswith("@"):
        old = inverse.get((cls.name.lower(), ""))
        lead = first_sentence(cls.brief or cls.description)
        parent = f" Inherits {' < '.join(cls.inherits)}." if cls.inherits else ""
        add(
            cls.name,
            "class",
            source_pattern=rf"(?<![\w.]){re.escape(cls.name)}(?!\w)",
            match_terms=[cls.name] + ([old] if old else []),
            required_when_seen_in_code=[cls.name],
            before_code=old,
            after_code=cls.name if old else None,
            description=f"{lead} Class {cls.name}.{parent}".strip(),
        )

    values: dict[str, list[Member]] = {}
    for m in cls.members:
        if m.enum is not None:
            values.setdefault(m.enum, []).append(m)
    constructor_done = False
    for m in cls.members:
        if m.kind == "operator" or m.enum is not None:
            continue  # operators have no name to find; enum values map through their enum
        if m.kind == "constructor":
            if constructor_done:
                continue  # overloads share one mapping
            constructor_done = True
        api = f"{cls.name}.{m.name}"
        if m.kind == "theme_property":
            api = f"{cls.name}.theme_override_{_theme_type(m)[1]}/{m.name}"
        pattern, required = _member_pattern(m, values.get(m.name, []))
        terms = [cls.name, m.name, api]
        if m.kind == "signal":
            terms += [f"{m.name}.connect", f'"{m.name}"']
        elif m.kind == "enum":
            terms += [v.name for v in values.get(m.name, [])]
        elif m.kind == "property":
            terms += list(m.accessors)
        old = inverse.get((cls.name.lower(), m.name))
        if old:
            terms.append(old.rpartition(".")[2])
        signature = m.signature
        if m.kind == "enum":
            shown = [v.name for v in values.get(m.name, [])]
            signature = f"{m.signature} {', '.join(shown[:12])}{', …' if len(shown) > 12 else ''}"
        lead = first_sentence(m.description)
        signature = _qualify(signature, cls.name, m.name)
        add(
            api,
            m.kind,
            source_pattern=pattern,
            match_terms=list(dict.fromkeys(terms)),
            required_when_seen_in_code=required,
            before_code=old,
            after_code=api if old else None,
            description=f"{lead} Signature: {signature}".strip(),
        )
    return records


def class_records(cls: ClassDoc, renames: Mapping[str, str] | None = None) -> list[DocsChunk | ApiMapping]:
    """Docs chunks and api mappings for one class.

    ``renames`` is :func:`pipeline.kb.migrating.rename_map` (old -> new API); it fills
    ``before_code``/``after_code`` on the class mapping (``api:CharacterBody2D`` gets
    ``KinematicBody2D``) and on members renamed by hand (``api:AcceptDialog.set_autowrap_mode``
    gets ``AcceptDialog.set_autowrap``). Members of a renamed class keep ``before_code=None``:
    the old class need not have had them.

    ``source_pattern`` regexes use named groups for the typed-variable case, so apply
    them with ``re.search``/``finditer`` (group 0 is the use), not ``findall``.
    """
    return [*_docs_chunks(cls), *_api_records(cls, renames)]
