"""The chunk input: an example, pasted code or an uploaded file, and which alternatives to run."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import streamlit as st

from pipeline.chunk import InputError, prepare_chunk
from pipeline.settings import AltName
from pipeline.trace import ChunkInfo
from pipeline.warm import Example, builtin_examples

log = logging.getLogger(__name__)

ALT_CHOICES: dict[str, tuple[AltName, ...]] = {"Both": ("D", "F"), "D": ("D",), "F": ("F",)}
ALT_LABELS = {"Both": "D and F", "D": "D · fusion", "F": "F · reranker"}


@st.cache_data(show_spinner=False)
def examples() -> list[Example]:
    """The reference chunk, the dev-set chunks and the edge cases (the list the demo warmer runs)."""
    return builtin_examples()


@dataclass(frozen=True)
class RunRequest:
    data: bytes | str
    origin: str  # where the chunk came from, in words
    alternatives: tuple[AltName, ...]


def _chunk_widgets(key: str, mode: str) -> tuple[bytes | str | None, str]:
    items = examples()
    if mode == "Example":
        idx = st.selectbox("Example chunk", range(len(items)), format_func=lambda i: items[i].title,
                           key=f"{key}_example", persist_state="session")
        return items[idx].code, items[idx].title
    if mode == "Paste":
        text = st.text_area("GDScript chunk", height=220, key=f"{key}_text", persist_state="session",
                            placeholder="func _process(delta):\n\t…")
        return text, "pasted chunk"
    up = st.file_uploader("GDScript file", type=["gd"], key=f"{key}_file")
    return (up.getvalue(), up.name) if up is not None else (None, "")


def input_form(key: str, *, choose_alternatives: bool = True) -> RunRequest | None:
    """Chunk input (example, paste or upload) and the alternative; returns a request on Run."""
    mode = st.radio("Chunk", ["Example", "Paste", "Upload"], horizontal=True, key=f"{key}_mode",
                    persist_state="session", label_visibility="collapsed",
                    format_func={"Example": "Pick an example", "Paste": "Paste code",
                                 "Upload": "Upload a .gd file"}.__getitem__)
    with st.form(f"{key}_form", border=True, enter_to_submit=False):
        data, origin = _chunk_widgets(key, mode)
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        choice = "Both"
        if choose_alternatives:
            choice = c1.radio("Alternative", list(ALT_CHOICES), horizontal=True, key=f"{key}_alts",
                              format_func=ALT_LABELS.__getitem__, persist_state="session")
        else:
            c1.caption("Runs both alternatives, D and F, on the same chunk.")
        submitted = c2.form_submit_button("Run", type="primary", key=f"{key}_run", width="stretch")
    if not submitted:
        return None
    if data is None:
        st.error("Upload a .gd file first, or pick an example.")
        return None
    return RunRequest(data, origin, ALT_CHOICES[choice])


def parse_chunk(data: bytes | str) -> ChunkInfo | None:
    try:
        return prepare_chunk(data)
    except InputError as exc:
        st.error(str(exc))
        return None
