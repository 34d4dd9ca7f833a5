"""Godot 3 -> 4 renames from ``tutorials/migrating/upgrading_to_godot_4.rst``.

Two sources in that page: the "Automatically renamed nodes and resources" grid
table (class renames) and the bulleted lists under "Manually renaming methods,
properties, signals and constants" (member renames, grouped by a bold
``**Methods**``/``**Properties**``/... marker). Each stated rename becomes one
``ApiMapping`` whose ``source_pattern`` finds the *old* spelling in GDScript,
so Godot 3 code can be pointed at its Godot 4 replacement.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.kb import rsttext as rt
from pipeline.records import ApiMapping

MIGRATION_DOC = "tutorials/migrating/upgrading_to_godot_4.rst"
SOURCE = "migrating/upgrading_to_godot_4"
PAGE_TITLE = "Upgrading from Godot 3 to Godot 4"
TABLE_SECTION = "Automatically renamed nodes and resources"
MANUAL_SECTION = "Manually renaming methods, properties, signals and constants"

# Bold markers in the manual section -> kind of the renamed thing.
_KIND_MARKERS = {
    "Methods": "method",
    "Properties": "property",
    "Enums": "constant",
    "Signals": "signal",
    "Constants": "constant",
}

_LIT = r"``([^`]+)``"
# "AcceptDialog's ``a()`` is now ``b()``", "EditorSettings' ``x`` ...", "A and B's ``x`` ..."
_CLASS_PREFIX = re.compile(r"^([A-Z]\w*(?:\s+and\s+[A-Z]\w*)*)'s?\s")
_IS_NOW = re.compile(_LIT + r"\s+is\s+(?:now\s+)?" + _LIT)
_BECOMES = re.compile(_LIT + r"\s+becomes\s+" + _LIT)
_REPLACE_WITH = re.compile(r"\breplace\s+(?:\w+\s+)?" + _LIT + r"\s+\w+\s+with\s+" + _LIT)
_REPLACED_WITH = re.compile(_LIT + r"[^`.]*?\b(?:replaced\s+with|in\s+favor\s+of)\s+(?:the\s+)?" + _LIT)
# "File and Directory classes were replaced by :ref:`class_FileAccess` and :ref:`class_DirAccess`"
_CLASSES_REPLACED = re.compile(
    r"^(\w+)(?:\s+and\s+(\w+))?\s+class(?:es)?\s+(?:was|were)\s+replaced\s+by\s+"
    r":ref:`class_(\w+)`(?:\s+and\s+:ref:`class_(\w+)`)?"
)
_IDENT = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class _Rename:
    kind: str  # "class", "method", "property", "signal", "constant"
    group: str  # bold marker it was listed under ("Methods", "Enums", ...) or the table
    cls: str | None  # owning class from "X's", if the bullet names one
    old: str  # spelling as written in the doc, e.g. "set_autowrap()"
    new: str
    section: str
    note: str  # the bullet's own text, for context


# Bullet text for descriptions: plain, but code keeps its backticks.
_plain = rt.Inline({}, literal="`{}`")


def _table_renames(lines: list[str]) -> list[_Rename]:
    """Class renames from the two-column grid table's body (the rows after its ``+===+`` header border)."""
    header = next((k for k, ln in enumerate(lines) if ln.strip().startswith("+=")), None)
    if header is None:
        return []
    end = next((k for k in range(header, len(lines)) if not lines[k].strip()), len(lines))
    return [
        _Rename("class", TABLE_SECTION, None, cells[0], cells[1], TABLE_SECTION, "")
        for cells in rt.grid_table_rows(lines[header + 1 : end])
        if len(cells) == 2 and all(_IDENT.match(c) for c in cells)
    ]


def _bullets(lines: list[str]) -> Iterable[tuple[str, str]]:
    """(bold marker, joined bullet text) for each top-level ``- `` bullet, in order."""
    group = "Methods"
    current: list[str] | None = None
    current_group = group
    for line in [*lines, ""]:  # a final blank line flushes the last bullet
        marker = re.fullmatch(r"\*\*(\w+)\*\*\s*", line)
        starts = line.startswith("- ")
        continues = current is not None and line.startswith("  ") and line.strip()
        if current is not None and not continues:
            yield current_group, " ".join(current)
            current = None
        if marker and marker.group(1) in _KIND_MARKERS:
            group = marker.group(1)
        elif starts:
            current, current_group = [line[2:].strip()], group
        elif continues and current is not None:
            current.append(line.strip())


def _bullet_renames(group: str, text: str, section: str) -> list[_Rename]:
    kind = _KIND_MARKERS[group]
    flat = re.sub(r"\s+", " ", text)
    note = _plain(flat)
    m = _CLASSES_REPLACED.match(flat)
    if m:
        olds = [g for g in (m.group(1), m.group(2)) if g]
        news = [g for g in (m.group(3), m.group(4)) if g]
        return [_Rename("class", group, None, o, n, section, note) for o, n in zip(olds, news, strict=False)]
    pm = _CLASS_PREFIX.match(flat)
    classes: list[str | None] = list(re.split(r"\s+and\s+", pm.group(1))) if pm else [None]
    pairs: list[tuple[str, str]] = []
    for rx in (_IS_NOW, _BECOMES, _REPLACE_WITH, _REPLACED_WITH):
        pairs.extend((a, b) for a, b in rx.findall(flat) if "<" not in a and "<" not in b)
    out: list[_Rename] = []
    seen: set[tuple[str, str]] = set()
    for old, new in pairs:
        if (old, new) in seen:
            continue
        seen.add((old, new))
        # A qualified old spelling ("OS.get_screen_size()") already names its class.
        owners = [None] if "." in old.rstrip("()") else classes
        for cls in owners:
            out.append(_Rename(kind, group, cls, old, new, section, note))
    return out


