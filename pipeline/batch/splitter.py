"""GDScript source -> chunks: one per top-level function or class, plus a header chunk.

tree-sitter-gdscript finds the top-level statements when the text parses; otherwise a line
scanner over :mod:`pipeline.gdlex`'s comment and string spans does (broken code, other
languages). Long blocks are split at blank lines.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.gdlex import lex, parse

DEFAULT_MAX_LINES = 120
MIN_HEADER_LINES = 2  # a header with fewer substantive lines says too little to retrieve for

_FUNC_RE = re.compile(r"^(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:static\s+)?func\b\s*(\w*)")
_CLASS_RE = re.compile(r"^class\s+(\w+)")
_ANNOTATION_RE = re.compile(r"^@[\w.]+\s*(?:\(.*\))?\s*(?:#.*)?$")  # an annotation alone on its line
_NOT_NEWLINE = re.compile(r"[^\n]")
_DECL_RE = re.compile(r"^(?:extends|class_name|@tool|@icon|@static_unload)\b")  # say nothing to retrieve for
# what a function's names mean in its file: the base class and the typed members (see Chunk.context)
_CONTEXT_RE = re.compile(r"^(?:(?:class_name\s+\w+\s+)?extends\b"
                         r"|(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:static\s+)?(?:var|const)\b)")
MAX_CONTEXT_LINES = 200
_LOCAL_VAR_RE = re.compile(r"^[ \t]+var\b")


@dataclass(frozen=True)
class _Item:
    """One top-level statement: its first row, its kind and (for func/class) its name."""

    start: int
    kind: str  # func | class | comment | annotation | decl | stmt
    name: str | None = None
    end: int = -1  # last row: the one before the next item's start


def _classify(line: str) -> tuple[str, str | None]:
    if line.startswith("#"):
        return "comment", None
    if m := _FUNC_RE.match(line):
        return "func", m.group(1) or None
    if m := _CLASS_RE.match(line):
        return "class", m.group(1)
    if _DECL_RE.match(line):
        return "decl", None
    if _ANNOTATION_RE.match(line):
        return "annotation", None
    return "stmt", None


def _at_column_0(line: str) -> bool:
    return bool(line.strip()) and line[0] not in " \t"


def _code_view(text: str) -> tuple[list[str], set[int]]:
    """Each line with its comments and strings blanked out (gdlex's regex scan: the text may not parse),
    and the rows that begin inside a multi-line string."""
    lexed = lex(text, "regex")
    lines = lexed.substitute(lambda t: _NOT_NEWLINE.sub(" ", t.text)).split("\n")
    row_start = [0]
    row_start += [m.end() for m in re.finditer("\n", text)]
    inside: set[int] = set()
    for tok in lexed.strings:
        if "\n" in tok.text:  # rows starting strictly inside the string
            inside.update(range(bisect_right(row_start, tok.start), bisect_left(row_start, tok.end)))
    return lines, inside


def _starts_by_lines(text: str, lines: Sequence[str]) -> list[int]:
    """Rows where a top-level statement starts, by a line scan (any text, also broken code).

    A logical line goes on past an open bracket, a multi-line string or a ``\\`` at the end of
    the line: a multi-line dict, call or string may have lines at column 0 that start no statement.
    """
    code, inside = _code_view(text)
    starts: list[int] = []
    depth, cont = 0, False
    for row, line in enumerate(lines):
        if depth == 0 and not cont and row not in inside and _at_column_0(line):
            starts.append(row)
        for c in code[row]:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(depth - 1, 0)
        cont = code[row].rstrip().endswith("\\")
    # A column-0 comment followed by indented code is inside a body (commented-out code), not a statement.
    # One backward pass: for each row, is the next line of code (not blank, not a column-0 comment) indented?
    start_set = set(starts)
    body_follows = [False] * (len(lines) + 1)
    for row in range(len(lines) - 1, -1, -1):
        line = lines[row]
        if not line.strip() or (row in start_set and line.startswith("#")):
            body_follows[row] = body_follows[row + 1]
        else:
            body_follows[row] = row not in start_set
    return [row for i, row in enumerate(starts)
            if not (i > 0 and lines[row].startswith("#") and body_follows[row + 1])]


def _starts_by_tree_sitter(text: str) -> list[int] | None:
    """Rows where top-level statements start, from tree-sitter-gdscript; None if it cannot parse the text."""
    parsed = parse(text)
    if parsed is None:
        return None
    return sorted({n.start_point.row for n in parsed.root.children if n.start_point.column == 0})


def _items(lines: Sequence[str], starts: list[int]) -> list[_Item]:
    first = next((r for r, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return []
    if not starts or starts[0] > first:
        starts = [first, *starts]  # indented code before any statement: keep it, as a statement
    items = []
    for i, row in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines) - 1
        kind, name = _classify(lines[row]) if row != first or _at_column_0(lines[row]) else ("stmt", None)
        items.append(_Item(row, kind, name, end))
    return items


@dataclass(frozen=True)
class Span:
    kind: str  # header | func | class
    name: str | None
    start: int  # 0-based rows, inclusive
    end: int


def _substantive_lines(lines: Sequence[str], items: Sequence[_Item]) -> int:
    n = 0
    for it in items:
        if it.kind in ("comment", "annotation", "decl"):
            continue
        n += sum(1 for r in range(it.start, it.end + 1) if lines[r].strip() and not lines[r].lstrip().startswith("#"))
    return n


def top_level_spans(lines: Sequence[str], starts: list[int], min_header_lines: int = MIN_HEADER_LINES) -> list[Span]:
    """Group top-level statements into func/class spans plus an optional header.

    Comment and annotation lines directly above a function (no blank line
    between) belong to it; statements between two functions go with the next
    one; statements after the last one go with it; statements before the first
    function form the header, kept only when it has ``min_header_lines``
    substantive lines (``extends``/``class_name``/``@tool`` do not count).
    """
    items = _items(lines, starts)
    spans: list[Span] = []
    pending: list[_Item] = []
    seen_def = False

    def header(group: list[_Item]) -> None:
        if group and _substantive_lines(lines, group) >= min_header_lines:
            spans.append(Span("header", None, group[0].start, group[-1].end))

    for it in items:
        if it.kind not in ("func", "class"):
            pending.append(it)
            continue
        k = len(pending)
        while k > 0 and pending[k - 1].kind in ("comment", "annotation") and pending[k - 1].end == pending[k - 1].start:
            k -= 1
        if seen_def:
            start = pending[0].start if pending else it.start
        else:
            header(pending[:k])
            start = pending[k].start if k < len(pending) else it.start
        spans.append(Span(it.kind, it.name, start, it.end))
        seen_def, pending = True, []
    if pending:
        if seen_def:
            last = spans[-1]
            spans[-1] = Span(last.kind, last.name, last.start, pending[-1].end)
        else:
            header(pending)
    return spans


def _trim(lines: Sequence[str], start: int, end: int) -> tuple[int, int] | None:
    while start <= end and not lines[start].strip():
        start += 1
    while end >= start and not lines[end].strip():
        end -= 1
    return (start, end) if start <= end else None


def split_long(lines: Sequence[str], start: int, end: int, max_lines: int) -> list[tuple[int, int]]:
    """Cut rows start..end into pieces of at most ``max_lines``, at the last blank line that fits.

    A stretch with no blank line is cut hard at ``max_lines``.
    """
    out: list[tuple[int, int]] = []
    span = _trim(lines, start, end)
    while span is not None:
        s, e = span
        if e - s + 1 <= max_lines:
            out.append((s, e))
            break
        limit = s + max_lines  # a blank line here still lets s..limit-1 fit
        cut = next((r for r in range(limit, s, -1) if not lines[r].strip()), None)
        piece = _trim(lines, s, (cut if cut is not None else limit) - 1)
        if piece:
            out.append(piece)
        span = _trim(lines, cut + 1 if cut is not None else limit, e)
    return out


@dataclass(frozen=True)
class Chunk:
    """One unit of batch work: a piece of one file, with where it came from."""

    file: str
    index: int  # 0-based position among the file's chunks
    start_line: int  # 1-based, inclusive
    end_line: int
    kind: str  # header | func | class
    name: str | None
    part: str | None  # "2/3" when a long block was split at blank lines
    text: str
    notices: tuple[str, ...] = ()  # from reading the file (e.g. decoded as Latin-1)
    # the file's `extends` and member declarations outside this chunk: a function's `velocity` or `nav.x`
    # means what they declare (the class-use rule reads it; no stage searches it)
    context: str = ""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def input_sha256(self) -> str:
        """What a run reads: the text and, when the file gives one, its context."""
        if not self.context:
            return self.sha256
        return hashlib.sha256(f"{self.text}\0{self.context}".encode()).hexdigest()

    def location(self) -> dict[str, Any]:
        return {"file": self.file, "chunk": self.index, "start_line": self.start_line, "end_line": self.end_line}


def split_source(text: str, file: str = "<text>", max_lines: int = DEFAULT_MAX_LINES, *,
                 parser: str = "auto", notices: Sequence[str] = (),
                 min_header_lines: int = MIN_HEADER_LINES) -> list[Chunk]:
    """Split GDScript source into chunks by top-level function/class.

    ``parser``: "tree-sitter", "lines", or "auto" (tree-sitter when it parses the
    text without errors, else the line scanner, which copes with broken code
    and other languages). Tabs and spaces are both indentation.
    """
    if max_lines < 1:
        raise ValueError("max_lines must be at least 1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    starts = _starts_by_tree_sitter(text) if parser in ("auto", "tree-sitter") else None
    if starts is None:
        if parser == "tree-sitter":
            raise ValueError("tree-sitter-gdscript cannot parse this text")
        starts = _starts_by_lines(text, lines)
    chunks: list[Chunk] = []
    declared = _declarations(lines, starts)
    for span in top_level_spans(lines, starts, min_header_lines):
        pieces = split_long(lines, span.start, span.end, max_lines)
        for p, (s, e) in enumerate(pieces, start=1):
            # an inner class has its own base and cannot see the file's members
            context = "" if span.kind == "class" else _context(lines, declared, s, e)
            if span.kind == "func" and p > 1:  # a later part: the function's parameters and earlier locals
                context += _earlier_locals(lines, span.start, s)
            chunks.append(Chunk(file, len(chunks), s + 1, e + 1, span.kind, span.name,
                                f"{p}/{len(pieces)}" if len(pieces) > 1 else None,
                                "\n".join(lines[s:e + 1]) + "\n", tuple(notices), context))
    return chunks


def _declarations(lines: Sequence[str], starts: list[int]) -> list[tuple[int, int]]:
    """Rows of the file's top-level `extends` and `var`/`const` statements."""
    out = []
    for it in _items(lines, starts):
        if it.kind in ("decl", "stmt") and _CONTEXT_RE.match(lines[it.start]):
            span = _trim(lines, it.start, it.end)
            if span:
                out.append(span)
    return out


def _earlier_locals(lines: Sequence[str], start: int, end: int) -> str:
    """A split function's signature and the one-line local `var`s of rows start..end-1 (its earlier parts), so
    a later part's `nav.target_position` still knows what nav is."""
    rows = [r for r in range(start, end) if _FUNC_RE.match(lines[r]) or _LOCAL_VAR_RE.match(lines[r])]
    return "".join(lines[r] + "\n" for r in rows[:MAX_CONTEXT_LINES])


def _context(lines: Sequence[str], declared: Sequence[tuple[int, int]], start: int, end: int) -> str:
    rows = [r for s, e in declared if e < start or s > end for r in range(s, e + 1)][:MAX_CONTEXT_LINES]
    return "".join(lines[r] + "\n" for r in rows)


