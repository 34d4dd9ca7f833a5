"""Turn a getting_started/ or tutorials/ RST page into ``DocsChunk`` records.

A line-based reader over the shared RST toolkit (:mod:`pipeline.kb.rsttext`):
sections by heading, prose paragraphs with inline markup rendered, and GDScript
blocks (literal blocks, ``code-block`` and ``tabs``), C# left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.kb import rsttext as rt
from pipeline.kb.symbols import extract_api_symbols
from pipeline.records import DocsChunk

MAX_SECTION_CHARS = 6000
_DEFAULT_LANGUAGE = "gdscript"  # highlight_language in the Godot docs' conf.py
_GDSCRIPT = frozenset({"gdscript", "gd"})
_ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "admonition": "",
}
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode"})
# Directives whose body is ordinary RST text worth keeping.
_CONTAINERS = frozenset({"tabs", "list-table", "csv-table", "table", "container", "only", "centered"})
_LEADING_FOLDERS = ("getting_started/", "tutorials/")

_SUBST_DEF_RE = re.compile(r"^\.\.\s+\|([^|]+)\|\s+([\w-]+)\s*::\s*(.*?)\s*$")

# Bare "::" blocks that are prose-adjacent commands, not GDScript.
_SHELL_FIRST_WORDS = frozenset(
    {"godot", "ffmpeg", "git", "scons", "cd", "sudo", "apt", "apt-get", "pip", "python", "python3"}
)
# "Here's an example of the output::", "Will print::": program output, not code.
_OUTPUT_LEAD_IN_RE = re.compile(
    r"(?:\boutput(?: from the \w+)?(?: will be| is)?|\bwill print|\bprints?(?: out)?)\s*:*$", re.IGNORECASE
)


@dataclass
class _Item:
    kind: str  # "text" or "code"
    text: str
    refs: list[tuple[str, str]] = field(default_factory=list)  # (ref text, target)


@dataclass
class _Section:
    path: list[str]
    items: list[_Item]


def source_label(doc_path: str) -> str:
    """``getting_started/first_2d_game/03.coding_the_player.rst`` -> ``first_2d_game/coding_the_player``."""
    path = doc_path.replace("\\", "/").removeprefix("./")
    for folder in _LEADING_FOLDERS:
        if path.startswith(folder):
            path = path[len(folder) :]
            break
    if path.endswith(".rst"):
        path = path[: -len(".rst")]
    head, _, name = path.rpartition("/")
    name = re.sub(r"^\d+\.", "", name)
    return f"{head}/{name}" if head else name


def parse_page(text: str, doc_path: str, member_index: Mapping[str, Sequence[str]] | None = None) -> list[DocsChunk]:
    """Chunk one tutorial page: a record per section, or per code-bearing part of a long section."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    reader = _Reader(_substitutions(lines), lambda: _case_map(text, member_index))
    sections = _sections(lines, reader)
    label = source_label(doc_path)
    title = sections[0].path[0] if sections and sections[0].path else label.rsplit("/", 1)[-1].replace("_", " ")

    records: list[DocsChunk] = []
    used: set[str] = set()
    for section in sections:
        pieces = _split(section.items)
        path = " > ".join(section.path) or title
        for n, piece in enumerate(pieces, start=1):
            split = len(pieces) > 1
            base = _slug(path) + (f"-p{n}" if split else "")
            slug, dup = base, 1
            while slug in used:  # the same heading path twice on one page
                dup += 1
                slug = f"{base}-{dup}"
            used.add(slug)
            code = [it.text for it in piece if it.kind == "code"]
            records.append(
                DocsChunk(
                    id=f"docs:{label}#{slug}",
                    doc_path=doc_path,
                    source=label,
                    title=title,
                    section=f"{path} (part {n})" if split else path,
                    content="\n\n".join(it.text for it in piece if it.kind == "text"),
                    code_blocks=code,
                    api_symbols=_api_symbols(piece, reader, member_index),
                )
            )
    return records


def _api_symbols(items: list[_Item], reader: _Reader, member_index: Mapping[str, Sequence[str]] | None) -> list[str]:
    symbols: set[str] = set()
    for it in items:
        if it.kind == "code":
            symbols.update(extract_api_symbols(it.text, member_index))
        for ref_text, target in it.refs:
            symbol = reader.ref_symbol(target, ref_text)
            if symbol:
                symbols.add(symbol)
    return sorted(symbols)


# --- sections ---------------------------------------------------------------


def _sections(lines: list[str], reader: _Reader) -> list[_Section]:
    spans = rt.section_spans(lines)
    if not spans:
        return [_Section([], reader.body(lines))]
    # Text above the page title is labels, field lists and editor comments;
    # read it only for directives that change state (e.g. ``highlight``).
    reader.body(lines[: spans[0][0].start])
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    for heading, end in spans:
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, reader.inline(heading.title)))
        sections.append(_Section([t for _, t in stack], reader.body(lines[heading.body : end])))
    return sections


# --- splitting --------------------------------------------------------------