def _bare(spelling: str) -> str:
    return spelling.strip().removesuffix("()").strip()


def _old_api(r: _Rename) -> str:
    bare = _bare(r.old)
    return f"{r.cls}.{bare}" if r.cls and "." not in bare else bare


def _new_api(r: _Rename) -> str:
    bare = _bare(r.new)
    if r.cls and _IDENT.match(bare) and "." not in bare:
        return f"{r.cls}.{bare}"
    return bare


def _pattern(r: _Rename) -> str:
    bare = _bare(r.old)
    parts = bare.split(".")
    name = re.escape(parts[-1])
    qual = r"\s*\.\s*".join(re.escape(p) for p in parts)
    if r.kind == "class":
        # Whole word, but not a node path ($Sprite, "Sprite", a/Sprite): those are node names.
        return rf"(?<![\w$%/\"'.]){name}(?!\w)"
    if len(parts) > 1:  # qualified: Color.palegreen, OS.get_screen_size(), Engine.editor_hint
        tail = r"\s*\(" if r.old.rstrip().endswith(")") else r"(?!\w)"
        return rf"(?<![\w.]){qual}{tail}"
    if r.kind == "method":
        return rf"(?<![\w$%]){name}\s*\("
    if r.kind == "property":
        # Attribute access or its setter/getter; a bare name would match too much
        # Godot 4 code (``offset``, ``group``, ``shift`` are common words).
        return rf"\.\s*{name}(?!\w)(?!\s*\()|(?<![\w$%])[sg]et_{name}\s*\("
    if r.kind == "signal":
        return (
            rf"[\"']{name}[\"']|(?<![\w$%\"']){name}\s*\.\s*(?:connect|disconnect|emit|is_connected)\s*\("
            rf"|\bfunc\s+_on_\w*?_{name}\s*\("
        )
    return rf"(?<![\w$%\"']){name}(?!\w)"


def _description(r: _Rename) -> str:
    old = _bare(r.old) if r.kind == "class" else r.old
    if r.cls and "." not in old:
        old = f"{r.cls}.{old}"
    new = r.new
    if r.cls and _IDENT.match(_bare(new)) and "." not in new:
        new = f"{r.cls}.{new}"
    parts = [f"Godot 3 `{old}` was renamed to `{new}` in Godot 4."]
    if r.kind == "class" and r.section == TABLE_SECTION:
        parts.append(f"({PAGE_TITLE} > {TABLE_SECTION}: the project upgrade tool renames it automatically.)")
    else:
        parts.append(f"({PAGE_TITLE} > {MANUAL_SECTION} > {r.group}: must be renamed by hand.)")
    if r.note:
        parts.append(r.note)
    return " ".join(parts)


def rename_records(text: str, doc_path: str = MIGRATION_DOC) -> list[ApiMapping]:
    """One ``ApiMapping`` per Godot 3 -> 4 rename stated on the migration page, in page order."""
    lines = text.splitlines()
    renames: list[_Rename] = []
    for heading, end in rt.section_spans(lines):
        if heading.title == TABLE_SECTION:
            renames.extend(_table_renames(lines[heading.body : end]))
        elif heading.title == MANUAL_SECTION:
            for group, bullet in _bullets(lines[heading.body : end]):
                renames.extend(_bullet_renames(group, bullet, MANUAL_SECTION))

    records: list[ApiMapping] = []
    used: dict[str, int] = {}
    for r in renames:
        api = _old_api(r)
        base = f"rename:{api}"
        used[base] = used.get(base, 0) + 1
        rid = base if used[base] == 1 else f"{base}~{used[base]}"  # e.g. two bullets renaming one name
        old_bare, new_bare = _bare(r.old), _bare(r.new)
        terms = [old_bare, new_bare] + [t for t in (api, _new_api(r)) if t not in (old_bare, new_bare)]
        # Literal text of the old spelling as it appears in code ("set_autowrap(" not "set_autowrap()").
        required = old_bare + "(" if r.old.rstrip().endswith(")") else old_bare
        records.append(
            ApiMapping(
                id=rid,
                source_api=api,
                source_pattern=_pattern(r),
                match_terms=list(dict.fromkeys(terms)),
                required_when_seen_in_code=[required],
                before_code=r.old,
                after_code=r.new,
                doc_path=doc_path,
                source=SOURCE,
                description=_description(r),
            )
        )
    return records


def rename_map(records: Iterable[ApiMapping]) -> dict[str, str]:
    """Old API -> new API, e.g. ``KinematicBody2D`` -> ``CharacterBody2D``,
    ``AcceptDialog.set_autowrap`` -> ``AcceptDialog.set_autowrap_mode``.

    The new side is qualified with the old side's class when the doc gives a
    bare member name; non-identifier replacements (``mat * vec``) are kept as written.
    """
    out: dict[str, str] = {}
    for r in records:
        if r.source != SOURCE or r.after_code is None:
            continue
        new = _bare(r.after_code)
        cls, _, _member = r.source_api.rpartition(".")
        if cls and _IDENT.match(new) and "." not in new:
            new = f"{cls}.{new}"
        out.setdefault(r.source_api, new)  # first statement on the page wins
    return out
