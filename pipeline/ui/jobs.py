"""Background jobs for the slow model stages.

A Streamlit click reruns the script and aborts whatever the script thread was
doing; running the models in a worker thread keeps a run alive across reruns
(the page just re-attaches to it), and Cancel is a plain ``threading.Event``.
The worker never calls ``st``: it only records progress that the page polls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised inside a job's progress callback once Cancel was pressed."""


@dataclass
class Job:
    label: str
    target: Callable[[Job], Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    steps: dict[str, tuple[int, int]] = field(default_factory=dict)  # step -> (done, total), in arrival order
    note: str = ""  # what is happening now, in words
    result: Any = None
    partial: Any = None  # a usable intermediate result (e.g. one alternative finished)
    version: int = 0  # bumped whenever ``partial`` changes, so the page knows to redraw
    error: str | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
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

    def progress(self, step: str, done: int, total: int) -> None:
        with self._lock:
            self.steps[step] = (done, total)

    def check(self) -> None:
        """Stop at a safe point if Cancel was pressed."""
        if self.cancel.is_set():
            raise JobCancelled

    def finish_steps(self, prefix: str = "") -> None:
        """Mark steps as complete (a validator's last tick is "judging k of k", never "k done")."""
        with self._lock:
            for step, (_, total) in list(self.steps.items()):
                if step.startswith(prefix):
                    self.steps[step] = (total, total)

    def publish(self, partial: Any) -> None:
        with self._lock:
            self.partial = partial
            self.version += 1

    def snapshot(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            return dict(self.steps)
