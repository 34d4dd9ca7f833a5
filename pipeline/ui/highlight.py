"""HTML views of code and record text with <mark>ed terms (escaped; legible in light and dark themes)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype

# Semi-transparent backgrounds read well on both the light and the dark theme; text keeps the theme colour.
STYLES: dict[str, str] = {
    "term": "rgba(250, 204, 21, 0.40)",  # BM25 matched term
    "fact": "rgba(250, 204, 21, 0.40)",  # deterministic evidence (string/API in both texts)
    "evidence": "rgba(34, 197, 94, 0.40)",  # Qwen's evidence, verified in both texts
    "unverified": "rgba(239, 68, 68, 0.40)",  # Qwen's evidence that is not in both texts
}
LEGEND = {
    "term": "BM25 matched term",
    "fact": "shared string/API (deterministic)",
    "evidence": "Qwen evidence, verified",
    "unverified": "Qwen evidence, not in both texts",
}
RECORD_CHARS = 4000  # enough for the code around a match; whole docs sections can be pages long


@dataclass(frozen=True)
class Mark:
    text: str
    kind: str = "term"  # a key of STYLES
    title: str = ""  # tooltip, e.g. the BM25 contribution
    word: bool = True  # match on identifier boundaries (BM25 terms) rather than as a raw substring
    ignore_case: bool = True
    # Whole identifiers only (facts, evidence): no [A-Za-z0-9_] glued on at an end that is itself one.
    whole: bool = False


_IDENT = "A-Za-z0-9_"


def _pattern(m: Mark) -> re.Pattern[str] | None:
    text = m.text.strip()
    if not text:
        return None
    body = re.escape(text)
    if m.whole:
        # "play" not in "player's"; "$AnimatedSprite2D" and "position.clamp(" keep their punctuation ends.
        head = rf"(?<![{_IDENT}])" if re.match(rf"[{_IDENT}]", text) else ""
        tail = rf"(?![{_IDENT}])" if re.match(rf"[{_IDENT}]", text[-1]) else ""
        body = head + body + tail
    elif m.word:
        # Identifier parts count ("pressed" in is_action_pressed), letters glued on do not ("is" in "this").
        body = rf"(?<![A-Za-z0-9]){body}(?![a-z0-9])"
    return re.compile(body, re.IGNORECASE if m.ignore_case else 0)


def _spans(line: str, marks: Iterable[Mark]) -> list[tuple[int, int, Mark]]:
    found: list[tuple[int, int, Mark]] = []
    for m in marks:
        rx = _pattern(m)
        if rx is None:
            continue
        found.extend((hit.start(), hit.end(), m) for hit in rx.finditer(line) if hit.end() > hit.start())
    # Earliest first, longest first at the same start; overlapping later spans are dropped.
    found.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: list[tuple[int, int, Mark]] = []
    end = -1
    for s in found:
        if s[0] >= end:
            out.append(s)
            end = s[1]
    return out


def mark_line(line: str, marks: Iterable[Mark]) -> str:
    """One line of text as escaped HTML with its matches wrapped in <mark>."""
    parts: list[str] = []
    pos = 0
    for start, end, m in _spans(line, marks):
        parts.append(html.escape(line[pos:start]))
        title = f' title="{html.escape(m.title)}"' if m.title else ""
        parts.append(f'<mark style="background:{STYLES.get(m.kind, STYLES["term"])};color:inherit;'
                     f'padding:0 1px;border-radius:3px"{title}>{html.escape(line[start:end])}</mark>')
        pos = end
    parts.append(html.escape(line[pos:]))
    return "".join(parts)


def marked_block(text: str, marks: Iterable[Mark], *, line_numbers: bool = True, max_height: int = 360) -> str:
    """A scrollable monospace block; marks never span lines (terms and facts are single tokens)."""
    marks = list(marks)
    lines = text.split("\n")
    width = len(str(len(lines)))
    rows = []
    for n, line in enumerate(lines, start=1):
        gutter = (f'<span style="opacity:0.45;user-select:none">{n:>{width}}  </span>' if line_numbers else "")
        rows.append(gutter + mark_line(line.expandtabs(4), marks))
    return (f'<div style="font-family:\'Source Code Pro\',ui-monospace,SFMono-Regular,Menlo,monospace;'
            f'font-size:0.8rem;line-height:1.45;white-space:pre;overflow:auto;max-height:{max_height}px;'
            f'padding:0.5rem 0.75rem;border-radius:0.5rem;background:rgba(128,128,128,0.10);'
            f'border:1px solid rgba(128,128,128,0.25)">' + "\n".join(rows) + "</div>")


def legend(kinds: Iterable[str]) -> str:
    items = [f'<mark style="background:{STYLES[k]};color:inherit;padding:0 4px;border-radius:3px">'
             f"{html.escape(LEGEND[k])}</mark>" for k in kinds]
    return '<div style="font-size:0.8rem;opacity:0.9">' + " &nbsp; ".join(items) + "</div>"


def record_text(record: AnyRecord, limit: int = RECORD_CHARS) -> str:
    """What a person reads of a record: heading, code, then prose (trimmed)."""
    # Dispatch on ``kind``, not isinstance: cached records may predate a module reload.
    if record.kind == "docs_chunk":
        d = cast(DocsChunk, record)
        parts = [f"# {d.title} — {d.section}"]
        if d.api_symbols:
            parts.append("# api: " + ", ".join(d.api_symbols[:20]))
        parts += [*d.code_blocks, d.content]
    elif record.kind == "api_mapping":
        a = cast(ApiMapping, record)
        parts = [f"# {a.source_api}   ({a.source or 'api mapping'})", f"pattern: {a.source_pattern}"]
        if a.match_terms:
            parts.append("match terms: " + ", ".join(a.match_terms))
        if a.required_when_seen_in_code:
            parts.append("required when seen: " + ", ".join(a.required_when_seen_in_code))
        if a.before_code or a.after_code:
            parts.append(f"before: {a.before_code or '—'}\nafter:  {a.after_code or '—'}")
        parts.append(a.description)
    else:
        lp = cast(LabelPrototype, record)
        parts = [f"# label: {lp.label}", lp.description, lp.prototype_code]
        if lp.match_terms:
            parts.append("match terms: " + ", ".join(lp.match_terms))
    text = "\n\n".join(p.strip("\n") for p in parts if p and p.strip())
    return text if len(text) <= limit else text[:limit].rstrip() + "\n…"
