"""Small drawing helpers shared by the panels, the comparison and the evaluation drill-down."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from pipeline.kb.store import KBStore
from pipeline.records import AnyRecord
from pipeline.settings import AltName
from pipeline.trace import AlternativeTrace, AnyStage, Trace, Verdict
from pipeline.ui.highlight import Mark, marked_block, record_text

log = logging.getLogger(__name__)

TABLE_HEIGHT = 320  # px: long tables scroll inside the panel instead of stretching the page
ALT_TITLES: dict[AltName, str] = {"D": "D · BM25 ∥ embedding → fusion", "F": "F · BM25 ∥ embedding → reranker"}
# Plain words: emoji need an emoji font the viewer may not have; icons come from Streamlit's Material set.
VERDICT_WORDS: dict[Verdict, str] = {"yes": "yes", "no": "no", "not_run": "not run", "error": "error",
                                     "timeout": "timeout", "unparsable": "unparsable", "cancelled": "cancelled"}
ICON_OK, ICON_NO, ICON_WAIT, ICON_WARN = (":material/check_circle:", ":material/cancel:",
                                          ":material/hourglass_top:", ":material/warning:")
# Tests set this: a drawing bug must fail the test, not become a message in one panel.
STRICT_ENV = "GDPOC_STRICT_UI"


@contextmanager
def guarded(what: str) -> Iterator[None]:
    """A drawing bug in one panel becomes a message there; the other panels still draw.

    Streamlit's rerun/stop signals are BaseExceptions and pass through untouched.
    """
    try:
        yield
    except Exception as exc:
        if os.environ.get(STRICT_ENV):
            raise
        log.exception("%s could not be drawn", what)
        st.error(f"{what} could not be drawn: {exc}")


def header(n: int, title: str, caption: str, anchor: str | None = None) -> None:
    """A numbered panel heading; ``anchor`` is the id the flow overview's nodes link to."""
    st.subheader(f"{n} · {title}", divider="gray", anchor=anchor)
    st.caption(caption)


def fmt_seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def fmt_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def eta_seconds(start: tuple[float, int], now: float, done: int, total: int) -> float | None:
    """Time left at the rate since ``start`` (its time and count); None until there is a rate, or when done."""
    t0, d0 = start
    if done <= d0 or done >= total or now <= t0:
        return None
    return (now - t0) / (done - d0) * (total - done)


def record_of(store: KBStore | None, record_id: str) -> AnyRecord | None:
    if store is None or record_id not in store.by_id:
        return None
    return store.get(record_id)


def stage_notice(stage: AnyStage | None, *, waiting: str = "") -> bool:
    """Show why a stage has nothing (or only part) to show; False when there is nothing to draw.

    ``waiting``: the model phase is running this stage now (said with an hourglass).
    """
    if waiting:
        st.info(waiting, icon=ICON_WAIT)
        return False
    if stage is None:
        st.info("This stage did not run for this alternative.")
        return False
    if stage.status == "error":
        st.warning(stage.message or "This stage failed.", icon=ICON_WARN)
    elif stage.status in ("skipped", "not_run", "pending"):
        st.info(stage.message or "This stage was skipped.")
        return bool(stage.rows)
    elif stage.message:  # it ran, with a fallback worth knowing (e.g. the trained model is missing)
        st.warning(stage.message, icon=ICON_WARN)
    if not stage.rows:
        st.info("No candidates." if stage.status == "ok" else "Nothing to show.")
    return bool(stage.rows)


def for_each_alt(trace: Trace, label: Callable[[AltName, AlternativeTrace], str] | None = None
                 ) -> Iterator[tuple[AltName, AlternativeTrace]]:
    """One tab per alternative when there are two (keeps 1366-px screens readable), none for one."""
    names = list(trace.alternatives)
    if len(names) > 1:
        tabs = st.tabs([label(n, trace.alternatives[n]) if label else ALT_TITLES[n] for n in names])
        for name, tab in zip(names, tabs, strict=True):
            with tab:
                yield name, trace.alternatives[name]
    else:
        for name in names:
            yield name, trace.alternatives[name]


def side_by_side(chunk: str, record: AnyRecord | None, chunk_marks: list[Mark], record_marks: list[Mark]) -> None:
    left, right = st.columns(2)
    with left:
        st.markdown("**Chunk**")
        st.html(marked_block(chunk, chunk_marks, max_height=300))
    with right:
        st.markdown("**Record**")
        if record is None:
            st.info("The record is not in the loaded KB.")
        else:
            st.html(marked_block(record_text(record), record_marks, line_numbers=False, max_height=300))
