"""Text views of a record: what BM25 indexes, what the embedder reads, what people see."""

from __future__ import annotations

from pipeline.analyzer import analyze_code, analyze_text
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype

EMBED_CHARS = 1600  # MiniLM reads 256 word pieces; more text only costs time


def code_of(record: AnyRecord) -> list[str]:
    if isinstance(record, DocsChunk):
        return list(record.code_blocks)
    if isinstance(record, LabelPrototype):
        return [record.prototype_code]
    return [c for c in (record.before_code, record.after_code) if c]


def prose_of(record: AnyRecord) -> str:
    if isinstance(record, DocsChunk):
        return "\n".join([record.title, record.section, record.content, " ".join(record.api_symbols)])
    if isinstance(record, ApiMapping):
        return "\n".join([record.source_api, record.description, " ".join(record.match_terms),
                          " ".join(record.required_when_seen_in_code)])
    return "\n".join([record.label.replace("_", " "), record.description, " ".join(record.match_terms)])


def bm25_terms(record: AnyRecord) -> list[str]:
    terms = analyze_text(prose_of(record))
    for code in code_of(record):
        terms.extend(analyze_code(code).terms)
    return terms


def embed_text(record: AnyRecord) -> str:
    """Heading and code first: the part that best says what the record is about."""
    if isinstance(record, DocsChunk):
        head = f"{record.title} — {record.section}"
        body = "\n".join(record.code_blocks) + "\n" + record.content
    elif isinstance(record, ApiMapping):
        head = record.source_api
        body = record.description + "\n" + " ".join(record.match_terms)
    else:
        head = record.label.replace("_", " ")
        body = record.description + "\n" + record.prototype_code
    return (head + "\n" + body)[:EMBED_CHARS]


def title_of(record: AnyRecord) -> str:
    if isinstance(record, DocsChunk):
        return f"{record.source} · {record.section}"
    if isinstance(record, ApiMapping):
        return f"{record.source_api} ({record.source})"
    return f"label: {record.label}"
