"""Regexes that find a use of a class-reference API in GDScript (``ApiMapping.source_pattern``).

One pattern per member kind. They use named groups for the typed-variable case, so apply
them with ``re.search``/``finditer`` (group 0 is the use), not ``findall``. About 21k
patterns exist, so each is kept short: compiling one costs ~0.5 ms.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.kb.classref import Member

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
# Not part of a longer name, a member access, a node path or a string.
_BARE = r"(?<![\w.$%\"'])"
# A bare use inside a script extending the class: not a definition, maybe through ``self.``.
_OWN_USE = _BARE + r"(?<!func )(?:self\s*\.\s*)?"

Pattern = tuple[str, list[str]]  # (source_pattern, required_when_seen_in_code)


def class_pattern(cls: str) -> str:
    return rf"(?<![\w.]){re.escape(cls)}(?!\w)"


def _on_instance(cls: str) -> str:
    """An expression that is (very likely) an instance of ``cls``, then the member-access dot.

    Covers the class itself (singletons, static calls: ``Input.``), node paths whose last
    part is the class name (``$AnimatedSprite2D.``, ``$Player/AnimatedSprite2D.``,
    ``%AnimatedSprite2D.``, ``$"../AnimatedSprite2D".``, ``get_node("AnimatedSprite2D").``)
    casts (``(x as AnimatedSprite2D).``) and constructor calls (``Vector2(1, 2).``).
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


def _method(m: Member, values: list[Member]) -> Pattern:
    cls, name, n = m.cls, m.name, re.escape(m.name)
    if cls.startswith("@"):
        return rf"(?<![\w.])(?<!func ){n}\s*\(", [f"{name}("]
    if "virtual" in m.qualifiers:
        define = rf"\bfunc\s+{n}\s*\("
        if cls in _BASE_CLASSES:
            return define, [f"{name}("]
        return _in_own_script(cls, define), [cls, f"{name}("]
    call = rf"{n}\s*\("
    pattern = "|".join([_on_instance(cls) + call, _typed_vars(cls, call), _in_own_script(cls, _OWN_USE + call)])
    return pattern, [cls, f"{name}("]


def _property(m: Member, values: list[Member]) -> Pattern:
    cls, name, n = m.cls, m.name, re.escape(m.name)
    if "/" in name or "{" in name:
        # Settings-style names ("display/window/size/viewport_width", "item_{index}/text")
        # are only ever used as strings: get_setting("..."), set("item_0/text", ...).
        parts = re.split(r"\{\w+\}", name)
        body = r"\d+".join(re.escape(p) for p in parts)
        return rf"[\"']{body}[\"']", [p for p in parts if p]
    if cls.startswith("@"):  # singletons: Input, Engine, OS...
        return rf"(?<![\w.$%/\"']){n}\s*\.", [name]
    use = rf"{n}(?!\w)(?!\s*\()"
    # Through an instance, the setter/getter count too ($Sprite2D.set_flip_h(true)).
    acc = "".join(rf"|{re.escape(a)}\s*\(" for a in m.accessors)
    alts = [rf"{_on_instance(cls)}(?:{use}{acc})", _typed_vars(cls, use), _in_own_script(cls, _OWN_USE + use)]
    return "|".join(alts), [cls, name]


def _signal(m: Member, values: list[Member]) -> Pattern:
    n = re.escape(m.name)
    return (
        rf"(?<![\w$%\"']){n}\s*\.\s*(?:connect|disconnect|emit|is_connected)\s*\("
        rf"|[\"']{n}[\"']"
        rf"|\bfunc\s+_on_\w*?_{n}\s*\("
        rf"|\bawait\b[^\n]*?(?<![\w$%]){n}(?!\w)"
    ), [m.name]


def _constant(m: Member, values: list[Member]) -> Pattern:
    n = re.escape(m.name)
    if m.cls.startswith("@"):
        return rf"{_BARE}{n}(?!\w)", [m.name]
    own = _in_own_script(m.cls, rf"{_BARE}{n}(?!\w)")
    return rf"(?<![\w.]){re.escape(m.cls)}\s*\.\s*{n}(?!\w)|{own}", [m.cls, m.name]


def _enum(m: Member, values: list[Member]) -> Pattern:
    """The enum by name, or any of its values (bare inside its class's scripts, else qualified)."""
    n = re.escape(m.name)
    names = [v.name for v in values] or [m.name]
    alt = "|".join(re.escape(v) for v in sorted(names, key=lambda s: (-len(s), s)))
    qualified = rf"(?:{n}\s*\.\s*)?(?:{alt})(?!\w)"
    prefix = _common_prefix(names)
    required = [prefix] if prefix else [m.name]
    if m.cls.startswith("@"):
        return rf"{_BARE}{qualified}|(?<![\w.]){n}\s*\.\s*(?:{alt})(?!\w)", required
    pattern = rf"(?<![\w.]){re.escape(m.cls)}\s*\.\s*(?:{n}(?!\w)|{qualified})|" + _in_own_script(
        m.cls, rf"{_BARE}{qualified}"
    )
    return pattern, required if prefix else [m.cls, m.name]


def _theme_property(m: Member, values: list[Member]) -> Pattern:
    suffix, plural = theme_type(m)
    n = re.escape(m.name)
    return (
        rf"\b(?:add_theme_{suffix}_override|get_theme_{suffix}|has_theme_{suffix}(?:_override)?"
        rf"|remove_theme_{suffix}_override)\s*\(\s*&?[\"']{n}[\"']"
        rf"|theme_override_{plural}/{n}(?!\w)"
    ), [m.name]


def _annotation(m: Member, values: list[Member]) -> Pattern:
    return rf"(?<![\w@]){re.escape(m.name)}(?!\w)", [m.name]


def _constructor(m: Member, values: list[Member]) -> Pattern:
    return rf"(?<![\w.]){re.escape(m.name)}\s*\(", [f"{m.name}("]


_BY_KIND: dict[str, Callable[[Member, list[Member]], Pattern]] = {
    "method": _method,
    "property": _property,
    "signal": _signal,
    "constant": _constant,
    "enum": _enum,
    "theme_property": _theme_property,
    "annotation": _annotation,
    "constructor": _constructor,
}


def member_pattern(m: Member, values: list[Member]) -> Pattern:
    """(source_pattern, required_when_seen_in_code) for one member's mapping; ``values`` are an enum's values."""
    if m.kind not in _BY_KIND:
        raise ValueError(f"no api mapping for {m.kind} {m.cls}.{m.name}")
    return _BY_KIND[m.kind](m, values)


def theme_type(m: Member) -> tuple[str, str]:
    """(override/getter suffix, ``theme_override_*`` plural) of a theme property, e.g. ("color", "colors")."""
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
