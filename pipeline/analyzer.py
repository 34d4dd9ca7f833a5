"""Code-aware analyzer: GDScript (and prose) -> lowercased BM25 terms.

The same normalisation runs on queries (raw code chunks) and on indexed
records (docs prose, code blocks, API symbols), so a term only has to be
produced the same way on both sides to match. What a Godot developer would
search for becomes a term:

* identifiers: ``velocity``, ``screen_size``;
* attribute chains kept whole and split: ``Input.is_action_pressed`` ->
  ``input.is_action_pressed``, ``input``, ``is_action_pressed``; chains of
  three or more segments also give every adjacent pair. A call or subscript
  ends a chain (``velocity.normalized().x`` -> ``velocity.normalized``, ``x``),
  and a leading ``self.`` is dropped;
* node paths: ``$Pivot/Camera3D`` -> ``pivot``, ``camera3d``; also ``%Unique``,
  ``$"../HUD"``, ``^"A/B"`` and the first string argument of ``get_node`` and
  friends. A chain hanging off a node path is joined to its last segment, so
  ``$AnimatedSprite2D.play()`` gives ``animatedsprite2d.play`` and matches the
  class reference's ``AnimatedSprite2D.play``;
* words inside string literals: ``"move_left"`` -> ``move_left``;
* parts of snake_case / CamelCase names, besides the whole name:
  ``is_action_pressed`` -> ``is``, ``action``, ``pressed``;
  ``AnimatedSprite2D`` -> ``animated``, ``sprite``, ``2d`` (``2D``/``3D`` stay one
  part; other digit runs are dropped);
* comment text, analysed like prose.

Dropped: pure numbers, 1-character tokens, and two small stop lists
(:data:`STOP_WORDS`, dropped everywhere, and :data:`GDSCRIPT_KEYWORDS`, dropped
as whole tokens only, so the ``is`` of ``is_on_floor`` survives as a part).

``analyze_code`` walks the tree-sitter-gdscript parse; if the parse has any
syntax error it analyses the whole chunk with the regex lexer instead (see
:func:`pipeline.gdlex.parse`). Both paths give the same terms on clean GDScript,
so falling back on any error loses nothing. What a comment or a string is comes
from :mod:`pipeline.gdlex` on both paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain as concat
from itertools import pairwise
from typing import Any, ClassVar

from pipeline import gdlex
from pipeline.gdlex import PARSER_REGEX, PARSER_TREE_SITTER, Parsed, string_body

# English noise that carries no topic. Dropped as whole tokens and as parts.
# ("is" is deliberately absent: it is a keyword, but as a part it marks
# Godot's predicates: is_on_floor, is_action_pressed.)
STOP_WORDS: frozenset[str] = frozenset(
    {
        "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "as",
        "and", "or", "not", "if", "it", "its", "this", "that", "these", "those", "be", "are",
        "was", "were", "can", "will", "you", "your", "we", "so", "do", "does", "than", "then",
        "there", "which", "into",
    }
)  # fmt: skip
# GDScript keywords/literals found in nearly every snippet. Dropped as whole
# tokens only. Topic-bearing keywords (signal, await, enum, const, static,
# match, class_name, super, export/onready annotations) are kept on purpose.
GDSCRIPT_KEYWORDS: frozenset[str] = frozenset(
    {
        "var", "func", "if", "elif", "else", "for", "while", "break", "continue", "pass",
        "return", "self", "and", "or", "not", "in", "is", "as", "true", "false", "null",
        "extends", "void",
    }
)  # fmt: skip
_DROP_WHOLE = STOP_WORDS | GDSCRIPT_KEYWORDS

# Functions whose first string argument is a node path.
GET_NODE_FUNCS: frozenset[str] = frozenset(
    {"get_node", "get_node_or_null", "has_node", "find_child", "find_node", "NodePath"}
)

Kind = str  # "identifier" | "dotted_call" | "node_path" | "string" | "part"
# When a term is produced for several reasons, the most specific one is kept.
_KIND_RANK: dict[str, int] = {
    "node_path": 0,
    "dotted_call": 1,
    "string": 2,
    "identifier": 3,
    "part": 4,
}

# Bump whenever the terms produced for some input change: cached indexes key on it.
# 2: ``#region`` / ``#endregion`` labels are comment text on the tree-sitter path too.
ANALYZER_VERSION = 2

__all__ = ["PARSER_REGEX", "PARSER_TREE_SITTER", "Analysis", "analyze_code", "analyze_text"]


@dataclass(frozen=True)
class Analysis:
    terms: list[str]  # the token stream fed to BM25 (with repeats, in order)
    kinds: dict[str, Kind]  # term -> why it is a term (most specific reason)
    parser: str  # "tree-sitter-gdscript" | "regex"


# --------------------------------------------------------------------------
# Term expansion (shared by every path, cached: vocabularies are small)

_IDENT = r"[^\W\d]\w*"  # identifier: letter or _ first (unicode allowed, as in GDScript 4)
_CHAIN_SPLIT = re.compile(r"[ \t]*\.[ \t]*")
# One part of a name: "2D"/"3D" stay whole, acronyms split before a capitalised
# word (HTTPRequest -> HTTP, Request), digit runs stand alone (and are dropped).
_CAMEL_PART = re.compile(r"\d+[dD](?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+")
_WORD = re.compile(r"\w+")
_ESCAPE = re.compile(r"\\.")

Pairs = tuple[tuple[str, str], ...]  # ((term, kind), ...)


def _keep_part(p: str) -> bool:
    return len(p) > 1 and not p.isdigit() and p not in STOP_WORDS


@lru_cache(maxsize=1 << 18)
def _word_pairs(word: str, kind: str) -> Pairs:
    """A name (or a word of prose/string) -> its whole lowercased form + parts."""
    whole = word.lower()
    if len(whole) < 2 or whole.isdigit() or whole in _DROP_WHOLE:
        return ()
    out = [(whole, kind)]
    parts = [m.lower() for piece in word.split("_") for m in _CAMEL_PART.findall(piece)]
    if parts != [whole]:
        out.extend((p, "part") for p in parts if _keep_part(p))
    return tuple(out)


def _dotted_ok(segments: Iterable[str]) -> bool:
    # "e.g", "i.e", "a.b": all-1-char chains are noise, not API names.
    return any(len(s) > 1 for s in segments)


@lru_cache(maxsize=1 << 16)
def _chain_pairs(chain: str) -> Pairs:
    """``a.b.c`` -> whole, adjacent pairs (3+ segments), then each segment."""
    segs = [s for s in _CHAIN_SPLIT.split(chain) if s]
    while segs and segs[0].lower() in _DROP_WHOLE:  # self.position -> position
        segs.pop(0)
    if len(segs) == 1:
        return _word_pairs(segs[0], "identifier")
    low = [s.lower() for s in segs]
    out: list[tuple[str, str]] = []
    if _dotted_ok(low):
        out.append((".".join(low), "dotted_call"))
    if len(low) > 2:
        out.extend((f"{x}.{y}", "dotted_call") for x, y in pairwise(low) if _dotted_ok((x, y)))
    for s in segs:
        out.extend(_word_pairs(s, "identifier"))
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def _node_path_pairs(path: str, tail: str) -> Pairs:
    """Node path body (no ``$``/quotes) + the attribute chain after it, if any.

    The tail chain's own terms come from the lexer/walker that meets it next;
    here only the terms joining it to the node name are added: the whole
    ``node.a.b`` and the pair ``node.a``.
    """
    out: list[tuple[str, str]] = []
    segments = [s.lstrip("%") for s in path.split("/")]
    segments = [s for s in segments if s not in ("", ".", "..")]
    for seg in segments:
        for w in _WORD.findall(seg):
            out.extend(_word_pairs(w, "node_path"))
    last = segments[-1] if segments else ""
    if tail and re.fullmatch(_IDENT, last):
        chain = [last.lower()] + [s.lower() for s in _CHAIN_SPLIT.split(tail) if s]
        if _dotted_ok(chain):
            out.append((".".join(chain), "dotted_call"))
        if len(chain) > 2 and _dotted_ok(chain[:2]):
            out.append((f"{chain[0]}.{chain[1]}", "dotted_call"))
    return tuple(out)


def _string_pairs(body: str) -> Pairs:
    text = _ESCAPE.sub(" ", body)
    out: list[tuple[str, str]] = []
    for w in _WORD.findall(text):
        out.extend(_word_pairs(w, "string"))
    return tuple(out)


# --------------------------------------------------------------------------
# Prose (analyze_text, and comments inside code)

# One prose token: a word or dotted chain, or a node path with its attribute
# tail. Word-first order matters for speed: most positions start a plain word.
_PROSE_TOKEN = re.compile(rf"\w+(?:\.{_IDENT})*|\$%?{_IDENT}(?:/{_IDENT})*(?:\.{_IDENT})*")
_PROSE_NODE = re.compile(rf"\$%?({_IDENT}(?:/{_IDENT})*)\.?(.*)")


@lru_cache(maxsize=1 << 18)
def _prose_token_pairs(token: str) -> Pairs:
    if token[0] == "$":  # $Node/Path.method: the node, its join with the chain, the chain
        m = _PROSE_NODE.fullmatch(token)
        assert m is not None  # _PROSE_TOKEN only yields what _PROSE_NODE matches
        path, tail = m.groups()
        return _node_path_pairs(path, tail) + (_chain_pairs(tail) if tail else ())
    if "." not in token:
        return _word_pairs(token, "identifier")
    if token[0].isdigit():  # "4.x", "2d.foo": a number/word then words, not an API chain
        return tuple(concat.from_iterable(_word_pairs(s, "identifier") for s in token.split(".")))
    return _chain_pairs(token)


@lru_cache(maxsize=1 << 18)
def _prose_token_terms(token: str) -> tuple[str, ...]:
    return tuple(t for t, _ in _prose_token_pairs(token))


def _prose_pairs(text: str) -> list[tuple[str, str]]:
    return list(concat.from_iterable(map(_prose_token_pairs, _PROSE_TOKEN.findall(text))))


def analyze_text(text: str) -> list[str]:
    """Terms of prose or mixed text (record content, descriptions). Regex only.

    Every distinct token is expanded once per process (cached), so a pass over
    the whole KB costs about one regex scan plus a dict lookup per token.
    """
    return list(concat.from_iterable(map(_prose_token_terms, _PROSE_TOKEN.findall(text))))


# --------------------------------------------------------------------------
# Code: shared event sink


class _Sink:
    """Collects (offset, seq, term, kind); both code paths emit through it.

    Terms are ordered by the source offset of the construct that produced them,
    so the tree walk (whose visiting order differs a little from the lexer's)
    and the regex lexer yield the same stream on clean code.
    """

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str, str]] = []

    def add(self, offset: int, pairs: Iterable[tuple[str, str]]) -> None:
        items = self.items
        for term, kind in pairs:
            items.append((offset, len(items), term, kind))

    def chain(self, offset: int, chain: str) -> None:
        self.add(offset, _chain_pairs(chain))

    def node_path(self, offset: int, path: str, tail: str) -> None:
        self.add(offset, _node_path_pairs(path, tail))

    def string(self, offset: int, raw: str) -> None:
        self.add(offset, _string_pairs(string_body(raw)))

    def comment(self, offset: int, raw: str) -> None:
        self.add(offset, _prose_pairs(raw.lstrip("#")))

    def result(self, parser: str) -> Analysis:
        self.items.sort(key=lambda it: (it[0], it[1]))
        terms = [it[2] for it in self.items]
        kinds: dict[str, str] = {}
        for _, _, term, kind in self.items:
            old = kinds.get(term)
            if old is None or _KIND_RANK[kind] < _KIND_RANK[old]:
                kinds[term] = kind
        return Analysis(terms=terms, kinds=kinds, parser=parser)


def _node_body(raw: str) -> str:
    """``$A/B``, ``%U``, ``$"../A"``, ``^"A:b"`` -> the path inside."""
    s = raw.lstrip("$%^")
    return string_body(s) if s[:1] in ('"', "'") else s


# After a $node / %node: its attribute chain.
_NODE_TAIL = re.compile(rf"[ \t]*\.[ \t]*({_IDENT}(?:[ \t]*\.[ \t]*{_IDENT})*)")
# After get_node("...": the closing paren and the attribute chain.
_CALL_TAIL = re.compile(rf"[ \t]*\)[ \t]*\.[ \t]*({_IDENT}(?:[ \t]*\.[ \t]*{_IDENT})*)")


def _tail(regex: re.Pattern[str], text: str, pos: int) -> str:
    m = regex.match(text, pos)
    return m.group(1) if m else ""


# --------------------------------------------------------------------------
# Code: regex path

# Comments and strings as gdlex defines them, then the tokens only the analyzer needs.
_CODE_LEX = re.compile(
    rf"""
    (?P<comment>{gdlex.COMMENT_PATTERN})
  | (?P<string>{gdlex.STRING_PATTERN})
  | (?P<node>\$(?:"[^"\n]*"?|'[^'\n]*'?|[%\w/]+)|%(?=[^\W\d])\w+)
  | (?P<number>\d\w*(?:\.\d\w*)?)
  | (?P<chain>[^\W\d]\w*(?:[ \t]*\.[ \t]*[^\W\d]\w*)*)
    """,
    re.VERBOSE,
)
_GET_NODE_BEFORE = re.compile(rf"\b(?:{'|'.join(sorted(GET_NODE_FUNCS))})\s*\(\s*$")
_OPERAND_END = re.compile(r"[\w)\]\"']")


def _analyze_regex(text: str) -> Analysis:
    sink = _Sink()
    for m in _CODE_LEX.finditer(text):
        group, start, raw = m.lastgroup, m.start(), m.group()
        if group == "chain":
            sink.chain(start, raw)
        elif group == "string":
            if raw.startswith("^"):
                sink.node_path(start, _node_body(raw), "")
            elif _GET_NODE_BEFORE.search(text, max(0, start - 40), start):
                sink.node_path(start, _node_body(raw), _tail(_CALL_TAIL, text, m.end()))
            else:
                sink.string(start, raw)
        elif group == "node":
            if raw.startswith("%"):
                # "a %b" is modulo, "= %Unique" a unique-name node.
                before = text[:start].rstrip(" \t")
                if before and _OPERAND_END.match(before[-1]):
                    sink.chain(start + 1, raw[1:])
                    continue
            sink.node_path(start, _node_body(raw), _tail(_NODE_TAIL, text, m.end()))
        elif group == "comment":
            sink.comment(start, raw)
        # numbers: dropped
    return sink.result(PARSER_REGEX)


# --------------------------------------------------------------------------
# Code: tree-sitter path

_IDENT_RE = re.compile(rf"{_IDENT}\Z")
_CHAIN_GAP = re.compile(r"[ \t]*\.[ \t]*")


class _Walker:
    """Walks an error-free tree: comments and strings as gdlex classifies the nodes, node paths by
    node type; identifier leaves are collected and joined into attribute chains afterwards.

    Chains are rebuilt from the source text between identifiers (only a ``.``
    between them) rather than from ``attribute`` nodes, because the grammar
    nests attributes inside operators wrongly: ``a - b.c.d`` parses as
    ``(a - b.c).d``, which would split ``b.c.d``. A call or subscript between
    two names leaves ``(...)``/``[...]`` in the gap, so it still ends a chain.
    """

    def __init__(self, parsed: Parsed, sink: _Sink) -> None:
        self.parsed = parsed
        self.text = parsed.text
        self.off = parsed.off  # tree-sitter reports byte offsets; peeks and ordering need str offsets
        self.raw = parsed.raw
        self.sink = sink
        self.names: list[tuple[int, int, str]] = []  # (start, end, text) in str offsets

    def run(self) -> None:
        self.visit(self.parsed.root)
        self.flush_chains()

    def visit(self, node: Any) -> None:
        handler: Callable[[_Walker, Any], None] | None = self.handlers.get(node.type)
        if handler is None:
            handler = self.by_kind.get(gdlex.node_kind(node))
        if handler is not None:
            handler(self, node)
        elif node.child_count == 0:
            # identifiers, declaration names and keywords (the stop lists then
            # drop or keep them exactly as they do the regex lexer's words)
            raw = self.raw(node)
            if _IDENT_RE.match(raw):
                self.names.append((self.off(node.start_byte), self.off(node.end_byte), raw))
        else:
            for child in node.children:
                self.visit(child)

    def flush_chains(self) -> None:
        self.names.sort()
        chain: list[str] = []
        chain_start = prev_end = 0
        for start, end, name in self.names:
            if chain and _CHAIN_GAP.fullmatch(self.text, prev_end, start):
                chain.append(name)
            else:
                if chain:
                    self.sink.chain(chain_start, ".".join(chain))
                chain, chain_start = [name], start
            prev_end = end
        if chain:
            self.sink.chain(chain_start, ".".join(chain))

    def comment(self, node: Any) -> None:
        self.sink.comment(self.off(node.start_byte), self.raw(node))

    def string(self, node: Any) -> None:
        start = self.off(node.start_byte)
        raw = self.raw(node)
        parent = node.parent
        call = parent.parent if parent is not None and parent.type == "arguments" else None
        if (
            call is not None
            and call.type in ("call", "attribute_call")
            and call.named_children
            and self.raw(call.named_children[0]) in GET_NODE_FUNCS
            and parent.named_children[0].id == node.id
        ):
            end = self.off(node.end_byte)
            self.sink.node_path(start, _node_body(raw), _tail(_CALL_TAIL, self.text, end))
        else:
            self.sink.string(start, raw)

    def node_path(self, node: Any) -> None:  # ^"A/B"
        self.sink.node_path(self.off(node.start_byte), _node_body(self.raw(node)), "")

    def get_node(self, node: Any) -> None:  # $A/B, %A, $"A"
        end = self.off(node.end_byte)
        self.sink.node_path(self.off(node.start_byte), _node_body(self.raw(node)), _tail(_NODE_TAIL, self.text, end))

    # Node paths by grammar type first (a NodePath literal is also a gdlex string); then gdlex's kinds.
    handlers: ClassVar[dict[str, Callable[[_Walker, Any], None]]] = {
        "node_path": node_path,
        "get_node": get_node,
    }
    by_kind: ClassVar[dict[str | None, Callable[[_Walker, Any], None]]] = {
        "comment": comment,
        "string": string,
    }


def analyze_code(text: str) -> Analysis:
    """Terms of a raw GDScript chunk or code block (tree-sitter, else regex)."""
    parsed = gdlex.parse(text)
    if parsed is None:  # see gdlex.parse
        return _analyze_regex(text)
    sink = _Sink()
    _Walker(parsed, sink).run()
    return sink.result(PARSER_TREE_SITTER)
