"""Knowledge base page helpers: a filterable table of records and the view of one record."""

from __future__ import annotations

from typing import cast

import pandas as pd
import streamlit as st

from pipeline.kb.load import LoadIssue
from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord, ApiMapping, DocsChunk, LabelPrototype
from pipeline.trace import RecordRef
from pipeline.ui.highlight import marked_block, record_text

MAX_ROWS = 5000  # the table stays responsive; filters narrow it down
SEARCH_CHARS = 3000  # per record: enough for headings, code and the start of the prose


def _title(r: AnyRecord) -> str:
    # ``kind`` rather than isinstance: records cached in the engine may predate a module reload.
    if r.kind == "docs_chunk":
        d = cast(DocsChunk, r)
        return f"{d.title} › {d.section}"
    if r.kind == "api_mapping":
        return cast(ApiMapping, r).source_api
    return cast(LabelPrototype, r).label


@st.cache_data(show_spinner="Preparing the record table…", max_entries=4)
def records_frame(kb_hash: str, _store: KBStore) -> pd.DataFrame:
    """One row per record, plus a lower-cased search column; cached per KB content hash."""
    rows = []
    for r in _store.records:
        ref = RecordRef.of(r)
        rows.append({"id": r.id, "kind": r.kind, "source": ref.source, "title": _title(r),
                     "doc_path": ref.doc_path or "",
                     "search": (r.id + "\n" + _title(r) + "\n" + record_text(r, SEARCH_CHARS)).lower()})
    return pd.DataFrame(rows, columns=["id", "kind", "source", "title", "doc_path", "search"])


def filter_frame(df: pd.DataFrame, kinds: list[str], source: str, text: str) -> pd.DataFrame:
    mask = df["kind"].isin(kinds) if kinds else pd.Series(True, index=df.index)
    if source.strip():
        mask &= df["source"].str.contains(source.strip(), case=False, regex=False)
    for word in text.lower().split():  # every word must occur somewhere in the record
        mask &= df["search"].str.contains(word, regex=False)
    return df[mask]


def issues_frame(issues: list[LoadIssue]) -> pd.DataFrame:
    return pd.DataFrame([{"where": f"{i.file}:{i.line}", "severity": i.severity, "reason": i.reason}
                         for i in issues], columns=["where", "severity", "reason"])


def show_record(record: AnyRecord) -> None:
    st.markdown(f"**{record.id}** · {record.kind}")
    left, right = st.columns(2)
    with left:
        st.caption("As the pipeline shows it")
        st.html(marked_block(record_text(record), [], line_numbers=False, max_height=480))
    with right:
        st.caption("All fields")
        st.json(record.model_dump(), expanded=1)
