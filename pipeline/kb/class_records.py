"""Records from a parsed class: docs chunks (the description, small groups of members) and api mappings.

One docs_chunk for the class description, docs_chunks for small groups of members, and
one api_mapping per member (one per enum for enum values, one per class for
constructors, none for operators) plus one per class.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TypedDict

from pipeline.kb.api_patterns import class_pattern, member_pattern, theme_type
from pipeline.kb.classref import ClassDoc, Member
from pipeline.records import ApiMapping, DocsChunk

MAX_GROUP_MEMBERS = 8
MAX_GROUP_CHARS = 3000
MAX_SENTENCE_CHARS = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(`\"'])")


# --- docs chunks ------------------------------------------------------------------

# Section label and id slug for each group of members, in the order they are emitted.
_GROUPS: dict[str, tuple[str, str]] = {
    "signal": ("Signals", "signals"),
    "enum": ("Enumerations", "enumerations"),
    "constant": ("Constants", "constants"),
    "annotation": ("Annotations", "annotations"),
    "property": ("Properties", "properties"),
    "constructor": ("Constructors", "constructors"),
    "method": ("Methods", "methods"),
    "operator": ("Operators", "operators"),
    "theme_property": ("Theme Properties", "theme-properties"),
}


def _group_key(m: Member) -> str:
    return "enum" if m.enum is not None else m.kind


def _symbol(m: Member) -> str:
    return f"{m.cls}.{m.name}"


def _member_text(m: Member) -> str:
    return f"{m.signature}\n{m.description}" if m.description else m.signature


def _groups(members: list[Member]) -> list[list[Member]]:
    """Consecutive runs of at most MAX_GROUP_MEMBERS members and ~MAX_GROUP_CHARS of text."""
    out: list[list[Member]] = []
    size = 0
    for m in members:
        n = len(_member_text(m)) + 2
        if not out or len(out[-1]) >= MAX_GROUP_MEMBERS or (out[-1] and size + n > MAX_GROUP_CHARS):
            out.append([])
            size = 0
        out[-1].append(m)
        size += n
    return out


def _docs_chunks(cls: ClassDoc) -> list[DocsChunk]:
    intro = [cls.brief, cls.description]
    if cls.inherits:
        intro.append(f"{cls.name} inherits: {' < '.join(cls.inherits)}.")
    if cls.tutorials:
        intro.append("Tutorials: " + "; ".join(cls.tutorials) + ".")
    chunks = [
        DocsChunk(
            id=f"class:{cls.name}#description",
            doc_path=cls.doc_path,
            source=cls.source,
            title=cls.name,
            section=f"{cls.name} > Description",
            content="\n\n".join(p for p in intro if p),
            code_blocks=list(cls.code_blocks),
            api_symbols=[cls.name],
        )
    ]
    by_group: dict[str, list[Member]] = {}
    for m in cls.members:
        by_group.setdefault(_group_key(m), []).append(m)
    for key, (label, slug) in _GROUPS.items():
        for n, group in enumerate(_groups(by_group.get(key, [])), start=1):
            names = group[0].name if len(group) == 1 else f"{group[0].name} … {group[-1].name}"
            chunks.append(
                DocsChunk(
                    id=f"class:{cls.name}#{slug}-{n}",
                    doc_path=cls.doc_path,
                    source=cls.source,
                    title=cls.name,
                    section=f"{cls.name} > {label} ({names})",
                    content="\n\n".join(_member_text(m) for m in group),
                    code_blocks=[c for m in group for c in m.code_blocks],
                    api_symbols=list(dict.fromkeys(_symbol(m) for m in group)),
                )
            )
    return chunks


# --- api mappings -----------------------------------------------------------------


def first_sentence(text: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    """The first sentence of the first paragraph, cut at ``limit`` characters."""
    para = text.split("\n\n", 1)[0].replace("\n", " ").strip()
    sentence = _SENTENCE_END.split(para, maxsplit=1)[0]
    if len(sentence) > limit:
        sentence = sentence[: limit - 1].rsplit(" ", 1)[0] + "…"
    return sentence


def _inverse_renames(renames: Mapping[str, str] | None) -> dict[tuple[str, str], str]:
    """(lower-cased Godot 4 class, member or "") -> Godot 3 API, first rename on the page winning.

    The migration page names some classes by their Godot 3 name or with odd casing
    (``MultiPlayerAPI``), so classes are resolved through the class renames and compared
    case-insensitively.
    """
    if not renames:
        return {}
    class_renames = {old: new for old, new in renames.items() if "." not in old and "." not in new}
    out: dict[tuple[str, str], str] = {}
    for old, new in renames.items():
        if not re.fullmatch(r"[\w.]+", new):
            continue  # "mat * vec": not an API
        cls, _, member = new.rpartition(".") if "." in new else (new, "", "")
        cls = class_renames.get(cls, cls)
        out.setdefault((cls.lower(), member), old)
    return out


def _qualify(signature: str, cls: str, name: str) -> str:
    """"void play(...)" -> "void AnimatedSprite2D.play(...)" (str search: a regex per member is slow)."""
    at = signature.find(name)
    while at >= 0:
        before = signature[at - 1] if at else " "
        after = signature[at + len(name) : at + len(name) + 1]
        if not (before.isalnum() or before in "_.@") and after in ("", "(", " "):
            return f"{signature[:at]}{cls}.{signature[at:]}"
        at = signature.find(name, at + 1)
    return f"{cls}: {signature}"


def _mapped_members(cls: ClassDoc) -> Iterator[Member]:
    """The members that get a mapping of their own."""
    constructor_done = False
    for m in cls.members:
        if m.kind == "operator" or m.enum is not None:
            continue  # operators have no name to find; enum values map through their enum
        if m.kind == "constructor":
            if constructor_done:
                continue  # overloads share one mapping
            constructor_done = True
        yield m


class _MappingFields(TypedDict):
    """The fields of an :class:`ApiMapping` that depend on the class or member (not its id or source)."""

    source_api: str
    source_pattern: str
    match_terms: list[str]
    required_when_seen_in_code: list[str]
    before_code: str | None
    after_code: str | None
    description: str


def _class_mapping(cls: ClassDoc, inverse: dict[tuple[str, str], str]) -> _MappingFields:
    old = inverse.get((cls.name.lower(), ""))
    lead = first_sentence(cls.brief or cls.description)
    parent = f" Inherits {' < '.join(cls.inherits)}." if cls.inherits else ""
    return {
        "source_api": cls.name,
        "source_pattern": class_pattern(cls.name),
        "match_terms": [cls.name] + ([old] if old else []),
        "required_when_seen_in_code": [cls.name],
        "before_code": old,
        "after_code": cls.name if old else None,
        "description": f"{lead} Class {cls.name}.{parent}".strip(),
    }


def _member_mapping(
    cls: ClassDoc, m: Member, values: list[Member], inverse: dict[tuple[str, str], str]
) -> _MappingFields:
    api = f"{cls.name}.{m.name}"
    if m.kind == "theme_property":
        api = f"{cls.name}.theme_override_{theme_type(m)[1]}/{m.name}"
    pattern, required = member_pattern(m, values)
    terms = [cls.name, m.name, api]
    if m.kind == "signal":
        terms += [f"{m.name}.connect", f'"{m.name}"']
    elif m.kind == "enum":
        terms += [v.name for v in values]
    elif m.kind == "property":
        terms += list(m.accessors)
    old = inverse.get((cls.name.lower(), m.name))
    if old:
        terms.append(old.rpartition(".")[2])
    signature = m.signature
    if m.kind == "enum":
        shown = [v.name for v in values]
        signature = f"{m.signature} {', '.join(shown[:12])}{', …' if len(shown) > 12 else ''}"
    signature = _qualify(signature, cls.name, m.name)
    return {
        "source_api": api,
        "source_pattern": pattern,
        "match_terms": list(dict.fromkeys(terms)),
        "required_when_seen_in_code": required,
        "before_code": old,
        "after_code": api if old else None,
        "description": f"{first_sentence(m.description)} Signature: {signature}".strip(),
    }


def _api_records(cls: ClassDoc, renames: Mapping[str, str] | None) -> list[ApiMapping]:
    inverse = _inverse_renames(renames)
    values: dict[str, list[Member]] = {}
    for m in cls.members:
        if m.enum is not None:
            values.setdefault(m.enum, []).append(m)
    mappings: list[tuple[str, _MappingFields]] = []
    if not cls.name.startswith("@"):
        mappings.append(("class", _class_mapping(cls, inverse)))
    mappings += [(m.kind, _member_mapping(cls, m, values.get(m.name, []), inverse)) for m in _mapped_members(cls)]

    records: list[ApiMapping] = []
    used: set[str] = set()
    for suffix, fields in mappings:
        rid = f"api:{fields['source_api']}"
        if rid in used:  # e.g. a signal and a method of one class sharing a name
            rid = f"{rid}:{suffix}"
        used.add(rid)
        records.append(ApiMapping(id=rid, source=cls.source, doc_path=cls.doc_path, **fields))
    return records


def class_records(cls: ClassDoc, renames: Mapping[str, str] | None = None) -> list[DocsChunk | ApiMapping]:
    """Docs chunks and api mappings for one class.

    ``renames`` is :func:`pipeline.kb.migrating.rename_map` (old -> new API); it fills
    ``before_code``/``after_code`` on the class mapping (``api:CharacterBody2D`` gets
    ``KinematicBody2D``) and on members renamed by hand (``api:AcceptDialog.set_autowrap_mode``
    gets ``AcceptDialog.set_autowrap``). Members of a renamed class keep ``before_code=None``:
    the old class need not have had them.

    ``source_pattern`` regexes use named groups for the typed-variable case, so apply
    them with ``re.search``/``finditer`` (group 0 is the use), not ``findall``.
    """
    return [*_docs_chunks(cls), *_api_records(cls, renames)]
