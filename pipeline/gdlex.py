"""GDScript comments and strings: the one lexer the analyzer, the evidence, the batch splitter and
the chunk reader share.

:func:`lex` reads comment and string spans off the tree-sitter-gdscript parse when the text parses
without error, and off a regex scan otherwise (a partial chunk, broken code, another language).
Both give the same spans on clean GDScript (tests/test_gdlex.py checks every GDScript block of the
docs). A string span keeps its prefix: ``&"name"`` (StringName), ``^"A/B"`` (NodePath), ``r"raw"``;
the quoted part of ``$"../HUD"`` / ``%"Name"`` is a plain string (the ``$``/``%`` belong to the
node-path expression).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

log = logging.getLogger(__name__)

PARSER_TREE_SITTER = "tree-sitter-gdscript"
PARSER_REGEX = "regex"

# Regex fragments, usable inside re.VERBOSE patterns (no blanks, ``#`` escaped): the analyzer's
# token regex is built from them. An unterminated string ends at the end of its line (or of the
# text, for a triple-quoted one), as the GDScript tokenizer reports it. The ``r`` prefix only
# counts at the start of a word (``bar"x"`` is the name ``bar`` then a string).
COMMENT_PATTERN = r"\#[^\n]*"
STRING_PATTERN = (r"[&^]?(?:(?<!\w)r)?(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"
                  r"|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?)")
_TOKEN = re.compile(rf"(?P<comment>{COMMENT_PATTERN})|(?P<string>{STRING_PATTERN})")
_PREFIX = re.compile(r"[&^]?r?")

TokenKind = Literal["comment", "string"]
LexMode = Literal["auto", "regex"]


def _prefix(raw: str) -> str:
    """The ``&``, ``^``, ``r``, ``&r`` or ``^r`` a string literal starts with (``""`` for none)."""
    m = _PREFIX.match(raw)
    assert m is not None  # every part of the pattern is optional: it matches at least the empty string
    return m.group()


def _kind(group: str | None) -> TokenKind:
    """The token kind a match of ``_TOKEN`` found (its groups are named after the kinds)."""
    if group == "comment":
        return "comment"
    if group == "string":
        return "string"
    raise AssertionError(f"_TOKEN matched without a kind group: {group!r}")


def string_body(raw: str) -> str:
    """``&"x"``, ``r'x'``, ``\"\"\"x\"\"\"`` -> ``x`` (escapes kept; an unterminated string keeps what it has)."""
    s = raw[len(_prefix(raw)):]
    for q in ('"""', "'''", '"', "'"):
        if s.startswith(q):
            s = s[len(q):]
            return s[: -len(q)] if s.endswith(q) and len(s) >= len(q) else s
    return s


@dataclass(frozen=True)
class Token:
    """A comment or a string literal: ``text[start:end]`` of the lexed text (str offsets)."""

    kind: TokenKind
    start: int
    end: int
    text: str

    @property
    def prefix(self) -> str:
        """A string's ``&``, ``^``, ``r`` (or ``&r``/``^r``); ``""`` for a comment or a plain string."""
        return _prefix(self.text) if self.kind == "string" else ""

    @property
    def body(self) -> str:
        """A string's contents between the quotes; a comment's text after its ``#``s."""
        return string_body(self.text) if self.kind == "string" else self.text.lstrip("#")


@dataclass(frozen=True)
class Lexed:
    text: str
    tokens: tuple[Token, ...]  # in text order, never overlapping
    parser: str  # PARSER_TREE_SITTER | PARSER_REGEX

    @property
    def comments(self) -> list[Token]:
        return [t for t in self.tokens if t.kind == "comment"]

    @property
    def strings(self) -> list[Token]:
        return [t for t in self.tokens if t.kind == "string"]

    def substitute(self, replace: Callable[[Token], str | None]) -> str:
        """The text with each token replaced by ``replace(token)`` (None keeps it as it is)."""
        out: list[str] = []
        pos = 0
        for tok in self.tokens:
            new = replace(tok)
            if new is not None:
                out += [self.text[pos : tok.start], new]
                pos = tok.end
        return "".join(out) + self.text[pos:]


# --------------------------------------------------------------------------
# tree-sitter

_language_lock = threading.Lock()
_language: Any = None  # tree_sitter.Language, loaded lazily once per process
_language_failed = False
# One Parser per thread: a Parser must not parse two texts at once, and the UI serves sessions
# from several threads. Creating one is cheap; the Language is shared.
_local = threading.local()


