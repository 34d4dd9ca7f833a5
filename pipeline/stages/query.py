"""Stage 0: read the chunk the way a Godot developer does (terms, calls, node paths, strings)."""

from __future__ import annotations

import re
import time

from pipeline.analyzer import analyze_code
from pipeline.stages.results import QueryResult
from pipeline.trace import ChunkInfo, QueryTermRow, QueryTrace


def _surface_forms(text: str, terms: list[str]) -> dict[str, str]:
    """Map each lowercased term back to its spelling in the chunk (for highlighting)."""
    out: dict[str, str] = {}
    for term in dict.fromkeys(terms):
        m = re.search(re.escape(term), text, flags=re.IGNORECASE)
        out[term] = m.group(0) if m else term
    return out


class QueryAnalysis:
    name = "query"

    def run(self, chunk: ChunkInfo) -> QueryResult:
        t0 = time.perf_counter()
        analysis = analyze_code(chunk.text)
        surface = _surface_forms(chunk.text, analysis.terms)
        return QueryResult(analysis.terms, dict(analysis.kinds), surface, analysis.parser,
                           (time.perf_counter() - t0) * 1000)

    def trace(self, result: QueryResult) -> QueryTrace:
        counts: dict[str, int] = {}
        for t in result.terms:
            counts[t] = counts.get(t, 0) + 1
        rows = [QueryTermRow(term=t, as_written=result.surface.get(t, t), kind=result.kinds.get(t, ""), count=n)
                for t, n in counts.items()]
        return QueryTrace(ms=result.ms, parser=result.parser, n_terms=len(result.terms), rows=rows)