def _split(items: list[_Item]) -> list[list[_Item]]:
    """Pieces of one section; a section without text or code yields none."""
    items = [it for it in items if it.text.strip()]
    if not items:
        return []
    groups: list[list[_Item]] = []
    if sum(it.kind == "code" for it in items) >= 2:
        # Each part = the prose leading up to a block + the block.
        current: list[_Item] = []
        for it in items:
            current.append(it)
            if it.kind == "code":
                groups.append(current)
                current = []
        if current:
            groups[-1].extend(current)
    else:
        groups = [items]
    pieces: list[list[_Item]] = []
    for group in groups:
        pieces.extend(_split_long(group))
    return pieces


def _split_long(items: list[_Item]) -> list[list[_Item]]:
    """Cut at paragraph boundaries so no piece's prose exceeds the limit; code stays with the prose before it."""
    if sum(len(it.text) + 2 for it in items if it.kind == "text") <= MAX_SECTION_CHARS:
        return [items]
    pieces: list[list[_Item]] = [[]]
    size = 0
    for it in (sub for item in items for sub in _split_item(item)):
        if it.kind == "text":
            if size and size + len(it.text) > MAX_SECTION_CHARS:
                pieces.append([])
                size = 0
            size += len(it.text) + 2
        pieces[-1].append(it)
    return pieces


def _split_item(item: _Item) -> list[_Item]:
    """A paragraph over the limit (in practice a big table) cut at line breaks."""
    if item.kind != "text" or len(item.text) <= MAX_SECTION_CHARS:
        return [item]
    chunks: list[list[str]] = [[]]
    size = 0
    for line in item.text.split("\n"):
        if size and size + len(line) > MAX_SECTION_CHARS:
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += len(line) + 1
    texts = ["\n".join(c) for c in chunks]
    # Give each ref to the chunk that shows its text; refs without text stay with the first chunk.
    out = [_Item("text", t) for t in texts]
    for ref in item.refs:
        home = next((o for o in out if ref[0] and ref[0] in o.text), out[0])
        home.refs.append(ref)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[\W_]+", "-", text.lower()).strip("-") or "section"


# --- body reader ------------------------------------------------------------


def _bare_block_is_gdscript(code: str, lead_in: str) -> bool:
    """Bare ``::`` blocks default to GDScript, but some hold commands, program output or diagrams."""
    if _OUTPUT_LEAD_IN_RE.search(lead_in.strip()) or _looks_like_shell(code) or rt.looks_like_csharp(code):
        return False
    lines = [ln.strip() for ln in code.split("\n") if ln.strip()]
    if any("\u2500" <= ch <= "\u257f" for ch in code):  # box drawing: a tree diagram
        return False
    if len(lines) == 1 and re.fullmatch(r"[\w.-]+(?:/[\w.-]+)+", lines[0]):  # a file path
        return False
    # An enumerated list kept verbatim, e.g. the style guide's code order.
    return sum(bool(re.match(r"\d+\.\s", ln)) for ln in lines) * 2 <= len(lines)


def _looks_like_shell(code: str) -> bool:
    first = next((ln.strip() for ln in code.split("\n") if ln.strip() and not ln.strip().startswith("#")), "")
    word = first.split(None, 1)[0] if first else ""
    return (
        first.startswith(("$ ", "> ", "./", "C:\\"))
        or word.lower() in _SHELL_FIRST_WORDS
        or word.lower().endswith(".exe")
        or bool(re.match(r"^[\w./-]+(?:\s+--?[\w-]+)+", first) and " --" in f" {first}")
    )


