"""On a long file: a page that several of its sections support moves up.

A long file is searched function by function (stages/parts.py). The page that teaches the file
tends to hold several well-ranked sections, while a generic page matches one function well. So
each page's best record takes the page's score, the sum of 1/(k + rank) over the page's best
``top`` records, and every other record keeps its own 1/(k + rank). Records without a page
(labels, API mappings) count alone. k and top were chosen on the real-file tune set and checked on
the long docs scripts of `pipeline eval --long`: D's fusion gains most with k = 10, F's learned
ranker only with k = 1, which keeps its order unless a page's sections agree (bench/NOTES.md,
"Pages that several sections support").
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.stages.results import Ordered, RankedItem

VOTE_K = {"D": 10, "F": 1}  # per design, chosen on the real-file tune set


@dataclass(frozen=True)
class PageVotes:
    k: int = 10
    top: int = 3
    shown: int = 20  # a lift is reported when it lands here (the engine passes the final list's length)

    def run(self, items: Sequence[RankedItem], fixed: Collection[str] = ()) -> Ordered:
        """``items`` re-ordered by page votes. Records in ``fixed`` (the other dimension's, which an earlier rule
        moved down) keep their places and do not vote."""
        slots = [n for n, it in enumerate(items) if it.candidate.record_id not in fixed]
        free = [items[n] for n in slots]
        groups = [self._group(it) for it in free]
        votes: dict[str, list[float]] = defaultdict(list)
        heads: set[int] = set()  # each page's best record, which takes the page's score
        for n, group in enumerate(groups):
            if group not in votes:
                heads.add(n)
            votes[group].append(1.0 / (self.k + n + 1))
        scores = [sum(votes[g][: self.top]) if n in heads else 1.0 / (self.k + n + 1)
                  for n, g in enumerate(groups)]
        order = sorted(range(len(free)), key=lambda i: (-scores[i], i))
        if order == list(range(len(free))):
            return Ordered(list(items), [])
        out = list(items)
        for slot, i in zip(slots, order, strict=True):
            out[slot] = free[i]
        ranked = [dataclasses.replace(it, rank=n) for n, it in enumerate(out, start=1)]
        # what the rule lifted into the shown list: the best record of a page with several records
        lifted = sorted(i for new, i in enumerate(order) if new < i and new < self.shown and i in heads
                        and len(votes[groups[i]]) > 1)
        names = [Path(free[i].candidate.ref.doc_path or "").stem for i in lifted]
        listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        what = "page" if len(names) == 1 else "pages"
        return Ordered(ranked, [free[i].candidate.record_id for i in lifted],
                       f"long file: {len(names)} {what} that several sections support moved up ({listed})"
                       if names else "")

    @staticmethod
    def _group(item: RankedItem) -> str:
        return item.candidate.ref.doc_path or item.candidate.record_id
