"""The engines the pages search with: one per KB per server process, all sharing one ModelHub.

Engines (KB, indexes) and the hub (Qwen, embedders, rerankers) live once per
process behind ``st.cache_resource``; the user's KB choice and upload live in
``st.session_state``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from pipeline.engine import Engine
from pipeline.kb.load import LoadIssue, load_bytes
from pipeline.kb.store import KBStore, from_load
from pipeline.models.hub import ModelHub
from pipeline.trace import ProgressEvent
from pipeline.ui import common

log = logging.getLogger(__name__)

BUILTIN = "builtin"
UPLOADED = "uploaded"
SS_USER_KB = "user_kb"
SS_KB_CHOICE = "kb_choice"
SS_REJECTED_KB = "user_kb_rejected"  # an upload with no valid record, while an earlier one works
SS_NAV_CHECKED = "nav_checked"  # set on a session's first run (see _through_app_navigation)
WARM_UP_CODE = "func _ready():\n\tpass"


def page(title: str, icon: str) -> None:
    """Same browser title pattern and wide layout on every page."""
    _through_app_navigation()
    st.set_page_config(page_title=f"{title} · Godot retrieval PoC", page_icon=icon, layout="wide")


def _through_app_navigation() -> None:
    """Run the page through app.py's ``st.navigation``, never Streamlit's pages/ discovery.

    A fresh server decides per process whether pages/ is an old-style page folder, and says yes until
    some run calls ``st.navigation``. So when the first visitor opens a page's URL directly, the page runs
    on its own: the sidebar lists a bogus "app" page and loses the icons, for every visitor, until one
    opens the main page. Clearing the flag and rerunning sends the run through app.py, on the same page.
    Only a session's first run may rerun: it is a page load, so no click or upload is lost.
    """
    try:  # a private flag: if a Streamlit release drops it, this does nothing (the browser test would say so)
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return
    first = SS_NAV_CHECKED not in st.session_state
    st.session_state[SS_NAV_CHECKED] = True
    if first and getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.rerun()


# --- the KB the user searches ------------------------------------------------------------------
@dataclass
class UserKB:
    """An uploaded JSONL KB: its good records as a store, and every bad line."""

    name: str
    file_id: str
    store: KBStore | None
    issues: list[LoadIssue]
    n_bytes: int


@dataclass(frozen=True)
class KBChoice:
    key: str  # cache key of the engine: "builtin" or "user:<content hash>"
    name: str
    store: KBStore | None  # None for the built-in KB (the engine opens it)


def user_kb() -> UserKB | None:
    return st.session_state.get(SS_USER_KB)


def load_user_kb(data: bytes, name: str, file_id: str) -> UserKB:
    """Parse an uploaded JSONL once per upload and keep it for every page of this session."""
    current = user_kb()
    if current is not None and current.file_id == file_id:
        return current
    rejected = st.session_state.get(SS_REJECTED_KB)
    if rejected is not None and rejected.file_id == file_id:
        return rejected
    result = load_bytes(data, name)
    kb = UserKB(name, file_id, from_load(result, name) if result.records else None, list(result.issues), len(data))
    if kb.store is None and current is not None and current.store is not None:
        st.session_state[SS_REJECTED_KB] = kb  # shown with its issues; the good KB loaded before stays in use
        return kb
    st.session_state[SS_USER_KB] = kb
    if kb.store is not None:
        st.session_state[SS_KB_CHOICE] = UPLOADED  # a fresh upload is what the user wants to search
    return kb


def kb_choice() -> KBChoice:
    kb = user_kb()
    if st.session_state.get(SS_KB_CHOICE) == UPLOADED and kb is not None and kb.store is not None:
        return KBChoice(f"user:{kb.store.content_hash}", f"uploaded: {kb.name}", kb.store)
    return KBChoice(BUILTIN, "built-in Godot docs", None)


# --- engines -----------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def hub() -> ModelHub:
    """The models of this server process, shared by every engine and session."""
    return ModelHub()


@dataclass
class _Slot:
    """One engine per KB per process; the lock makes a second session wait instead of loading twice."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: Engine | None = None
    dense_error: str | None = None


@st.cache_resource(show_spinner=False)
def _slot(kb_key: str) -> _Slot:
    return _Slot()


def _load(slot: _Slot, choice: KBChoice, progress: Callable[[ProgressEvent], None]) -> None:
    engine = Engine.open(None, progress, hub()) if choice.store is None else \
        Engine.for_store(choice.store, progress, hub())
    try:
        # Vectors only: the embedder itself loads on the first run (or in the background below),
        # so the first screen is not held up by importing torch.
        embedder, _ = engine.dense(None, progress)
        threading.Thread(target=embedder.encode, args=([WARM_UP_CODE],), daemon=True).start()
    except Exception as exc:  # BM25 still works; the embedding panel says why it is empty
        slot.dense_error = str(exc)
    slot.engine = engine


def get_engine(choice: KBChoice | None = None) -> Engine | None:
    """The loaded engine for the chosen KB, loading it (with progress) on first use; None after an error."""
    choice = choice or kb_choice()
    slot = _slot(choice.key)
    if slot.engine is not None:
        return slot.engine
    with st.status(f"Loading the knowledge base ({choice.name}) and its indexes…", expanded=True) as status:
        st.caption("Once per server process. The first start on a new KB also computes an embedding per "
                   "record (15–30 min for the built-in ~29k records on 2 cores; cached on disk and resumable).")
        bars: dict[str, Any] = {}
        starts: dict[str, tuple[float, int]] = {}  # per bar: when and where it started, for the ETA

        def progress(ev: ProgressEvent) -> None:
            if ev.label not in bars:
                bars[ev.label] = st.progress(0.0)
                starts[ev.label] = (time.monotonic(), ev.done)
            left = common.eta_seconds(starts[ev.label], time.monotonic(), ev.done, ev.total)
            eta = f" · about {common.fmt_duration(left)} left" if left is not None else ""
            bars[ev.label].progress(ev.fraction, text=f"{ev.label}: {ev.done:,} / {ev.total:,}{eta}")

        if not slot.lock.acquire(blocking=False):
            status.update(label="Another session is loading this knowledge base; waiting for it…")
            slot.lock.acquire()
        try:
            if slot.engine is None:
                _load(slot, choice, progress)
        except Exception as exc:
            log.exception("cannot open the KB")
            status.update(label="The knowledge base could not be loaded", state="error")
            st.error(f"Cannot load the knowledge base: {exc}")
            return None
        finally:
            slot.lock.release()
        assert slot.engine is not None
        status.update(label=f"Knowledge base ready: {len(slot.engine.store.records):,} records",
                      state="complete", expanded=False)
    if slot.dense_error:
        st.warning(f"Embedding leg unavailable: {slot.dense_error}")
    return slot.engine
