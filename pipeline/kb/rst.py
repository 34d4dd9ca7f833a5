"""Turn a getting_started/ or tutorials/ RST page into ``DocsChunk`` records.

A small line-based reader for the subset of reStructuredText (plus the Sphinx
``tabs`` extension) that the Godot docs use; docutils would need the Sphinx
extensions registered and is far slower on the whole corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.kb.symbols import extract_api_symbols
from pipeline.records import DocsChunk

MAX_SECTION_CHARS = 6000
_TAB = 8  # docutils expands tabs to 8-column stops
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

_ADORNMENT_RE = re.compile(r"^([!-/:-@\[-`{-~])\1*\s*$")
_DIRECTIVE_RE = re.compile(r"^\.\.\s+([A-Za-z][\w-]*)\s*::(?:\s+(.*?))?\s*$")
_SUBST_DEF_RE = re.compile(r"^\.\.\s+\|([^|]+)\|\s+([\w-]+)\s*::\s*(.*?)\s*$")
_OPTION_RE = re.compile(r"^\s*:[\w -]+:(\s|$)")
_LIST_MARKER_RE = re.compile(r"^(?:[-*+\u2022]\s|\d+[.)]\s|#\.\s|\(?[a-zA-Z0-9]\)\s)")
_GRID_BORDER_RE = re.compile(r"^\s*\+[-=+]+\+\s*$")
_GRID_RUN_RE = re.compile(r"\+[-=+]+\+")
_SIMPLE_TABLE_BORDER_RE = re.compile(r"^\s*=+(?:\s+=+)+\s*$")

_LITERAL_RE = re.compile(r"``(.+?)``")
# Also accepts quotes in place of backticks: the corpus has ":ref:'class_Camera3D'".
_ROLE_RE = re.compile(r":([A-Za-z][\w-]*):(?:`((?:[^`\\]|\\.)+?)`|'([^'\s]+)')")
_TARGETED_RE = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
_LINK_RE = re.compile(r"`([^`]+?)`__?")
_DEFAULT_ROLE_RE = re.compile(r"(?<![\w`])`([^`]+?)`(?![\w`])")
_SUBST_RE = re.compile(r"(?<![\w|])\|(?=\S)([^|\n]+?)(?<=\S)\|(?:__?)?(?![\w|])")
_STRONG_RE = re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")
_EMPHASIS_RE = re.compile(r"(?<![\w*\\])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![\w*])")
_FOOTNOTE_REF_RE = re.compile(r"\s?\[(?:#[\w-]*|\d+|\*)\]_")
_ESCAPE_RE = re.compile(r"\\(.)")
_PLACEHOLDER_RE = re.compile("\x00(\\d+)\x00")
_REF_TARGET_RE = re.compile(r":ref:(?:`((?:[^`\\]|\\.)+?)`|'([^'\s]+)')")

_CLASS_TARGET_RE = re.compile(r"^class_(@?[A-Za-z0-9]+)(?:_(.+))?$")
# Longest first: "theme_font_size_" must win over "theme_font_".
_MEMBER_KINDS = (
    "private_method_",
    "method_",
    "property_",
    "signal_",
    "constant_",
    "annotation_",
    "enum_",
    "theme_font_size_",
    "theme_color_",
    "theme_constant_",
    "theme_font_",
    "theme_icon_",
    "theme_style_",
)
_CLASS_ONLY_KINDS = ("constructor_", "operator_")

# Bare "::" blocks that are prose-adjacent commands, not GDScript.
_SHELL_FIRST_WORDS = frozenset(
    {"godot", "ffmpeg", "git", "scons", "cd", "sudo", "apt", "apt-get", "pip", "python", "python3"}
)
# "Here's an example of the output::", "Will print::": program output, not code.
_OUTPUT_LEAD_IN_RE = re.compile(
    r"(?:\boutput(?: from the \w+)?(?: will be| is)?|\bwill print|\bprints?(?: out)?)\s*:*$", re.IGNORECASE
)
_CSHARP_LINE_RE = re.compile(
    r"^\s*(?:using\s+[\w.]+\s*;|namespace\s|(?:public|private|protected|internal)\s|\[Export\b|(?:\w+\s+)*override\s+\w+)|\bGD\.Print"
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
    headings = _headings(lines)
    if not headings:
        return [_Section([], reader.body(lines))]
    # Text above the page title is labels, field lists and editor comments;
    # read it only for directives that change state (e.g. ``highlight``).
    reader.body(lines[: headings[0][0]])
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    for k, (_, body_start, level, raw_title) in enumerate(headings):
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, reader.inline(raw_title)))
        sections.append(_Section([t for _, t in stack], reader.body(lines[body_start:end])))
    return sections


def _headings(lines: list[str]) -> list[tuple[int, int, int, str]]:
    """(first line, first body line, level, title) for each section title."""
    styles: list[tuple[bool, str]] = []
    found: list[tuple[int, int, int, str]] = []
    i, n = 0, len(lines)
    while i < n - 1:
        title, under = lines[i], lines[i + 1]
        if title.strip() and not title[0].isspace() and not _ADORNMENT_RE.match(title) and _is_underline(under, title):
            over = i > 0 and lines[i - 1].rstrip() == under.rstrip()
            start = i - 1 if over else i
            if start == 0 or not lines[start - 1].strip():
                style = (over, under[0])
                if style not in styles:
                    styles.append(style)
                found.append((start, i + 2, styles.index(style), title.strip()))
                i += 2
                continue
        i += 1
    return found


def _is_underline(line: str, title: str) -> bool:
    stripped = line.rstrip()
    if not stripped or line[0].isspace() or not _ADORNMENT_RE.match(stripped):
        return False
    # docutils accepts a short underline only as a warning; the corpus has "3D\n==".
    return len(stripped) >= len(title.rstrip()) or len(stripped) >= 4


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


def _indent(line: str) -> int:
    col = 0
    for ch in line:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col = (col // _TAB + 1) * _TAB
        else:
            break
    return col


def _block_end(lines: Sequence[str], start: int, indent: int) -> int:
    """Index of the first non-blank line at or left of ``indent`` from ``start``."""
    j = start
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > indent):
        j += 1
    return j


def _dedent(lines: Sequence[str]) -> list[str]:
    """Remove the common indentation, counting tabs by width but leaving tabs after it alone."""
    widths = [_indent(ln) for ln in lines if ln.strip()]
    if not widths:
        return []
    cut = min(widths)
    out: list[str] = []
    for ln in lines:
        if not ln.strip():
            out.append("")
            continue
        col = pos = 0
        while col < cut:
            col = (col // _TAB + 1) * _TAB if ln[pos] == "\t" else col + 1
            pos += 1
        out.append(" " * (col - cut) + ln[pos:].rstrip())
    return out


def _code_text(lines: Sequence[str]) -> str:
    body = _dedent(lines)
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    return "\n".join(body)


def _skip_options(body: Sequence[str]) -> Sequence[str]:
    k = 0
    while k < len(body) and body[k].strip() and _OPTION_RE.match(body[k]):
        k += 1
    return body[k:]


def _looks_like_csharp(code: str) -> bool:
    lines = [ln.strip() for ln in code.split("\n")]
    if any(_CSHARP_LINE_RE.search(ln) for ln in lines if not ln.startswith(("#", "//"))):
        return True
    lines = [ln for ln in lines if ln and not ln.startswith(("//", "#")) and ln not in ("{", "}")]
    semicolons = sum(ln.endswith(";") for ln in lines)
    return bool(lines) and semicolons * 2 > len(lines)


def _bare_block_is_gdscript(code: str, lead_in: str) -> bool:
    """Bare ``::`` blocks default to GDScript, but some hold commands, program output or diagrams."""
    if _OUTPUT_LEAD_IN_RE.search(lead_in.strip()) or _looks_like_shell(code) or _looks_like_csharp(code):
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
        self.substitutions = substitutions
        self._make_case_map = case_map  # built only if a page spells a class label in lower case
        self._case_map: dict[str, str] | None = None
        self.language = _DEFAULT_LANGUAGE  # changed by ".. highlight::"

    def body(self, lines: Sequence[str]) -> list[_Item]:
        items: list[_Item] = []
        lead_in = ""
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                i += 1
                continue
            indent = _indent(line)
            if stripped == ".." or stripped.startswith(".. "):
                end = _block_end(lines, i + 1, indent)
                items.extend(self._explicit(stripped, lines[i + 1 : end], indent))
                i = end
                continue
            if _GRID_BORDER_RE.match(line):
                j = i
                while j < n and lines[j].strip():
                    j += 1
                items.extend(self._text(_grid_table_text(lines[i:j])))
                i = j
                continue
            j = i + 1
            while j < n and lines[j].strip() and not lines[j].strip().startswith(".. "):
                j += 1
            para = list(lines[i:j])
            literal_end = j
            if para[-1].rstrip().endswith("::"):
                ref = _indent(para[-1])
                k = j
                while k < n and not lines[k].strip():
                    k += 1
                if k < n and _indent(lines[k]) > ref:
                    literal_end = _block_end(lines, k, ref)
                last = para[-1].rstrip()
                para[-1] = last[:-2].rstrip() if last[:-2].endswith((" ", "\t")) or last.strip() == "::" else last[:-1]
            paragraph = _simple_table_text(para) if _SIMPLE_TABLE_BORDER_RE.match(para[0]) else _join_paragraph(para)
            items.extend(self._text(paragraph))
            if literal_end > j:
                code = _code_text(lines[j:literal_end])
                # A lone "::" is introduced by the paragraph before it.
                lead_in = paragraph.strip() or lead_in
                if self.language in _GDSCRIPT and _bare_block_is_gdscript(code, lead_in):
                    items.append(_Item("code", code))
            lead_in = paragraph
            i = literal_end
        return items

    def _explicit(self, stripped: str, body: Sequence[str], indent: int) -> list[_Item]:
        """One explicit markup block: directive, target, substitution definition or comment."""
        if _SUBST_DEF_RE.match(stripped) or stripped.startswith(".. _") or stripped == "..":
            return []
        m = _DIRECTIVE_RE.match(stripped)
        if m is None:
            return []  # a comment
        name, arg = m.group(1).lower(), (m.group(2) or "").strip()
        if name == "highlight":
            self.language = arg.lower() or _DEFAULT_LANGUAGE
            return []
        if name in _CODE_DIRECTIVES or name == "code-tab":
            language = (arg.split(None, 1)[0] if arg else self.language).lower()
            code = _code_text(_skip_options(body))
            # A gdscript label is trusted, but never let C# through.
            if language in _GDSCRIPT and code and not _looks_like_csharp(code):
                return [_Item("code", code)]
            return []
        if name in _ADMONITIONS:
            label = _ADMONITIONS[name] or self.inline(arg)
            content: list[str] = list(_skip_options(body))
            if arg and name != "admonition":
                # The text after "note::" is the first line of the content.
                after = stripped[stripped.index("::") + 2 :]
                column = indent + stripped.index("::") + 2 + len(after) - len(after.lstrip())
                content.insert(0, " " * column + arg)
            items = self.body(content)
            for it in items:
                if it.kind == "text":
                    it.text = f"{label}: {it.text}" if label else it.text
                    break
            return items
        if name == "tab":
            if re.search(r"C#|C\+\+|csharp|\bcpp\b", arg, re.I):
                return []
            return self.body(body)
        if name == "figure":
            return self.body(_skip_options(body))  # caption and legend
        if name == "rubric":
            return self._text(arg)
        if name in _CONTAINERS:
            return self.body(_skip_options(body))
        return []  # image, video, toctree, meta, math, rst-class, raw, ...

    def _text(self, raw: str) -> list[_Item]:
        refs = [_split_target(m.group(1) or m.group(2)) for m in _REF_TARGET_RE.finditer(raw)]
        text = self.inline(raw)
        return [_Item("text", text, refs)] if text.strip() else []

    def inline(self, raw: str) -> str:
        """Plain text of one paragraph's inline markup."""
        kept: list[str] = []
        literals: list[str] = []  # put back after whitespace is normalised: spaces inside ``code`` matter

        def keep(s: str) -> str:
            kept.append(s)
            return f"\x00{len(kept) - 1}\x00"

        def keep_literal(s: str) -> str:
            literals.append(s)
            return f"\x01{len(literals) - 1}\x01"

        text = raw
        # The "in" guards skip regex passes that cannot match; most paragraphs need few.
        if "`" in text:
            text = _LITERAL_RE.sub(lambda m: keep_literal(m.group(1)), text)
            text = _ROLE_RE.sub(lambda m: keep(self._role(m.group(1), m.group(2) or m.group(3))), text)
            text = _LINK_RE.sub(lambda m: keep(_link_text(m.group(1))), text)
            text = _DEFAULT_ROLE_RE.sub(lambda m: keep(m.group(1)), text)
        elif ":'" in text:
            text = _ROLE_RE.sub(lambda m: keep(self._role(m.group(1), m.group(2) or m.group(3))), text)
        if "|" in text:
            text = _SUBST_RE.sub(lambda m: keep(self.substitutions.get(m.group(1), "")), text)
        if "*" in text:
            text = _STRONG_RE.sub(r"\1", text)
            text = _EMPHASIS_RE.sub(r"\1", text)
        if "]_" in text:
            text = _FOOTNOTE_REF_RE.sub("", text)
        if "\\" in text:
            text = _ESCAPE_RE.sub(r"\1", text.replace("\\ ", ""))
        for _ in range(3):  # placeholders can nest (a role inside a link's text)
            if "\x00" not in text:
                break
            text = _PLACEHOLDER_RE.sub(lambda m: kept[int(m.group(1))], text)
        text = re.sub(r"[ \t]+", " ", text)
        text = re.sub(r" *\n *", "\n", text)
        if literals:
            text = re.sub("\x01(\\d+)\x01", lambda m: literals[int(m.group(1))], text)
        return text.strip()

    def _role(self, role: str, content: str) -> str:
        content = content.replace("\\`", "`")
        text, target = _split_target(content)
        if role == "ref":
            return text or self.humanise_target(target)
        if role == "doc":
            return text or target.rstrip("/").rsplit("/", 1)[-1].replace("_", " ")
        if role in ("download", "any", "term", "numref"):
            return text or target
        # kbd, abbr, menu, button, ui, inspector, sub, sup, guilabel, ...: the content itself.
        return content

    def ref_symbol(self, target: str, text: str = "") -> str | None:
        """``class_AnimatedSprite2D_method_play`` -> ``AnimatedSprite2D.play``; None for non-API targets."""
        m = _CLASS_TARGET_RE.match(target)
        if m is None:
            return None
        cls = self._class_case(m.group(1), text)
        rest = m.group(2)
        if not rest:
            return cls
        for kind in _MEMBER_KINDS:
            if rest.startswith(kind):
                return f"{cls}.{rest[len(kind) :]}"
        return cls if rest.startswith(_CLASS_ONLY_KINDS) else f"{cls}.{rest}"

    def humanise_target(self, target: str) -> str:
        symbol = self.ref_symbol(target)
        if symbol:
            return symbol
        label = target[4:] if target.startswith("doc_") else target
        return label.replace("_", " ").strip()

    def _class_case(self, name: str, text: str) -> str:
        # Sphinx labels are case-insensitive and some pages write "class_sprite2d".
        if any(ch.isupper() for ch in name):
            return name
        for word in re.findall(r"[A-Za-z0-9@]+", text):
            if word.lower() == name and any(ch.isupper() for ch in word):
                return word
        if self._case_map is None:
            self._case_map = self._make_case_map()
        return self._case_map.get(name, name)


