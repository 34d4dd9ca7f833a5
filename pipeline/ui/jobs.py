"""Background jobs for the dashboard: the model phase of a run, or an evaluation.

Streamlit reruns the page script on every interaction; a job in a worker thread
keeps a run alive across reruns (the page just re-attaches to it), and Cancel
is a plain ``threading.Event``. The worker never calls ``st``: it records typed
progress events, and :func:`monitor` — a fragment that reruns on a timer —
draws them and reruns the page when a partial result arrives or the job ends.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from pipeline.settings import AltName
from pipeline.trace import ProgressEvent

log = logging.getLogger(__name__)

# How often the progress box redraws itself: each redraw takes CPU from Qwen on 2 cores (bench/dashboard.py
# sets the old 0.5 s through the variable, as its baseline).
POLL_S = float(os.environ.get("GDPOC_POLL_S") or 1.0)
# A session-bound job stops once its page has been gone this long (a closed tab; a brief reconnect is not)
ORPHAN_GRACE_S = 60.0


def current_session() -> str | None:
    """The id of the session running this script, if any (None in a bare process)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


def session_alive(session_id: str) -> bool:
    """Whether a browser is still connected to ``session_id`` (thread-safe in Streamlit's runtime)."""
    from streamlit.runtime import Runtime

    return not Runtime.exists() or Runtime.instance().is_active_session(session_id)


class JobCancelled(Exception):
    """Raised by :meth:`Job.check` once Cancel was pressed."""


@dataclass
class Job:
    label: str
    target: Callable[[Job], Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    note: str = ""  # what is happening now, in words
    result: Any = None
    partial: Any = None  # a usable intermediate result (e.g. one alternative finished)
    version: int = 0  # bumped whenever ``partial`` changes, so the page knows to redraw
    error: str | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    session_id: str | None = None  # set: the job stops at a check once that session's page is gone
    _gone_since: float | None = None
    _events: dict[tuple[str, str | None], ProgressEvent] = field(default_factory=dict)  # latest per step
    _done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Job:
        threading.Thread(target=self._run, name=f"job: {self.label}", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            self.result = self.target(self)
        except JobCancelled:
            self.cancelled = True
        except Exception as exc:  # shown to the user as a message, logged with its traceback
            log.exception("job %s failed", self.label)
            self.error = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
        finally:
            self.cancelled = self.cancelled or self.cancel.is_set()
            self.finished = time.monotonic()
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def progress(self, event: ProgressEvent) -> None:
        with self._lock:
            self._events[(event.stage, event.alternative)] = event
        self.note = f"{event.label}: {event.note}" if event.note else event.label

    def check(self) -> None:
        """Stop at a safe point if Cancel was pressed, or if the page that started it was closed."""
        if self.cancel.is_set():
            raise JobCancelled
        if self.session_id is None:
            return
        if session_alive(self.session_id):
            self._gone_since = None
        elif self._gone_since is None:
            self._gone_since = time.monotonic()
        elif time.monotonic() - self._gone_since >= ORPHAN_GRACE_S:
            log.info("job %s: its page was closed; stopping", self.label)
            self.cancel.set()
            raise JobCancelled

    def finish(self, alternative: AltName) -> None:
        """Mark every step of ``alternative`` complete (a validator's last tick is "judging k of k")."""
        with self._lock:
            for key, ev in self._events.items():
                if ev.alternative == alternative:
                    self._events[key] = ProgressEvent(ev.stage, ev.total, ev.total, ev.alternative)

    def publish(self, partial: Any) -> None:
        with self._lock:
            self.partial = partial
            self.version += 1

    def snapshot(self) -> list[ProgressEvent]:
        """The latest event of every step, in the order the steps started."""
        with self._lock:
            return list(self._events.values())


def monitor(job: Job, title: str, key: str, *, hint: str = "", eta: Callable[[], str] | None = None) -> None:
    """Progress bars and a Cancel button for ``job``, redrawn every POLL_S by a fragment.

    ``eta`` says what is still running and for how long, recomputed on every redraw. When the job
    publishes a partial result or ends, the whole page reruns so the panels redraw.
    """
    seen = job.version

    @st.fragment(run_every=POLL_S)
    def box() -> None:
        if job.done or job.version != seen:
            st.rerun()
        left, right = st.columns([6, 1], vertical_alignment="top")
        right.button("Cancel", key=f"{key}_cancel", on_click=job.cancel.set, disabled=job.cancel.is_set(),
                     width="stretch", help="Stops after the current model call; finished stages stay.")
        what = "cancelling…" if job.cancel.is_set() else (job.note or "starting…")
        status = left.status(f"{title} · {job.elapsed:.0f} s · {what}", expanded=True, state="running")
        if eta is not None:
            status.markdown(f"**{eta()}**")
        if hint:
            status.caption(hint)
        for ev in job.snapshot():
            status.progress(ev.fraction, text=f"{ev.label}: {ev.done} / {ev.total}")

    box()
