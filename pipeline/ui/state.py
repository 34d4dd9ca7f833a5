"""Session and process state of the dashboard: engines, KB choice, settings, runs.

Engines (KB, indexes, models) live once per process behind ``st.cache_resource``;
everything a user did (uploaded KB, last run, cached traces) lives in
``st.session_state``. Model stages run in a worker thread (see ``jobs``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from pydantic import ValidationError

from pipeline.chunk import InputError, prepare_chunk
from pipeline.config import FIXTURES
from pipeline.engine import Engine
from pipeline.kb import index as kb_index
from pipeline.kb.load import LoadIssue, load_bytes
from pipeline.kb.store import KBStore, from_load
from pipeline.models import provision
from pipeline.settings import Settings
from pipeline.stages.validate import POLICIES
from pipeline.trace import ChunkInfo, Trace
from pipeline.ui.jobs import Job

log = logging.getLogger(__name__)

BUILTIN = "builtin"
UPLOADED = "uploaded"
TRACE_CACHE_SIZE = 32
SS_USER_KB = "user_kb"
SS_RUN = "run"
SS_TRACES = "trace_cache"

# Validator thresholds are calibrated per model (pipeline.models.validator.DEFAULT_THRESHOLDS); the
# import is deferred there, so keep the defaults' display in step by reading them lazily.
FUSION_LABELS = {"rrf": "RRF (reciprocal rank fusion)", "minmax": "min-max + α", "zscore": "z-score + α"}
RERANKER_LABELS = {"qwen": "Qwen 0.5B yes/no (local)", "bge": "bge-reranker (local folder)",
                   "none": "none (keep union order)"}
VALIDATOR_LABELS = {"qwen-1.5b": "Qwen2.5-Coder 1.5B (~3 s/candidate)", "qwen-0.5b": "Qwen2.5-Coder 0.5B (faster)"}
POLICY_LABELS = {"qwen_and_evidence": "Qwen yes + verified evidence", "qwen_only": "Qwen yes",
                 "evidence_only": "deterministic evidence only (no model)"}


# --- page chrome -------------------------------------------------------------------------------
def page(title: str, icon: str) -> None:
    """Same browser title pattern and wide layout on every page."""
    st.set_page_config(page_title=f"{title} · Godot retrieval PoC", page_icon=icon, layout="wide")


# --- knowledge base ----------------------------------------------------------------------------
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
    result = load_bytes(data, name)
    kb = UserKB(name, file_id, from_load(result, name) if result.records else None, list(result.issues), len(data))
    st.session_state[SS_USER_KB] = kb
    if kb.store is not None:
        st.session_state["kb_choice"] = UPLOADED  # a fresh upload is what the user wants to search
    return kb


def kb_choice() -> KBChoice:
    kb = user_kb()
    if st.session_state.get("kb_choice") == UPLOADED and kb is not None and kb.store is not None:
        return KBChoice(f"user:{kb.store.content_hash}", f"uploaded: {kb.name}", kb.store)
    return KBChoice(BUILTIN, "built-in Godot docs", None)


@dataclass
class _Slot:
    """One engine per KB per process; the lock makes a second session wait instead of loading twice."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: Engine | None = None
    dense_error: str | None = None


@st.cache_resource(show_spinner=False)
def _slot(kb_key: str) -> _Slot:
    return _Slot()


@st.cache_resource(show_spinner=False)
def _shared_models() -> tuple[dict[str, Any], dict[str, Any]]:
    """Qwen and bge instances shared by every engine, so an uploaded KB does not load a second Qwen."""
    return {}, {}


def _open(choice: KBChoice, progress: Callable[[str, int, int], None]) -> Engine:
    if choice.store is None:
        engine = Engine.open(None, progress)
    else:
        store = choice.store
        engine = Engine(store, kb_index.open_bm25(store, lambda d, t: progress("bm25 index", d, t)))
    engine.qwens, engine.bge = _shared_models()  # type: ignore[assignment]
    return engine


