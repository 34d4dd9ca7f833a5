"""After D's fusion and F's reranker: the class pages of the classes the code uses follow its top pages.

stages/classuse.py finds the engine classes the code names or whose members it uses. Both
rankers place the best tutorial pages first and these class pages anywhere below. Here the
best-ranked record of each such page moves up to follow the first ``after`` pages, in
its own order; a page already among them stays. Everything else keeps its order.
``after`` was chosen on the dev set's tune half (bench/NOTES.md, "Class pages the code uses").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pipeline.stages.results import Ordered, RankedItem


def _page(item: RankedItem) -> str | None:
    return item.candidate.ref.doc_path  # labels have none: they are not pages and do not count


@dataclass(frozen=True)
class ClassPagesUp:
    after: int  # pages that stay above the class pages

    def run(self, items: Sequence[RankedItem], pages: Collection[str]) -> Ordered:
        """``items`` with the best record of each page in ``pages`` just after the first ``after`` pages."""
        seen: set[str] = set()
        at = len(items)
        for n, it in enumerate(items):  # the items of the first ``after`` pages stay where they are
            page = _page(it)
            if page is not None and page not in seen:
                if len(seen) == self.after:
                    at = n
                    break
                seen.add(page)
        top, rest = list(items[:at]), list(items[at:])
        moved: list[RankedItem] = []
        for it in rest:
            page = _page(it)
            if page in pages and page not in seen:
                seen.add(page)
                moved.append(it)
        was = {id(it): n for n, it in enumerate(items)}
        ids = {id(it) for it in moved}
        order = top + moved + [it for it in rest if id(it) not in ids]
        up = [it.candidate.record_id for n, it in enumerate(order) if id(it) in ids and n < was[id(it)]]
        if not up:
            return Ordered(list(items), [])
        ranked = [dataclasses.replace(it, rank=n) for n, it in enumerate(order, start=1)]
        what = "class page" if len(up) == 1 else "class pages"
        return Ordered(ranked, up, f"{len(up)} {what} of classes the code uses moved up to follow the top "
                                   f"{self.after} pages")
