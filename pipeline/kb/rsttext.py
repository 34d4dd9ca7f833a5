"""The one RST toolkit shared by the KB readers (tutorial pages, class reference, migration page).

Line-based helpers for the subset of reStructuredText (plus the Sphinx roles and the ``tabs``
extension) that the Godot docs use: indentation with one tab width, headings, directives,
inline markup and roles, tables, and telling GDScript from C# or shader code. docutils
would need Sphinx's directives and roles registered and builds a full doctree the readers
do not need (see ``bench/rst_parse.py`` for the measurement).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

TAB_WIDTH = 8  # docutils expands tabs to 8-column stops

# --- indentation --------------------------------------------------------------


def indent(line: str) -> int:
    """Column of the first non-blank character, tabs advancing to the next tab stop."""
    col = 0
    for ch in line:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col = (col // TAB_WIDTH + 1) * TAB_WIDTH
        else:
            break
    return col


def block_end(lines: Sequence[str], start: int, column: int) -> int:
    """Index of the first non-blank line at or left of ``column``, from ``start`` on."""
    j = start
    while j < len(lines) and (not lines[j].strip() or indent(lines[j]) > column):
        j += 1
    return j


def indented_block(lines: Sequence[str], start: int, column: int) -> tuple[list[str], int]:
    """The block indented deeper than ``column`` from ``start`` (trailing blank lines dropped), and its end."""
    end = block_end(lines, start, column)
    body = list(lines[start:end])
    while body and not body[-1].strip():
        body.pop()
    return body, end


def literal_block_end(lines: Sequence[str], start: int, column: int) -> int:
    """End of the literal block a ``::`` paragraph at ``column`` introduces; ``start`` if none follows."""
    k = start
    while k < len(lines) and not lines[k].strip():
        k += 1
    return block_end(lines, k, column) if k < len(lines) and indent(lines[k]) > column else start


def strip_literal_marker(line: str) -> str:
    """``Text::`` -> ``Text:``; ``Text ::`` -> ``Text``; a lone ``::`` -> nothing (docutils' rules)."""
    last = line.rstrip()
    return last[:-2].rstrip() if last[:-2].endswith((" ", "\t")) or last.strip() == "::" else last[:-1]


def dedent(lines: Sequence[str]) -> list[str]:
    """Remove the common indentation, counting tabs by width but leaving tabs after it alone."""
    widths = [indent(ln) for ln in lines if ln.strip()]
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
            col = (col // TAB_WIDTH + 1) * TAB_WIDTH if ln[pos] == "\t" else col + 1
            pos += 1
        out.append(" " * (col - cut) + ln[pos:].rstrip())
    return out


def code_text(lines: Sequence[str]) -> str:
    """A literal block's text: dedented, without blank lines at either end."""
    body = dedent(lines)
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    return "\n".join(body)


# --- headings -------------------------------------------------------------------

_ADORNMENT_RE = re.compile(r"^([!-/:-@\[-`{-~])\1*\s*$")


@dataclass(frozen=True)
class Heading:
    start: int  # first line: the overline if there is one, else the title
    body: int  # first line after the underline
    level: int  # 0 for the first adornment style on the page, 1 for the next new one, ...
    title: str  # raw title text (inline markup not rendered)
    char: str  # adornment character, e.g. "=" or "-"


def is_adornment(line: str) -> bool:
    """A line of one repeated punctuation character (a section underline or a transition)."""
    return _ADORNMENT_RE.match(line) is not None


def _is_underline(line: str, title: str) -> bool:
    stripped = line.rstrip()
    if not stripped or line[0].isspace() or not is_adornment(stripped):
        return False
    # docutils accepts a short underline only as a warning; the corpus has "3D\n==".
    return len(stripped) >= len(title.rstrip()) or len(stripped) >= 4


def headings(lines: Sequence[str]) -> list[Heading]:
    """Every section title of a page, with its level in docutils' order of first appearance."""
    styles: list[tuple[bool, str]] = []
    found: list[Heading] = []
    i, n = 0, len(lines)
    while i < n - 1:
        title, under = lines[i], lines[i + 1]
        if title.strip() and not title[0].isspace() and not is_adornment(title) and _is_underline(under, title):
            over = i > 0 and lines[i - 1].rstrip() == under.rstrip()
            start = i - 1 if over else i
            if start == 0 or not lines[start - 1].strip():
                style = (over, under[0])
                if style not in styles:
                    styles.append(style)
                found.append(Heading(start, i + 2, styles.index(style), title.strip(), under[0]))
                i += 2
                continue
        i += 1
    return found


def section_spans(lines: Sequence[str]) -> list[tuple[Heading, int]]:
    """Each heading with the end of its own text (the start of the next heading of any level)."""
    found = headings(lines)
    ends = [h.start for h in found[1:]] + [len(lines)]
    return list(zip(found, ends, strict=False))  # no headings: no spans


# --- directives -------------------------------------------------------------------

_DIRECTIVE_RE = re.compile(r"^(\s*)\.\.\s+([A-Za-z][\w-]*)\s*::(?:\s+(.*?))?\s*$")
_OPTION_RE = re.compile(r"^\s*:[\w -]+:(\s|$)")


@dataclass(frozen=True)
class Directive:
    name: str  # lower-cased, e.g. "code-block"
    arg: str  # text after "::", stripped
    column: int  # indentation of the ".." line


def directive(line: str) -> Directive | None:
    """``.. name:: argument`` (also the corpus's ``.. code-tab :: GDScript``), or None."""
    m = _DIRECTIVE_RE.match(line)
    if m is None:
        return None
    return Directive(m.group(2).lower(), (m.group(3) or "").strip(), indent(m.group(1)))


def skip_options(body: Sequence[str]) -> Sequence[str]:
    """A directive body without its leading ``:option: value`` lines."""
    k = 0
    while k < len(body) and body[k].strip() and _OPTION_RE.match(body[k]):
        k += 1
    return body[k:]


# --- cross-reference labels ---------------------------------------------------------

_TARGETED_RE = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
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
PERMALINK = "🔗"  # the text of the link make_rst.py puts after every class-reference signature


def split_target(content: str) -> tuple[str, str]:
    """``text <target>`` -> (text, target); a bare ``target`` -> ("", target)."""
    m = _TARGETED_RE.match(content.strip())
    if m:
        return m.group(1).strip(), m.group(2).strip()
    return "", content.strip()


def label_symbol(target: str, class_case: Callable[[str], str] = str) -> str | None:
    """``class_AnimatedSprite2D_method_play`` -> ``AnimatedSprite2D.play``; None for non-API labels.

    ``class_case`` spells a lower-case class label properly (Sphinx labels are case-insensitive).
    """
    m = _CLASS_TARGET_RE.match(target)
    if m is None:
        return None
    cls = m.group(1) if any(ch.isupper() for ch in m.group(1)) else class_case(m.group(1))
    rest = m.group(2)
    if not rest:
        return cls
    for kind in _MEMBER_KINDS:
        if rest.startswith(kind):
            return f"{cls}.{rest[len(kind) :]}"
    return cls if rest.startswith(_CLASS_ONLY_KINDS) else f"{cls}.{rest}"


def label_text(target: str, class_case: Callable[[str], str] = str) -> str:
    """What a ``:ref:`` without text shows: the API symbol, or the label in words."""
    symbol = label_symbol(target, class_case)
    if symbol:
        return symbol
    label = target[4:] if target.startswith("doc_") else target
    return label.replace("_", " ").strip()


# --- inline markup ----------------------------------------------------------------

_LITERAL_RE = re.compile(r"``(.+?)``(?!`)")
# Also accepts quotes in place of backticks: the corpus has ":ref:'class_Camera3D'".
_ROLE_RE = re.compile(r":([A-Za-z][\w-]*):(?:`((?:[^`\\]|\\.)+?)`|'([^'\s]+)')")
_LINK_RE = re.compile(r"`([^`]+?)`__?")
_DEFAULT_ROLE_RE = re.compile(r"(?<![\w`])`([^`]+?)`(?![\w`])")
_SUBST_RE = re.compile(r"(?<![\w|])\|(?=\S)([^|\n]+?)(?<=\S)\|(?:__?)?(?![\w|])")
_STRONG_RE = re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")
_EMPHASIS_RE = re.compile(r"(?<![\w*\\])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![\w*])")
_FOOTNOTE_REF_RE = re.compile(r"\s?\[(?:#[\w-]*|\d+|\*)\]_")
_ESCAPE_RE = re.compile(r"\\(.?)", re.S)
_PLACEHOLDER_RE = re.compile("\x00(\\d+)\x00")
_LITERAL_PLACEHOLDER_RE = re.compile("\x01(\\d+)\x01")
_SPACES_RE = re.compile(r"[ \t]{2,}|\t")
_LINE_BREAK_RE = re.compile(r" *\n *")
REF_TARGET_RE = re.compile(r":ref:(?:`((?:[^`\\]|\\.)+?)`|'([^'\s]+)')")


def render_role(role: str, content: str, ref_text: Callable[[str], str] = label_text) -> str:
    """Plain text of one interpreted-text role; ``ref_text`` renders a ``:ref:`` that has no text."""
    content = content.replace("\\`", "`")
    text, target = split_target(content)
    if role == "ref":
        if text == PERMALINK:
            return ""
        return text or ref_text(target)
    if role == "doc":
        return text or target.rstrip("/").rsplit("/", 1)[-1].replace("_", " ")
    if role in ("download", "any", "term", "numref"):
        return text or target
    # kbd, abbr, menu, button, ui, inspector, sub, sup, guilabel, ...: the content itself.
    return content


class _Placeholders:
    """Rendered pieces held out of the text while later passes run, then put back."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.literals: list[str] = []  # put back last, verbatim: runs of spaces inside ``code`` matter

    def keep(self, s: str) -> str:
        self.kept.append(s)
        return f"\x00{len(self.kept) - 1}\x00"

    def keep_literal(self, s: str) -> str:
        self.literals.append(s)
        return f"\x01{len(self.literals) - 1}\x01"

    def restore(self, text: str) -> str:
        for _ in range(3):  # placeholders can nest (a role inside a link's text)
            if "\x00" not in text:
                break
            text = _PLACEHOLDER_RE.sub(lambda m: self.kept[int(m.group(1))], text)
        if "  " in text or "\t" in text:
            text = _SPACES_RE.sub(" ", text)
        if "\n" in text:
            text = _LINE_BREAK_RE.sub("\n", text)
        if self.literals:
            text = _LITERAL_PLACEHOLDER_RE.sub(lambda m: self.literals[int(m.group(1))], text)
        return text.strip()


@dataclass(frozen=True)
class Inline:
    """Renders a paragraph's inline markup to plain text.

    ``substitutions`` maps ``|name|`` to its text (unknown names render as nothing);
    ``ref_text`` renders a ``:ref:`` without text; ``literal`` formats ````code```` (plain by default).
    """

    substitutions: Mapping[str, str]
    ref_text: Callable[[str], str] = label_text
    literal: str = "{}"

    def __call__(self, raw: str) -> str:
        held = _Placeholders()
        return held.restore(_strip_markup(self._hold(raw, held)))

    def _hold(self, text: str, held: _Placeholders) -> str:
        """Literals, roles, links and substitutions replaced by placeholders for their rendered text,
        so that a "*" or "|" inside them is not read as markup. The "in" guards skip passes that cannot match."""
        if "``" in text:
            text = _LITERAL_RE.sub(lambda m: held.keep_literal(self.literal.format(m.group(1))), text)
        if ":`" in text or ":'" in text:
            text = _ROLE_RE.sub(lambda m: held.keep(self._role(m)), text)
        if "`" in text:
            text = _LINK_RE.sub(lambda m: held.keep(_link_text(m.group(1))), text)
            text = _DEFAULT_ROLE_RE.sub(lambda m: held.keep(m.group(1)), text)
        if "|" in text:
            text = _SUBST_RE.sub(lambda m: held.keep(self.substitutions.get(m.group(1), "")), text)
        return text

    def _role(self, m: re.Match[str]) -> str:
        return render_role(m.group(1), m.group(2) or m.group(3), self.ref_text)


def _strip_markup(text: str) -> str:
    """Text without strong/emphasis markers, footnote references and escapes."""
    if "**" in text:
        text = _STRONG_RE.sub(r"\1", text)
    if "*" in text:
        text = _EMPHASIS_RE.sub(r"\1", text)
    if "]_" in text:
        text = _FOOTNOTE_REF_RE.sub("", text)
    if "\\" in text:
        text = _ESCAPE_RE.sub(_unescape, text)
    return text


def _unescape(m: re.Match[str]) -> str:
    # An escaped space or line break (or a trailing backslash) is nothing: it only separates markup.
    return "" if m.group(1) in ("", " ", "\n") else m.group(1)


def _link_text(content: str) -> str:
    text, target = split_target(content)
    return text or target


# --- paragraphs and tables ------------------------------------------------------------

_LIST_MARKER_RE = re.compile(r"^(?:[-*+\u2022]\s|\d+[.)]\s|#\.\s|\(?[a-zA-Z0-9]\)\s)")
GRID_BORDER_RE = re.compile(r"^\s*\+[-=+]+\+\s*$")
_GRID_RUN_RE = re.compile(r"\+[-=+]+\+")
SIMPLE_TABLE_BORDER_RE = re.compile(r"^\s*=+(?:\s+=+)+\s*$")


def join_paragraph(lines: Iterable[str]) -> str:
    """One paragraph on one line, but each list item (or table row) on its own line."""
    out: list[str] = []
    for ln in lines:
        s = ln.strip()
        if SIMPLE_TABLE_BORDER_RE.match(s) or (is_adornment(s) and len(s) >= 3):
            if out:
                out[-1] += "\n"
            continue
        if out and (_LIST_MARKER_RE.match(s) or out[-1].endswith("\n")):
            out.append("\n" + s)
        else:
            out.append(s)
    return " ".join(out).replace(" \n", "\n").replace("\n ", "\n")


def simple_table_text(lines: Sequence[str]) -> str:
    """One line per row. Cells are cut at runs of 2+ spaces, not at the border's
    columns: emoji cells (|✔️|) are wide, so character offsets drift."""
    rows: list[str] = []
    for ln in lines:
        if SIMPLE_TABLE_BORDER_RE.match(ln) or re.fullmatch(r"\s*[-=\s]+", ln):
            continue
        row = " | ".join(c for c in re.split(r"\s{2,}", ln.strip()) if c)
        if row:
            rows.append(row)
    return "\n".join(rows)


def grid_table_rows(lines: Sequence[str]) -> list[list[str]]:
    """The non-empty cells of each text line of a grid table (borders dropped)."""
    rows: list[list[str]] = []
    for ln in lines:
        # Border runs also appear mid-line next to a cell spanning rows.
        cells = [c.strip() for c in _GRID_RUN_RE.sub("|", ln).split("|")]
        row = [c for c in cells if c]
        if row:
            rows.append(row)
    return rows


def grid_table_text(lines: Sequence[str]) -> str:
    return "\n".join(" | ".join(row) for row in grid_table_rows(lines))


# --- code language ---------------------------------------------------------------------

_NOT_GDSCRIPT_RE = re.compile(
    # C# declarations and calls
    r"^\s*(?:using\s+[\w.]+\s*;|namespace\s|(?:public|private|protected|internal)\s|\[Export\b"
    r"|(?:\w+\s+)*override\s+\w+)|\bGD\.\w+\(|\bnew\s+[A-Z]\w*\s*\(|=>\s*\{|\bvoid\s+\w+\s*\("
    # shader code: its header and typed declarations
    r"|^\s*shader_type\s|^\s*(?:uniform|varying|float|vec[234]|mat[234]|ivec[234])\s+\w+\s*[=;(]",
    re.M,
)


def looks_like_csharp(code: str) -> bool:
    """C# (or shader code) rather than GDScript: C#-only syntax, or most statements ending in ``;``."""
    # GDScript comments may quote C# or JavaScript ("# new ArrayBuffer(10)"): drop them first.
    lines = [re.sub(r"#.*", "", ln).strip() for ln in code.split("\n")]
    lines = [ln for ln in lines if ln and not ln.startswith("//")]
    if _NOT_GDSCRIPT_RE.search("\n".join(lines)):
        return True
    statements = [ln for ln in lines if ln not in ("{", "}")]
    semicolons = sum(ln.endswith(";") for ln in statements)
    return bool(statements) and semicolons * 2 > len(statements)