def get_engine(choice: KBChoice | None = None) -> Engine | None:
    """The loaded engine for the chosen KB, loading it (with progress) on first use; None after an error."""
    choice = choice or kb_choice()
    slot = _slot(choice.key)
    if slot.engine is not None:
        return slot.engine
    with st.status(f"Loading the knowledge base ({choice.name}) and its indexes…", expanded=True) as status:
        st.caption("Once per server process. The first start on a new KB also computes an embedding per "
                   "record (minutes for the built-in ~40k records; cached on disk and resumable).")
        bars: dict[str, Any] = {}

        def progress(step: str, done: int, total: int) -> None:
            if step not in bars:
                bars[step] = st.progress(0.0)
            bars[step].progress(min(done / total, 1.0) if total else 0.0, text=f"{step}: {done:,} / {total:,}")

        if not slot.lock.acquire(blocking=False):
            status.update(label="Another session is loading this knowledge base; waiting for it…")
            slot.lock.acquire()
        try:
            if slot.engine is None:
                engine = _open(choice, progress)
                try:
                    # Vectors only: the embedder itself loads on the first run (or in the background
                    # below), so the first screen is not held up by importing torch.
                    embedder, _ = engine.dense(None, progress)
                    threading.Thread(target=embedder.encode, args=(["func _ready():\n\tpass"],), daemon=True).start()
                except Exception as exc:  # BM25 still works; the embedding panel says why it is empty
                    slot.dense_error = str(exc)
                slot.engine = engine
        except Exception as exc:
            log.exception("cannot open the KB")
            status.update(label="The knowledge base could not be loaded", state="error")
            st.error(f"Cannot load the knowledge base: {exc}")
            return None
        finally:
            slot.lock.release()
        status.update(label=f"Knowledge base ready: {len(slot.engine.store.records):,} records",
                      state="complete", expanded=False)
    if slot.dense_error:
        st.warning(f"Embedding leg unavailable: {slot.dense_error}")
    return slot.engine


# --- examples ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    title: str
    code: str


@st.cache_data(show_spinner=False)
def examples() -> list[Example]:
    """The reference chunk, the dev-set chunks and the edge cases shipped in fixtures/."""
    from pipeline.evaluate import DEV_SET, load_set

    out = [Example("Reference: Dodge the Creeps player _process", (FIXTURES / "reference_chunk.gd").read_text())]
    try:
        out += [Example(f"Dev set: {c.title}", c.code) for c in load_set(DEV_SET) if c.id != "dev-00-reference"]
    except (OSError, ValueError) as exc:
        log.warning("dev set unavailable: %s", exc)
    for name, title in (("godot3_player.gd", "Godot 3 player script (migration)"),
                        ("injection.gd", "Prompt injection hidden in comments"),
                        ("latin1.gd", "Latin-1 bytes (decoding notice)"),
                        ("unity_player.cs", "Unity C# (not Godot)")):
        path = FIXTURES / "chunks" / name
        if path.is_file():
            out.append(Example(f"Edge case: {title}", path.read_bytes().decode("latin-1")))
    return out


# --- settings ----------------------------------------------------------------------------------
def _policy_caption(policy: str) -> str:
    return POLICIES.get(policy, "")