def get_parser() -> Any:
    """This thread's tree-sitter-gdscript ``Parser``, or None if the packages are unusable."""
    global _language, _language_failed
    parser = getattr(_local, "parser", None)
    if parser is not None:
        return parser
    if _language is None and not _language_failed:
        with _language_lock:
            if _language is None and not _language_failed:
                try:
                    import tree_sitter_gdscript
                    from tree_sitter import Language

                    _language = Language(tree_sitter_gdscript.language())
                except Exception as exc:  # any failure means: use the regex path
                    _language_failed = True
                    log.warning("tree-sitter-gdscript unavailable (%s); reading code with regexes only", exc)
    if _language is None:
        return None
    from tree_sitter import Parser

    _local.parser = Parser(_language)
    return _local.parser


class Parsed:
    """An error-free tree-sitter parse of ``text``, with byte -> str offsets (tree-sitter counts bytes)."""

    def __init__(self, text: str, src: bytes, tree: Any) -> None:
        self.text = text
        self.src = src
        self.tree = tree
        self.root = tree.root_node
        self._char_at: list[int] | None = None
        if len(src) != len(text):
            char_at = [0] * (len(src) + 1)
            pos = 0
            for i, ch in enumerate(text):
                n = len(ch.encode("utf-8"))
                char_at[pos : pos + n] = [i] * n
                pos += n
            char_at[pos] = len(text)
            self._char_at = char_at

    def off(self, byte: int) -> int:
        return byte if self._char_at is None else self._char_at[byte]

    def raw(self, node: Any) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def parse(text: str) -> Parsed | None:
    """The tree of ``text`` if tree-sitter-gdscript parses it without any error, else None.

    tree-sitter recovers leniently (JavaScript parses as ~80 % "valid" GDScript, an orphan
    ``else:`` costs 5 bytes of ERROR), so any error at all sends the caller to its regex path.
    """
    parser = get_parser()
    if parser is None:
        return None
    src = text.encode("utf-8")
    tree = parser.parse(src)
    return None if tree.root_node.has_error else Parsed(text, src, tree)


# ``#region``/``#endregion`` lines are comments to Godot (editor folding marks); the grammar names them apart.
_COMMENT_NODES = frozenset({"comment", "region_start", "region_end"})
_STRING_NODES = frozenset({"string", "string_name", "node_path"})


def node_kind(node: Any) -> TokenKind | None:
    """Is this tree-sitter node a comment, a string literal, or neither (look inside it)?"""
    t = node.type
    if t in _COMMENT_NODES:
        return "comment"
    if t in _STRING_NODES or (t == "value" and node.parent.type == "get_node" and node.text[:1] in (b'"', b"'")):
        return "string"  # the quoted part of $"../HUD" / %"Name"
    return None


# The same nodes as node_kind, found by tree-sitter itself (ten times faster than walking them in Python).
_QUERY = ("[(comment) (region_start) (region_end)] @comment [(string) (string_name) (node_path)] @string "
          "(get_node) @get_node")
_query: Any = None


def _tree_tokens(parsed: Parsed) -> list[Token]:
    global _query
    from tree_sitter import Query, QueryCursor

    if _query is None:
        _query = Query(_language, _QUERY)  # immutable, shared; a cursor per call
    captures = QueryCursor(_query).captures(parsed.root)
    # The capture name is the kind node_kind gives each node; a get_node's quoted part is a string.
    nodes: list[tuple[TokenKind, Any]] = [("comment", n) for n in captures.get("comment", [])]
    nodes += [("string", n) for n in captures.get("string", [])]
    nodes += [("string", child) for node in captures.get("get_node", []) for child in node.children
              if node_kind(child) == "string"]
    tokens = []
    for kind, node in sorted(nodes, key=lambda kn: kn[1].start_byte):
        start, end = parsed.off(node.start_byte), parsed.off(node.end_byte)
        tokens.append(Token(kind, start, end, parsed.text[start:end]))
    return tokens


def _regex_tokens(text: str) -> list[Token]:
    return [Token(_kind(m.lastgroup), m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]


@lru_cache(maxsize=256)
def lex(text: str, parser: LexMode = "auto") -> Lexed:
    """Comment and string spans of ``text``: tree-sitter when it parses cleanly (``auto``), else regexes."""
    parsed = parse(text) if parser == "auto" else None
    if parsed is not None:
        return Lexed(text, tuple(_tree_tokens(parsed)), PARSER_TREE_SITTER)
    return Lexed(text, tuple(_regex_tokens(text)), PARSER_REGEX)


def strip_comments(text: str) -> str:
    """``text`` without its comments (each from ``#`` to the end of its line; the newline stays)."""
    return lex(text).substitute(lambda t: "" if t.kind == "comment" else None)


def code_only(text: str) -> str:
    """Comments removed and every string emptied to ``""``: only what the code itself names is left."""
    return lex(text).substitute(lambda t: "" if t.kind == "comment" else '""')
