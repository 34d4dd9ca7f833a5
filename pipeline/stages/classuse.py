"""Stage 1d: the engine classes the code uses, whose class-reference pages join the union as a rule.

Class pages are where both rankers lose most (bench/NOTES.md): they rank the tutorial
sections well and the class pages of the code's own classes anywhere from 3rd to 50th.
Yet whether code uses a class is not a matter of similarity. The code either
- names it: `extends CharacterBody2D`, `var nav: NavigationAgent2D`, `Tween.new()`, `Input.x`, `$Timer.start()`;
- or uses a member the class defines: `global_position` in a CharacterBody2D script is Node2D's,
  found through the ``Inherits`` chain its api_mapping record carries;
- or uses a member of what a call or property returns: `get_tree().create_timer(1.0).timeout` uses
  SceneTree and SceneTreeTimer, and `var t := create_tween()` types `t`, through the return types of
  the class reference's signatures.
Built-in Variant types (Vector2, Color, …) and Object, RefCounted and Node are left out: nearly
every script uses them, so they say nothing about this one. Each class found joins the union
as provenance ``rule`` (its api_mapping record, with the code that uses it), and
stages/classorder.py moves its page up. About 1 ms; chosen on the tune half (bench/NOTES.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from pipeline.features import ChunkFacts
from pipeline.gdlex import code_only
from pipeline.kb.store import KBStore
from pipeline.records import ApiMapping
from pipeline.stages.results import RuleHit, RuleResult
from pipeline.trace import RecordRef

# Every script uses these: their pages say nothing about this code (Node's own members are as common).
VARIANT_TYPES = frozenset({
    "Vector2", "Vector2i", "Vector3", "Vector3i", "Vector4", "Vector4i", "Color", "Array", "Dictionary", "String",
    "StringName", "NodePath", "Transform2D", "Transform3D", "Basis", "Quaternion", "Rect2", "Rect2i", "AABB",
    "Plane", "Projection", "Callable", "Signal", "RID", "int", "float", "bool", "PackedByteArray",
    "PackedInt32Array", "PackedInt64Array", "PackedFloat32Array", "PackedFloat64Array", "PackedStringArray",
    "PackedVector2Array", "PackedVector3Array", "PackedVector4Array", "PackedColorArray"})
TOO_COMMON = VARIANT_TYPES | {"Object", "RefCounted", "Node"}

_NAME = r"[A-Z]\w*"
_INHERITS = re.compile(r"Inherits ([\w@ <]+)\.")
_EXTENDS = re.compile(rf"^[ \t]*(?:class_name[ \t]+\w+[ \t]+)?extends[ \t]+({_NAME})", re.M)
# what names a class: a type (`: T`, `-> T`, `as T`, `is T`, `Array[T]`), an instance (`T.new(`),
# a singleton or static (`T.member`)
_NAMING = (re.compile(rf"\b[A-Za-z_]\w*[ \t]*(?<!:):[ \t]*({_NAME})\b"), re.compile(rf"->[ \t]*({_NAME})\b"),
           re.compile(rf"\b(?:as|is)[ \t]+({_NAME})\b"), re.compile(rf"\[[ \t]*({_NAME})[ \t]*\]"),
           re.compile(rf"(?<![\w.$%])({_NAME})[ \t]*\.[ \t]*[A-Za-z_]\w*"))
_TYPED_VAR = re.compile(rf"\b([a-z_]\w*)[ \t]*:[ \t]*({_NAME})\b")  # `var nav: NavigationAgent2D`, `(body: Node2D`
_NEW_VAR = re.compile(rf"\bvar[ \t]+([a-z_]\w*)[ \t]*:?=[ \t]*({_NAME})\.new\(")
_NODE_VAR = re.compile(rf"\bvar[ \t]+([a-z_]\w*)[ \t]*:?=[ \t]*[$%](?:%?\w+/)*%?({_NAME})\b(?![ \t]*\.)")
# anchored at the line start: an unanchored `[^\n]*` would rescan a long line once per `var` in it
_AS_VAR = re.compile(rf"^[ \t]*(?:@\w+[ \t]+|static[ \t]+)*var[ \t]+([a-z_]\w*)[ \t]*:?=[^\n]*\bas[ \t]+({_NAME})\b",
                     re.M)
_NODE_USE = re.compile(rf"[$%](?:\w+/)*%?({_NAME})[ \t]*\.[ \t]*([a-z_]\w*)")
_MEMBER_USE = re.compile(r"(?<![\w.$%])([a-z_]\w*)[ \t]*\.[ \t]*([a-z_]\w*)")
_BARE = re.compile(r"(?<![\w.$%@])([a-z_]\w*)\b")
_DECLARED = re.compile(r"\b(?:var|const|signal|for|enum|class)[ \t]+([a-z_]\w*)")
_FUNC = re.compile(r"\bfunc[ \t]+([a-z_]\w*)")
# what a member returns, from the class reference's signature (`Signature: SceneTree Node.get_tree() const`)
_SIGNATURE = re.compile(r"Signature: (?:static )?([A-Z]\w*) \w+\.\w+")
# the start of a chain of member uses: `get_tree()`, `self`, `$Path/Node`, `tween`, `Engine`
_HEAD = re.compile(r"(?<![\w.$%@])([$%](?:%?\w+/)*%?[A-Za-z_]\w*|[A-Za-z_]\w*)")
_NEXT = re.compile(r"[ \t]*\.[ \t]*([A-Za-z_]\w*)")
_ASSIGNED = re.compile(r"\bvar[ \t]+([a-z_]\w*)[ \t]*:?=[ \t]*")
_PAREN = re.compile(r"[()]")
_BLANKS = re.compile(r"[ \t]*")


def class_names(result: RuleResult) -> frozenset[str]:
    """The classes of the rule's hits (each hit is a record of its class: `class/Timer`)."""
    return frozenset(h.ref.source.removeprefix("class/") for h in result.hits)


