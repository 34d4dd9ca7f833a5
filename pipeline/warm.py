"""Instant examples for demos: finished traces on disk, and a low-priority warmer that fills them.

* :class:`TraceCache` keeps every complete trace on disk, keyed like the
  dashboard's session cache (chunk sha + settings + KB hash): a stakeholder who
  picks a warmed example sees the finished flow at once, marked "from cache".
* :func:`user_run` is held (a shared ``flock``) by the dashboard while a user's
  model phase runs; :func:`user_run_active` is how the warmer sees it. The OS
  drops the lock when a process dies, so a crash never leaves the warmer paused.
* ``python -m pipeline warm`` runs the built-in examples through D and F with
  the dashboard's default settings at ``nice 19``, pausing while a user run is
  going (it checks between examples and between model calls, and redoes an
  interrupted example: the verdicts it had reached stay cached).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline import config
from pipeline.settings import Settings
from pipeline.trace import ChunkInfo, Trace

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

EDGE_CASES = (("godot3_player.gd", "Godot 3 player script (migration)"),
              ("injection.gd", "Prompt injection hidden in comments"),
              ("latin1.gd", "Latin-1 bytes (decoding notice)"),
              ("unity_player.cs", "Unity C# (not Godot)"))
TRACE_CACHE_ENV = "GDPOC_TRACE_CACHE"  # tests point it at a temp folder, so a cached trace never hides a run
TRACE_CACHE_BYTES = 512 * 2**20  # traces are ~0.2–1 MB of JSON; older ones are evicted first
PAUSE_POLL_S = 2.0


@dataclass(frozen=True)
class Example:
    title: str
    code: str


def builtin_examples() -> list[Example]:
    """The reference chunk, the dev-set chunks and the edge cases shipped in fixtures/ (the dashboard's list)."""
    from pipeline.evaluate import DEV_SET, load_set

    fixtures = config.FIXTURES
    out = [Example("Reference: Dodge the Creeps player _process", (fixtures / "reference_chunk.gd").read_text())]
    try:
        out += [Example(f"Dev set: {c.title}", c.code) for c in load_set(DEV_SET) if c.id != "dev-00-reference"]
    except (OSError, ValueError) as exc:
        log.warning("dev set unavailable: %s", exc)
    for name, title in EDGE_CASES:
        path = fixtures / "chunks" / name
        if path.is_file():
            out.append(Example(f"Edge case: {title}", path.read_bytes().decode("latin-1")))
    return out


def run_key(chunk: ChunkInfo, settings: Settings, kb_hash: str) -> str:
    """One key per (chunk, settings, KB) and trace layout: the session cache's and the disk cache's."""
    version = str(Trace.model_fields["version"].default)
    return hashlib.sha256("|".join([chunk.sha256, settings.cache_key(), kb_hash, version]).encode()).hexdigest()


def complete(trace: Trace) -> bool:
    """No stage pending or cut short by Cancel, no candidate left unjudged by it."""
    for a in trace.alternatives.values():
        for st in a.stages:
            if st.status == "pending" or (st.status == "not_run" and "cancel" in st.message):
                return False
        if a.validation is not None and any(r.verdict == "cancelled" for r in a.validation.rows):
            return False
    return True


class TraceCache:
    """Complete traces on disk (diskcache, like the verdicts); an unreadable entry is a miss."""

    def __init__(self, folder: Path | None = None) -> None:
        import diskcache

        folder = folder or Path(os.environ.get(TRACE_CACHE_ENV) or config.cache_dir() / "traces")
        self._cache = diskcache.Cache(str(folder), size_limit=TRACE_CACHE_BYTES)

    def get(self, key: str) -> Trace | None:
        try:
            raw = self._cache.get(key)
            return Trace.model_validate_json(raw) if isinstance(raw, str) else None
        except Exception as exc:  # an older trace layout or a damaged entry: run again
            log.warning("cached trace %s unusable (%s); running again", key[:12], exc)
            return None

    def put(self, key: str, trace: Trace) -> bool:
        """Only finished traces: nothing pending, nothing cancelled. True when stored."""
        if not complete(trace):
            return False
        self._cache.set(key, trace.model_dump_json())
        return True

    def __contains__(self, key: str) -> bool:
        return key in self._cache


# --- the pause: held by the dashboard while a user's run works ----------------------------------------
def _lock_path() -> Path:
    return config.cache_dir() / "user_run.lock"


@contextlib.contextmanager
def user_run() -> Iterator[None]:
    """Held for the whole model phase of a user's run (shared: several sessions may run at once)."""
    with _lock_path().open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def user_run_active() -> bool:
    """Whether any process holds :func:`user_run` now (an exclusive try-lock fails)."""
    with _lock_path().open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


# --- the warmer --------------------------------------------------------------------------------
@dataclass
class WarmReport:
    done: list[str]  # example titles run now
    cached: list[str]  # already on disk
    failed: list[str]
    pauses: int = 0


def _wait_while_busy(busy: Callable[[], bool], sleep: Callable[[float], None]) -> int:
    pauses = 0
    while busy():
        pauses += 1
        sleep(PAUSE_POLL_S)
    return pauses


@dataclass
class _Interrupt:
    """The engine's ``cancelled`` check: true from the first time a user run is seen, for the rest of the run."""

    busy: Callable[[], bool]
    seen: bool = False

    def __call__(self) -> bool:
        self.seen = self.seen or self.busy()
        return self.seen


def warm(engine: Engine, examples: list[Example], settings: Settings, cache: TraceCache, *,
         busy: Callable[[], bool] = user_run_active, sleep: Callable[[float], None] = time.sleep,
         echo: Callable[[str], None] = log.info) -> WarmReport:
    """Run every example not yet on disk, yielding to user runs; an interrupted example is run again."""
    from pipeline.chunk import prepare_chunk

    report = WarmReport([], [], [])
    for ex in examples:
        chunk = prepare_chunk(ex.code)
        key = run_key(chunk, settings, engine.store.content_hash)
        if key in cache:
            report.cached.append(ex.title)
            continue
        while True:
            report.pauses += _wait_while_busy(busy, sleep)
            interrupt = _Interrupt(busy)
            try:
                trace = engine.run(chunk, settings, cancelled=interrupt)
            except Exception as exc:  # one bad example must not stop the others
                log.warning("warming %s failed: %s", ex.title, exc)
                report.failed.append(ex.title)
                break
            if interrupt.seen:
                echo(f"warm: paused for a user run during {ex.title}; it runs again after")
                continue
            (report.done if cache.put(key, trace) else report.failed).append(ex.title)
            echo(f"warm: {ex.title} ({sum(a.ms for a in trace.alternatives.values()) / 1000:.1f} s)")
            break
    return report


def _wait_for(url: str, timeout_s: float) -> bool:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    return False


def warm_command(
    after: Annotated[str | None, typer.Option(help="wait until this URL answers (the dashboard's health check)")
                     ] = None,
    nice: Annotated[int, typer.Option(min=0, max=19, help="CPU priority increment (19: lowest)")] = 19,
    limit: Annotated[int | None, typer.Option(min=1, help="warm only the first N examples")] = None,
) -> None:
    """Warm the verdict, reranker and trace caches for the dashboard's built-in examples, at low priority."""
    from pipeline.cli_common import fail
    from pipeline.engine import Engine
    from pipeline.models.provision import ModelError

    os.nice(nice)
    if after is not None and not _wait_for(after, 600.0):
        fail(f"{after} did not answer within 10 minutes; not warming")
    try:
        engine = Engine.open()
    except (FileNotFoundError, ValueError, ModelError) as exc:
        fail(str(exc))
    examples = builtin_examples()[:limit]
    typer.echo(f"warm: {len(examples)} examples at nice {nice}; pausing while a user run is going")
    report = warm(engine, examples, Settings(), TraceCache(), echo=typer.echo)
    typer.echo(f"warm: {len(report.done)} run now, {len(report.cached)} already cached, {len(report.failed)} failed"
               + (f", paused {report.pauses} times for user runs" if report.pauses else ""))
