"""A run of one chunk: the engine's fast phase at once, its model phase as a background job.

The page only starts a run and draws the trace it gets back: the fast trace
first, then each alternative as the job publishes it, then the finished trace
(kept in this session's cache and on disk, so running the same chunk again,
or an example the demo warmer ran, is instant). The job holds the warmer's
pause lock while it works, so ``make demo``'s warmer yields the CPU to it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from pipeline.engine import Engine, Prepared
from pipeline.settings import AltName, Settings
from pipeline.trace import ChunkInfo, ProgressEvent, Trace
from pipeline.ui.inputs import RunRequest, parse_chunk
from pipeline.ui.jobs import Job
from pipeline.warm import TraceCache, run_key, user_run

log = logging.getLogger(__name__)

SS_RUN = "run"
SS_TRACES = "trace_cache"
TRACE_CACHE_SIZE = 32


__all__ = ["RunState", "cache_trace", "current_run", "run_key", "start_run"]


@st.cache_resource(show_spinner=False)
def disk_traces() -> TraceCache:
    """Finished traces on disk, shared by every session and by the demo warmer."""
    return TraceCache()


@dataclass
class RunState:
    key: str
    origin: str
    chunk: ChunkInfo
    settings: Settings
    engine: Engine
    fast: Trace  # the fast phase's trace (a copy: the job completes the engine's own)
    full: Trace | None = None
    job: Job | None = None
    from_cache: bool = False
    cache_origin: str = ""  # "session" or "disk": where a cached trace came from
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
        trace = job.result if isinstance(job.result, Trace) else (job.partial or self.fast).model_copy(deep=True)
        if self.message:
            trace.close_pending(self.message)
        else:
            cache_trace(self.key, trace)
        self.full = trace

    def view(self) -> Trace:
        """The trace to draw now: finished, else the latest published, else the fast one."""
        if self.full is not None:
            return self.full
        if self.job is not None and self.job.partial is not None:
            return self.job.partial
        return self.fast

    @property
    def pending(self) -> set[AltName]:
        """Alternatives whose model stages are still running."""
        return self.view().pending if self.job is not None and not self.job.done else set()


def _trace_cache() -> OrderedDict[str, Trace]:
    return st.session_state.setdefault(SS_TRACES, OrderedDict())


def cache_trace(key: str, trace: Trace) -> None:
    """In this session (LRU) and on disk (for later sessions and restarts)."""
    try:
        disk_traces().put(key, trace)
    except OSError as exc:  # a full or read-only cache folder costs only the instant re-run
        log.warning("trace not cached on disk: %s", exc)
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


def _model_job(engine: Engine, prepared: Prepared) -> Job:
    def target(job: Job) -> Trace:
        def published(name: AltName) -> None:
            job.finish(name)
            job.publish(prepared.trace.model_copy(deep=True))

        def shown() -> None:  # a stage still running has something to show: its decisions
            job.publish(prepared.trace.model_copy(deep=True))

        with user_run():  # the demo warmer pauses while this holds
            return engine.complete(prepared, job.progress, job.cancel.is_set, published, shown)

    return Job(f"run {prepared.chunk.sha256[:8]}", target).start()


def fast_progress(bar: Any) -> Callable[[ProgressEvent], None]:
    """The fast phase's bar: a long chunk's functions are searched one by one, seconds in all."""
    def show(ev: ProgressEvent) -> None:
        if ev.stage == "functions" and ev.total:
            bar.progress(ev.fraction, text=f"{ev.alternative}: searching the long chunk function by function, "
                                           f"{ev.done} of {ev.total}")
    return show


def start_run(engine: Engine, request: RunRequest, settings: Settings) -> RunState | None:
    """Fast phase now (rendered at once), model phase in the background; cached runs are instant."""
    chunk = parse_chunk(request.data)
    if chunk is None:  # the error is shown; the last run stays on screen, and the page says whose it is
        if (shown := st.session_state.get(SS_RUN)) is not None:
            st.info(f"Still showing the last run ({shown.origin}, {shown.chunk.lines_text}); this input was not run.")
        return None
    settings = settings.model_copy(update={"alternatives": request.alternatives})
    old: RunState | None = st.session_state.get(SS_RUN)
    if old is not None and old.job is not None and not old.job.done:
        old.job.cancel.set()  # a new run replaces the old one; the models would only be shared anyway
    key = run_key(chunk, settings, engine.store.content_hash)
    cached, where = _trace_cache().get(key), "session"
    if cached is None:
        cached, where = disk_traces().get(key), "disk"
        if cached is not None:  # a second Run in this session is a session hit
            _trace_cache()[key] = cached
    if cached is not None:
        run = RunState(key, request.origin, chunk, settings, engine, cached, full=cached, from_cache=True,
                       cache_origin=where)
    else:
        try:
            with st.spinner("BM25, embedding, union and fusion…"):
                bar = st.empty()
                try:
                    prepared = engine.prepare(chunk, settings, fast_progress(bar), prime=True)
                finally:
                    bar.empty()
        except Exception as exc:
            log.exception("fast phase failed")
            st.error(f"The run failed: {exc}")
            return None
        run = RunState(key, request.origin, chunk, settings, engine, prepared.trace.model_copy(deep=True))
        if prepared.needs_models:
            run.job = _model_job(engine, prepared)
        else:
            run.full = run.fast
            cache_trace(key, run.fast)
    st.session_state[SS_RUN] = run
    return run