class _Reader:
    """Reads RST body lines into prose paragraphs and GDScript blocks, in order."""

    def __init__(self, substitutions: dict[str, str], case_map: Callable[[], dict[str, str]]) -> None:
        self.inline = rt.Inline(substitutions, self.humanise_target)
        self._make_case_map = case_map  # built only if a page spells a class label in lower case
        self._case_map: dict[str, str] | None = None
        self.language = _DEFAULT_LANGUAGE  # changed by ".. highlight::"

    def body(self, lines: Sequence[str]) -> list[_Item]:
        items: list[_Item] = []
        lead_in = ""
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                i += 1
            elif stripped == ".." or stripped.startswith(".. "):
                column = rt.indent(line)
                end = rt.block_end(lines, i + 1, column)
                items.extend(self._explicit(stripped, lines[i + 1 : end], column))
                i = end
            elif rt.GRID_BORDER_RE.match(line):
                end = next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
                items.extend(self._text(rt.grid_table_text(lines[i:end])))
                i = end
            else:
                i, lead_in = self._paragraph(lines, i, lead_in, items)
        return items

    def _paragraph(self, lines: Sequence[str], i: int, lead_in: str, items: list[_Item]) -> tuple[int, str]:
        """One paragraph (or simple table) from ``lines[i]`` and the literal block it may introduce.

        Appends to ``items``; returns the next line to read and the paragraph (the next block's lead-in).
        """
        j = i + 1
        while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith(".. "):
            j += 1
        para = list(lines[i:j])
        literal_end = j
        if para[-1].rstrip().endswith("::"):
            literal_end = rt.literal_block_end(lines, j, rt.indent(para[-1]))
            para[-1] = rt.strip_literal_marker(para[-1])
        table = rt.SIMPLE_TABLE_BORDER_RE.match(para[0])
        paragraph = rt.simple_table_text(para) if table else rt.join_paragraph(para)
        items.extend(self._text(paragraph))
        if literal_end > j:
            code = rt.code_text(lines[j:literal_end])
            # A lone "::" is introduced by the paragraph before it.
            lead_in = paragraph.strip() or lead_in
            if self.language in _GDSCRIPT and _bare_block_is_gdscript(code, lead_in):
                items.append(_Item("code", code))
        return literal_end, paragraph

    def _explicit(self, stripped: str, body: Sequence[str], column: int) -> list[_Item]:
        """One explicit markup block: directive, target, substitution definition or comment."""
        if _SUBST_DEF_RE.match(stripped) or stripped.startswith(".. _") or stripped == "..":
            return []
        d = rt.directive(stripped)
        if d is None:
            return []  # a comment
        if d.name == "highlight":
            self.language = d.arg.lower() or _DEFAULT_LANGUAGE
            return []
        if d.name in _CODE_DIRECTIVES or d.name == "code-tab":
            language = (d.arg.split(None, 1)[0] if d.arg else self.language).lower()
            code = rt.code_text(rt.skip_options(body))
            # A gdscript label is trusted, but never let C# through.
            if language in _GDSCRIPT and code and not rt.looks_like_csharp(code):
                return [_Item("code", code)]
            return []
        if d.name in _ADMONITIONS:
            return self._admonition(d, stripped, body, column)
        if d.name == "tab":
            return [] if re.search(r"C#|C\+\+|csharp|\bcpp\b", d.arg, re.I) else self.body(body)
        if d.name == "rubric":
            return self._text(d.arg)
        if d.name == "figure" or d.name in _CONTAINERS:  # a figure's body is its caption and legend
            return self.body(rt.skip_options(body))
        return []  # image, video, toctree, meta, math, rst-class, raw, ...

    def _admonition(self, d: rt.Directive, stripped: str, body: Sequence[str], column: int) -> list[_Item]:
        label = _ADMONITIONS[d.name] or self.inline(d.arg)
        content: list[str] = list(rt.skip_options(body))
        if d.arg and d.name != "admonition":
            # The text after "note::" is the first line of the content.
            after = stripped[stripped.index("::") + 2 :]
            column += stripped.index("::") + 2 + len(after) - len(after.lstrip())
            content.insert(0, " " * column + d.arg)
        items = self.body(content)
        for it in items:
            if it.kind == "text":
                it.text = f"{label}: {it.text}" if label else it.text
                break
        return items

    def _text(self, raw: str) -> list[_Item]:
        refs = [rt.split_target(m.group(1) or m.group(2)) for m in rt.REF_TARGET_RE.finditer(raw)]
        text = self.inline(raw)
        return [_Item("text", text, refs)] if text.strip() else []

    def ref_symbol(self, target: str, text: str = "") -> str | None:
        """``class_AnimatedSprite2D_method_play`` -> ``AnimatedSprite2D.play``; None for non-API targets."""
        return rt.label_symbol(target, lambda name: self._class_case(name, text))

    def humanise_target(self, target: str) -> str:
        return rt.label_text(target, lambda name: self._class_case(name, ""))

    def _class_case(self, name: str, text: str) -> str:
        # Sphinx labels are case-insensitive and some pages write "class_sprite2d".
        for word in re.findall(r"[A-Za-z0-9@]+", text):
            if word.lower() == name and any(ch.isupper() for ch in word):
                return word
        if self._case_map is None:
            self._case_map = self._make_case_map()
        return self._case_map.get(name, name)


def _substitutions(lines: Iterable[str]) -> dict[str, str]:
    """Text of ``.. |name| replace::`` definitions; image substitutions render as nothing."""
    subs: dict[str, str] = {}
    for ln in lines:
        m = _SUBST_DEF_RE.match(ln.strip())
        if m and m.group(2) == "replace":
            # Substitutions are table symbols (|✔️|); their :abbr: tooltips would repeat on every row.
            subs[m.group(1)] = re.sub(r":abbr:`([^`(]+?)\s*\([^`]*\)`", r"\1", m.group(3))
    inline = rt.Inline({})
    return {name: inline(text) for name, text in subs.items()}


def _case_map(text: str, member_index: Mapping[str, Sequence[str]] | None) -> dict[str, str]:
    """Lower-case class name -> proper spelling, from the page itself and the member index."""
    mapping: dict[str, str] = {}
    if member_index is not None:
        for owners in member_index.values():
            for cls in owners:
                mapping.setdefault(cls.lower(), cls)
    for m in re.finditer(r"class_(@?[A-Za-z0-9]+)", text):
        if any(ch.isupper() for ch in m.group(1)):
            mapping.setdefault(m.group(1).lower(), m.group(1))
    for word in re.findall(r"\b[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*\b", text):
        mapping.setdefault(word.lower(), word)
    return mapping