@dataclass(frozen=True)
class EngineClass:
    record_id: str  # its class api_mapping (`api:Timer`)
    parents: tuple[str, ...]  # nearest first
    members: dict[str, str] = field(default_factory=dict)  # member -> its api_mapping id
    returns: dict[str, str] = field(default_factory=dict)  # member -> the class it returns or holds, if one


@dataclass(frozen=True)
class ClassUse:
    """One engine class the code uses, and how."""

    name: str
    record_id: str  # the record that joins the union: the member's mapping, or the class's own
    use: str  # what in the code uses it, for the union row


@dataclass
class ClassUses:
    store: KBStore
    name = "class use"

    @cached_property
    def classes(self) -> dict[str, EngineClass]:
        """Engine classes of this KB, from their api_mapping records (a KB without them finds nothing)."""
        heads: dict[str, ApiMapping] = {}
        members: dict[str, dict[str, str]] = {}
        returns: dict[str, dict[str, str]] = {}
        for r in self.store.records:
            if not isinstance(r, ApiMapping) or not r.source.startswith("class/") or not r.doc_path:
                continue
            cls, _, member = r.source_api.partition(".")
            if not member:
                heads[cls] = r
            elif member.isidentifier():
                members.setdefault(cls, {}).setdefault(member, r.id)
                sig = _SIGNATURE.search(r.description)
                if sig:
                    returns.setdefault(cls, {}).setdefault(member, sig.group(1))
        out = {}
        for cls, r in heads.items():
            m = _INHERITS.search(r.description)
            parents = tuple(p.strip() for p in m.group(1).split("<")) if m else ()
            out[cls] = EngineClass(r.id, parents, members.get(cls, {}), returns.get(cls, {}))
        return out

    def defining(self, cls: str, member: str) -> str | None:
        """The class in ``cls``'s chain (itself first) that defines ``member``."""
        own = self.classes.get(cls)
        chain = (cls, *own.parents) if own else ()
        return next((c for c in chain if c in self.classes and member in self.classes[c].members), None)

    def run(self, code: str, facts: ChunkFacts, context: str = "") -> RuleResult:
        """The classes ``code`` uses (named ones first, then those defining a member it uses); none for another
        language. ``context``: the declarations of the file the code was cut from (its ``extends`` and member
        variables), which type the code's names but are not uses themselves."""
        t0 = time.perf_counter()
        hits: list[RuleHit] = []
        if not facts.foreign and self.classes:
            for use in self.uses(code, context):
                hits.append(RuleHit(RecordRef.of(self.store.get(use.record_id)), len(hits) + 1, use.use))
        return RuleResult(hits, (time.perf_counter() - t0) * 1000)

    def uses(self, code: str, context: str = "") -> list[ClassUse]:
        """Each engine class once, with the first use found; comments and strings do not count."""
        found: dict[str, ClassUse] = {}
        for cls, use, member in self._named(code_only(code), code_only(context) if context else ""):
            if cls in self.classes and cls not in TOO_COMMON and cls not in found:
                info = self.classes[cls]
                found[cls] = ClassUse(cls, info.members.get(member, info.record_id) if member else info.record_id, use)
        return list(found.values())

    def member_uses(self, code: str, context: str = "") -> dict[str, str]:
        """The api_mapping id of every member the code uses (on a class it names, a typed name or its base),
        with the first use of each."""
        found: dict[str, str] = {}
        for cls, use, member in self._named(code_only(code), code_only(context) if context else ""):
            rid = self.classes[cls].members.get(member) if member and cls in self.classes else None
            if rid and cls not in TOO_COMMON:
                found.setdefault(rid, use)
        return found

    def _named(self, text: str, context: str = "") -> Iterator[tuple[str, str, str | None]]:
        """(class, the code that uses it, the member used or None), named classes first."""
        base = _EXTENDS.search(text)
        if base:
            yield base.group(1), base.group(0).strip(), None
        for rx in _NAMING:
            for m in rx.finditer(text):
                yield m.group(1), m.group(0).strip(), None
        # a function cut from a file: the file's `extends` is its base, but the function does not name it
        inherited = None if base else _EXTENDS.search(context)
        yield from self._defined(text, base.group(1) if base else inherited.group(1) if inherited else None,
                                 context, inherited is not None)

    def _defined(self, text: str, base: str | None, context: str = "",
                 inherited: bool = False) -> Iterator[tuple[str, str, str | None]]:
        """Classes that define a member the code uses on a typed variable, a `$Node` or itself; the context's
        declarations type names first, the code's own then override them."""
        own = {f for f in _FUNC.findall(text) if self.defining(base, f) is None}
        types: dict[str, str] = {}
        for src in (context, text):
            own |= set(_DECLARED.findall(src))
            explicit = {v: t for rx in (_TYPED_VAR, _NEW_VAR, _AS_VAR, _NODE_VAR) for v, t in rx.findall(src)
                        if t in self.classes}
            types |= explicit
            self._assigned(src, types, set(explicit), base, own)
        closing = _closing(text)
        dotted = _MEMBER_USE.findall(text)
        used = [(types[v], f"{v}.{member}", member, False) for v, member in dotted if v in types]
        used += [(m.group(1), m.group(0), m.group(2), False) for m in _NODE_USE.finditer(text)
                 if m.group(1) in self.classes]
        if base in self.classes:
            # the script's own names; a func the base chain defines overrides a virtual (`_draw`), a use
            skip = own | set(types)
            used += [(base, n, n, inherited) for n in dict.fromkeys(_BARE.findall(text)) if n not in skip]  # once
            used += [(base, f"self.{member}", member, inherited) for v, member in dotted if v == "self"]
        for cls, shown, member, via_file in used:
            owner = self.defining(cls, member)
            if owner is not None:
                via = [] if owner == cls else [f"defined in {owner}, which {cls} inherits"]
                via += [f"the file extends {cls}"] if via_file else []
                yield owner, shown + (f" ({'; '.join(via)})" if via else ""), member
        # what a chain's calls and properties return: `get_tree().create_timer(1.0).timeout` uses SceneTree
        # and SceneTreeTimer (the first link is found above; later ones only here)
        for head in _HEAD.finditer(text):
            yield from self._chain(text, head, types, base, own, closing)[0]

    def _assigned(self, text: str, types: dict[str, str], explicit: set[str], base: str | None,
                  own: set[str]) -> None:
        """`var t := create_tween()`: t is what the chain returns (into ``types``; a type the same text states
        stays)."""
        closing = _closing(text)
        for m in _ASSIGNED.finditer(text):
            head = _HEAD.match(text, m.end())
            if head and m.group(1) not in explicit:
                typed = self._chain(text, head, types, base, own, closing)[1]
                if typed:
                    types[m.group(1)] = typed

    def _chain(self, text: str, head: re.Match[str], types: dict[str, str], base: str | None, own: set[str],
               closing: dict[int, int]) -> tuple[list[tuple[str, str, str]], str | None]:
        """The members a chain uses, each with its defining class, and the class the whole chain returns (None
        when a link is unknown: its type would be a guess)."""
        name = head.group(1)
        if name == "self":
            cur = base
        elif name[0] in "$%":
            cur = re.split(r"[$%/]", name)[-1]
        elif name[0].isupper():
            cur = name
        elif name in types:
            cur = types[name]
        elif base is not None and name not in own and (owner := self.defining(base, name)):
            cur = self.classes[owner].returns.get(name)  # `get_tree()`: a member of the script's base
        else:
            cur = None
        if cur not in self.classes:
            return [], None
        uses: list[tuple[str, str, str]] = []
        at = _after_call(text, head.end(), closing)
        shown = name + ("()" if at > head.end() else "")  # the chain without its arguments
        while at >= 0 and (link := _NEXT.match(text, at)):
            member = link.group(1)
            owner = self.defining(cur, member)
            if owner is None:
                return uses, None
            shown += f".{member}"
            uses.append((owner, shown, member))
            cur, at = self.classes[owner].returns.get(member), _after_call(text, link.end(), closing)
            shown += "()" if at > link.end() else ""
            if cur not in self.classes:
                return uses, None
        return uses, cur if at >= 0 else None


def _closing(text: str) -> dict[int, int]:
    """Each `(` -> the index after its matching `)`; an unclosed one has none (one pass: long chunks stay linear)."""
    out: dict[int, int] = {}
    opened: list[int] = []
    for m in _PAREN.finditer(text):
        if m.group() == "(":
            opened.append(m.start())
        elif opened:
            out[opened.pop()] = m.end()
    return out


def _after_call(text: str, at: int, closing: dict[int, int]) -> int:
    """The index after a call's `(...)` starting at ``at`` (``at`` when none does; -1 when it is never closed)."""
    start = _BLANKS.match(text, at).end()
    if text[start:start + 1] != "(":
        return at
    return closing.get(start, -1)