def settings_sidebar(*, validator_default: bool = True) -> Settings | None:
    """The run settings as sidebar widgets (values persist across pages); None if they are invalid."""
    from pipeline.models.validator import DEFAULT_THRESHOLDS

    d = Settings()
    keep: dict[str, Any] = {"persist_state": "session"}
    with st.sidebar:
        kb_sidebar()
        st.subheader("Run settings")
        with st.expander("Retrieval legs (top-k)"):
            c1, c2 = st.columns(2)
            d_bm25_k = c1.number_input("D · BM25", 1, 1000, d.d_bm25_k, key="s_d_bm25_k", **keep)
            d_dense_k = c2.number_input("D · embedding", 1, 1000, d.d_dense_k, key="s_d_dense_k", **keep)
            f_bm25_k = c1.number_input("F · BM25", 1, 1000, d.f_bm25_k, key="s_f_bm25_k", **keep)
            f_dense_k = c2.number_input("F · embedding", 1, 1000, d.f_dense_k, key="s_f_dense_k", **keep)
            final_k = st.number_input("Final list length", 1, 200, d.final_k, key="s_final_k", **keep)
        with st.expander("D · hybrid fusion"):
            fusion = st.selectbox("Method", list(FUSION_LABELS), format_func=FUSION_LABELS.__getitem__,
                                  key="s_fusion", **keep)
            alpha = st.slider("α — weight of BM25", 0.0, 1.0, d.alpha, 0.05, key="s_alpha",
                              help="RRF weighs the legs 2α and 2(1 − α) (α = 0.5 is plain RRF); min-max and "
                                   "z-score mix the normalised scores α : (1 − α).", **keep)
            rrf_k = st.number_input("RRF k", 1, 1000, d.rrf_k, key="s_rrf_k", disabled=fusion != "rrf", **keep)
        with st.expander("F · reranker"):
            reranker = st.selectbox("Backend", list(RERANKER_LABELS), format_func=RERANKER_LABELS.__getitem__,
                                    key="s_reranker", **keep)
            reranker_model = st.text_input("Model path (optional)", "", key="s_reranker_model",
                                           placeholder="default model",
                                           help="A GGUF file for the Qwen backend, a local folder for bge.", **keep)
            rerank_top_n = st.number_input("Rerank the top N of the union", 1, 200, d.rerank_top_n,
                                           key="s_rerank_top_n", **keep)
        with st.expander("Validator", expanded=True):
            run_validator = st.toggle("Run the validator", validator_default, key="s_run_validator", **keep)
            validator_model = st.selectbox("Model", list(VALIDATOR_LABELS), format_func=VALIDATOR_LABELS.__getitem__,
                                           key="s_validator_model", disabled=not run_validator, **keep)
            validator_top_k = st.number_input("Judge the top k of each ranking", 0, 50, d.validator_top_k,
                                              key="s_validator_top_k", disabled=not run_validator, **keep)
            accept_policy = st.selectbox("Accept policy", list(POLICY_LABELS), format_func=POLICY_LABELS.__getitem__,
                                         key="s_accept_policy", disabled=not run_validator, **keep)
            st.caption(_policy_caption(accept_policy))
            default_thr = DEFAULT_THRESHOLDS.get(validator_model, 1.0)
            custom = st.checkbox(f"Custom margin threshold (default {default_thr:g})", False, key="s_custom_thr",
                                 disabled=not run_validator, **keep)
            threshold = st.number_input("Margin threshold", -20.0, 20.0, float(default_thr), 0.1,
                                        key="s_threshold", disabled=not (custom and run_validator), **keep)
            timeout_s = st.number_input("Timeout per candidate (s)", 1.0, 600.0, d.timeout_s, 5.0,
                                        key="s_timeout", disabled=not run_validator, **keep)
        with st.expander("Embedders"):
            embedder = st.text_input("D embedder folder", "", key="s_embedder", placeholder="all-MiniLM-L6-v2",
                                     **keep)
            f_embedder = st.text_input("F embedder folder", "", key="s_f_embedder", placeholder="same as D",
                                       **keep)
        _model_notices(run_validator, validator_model, accept_policy, reranker)
    try:
        return Settings(d_bm25_k=d_bm25_k, d_dense_k=d_dense_k, f_bm25_k=f_bm25_k, f_dense_k=f_dense_k,
                        final_k=final_k, fusion=fusion, alpha=alpha, rrf_k=rrf_k, reranker=reranker,
                        reranker_model=reranker_model.strip() or None, rerank_top_n=rerank_top_n,
                        run_validator=run_validator, validator_model=validator_model,
                        validator_top_k=validator_top_k, accept_policy=accept_policy,
                        margin_threshold=threshold if custom else None, timeout_s=timeout_s,
                        embedder=embedder.strip() or None, f_embedder=f_embedder.strip() or None)
    except ValidationError as exc:
        st.sidebar.error("Invalid settings: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                          for e in exc.errors()))
        return None


def _model_notices(run_validator: bool, validator_model: str, policy: str, reranker: str) -> None:
    """Say up front which model is missing; the run still works and the panel repeats the warning."""
    wanted = []
    if run_validator and policy != "evidence_only":
        wanted.append(validator_model)
    if reranker == "qwen" and "qwen-0.5b" not in wanted:
        wanted.append("qwen-0.5b")
    for key in wanted:
        try:
            status = provision.status(key)
        except Exception as exc:
            st.warning(f"{key}: {exc}")
            continue
        if not status.ready:
            st.warning(f"**{status.title}** is not ready: {status.message}")


def kb_sidebar(*, upload: bool = True) -> None:
    """KB choice (built-in or uploaded) and an upload box; shared with the Knowledge base page."""
    st.subheader("Knowledge base")
    if upload:
        with st.expander("Upload a KB (JSONL)"):
            up = st.file_uploader("JSONL records", type=["jsonl"], key="kb_upload_sidebar",
                                  help="One record per line; bad lines are reported and skipped "
                                       "(details on the Knowledge base page).")
            if up is not None:
                kb_upload_summary(load_user_kb(up.getvalue(), up.name, up.file_id), compact=True)
    kb = user_kb()
    options = [BUILTIN] + ([UPLOADED] if kb is not None and kb.store is not None else [])
    if st.session_state.get("kb_choice") not in options:
        st.session_state["kb_choice"] = BUILTIN
    st.radio("Search in", options, key="kb_choice", persist_state="session",
             format_func=lambda o: "Built-in Godot 4 docs" if o == BUILTIN else f"Uploaded: {kb.name if kb else ''}")


def kb_upload_summary(kb: UserKB, *, compact: bool = False) -> None:
    errors = [i for i in kb.issues if i.severity == "error"]
    n = len(kb.store.records) if kb.store else 0
    if kb.store is None:
        st.error(f"{kb.name}: no valid record; {len(errors)} bad line(s).")
    elif errors:
        st.warning(f"{kb.name}: {n:,} records loaded, {len(errors)} bad line(s) skipped.")
    else:
        st.success(f"{kb.name}: {n:,} records loaded.")
    if compact and kb.issues:
        st.caption("\n\n".join(str(i) for i in kb.issues[:5]) + ("\n\n…" if len(kb.issues) > 5 else ""))


# --- input -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRequest:
    data: bytes | str
    origin: str  # where the chunk came from, in words
    alternatives: tuple[str, ...]


ALT_CHOICES = {"Both": ("D", "F"), "D": ("D",), "F": ("F",)}
ALT_LABELS = {"Both": "D and F", "D": "D · fusion", "F": "F · reranker"}


def input_form(key: str, *, choose_alternatives: bool = True) -> RunRequest | None:
    """Chunk input (example, paste or upload) and the alternative; returns a request on Run."""
    items = examples()
    mode = st.radio("Chunk", ["Example", "Paste", "Upload"], horizontal=True, key=f"{key}_mode",
                    persist_state="session", label_visibility="collapsed",
                    format_func={"Example": "Pick an example", "Paste": "Paste code",
                                 "Upload": "Upload a .gd file"}.__getitem__)
    with st.form(f"{key}_form", border=True, enter_to_submit=False):
        data: bytes | str | None = None
        origin = ""
        if mode == "Example":
            idx = st.selectbox("Example chunk", range(len(items)), format_func=lambda i: items[i].title,
                               key=f"{key}_example", persist_state="session")
            data, origin = items[idx].code, items[idx].title
        elif mode == "Paste":
            data = st.text_area("GDScript chunk", height=220, key=f"{key}_text", persist_state="session",
                                placeholder="func _process(delta):\n\t…")
            origin = "pasted chunk"
        else:
            up = st.file_uploader("GDScript file", type=["gd"], key=f"{key}_file")
            if up is not None:
                data, origin = up.getvalue(), up.name
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


# --- runs --------------------------------------------------------------------------------------
def run_key(chunk: ChunkInfo, settings: Settings, kb_hash: str) -> str:
    return hashlib.sha256("|".join([chunk.sha256, settings.cache_key(), kb_hash]).encode()).hexdigest()


def needs_models(s: Settings) -> bool:
    """Whether anything beyond the fast stages (BM25, embedding, union, fusion) is asked for."""
    return s.run_validator or ("F" in s.alternatives and s.reranker != "none")


def fast_settings(s: Settings) -> Settings:
    # F's reranker is a Qwen (~20–40 s): the fast pass shows F in union order meanwhile.
    return s.model_copy(update={"run_validator": False, "reranker": "none"})


@dataclass
class RunState:
    key: str
    origin: str
    chunk: ChunkInfo
    settings: Settings
    engine: Engine
    fast: Trace
    full: Trace | None = None
    job: Job | None = None
    from_cache: bool = False
    message: str = ""  # why the shown trace is incomplete (cancelled, failed)

    def refresh(self) -> None:
        """Take over a finished job's result (and cache it if the run was complete)."""
        job = self.job
        if job is None or not job.done or self.full is not None or self.message:
            return
        if job.error:
            self.message = f"The model stages failed: {job.error}"
        elif job.cancelled:
            self.message = "Cancelled: the stages that finished are shown; run again to complete."
        if isinstance(job.result, Trace):
            self.full = job.result
            if not job.cancelled:
                cache_trace(self.key, self.full)
        elif job.partial is not None:
            self.full = job.partial[0]

    def view(self) -> tuple[Trace, set[str]]:
        """The trace to draw now, and the alternatives whose model stages are still pending."""
        if self.full is not None:
            return self.full, set()
        pending = set(self.settings.alternatives) if needs_models(self.settings) and not self.message else set()
        if self.job is not None and self.job.partial is not None:
            trace, done = self.job.partial
            return trace, pending - set(done)
        return self.fast, pending


def _trace_cache() -> OrderedDict[str, Trace]:
    return st.session_state.setdefault(SS_TRACES, OrderedDict())


def cache_trace(key: str, trace: Trace) -> None:
    cache = _trace_cache()
    cache[key] = trace
    cache.move_to_end(key)
    while len(cache) > TRACE_CACHE_SIZE:
        cache.popitem(last=False)


def current_run() -> RunState | None:
    run: RunState | None = st.session_state.get(SS_RUN)
    if run is not None:
        run.refresh()
    return run


def _model_job(engine: Engine, chunk: ChunkInfo, settings: Settings, fast: Trace) -> Job:
    def target(job: Job) -> Trace:
        trace = fast.model_copy(deep=True)
        trace.settings = settings.model_dump()
        done: list[str] = []
        for name in settings.alternatives:
            job.check()
            job.note = f"alternative {name}: " + ("reranking and validating" if name == "F" else "validating")

            def progress(step: str, n: int, total: int) -> None:
                job.progress(step, n, total)
                if not step.startswith("validate"):
                    job.check()  # the reranker has no cancel hook of its own; validation stops via `cancelled`

            one = engine.run(chunk, settings.model_copy(update={"alternatives": (name,)}), progress,
                             cancelled=job.cancel.is_set)
            trace.alternatives[name] = one.alternatives[name]
            job.finish_steps(f"validate {name}")
            job.finish_steps(f"rerank {name}")
            done.append(name)
            job.publish((trace.model_copy(deep=True), tuple(done)))
        return trace

    return Job(f"run {chunk.sha256[:8]}", target).start()


def start_run(engine: Engine, request: RunRequest, settings: Settings) -> RunState | None:
    """Fast stages now (rendered at once), model stages in the background; cached runs are instant."""
    chunk = parse_chunk(request.data)
    if chunk is None:
        return None
    settings = settings.model_copy(update={"alternatives": request.alternatives})
    old: RunState | None = st.session_state.get(SS_RUN)
    if old is not None and old.job is not None and not old.job.done:
        old.job.cancel.set()  # a new run replaces the old one; the models would only be shared anyway
    key = run_key(chunk, settings, engine.store.content_hash)
    cached = _trace_cache().get(key)
    if cached is not None:
        run = RunState(key, request.origin, chunk, settings, engine, cached, full=cached, from_cache=True)
    else:
        try:
            with st.spinner("BM25, embedding, union and fusion…"):
                fast = engine.run(chunk, fast_settings(settings))
        except Exception as exc:
            log.exception("fast pass failed")
            st.error(f"The run failed: {exc}")
            return None
        run = RunState(key, request.origin, chunk, settings, engine, fast)
        if needs_models(settings):
            run.job = _model_job(engine, chunk, settings, fast)
        else:
            run.full = fast
            cache_trace(key, fast)
    st.session_state[SS_RUN] = run
    return run


# --- progress ----------------------------------------------------------------------------------
class JobMonitor:
    """Progress bars and a Cancel button for a background job, drawn where it is created.

    ``follow()`` (called after the page is drawn) polls the job and reruns the
    script when a partial result arrives or the job ends, so panels redraw.
    """

    def __init__(self, job: Job, title: str, key: str, *, hint: str = "") -> None:
        self.job, self.title = job, title
        self.seen = job.version
        self.bars: dict[str, Any] = {}
        left, right = st.columns([6, 1], vertical_alignment="top")
        right.button("Cancel", key=f"{key}_cancel", on_click=job.cancel.set, disabled=job.cancel.is_set(),
                     width="stretch", help="Stops after the current model call; finished stages stay.")
        self.status = left.status(self._label(), expanded=True, state="running")
        if hint:
            self.status.caption(hint)
        self._draw()

    def _label(self) -> str:
        what = "cancelling…" if self.job.cancel.is_set() else (self.job.note or "starting…")
        return f"{self.title} · {self.job.elapsed:.0f} s · {what}"

    def _draw(self) -> None:
        for step, (done, total) in self.job.snapshot().items():
            if step not in self.bars:
                self.bars[step] = self.status.progress(0.0)
            frac = min(done / total, 1.0) if total else 0.0
            self.bars[step].progress(frac, text=f"{step}: {done} / {total}")
        # An update without ``expanded`` collapses the box in the browser; the bars must stay in view.
        self.status.update(label=self._label(), expanded=True)

    def follow(self, poll: float = 0.5) -> None:
        while not self.job.done and self.job.version == self.seen:
            time.sleep(poll)
            self._draw()
        self._draw()
        st.rerun()
