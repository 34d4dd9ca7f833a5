"""Godot API symbols ("Class" or "Class.member") used by a GDScript snippet.

Heuristic and regex based: docs snippets are often fragments that no parser
accepts, and all we need is a good set of lookup keys for the API mappings.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

_CLASS = r"[A-Z][A-Za-z0-9]*"  # no underscores: keeps KEY_A / MOUSE_MODE out
_CLASS_RE = re.compile(rf"^{_CLASS}$")
_CAMEL_WORD_RE = re.compile(rf"(?<![\w.$%@]){_CLASS}\b")

# String literals (with escapes) and comments, scanned left to right so a "#"
# inside a string is not taken for a comment.
_STRING_OR_COMMENT_RE = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|&?"(?:[^"\\\n]|\\.)*"|&?\'(?:[^\'\\\n]|\\.)*\'|\^"(?:[^"\\\n]|\\.)*"|#[^\n]*'
)
_GET_NODE_RE = re.compile(r"""\bget_node(?:_or_null)?\(\s*["']([^"'\n]+)["']\s*\)""")
_QUOTED_NODE_PATH_RE = re.compile(r"""([$%])["']([^"'\n]+)["']""")

_QUALIFIED_RE = re.compile(rf"(?<![\w.$%@])({_CLASS})\s*\.\s*([A-Za-z_]\w*)")
_NODE_PATH_RE = re.compile(r"([$%])((?:\.\./)*%?[A-Za-z_]\w*(?:/%?[A-Za-z_]\w*)*)\.([A-Za-z_]\w*)")
_LOWER_CALL_RE = re.compile(r"(?<![\w$%@])([a-z_]\w*)\s*\.\s*([A-Za-z_]\w*)\s*\(")
_BARE_CALL_RE = re.compile(r"(?<![\w.$%@])([a-z_]\w*)\s*\(")
# Horizontal space only: "if x:\n    Foo.bar()" must not read as a type hint.
_TYPE_USE_RES = (
    re.compile(rf"\bextends[ \t]+({_CLASS})\b"),
    re.compile(rf"(?<![\w.])({_CLASS})[ \t]*\.[ \t]*new[ \t]*\("),
    re.compile(rf"(?<!:):[ \t]*({_CLASS})\b"),  # "var v: Vector2", "func f(n: Node)"
    re.compile(rf"->[ \t]*({_CLASS})\b"),
    re.compile(rf"\bas[ \t]+({_CLASS})\b"),
    re.compile(rf"\bis[ \t]+({_CLASS})\b"),
    re.compile(rf"\b(?:Array|Dictionary)\[[ \t]*({_CLASS})\b"),
)
_EXTENDS_RE = re.compile(rf"^[ \t]*extends[ \t]+({_CLASS})\b", re.M)
_KEYWORDS = frozenset(
    {"func", "if", "elif", "while", "for", "match", "return", "await", "assert", "not", "and", "or", "in"}
)


def _clean(code: str) -> str:
    """Code with node paths unquoted and other strings / comments blanked."""
    code = _GET_NODE_RE.sub(lambda m: "$" + _path_token(m.group(1)), code)
    code = _QUOTED_NODE_PATH_RE.sub(lambda m: m.group(1) + _path_token(m.group(2)), code)

    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        return "" if s.startswith("#") else '""'

    return _STRING_OR_COMMENT_RE.sub(blank, code)


def _path_token(path: str) -> str:
    # Node names may hold spaces or dots; "_" keeps each segment one identifier.
    return "/".join(seg if seg == ".." else re.sub(r"[^\w%]", "_", seg) for seg in path.split("/"))


def extract_api_symbols(
    code: str,
    member_index: Mapping[str, Sequence[str]] | None = None,
    *,
    classes: Collection[str] | None = None,
) -> list[str]:
    """Sorted unique API symbols found in ``code``.

    ``member_index`` maps a member name to the classes defining it; with it,
    unverifiable guesses are dropped. ``classes`` (all engine class names), when
    given, limits class names to real engine classes.
    """
    text = _clean(code)

    def is_class(name: str) -> bool:
        return classes is None or name in classes

    def owns(cls: str, member: str) -> bool:
        # Without an index there is nothing to check against.
        return member_index is None or cls in member_index.get(member, ())

    found: set[str] = set()

    # Class.member (statics, singletons, constants, enums).
    for m in _QUALIFIED_RE.finditer(text):
        cls, member = m.group(1), m.group(2)
        if member == "new" or not is_class(cls):
            continue
        # Only a known member owned by other classes contradicts the guess.
        if member_index is not None and member in member_index and cls not in member_index[member]:
            continue
        found.add(f"{cls}.{member}")

    # $Path/To/Node.member and get_node("Node").member: the node is named after its class.
    node_classes: set[str] = set()
    for m in _NODE_PATH_RE.finditer(text):
        last = m.group(2).rsplit("/", 1)[-1].lstrip("%")
        if not _CLASS_RE.match(last):
            continue
        node_classes.add(last)
        if owns(last, m.group(3)):
            found.add(f"{last}.{m.group(3)}")

    # Classes mentioned anywhere in the snippet, for resolving untyped receivers.
    mentioned = {w for w in _CAMEL_WORD_RE.findall(text) if is_class(w)} | node_classes

    if member_index is not None:
        for m in _LOWER_CALL_RE.finditer(text):
            member = m.group(2)
            for cls in member_index.get(member, ()):
                if cls in mentioned:
                    found.add(f"{cls}.{member}")
        # Bare calls inside a script resolve against its "extends" class.
        base = _EXTENDS_RE.search(text)
        if base is not None:
            cls = base.group(1)
            for m in _BARE_CALL_RE.finditer(text):
                name = m.group(1)
                if name not in _KEYWORDS and not _is_definition(text, m.start()) and cls in member_index.get(name, ()):
                    found.add(f"{cls}.{name}")

    # Bare class names used as types.
    if classes is not None:
        found.update(w for w in _CAMEL_WORD_RE.findall(text) if w in classes)
    else:
        for pattern in _TYPE_USE_RES:
            found.update(m.group(1) for m in pattern.finditer(text))
    return sorted(found)


def _is_definition(text: str, pos: int) -> bool:
    """True when the call at ``pos`` is really ``func name(`` or ``signal name(``."""
    head = text[max(0, pos - 12) : pos].rstrip()
    return head.endswith(("func", "signal"))
