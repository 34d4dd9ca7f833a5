"""Which ranked records the validator judges: its scope.

The top ``top_k`` of the ranking, and every label prototype that fits the code wherever the
ranking put it. A label carries its own test of fit, its match terms: one that holds at least
``label_fit`` of them literally in the code has direct evidence to judge, even when a ranker
trained on docs pages (which have no labels) left it at rank 31. The engine keeps such labels
in the final list past ``final_k``. ``label_fit`` was chosen on the dev set's tune half
(BENCHMARKS.md, "Validator scope"): at 0.5 F's accept recall rose from 0.25 to 0.35 and its
precision from 0.76 to 0.82; D, whose fusion already ranks fitting labels high, was unchanged.
A cap of records per page, tried on the same half, lowered precision and was dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.accept import label_terms
from pipeline.evidence import _pattern_use
from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord, ApiMapping
from pipeline.trace import FinalItem, RecordRef


@dataclass(frozen=True)
class Scope:
    """Per final item: whether it is judged, and why it is when its rank alone would not do."""

    judged: list[bool]
    notes: list[str]

    @property
    def n(self) -> int:
        return sum(self.judged)


def label_fits(store: KBStore, ref: RecordRef, code: str, fit: float) -> float | None:
    """The share of a label's match terms in the code when it reaches ``fit``, else None (and for other kinds)."""
    if ref.kind != "label_prototype":
        return None
    share = label_terms(store.get(ref.record_id), code)
    return share if share and share >= fit else None


@dataclass(frozen=True)
class UsedClasses:
    """What the class-use rule finds in the code (``Settings.class_accepts``)."""

    classes: Mapping[str, str]  # class -> its first use in the code
    members: Mapping[str, str] = field(default_factory=dict)  # a used member's api_mapping id -> its use


def used_class(record: AnyRecord, code: str, used: UsedClasses) -> tuple[str, str] | None:
    """(class, the code's use) when ``record`` is about a class the code uses.

    An API mapping names one member, so it counts only when the code uses that member: its own pattern matches,
    or the rule found the member on a typed name (`bar.max_value`, bar a TextureProgressBar, uses
    Range.max_value). A class the code uses does not make each of its 200 methods relevant.
    """
    cls = record.source.removeprefix("class/") if record.source.startswith("class/") else None
    if cls not in used.classes:
        return None
    if not isinstance(record, ApiMapping):
        return cls, used.classes[cls]
    use = _pattern_use(code, record) or used.members.get(record.id)
    return (cls, use) if use else None


def run(store: KBStore, code: str, final: Sequence[FinalItem], top_k: int, label_fit: float,
        classes: UsedClasses | None = None) -> Scope:
    """The first ``top_k`` items by position, any label further down that fits the code, and (``classes``) any
    class-reference record of a class the code uses."""
    judged, notes = [], []
    for n, item in enumerate(final):
        share = label_fits(store, item, code, label_fit) if n >= top_k else None
        use = used_class(store.get(item.record_id), code, classes) if classes and n >= top_k else None
        cls = use[0] if use else None
        judged.append(n < top_k or share is not None or cls is not None)
        notes.append(f"judged past the top {top_k}: {share:.0%} of the label's match terms are in the code"
                     if share is not None else
                     f"judged past the top {top_k}: the code uses {cls}" if cls is not None else "")
    return Scope(judged, notes)
