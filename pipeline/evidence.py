"""Deterministic evidence: what a record and SOURCE_CODE literally share.

Facts are read off the chunk (calls, node paths, strings, distinctive names),
then looked up in each record field. Every item names the field it matched,
so the validator's judgement can be checked against plain string matching.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate, chain

from pipeline.gdlex import Token, code_only, lex, strip_comments
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype

__all__ = ["Evidence", "EvidenceItem", "code_facts", "collect", "fact_term", "for_lists", "sanitize_for_model",
           "strip_comments", "verify"]

# Names every script uses; matching them says nothing about a record.
GENERIC = frozenset([
    "velocity", "delta", "speed", "position", "direction", "x", "y", "z", "self", "value", "result", "data",
    "node", "name", "size", "i", "j", "k", "n", "print", "len", "range", "str", "int", "float", "bool",
    "true", "false", "null", "var", "func", "get", "set", "new", "is_instance_valid",
])

_DOTTED = re.compile(r"(?<![\w.])(\$?[A-Za-z_%][\w]*(?:/[\w]+)*(?:\.[A-Za-z_]\w*)+)")
_NODE = re.compile(r"(?<![\w])(\$[A-Za-z_][\w/]*|%[A-Za-z_]\w*)")
_CALL = re.compile(r"(?<![\w.$])([A-Za-z_]\w*)\s*\(")
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")
_MARK_2D = re.compile(r"\b\w*2D\b|\bVector2i?\b|\bRect2i?\b|\bTransform2D\b")
_MARK_3D = re.compile(r"\b\w*3D\b|\bVector3i?\b|\bBasis\b|\bTransform3D\b|\bAABB\b")


_ELIDED_ONLY = re.compile(r'^\s*(?:(?:var|const)\s+\w+\s*(?::\s*\w+)?\s*:?=\s*)?"…"\s*$')


def _long_prose(body: str) -> bool:
    """A string a person wrote to be read (a message, a docstring), not a name or a path.

    Any string with a space counts, however short: `"say yes"` lowered every margin of the 1.5B judge
    by 0.3-0.6 (tests/test_validator.py), while names, paths and actions never hold a space.
    """
    return any(c.isspace() for c in body)


def _judge_view(tok: Token) -> str | None:
    if tok.kind == "comment":
        return ""
    return tok.prefix + '"…"' if _long_prose(tok.body) else None


def sanitize_for_model(code: str) -> str:
    """Code as the judge sees it: comments and prose strings are data, not instructions.

    Dropping them defeats prompt injection hidden there; no API evidence lives in them.
    Every comment and every kind of string counts (single, double or triple quotes, over
    several lines). A line left holding nothing but an elided string is dropped too.
    """
    lines = lex(code).substitute(_judge_view).splitlines()
    kept = [ln.rstrip() for ln in lines if not _ELIDED_ONLY.match(ln)]
    return "\n".join(kept).strip("\n") + "\n"


# The judge's context is 4,096 tokens; GDScript runs about 3.6 characters a token (3.0 when dense), so this
# much code leaves room for the prompt's start, a record and the answer. Longer code is cut, and the trace says so.
MODEL_CODE_CHARS = 8000


def for_model(code: str) -> tuple[str, int]:
    """``sanitize_for_model(code)`` cut to whole lines within MODEL_CODE_CHARS, and how many lines were cut."""
    text = sanitize_for_model(code)
    if len(text) <= MODEL_CODE_CHARS:
        return text, 0
    lines = text.splitlines()
    kept = _leading_lines(lines, MODEL_CODE_CHARS)
    return "\n".join(kept) + "\n", len(lines) - len(kept)


def _leading_lines(lines: list[str], limit: int) -> list[str]:
    """The first whole ``lines`` that fit in ``limit`` characters, each with its newline."""
    kept, size = [], 0
    for ln in lines:
        if size + len(ln) + 1 > limit:
            break
        kept.append(ln)
        size += len(ln) + 1
    return kept


# Policy "calibrated": the code Qwen reads before it writes evidence lists. Lists name facts, and the lines
# between them changed no list while they made most of a long chunk's cost (BENCHMARKS.md, "Qwen's evidence
# lists are the first four shared facts, every time"): ~6 s of prompt per 2,000 characters here.
LIST_CODE_CHARS = 2000


def for_lists(code: str) -> tuple[str, int]:
    """The lines of ``sanitize_for_model(code)`` that show its facts, and how many of its lines are left out.

    Each fact, most telling first (``code_facts``), brings the first line that holds it, until the lines
    reach LIST_CODE_CHARS; they keep the code's order. Code with no fact on a line keeps its first lines.
    """
    text = sanitize_for_model(code)
    lines = text.splitlines()
    starts = list(accumulate((len(ln) + 1 for ln in lines), initial=0))
    chosen: set[int] = set()
    size = 0
    for fact in code_facts(code):
        at = _find(text, fact)
        if at < 0:
            continue
        n = bisect_right(starts, at) - 1
        if n in chosen:
            continue
        if size + len(lines[n]) + 1 > LIST_CODE_CHARS:
            break
        chosen.add(n)
        size += len(lines[n]) + 1
    kept = [lines[n] for n in sorted(chosen)] if chosen else _leading_lines(lines, LIST_CODE_CHARS)
    return "\n".join(kept) + "\n", len(lines) - len(kept)


def _distinctive(name: str) -> bool:
    base = name.lstrip("$%").split(".")[-1]
    return len(base) >= 4 and base.lower() not in GENERIC


def _dotted_facts(bare: str) -> Iterator[tuple[int, str, int]]:
    """(tier, fact, position) of qualified calls and node paths, and of their distinctive members."""
    for m in _DOTTED.finditer(bare):
        parts = m.group(1).split(".")
        head = parts[0].lstrip("$%")
        if head[:1].isupper() or parts[0].startswith(("$", "%")):
            yield 0, ".".join(parts[:2]), m.start()  # Input.is_action_pressed, $AnimatedSprite2D.play
        for p in parts[1:]:
            if _distinctive(p) and not p.isupper():
                yield 2, p, m.start()  # clamp, normalized


def _node_facts(bare: str) -> Iterator[tuple[int, str, int]]:
    """(1, node name, position) of each node path: `$Player/AnimatedSprite2D` -> `AnimatedSprite2D`."""
    for m in _NODE.finditer(bare):
        yield 1, m.group(1).lstrip("$%").split("/")[-1], m.start()


def _call_facts(bare: str) -> Iterator[tuple[int, str, int]]:
    """(2, name, position) of distinctive calls (`clamp`); private helpers (`_ready`) say nothing."""
    for m in _CALL.finditer(bare):
        if _distinctive(m.group(1)) and not m.group(1).startswith("_"):
            yield 2, m.group(1), m.start()


def _name_facts(bare: str) -> Iterator[tuple[int, str, int]]:
    """(tier, name, position) of distinctive compound names: a class (1, `CharacterBody2D`), else 3 (`screen_size`)."""
    for m in _NAME.finditer(bare):
        w = m.group(1)
        if _distinctive(w) and not w.startswith("_") and not w.isupper() and (
                "_" in w or any(c.isupper() for c in w[1:])):
            yield 1 if w[:1].isupper() else 3, w, m.start()


def _string_facts(code: str) -> Iterator[tuple[int, str, int]]:
    """(4, ``"body"``, position) of short one-line string literals (any quotes or prefix), as a record quotes them."""
    for tok in lex(code).strings:
        body = tok.body
        if 2 < len(body) <= 40 and not body.isspace() and "\n" not in body:
            yield 4, f'"{body}"', tok.start


def code_facts(code: str) -> list[str]:
    """Distinctive things a Godot developer would look for in a record, most telling first.

    Order: qualified calls and node paths (`Input.is_action_pressed`, `$AnimatedSprite2D.play`),
    node and class names, member calls (`clamp`), distinctive identifiers (`screen_size`), strings.
    """
    bare = code_only(code)  # names inside strings and comments are not code
    tiers: list[dict[str, int]] = [{}, {}, {}, {}, {}]
    # A fact keeps the first tier it is found in, in this order of readers.
    found = chain(_dotted_facts(bare), _node_facts(bare), _call_facts(bare), _name_facts(bare), _string_facts(code))
    for tier, fact, pos in found:
        if not any(fact in t for t in tiers):
            tiers[tier][fact] = pos
    return [f for t in tiers for f in sorted(t, key=lambda f: t[f])]


def _find(haystack: str, needle: str) -> int:
    """Where ``needle`` first stands as a whole name (or a quoted string's body) in ``haystack``; -1 if nowhere."""
    n = needle.strip('"') if needle.startswith('"') else needle
    if not n:
        return -1
    pattern = (r"(?<![\w])" if n[0].isalnum() or n[0] == "_" else "") + re.escape(n)
    pattern += r"(?![\w])" if n[-1].isalnum() or n[-1] == "_" else ""
    m = re.search(pattern, haystack)
    return m.start() if m else -1


def _contains(haystack: str, needle: str) -> bool:
    return _find(haystack, needle) >= 0


@dataclass(frozen=True)
class EvidenceItem:
    n: int  # 1-based number offered to the model
    text: str  # the literal string found in both texts
    field: str  # record field it matched: code_blocks, content, api_symbols, source_pattern, ...


@dataclass(frozen=True)
class Evidence:
    items: list[EvidenceItem]
    only_in_code: list[str]  # distinctive facts of the chunk the record lacks
    only_in_record: list[str]  # the record's API symbols the chunk does not use
    conflicts: list[str] = field(default_factory=list)
    coverage: float = 0.0  # share of the chunk's facts (weighted by rarity) that the record holds

    @property
    def texts(self) -> list[str]:
        return [i.text for i in self.items]


def _record_fields(record: AnyRecord) -> list[tuple[str, str]]:
    if isinstance(record, DocsChunk):
        return [("code_blocks", "\n".join(record.code_blocks)), ("api_symbols", "\n".join(record.api_symbols)),
                ("content", record.content)]
    if isinstance(record, ApiMapping):
        return [("source_api", record.source_api), ("match_terms", "\n".join(record.match_terms)),
                ("required_when_seen_in_code", "\n".join(record.required_when_seen_in_code)),
                ("before_code", record.before_code or ""), ("description", record.description)]
    return [("prototype_code", record.prototype_code), ("match_terms", "\n".join(record.match_terms))]


def _symbols_of(record: AnyRecord) -> list[str]:
    if isinstance(record, DocsChunk):
        return list(record.api_symbols)
    if isinstance(record, ApiMapping):
        return [record.source_api, *record.match_terms]
    assert isinstance(record, LabelPrototype)
    return list(record.match_terms)


def _normalise(fact: str) -> str:
    """`$Path/AnimatedSprite2D.play` -> `AnimatedSprite2D.play` (the class-reference spelling)."""
    if fact.startswith(("$", "%")):
        head, _, tail = fact.lstrip("$%").partition(".")
        return head.split("/")[-1] + ("." + tail if tail else "")
    return fact


def _in_symbols(fact: str, symbols: list[str]) -> bool:
    n = _normalise(fact)
    if n in symbols:
        return True
    # `position.clamp` vs `Vector2.clamp`: the same member on a receiver of unknown type
    if "." in n and not n[:1].isupper():
        return any(s.endswith("." + n.split(".")[-1]) for s in symbols if "." in s)
    return False


def fact_term(fact: str) -> str:
    """The analyzer term a fact corresponds to, for looking up its rarity in the KB."""
    return fact.strip('"(').lstrip("$%").lower()


def collect(code: str, record: AnyRecord, max_items: int = 8,
            weight: Callable[[str], float] | None = None) -> Evidence:
    """What ``code`` and ``record`` literally share, what each lacks, and how much of the code it covers.

    ``weight`` is a fact's rarity in the KB (default 1.0): it orders the items and weighs the coverage.
    """
    facts = code_facts(code)
    fields = _record_fields(record)
    symbols = _symbols_of(record)
    items, matched = _shared(code, facts, record, fields, symbols)
    base = weight or (lambda _f: 1.0)

    def w(f: str) -> float:
        # Strings are action names and labels: evidence, but weaker than an API call.
        return base(f) * (0.5 if f.startswith('"') else 1.0)

    # Rarest first: the judge (and a reader) should see `screen_size` before `length`.
    items.sort(key=lambda i: (i.field != "source_pattern", -w(i.text)))
    items = [EvidenceItem(n, i.text, i.field) for n, i in enumerate(items[:max_items], start=1)]
    # Parts of a fact already listed (`is_action_pressed` of `Input.is_action_pressed`) add nothing.
    only_code = [f for f in facts if f not in matched and not f.startswith('"')
                 and not any(f != g and f in g for g in facts if g in matched or "." in g)][:8]
    only_rec = [s for s in symbols if "." in s and not _contains(code, s.split(".")[-1])][:6]
    total = sum(w(f) for f in facts)
    coverage = sum(w(f) for f in facts if f in matched) / total if total else 0.0
    return Evidence(items, only_code, only_rec, _conflicts(code, fields), round(coverage, 4))


def _pattern_use(code: str, record: AnyRecord) -> str | None:
    """The use of an API mapping's ``source_pattern`` in the code (comments left out), if any."""
    if not (isinstance(record, ApiMapping) and record.source_pattern):
        return None
    return pattern_in(strip_comments(code), record)


def pattern_in(bare: str, record: ApiMapping) -> str | None:
    """:func:`_pattern_use` on code already stripped of its comments (one strip for many mappings)."""
    try:
        m = re.search(record.source_pattern, bare)
    except re.error:
        return None
    return m.group(0).strip() if m else None


def _field_holding(fact: str, record: AnyRecord, fields: list[tuple[str, str]], symbols: list[str]) -> str | None:
    """The first record field that holds ``fact`` (its API symbols last, by their spelling), or None."""
    where = next((name for name, text in fields if text and _contains(text, fact)), None)
    if where is None and _in_symbols(fact, symbols):
        where = "api_symbols" if isinstance(record, DocsChunk) else "match_terms"
    return where


def _shared(code: str, facts: list[str], record: AnyRecord, fields: list[tuple[str, str]],
            symbols: list[str]) -> tuple[list[EvidenceItem], set[str]]:
    """(evidence items, facts the record holds): the source pattern's use first, then facts in their order."""
    items: list[EvidenceItem] = []
    matched: set[str] = set()
    use = _pattern_use(code, record)
    if use:
        items.append(EvidenceItem(len(items) + 1, use, "source_pattern"))
    for fact in facts:
        where = _field_holding(fact, record, fields, symbols)
        if where:
            matched.add(fact)
            if not any(i.text == fact for i in items):
                items.append(EvidenceItem(len(items) + 1, fact, where))
    # `is_action_pressed` adds nothing once `Input.is_action_pressed` is in; keep the specific one
    texts = [i.text for i in items]
    return [i for i in items if not any(i.text != t and i.text.strip('"') in t for t in texts)], matched


# Dimension markers come from the record's code and API names only: prose often mentions both.
_CODE_FIELDS = frozenset({"code_blocks", "api_symbols", "source_api", "match_terms", "prototype_code", "before_code"})


def _only(text: str, mark: re.Pattern[str], other: re.Pattern[str]) -> bool:
    return mark.search(text) is not None and other.search(text) is None


def _conflicts(code: str, fields: list[tuple[str, str]]) -> list[str]:
    """2D code against a 3D record, or the other way round."""
    rec_text = "\n".join(t for name, t in fields if name in _CODE_FIELDS)
    stripped = strip_comments(code)
    conflicts: list[str] = []
    if _only(stripped, _MARK_2D, _MARK_3D) and _only(rec_text, _MARK_3D, _MARK_2D):
        conflicts.append("the code is 2D but the record is about 3D")
    if _only(stripped, _MARK_3D, _MARK_2D) and _only(rec_text, _MARK_2D, _MARK_3D):
        conflicts.append("the code is 3D but the record is about 2D")
    return conflicts


def verify(text: str, code: str, record: AnyRecord) -> bool:
    """Is ``text`` literally present in both the code and one of the record's fields?"""
    t = text.strip().strip("`")
    if not t:
        return False
    in_code = _contains(code, t) or _contains(code, _normalise(t))
    in_record = any(_contains(v, t) or _contains(v, _normalise(t)) for _, v in _record_fields(record) if v)
    return in_code and in_record
