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
    found = _qualified(text, member_index, classes)
    node_found, node_classes = _node_members(text, member_index)
    found |= node_found
    if member_index is not None:
        # Classes mentioned anywhere in the snippet, for resolving untyped receivers.
        mentioned = {w for w in _CAMEL_WORD_RE.findall(text) if _is_class(w, classes)} | node_classes
        found |= _receiver_calls(text, member_index, mentioned) | _inherited_calls(text, member_index)
    found |= _type_names(text, classes)
    return sorted(found)


def _is_class(name: str, classes: Collection[str] | None) -> bool:
    return classes is None or name in classes


def _qualified(text: str, member_index: Mapping[str, Sequence[str]] | None,
               classes: Collection[str] | None) -> set[str]:
    """Class.member (statics, singletons, constants, enums)."""
    found: set[str] = set()
    for m in _QUALIFIED_RE.finditer(text):
        cls, member = m.group(1), m.group(2)
        if member == "new" or not _is_class(cls, classes):
            continue
        # Only a known member owned by other classes contradicts the guess.
        if member_index is not None and member in member_index and cls not in member_index[member]:
            continue
        found.add(f"{cls}.{member}")
    return found


def _node_members(text: str, member_index: Mapping[str, Sequence[str]] | None) -> tuple[set[str], set[str]]:
    """($Path/To/Node.member and get_node("Node").member symbols, the node classes): a node is named after its class."""
    found: set[str] = set()
    node_classes: set[str] = set()
    for m in _NODE_PATH_RE.finditer(text):
        last = m.group(2).rsplit("/", 1)[-1].lstrip("%")
        if not _CLASS_RE.match(last):
            continue
        node_classes.add(last)
        # Without an index there is nothing to check the member against.
        if member_index is None or last in member_index.get(m.group(3), ()):
            found.add(f"{last}.{m.group(3)}")
    return found, node_classes


def _receiver_calls(text: str, member_index: Mapping[str, Sequence[str]], mentioned: set[str]) -> set[str]:
    """``x.member(`` on an untyped receiver: each class defining ``member`` that the snippet mentions."""
    found: set[str] = set()
    for m in _LOWER_CALL_RE.finditer(text):
        member = m.group(2)
        for cls in member_index.get(member, ()):
            if cls in mentioned:
                found.add(f"{cls}.{member}")
    return found


def _inherited_calls(text: str, member_index: Mapping[str, Sequence[str]]) -> set[str]:
    """Bare calls inside a script resolve against its "extends" class."""
    base = _EXTENDS_RE.search(text)
    if base is None:
        return set()
    cls = base.group(1)
    found: set[str] = set()
    for m in _BARE_CALL_RE.finditer(text):
        name = m.group(1)
        if name not in _KEYWORDS and not _is_definition(text, m.start()) and cls in member_index.get(name, ()):
            found.add(f"{cls}.{name}")
    return found


def _type_names(text: str, classes: Collection[str] | None) -> set[str]:
    """Bare class names: every engine class named, or (without the class list) the names used as types."""
    if classes is not None:
        return {w for w in _CAMEL_WORD_RE.findall(text) if w in classes}
    return {m.group(1) for pattern in _TYPE_USE_RES for m in pattern.finditer(text)}


def _is_definition(text: str, pos: int) -> bool:
    """True when the call at ``pos`` is really ``func name(`` or ``signal name(``."""
    head = text[max(0, pos - 12) : pos].rstrip()
    return head.endswith(("func", "signal"))