def _split_target(content: str) -> tuple[str, str]:
    """``text <target>`` -> (text, target); a bare ``target`` -> ("", target)."""
    m = _TARGETED_RE.match(content.strip())
    if m:
        return m.group(1).strip(), m.group(2).strip()
    return "", content.strip()


def _link_text(content: str) -> str:
    text, target = _split_target(content)
    return text or target


def _join_paragraph(lines: Iterable[str]) -> str:
    """One paragraph on one line, but each list item (or table row) on its own line."""
    out: list[str] = []
    for ln in lines:
        s = ln.strip()
        if _SIMPLE_TABLE_BORDER_RE.match(s) or (_ADORNMENT_RE.match(s) and len(s) >= 3):
            if out:
                out[-1] += "\n"
            continue
        if out and (_LIST_MARKER_RE.match(s) or out[-1].endswith("\n")):
            out.append("\n" + s)
        else:
            out.append(s)
    return " ".join(out).replace(" \n", "\n").replace("\n ", "\n")


def _simple_table_text(lines: Sequence[str]) -> str:
    """One line per row. Cells are cut at runs of 2+ spaces, not at the border's
    columns: emoji cells (|✔️|) are wide, so character offsets drift."""
    rows: list[str] = []
    for ln in lines:
        if _SIMPLE_TABLE_BORDER_RE.match(ln) or re.fullmatch(r"\s*[-=\s]+", ln):
            continue
        row = " | ".join(c for c in re.split(r"\s{2,}", ln.strip()) if c)
        if row:
            rows.append(row)
    return "\n".join(rows)


def _grid_table_text(lines: Sequence[str]) -> str:
    rows: list[str] = []
    for ln in lines:
        # Border runs also appear mid-line next to a cell spanning rows.
        cells = [c.strip() for c in _GRID_RUN_RE.sub("|", ln).split("|")]
        row = " | ".join(c for c in cells if c)
        if row:
            rows.append(row)
    return "\n".join(rows)


def _substitutions(lines: Iterable[str]) -> dict[str, str]:
    """Text of ``.. |name| replace::`` definitions; image substitutions render as nothing."""
    subs: dict[str, str] = {}
    for ln in lines:
        m = _SUBST_DEF_RE.match(ln.strip())
        if m and m.group(2) == "replace":
            # Substitutions are table symbols (|✔️|); their :abbr: tooltips would repeat on every row.
            subs[m.group(1)] = re.sub(r":abbr:`([^`(]+?)\s*\([^`]*\)`", r"\1", m.group(3))
    reader = _Reader({}, dict)
    return {name: reader.inline(text) for name, text in subs.items()}


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
