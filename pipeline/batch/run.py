"""Running chunks: one chunk -> one :class:`ResultLine` (:func:`process_chunk`, the task a worker runs),
:class:`ChunkWorker` (one Engine, chunk after chunk: the local backend's, and each Ray actor's), and
:func:`run_batch`, the driver: plan, resume, hand the jobs to a backend, write every line it returns."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pipeline.batch.plan import BatchError, Job, chunk_key, jobs_for, kb_content_hash, plan
from pipeline.batch.results import (
    AcceptedRecord,
    AltResult,
    RankedRecord,
    ResultLine,
    ResultsLog,
    SettingsSummary,
    error_fields,
    file_error_line,
)
from pipeline.batch.splitter import DEFAULT_MAX_LINES, Chunk
from pipeline.chunk import InputError, prepare_chunk
from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.engine import Engine
    from pipeline.trace import AlternativeTrace, ProgressEvent

log = logging.getLogger(__name__)

ProgressFn = Callable[["ProgressEvent"], None]
BackendName = Literal["local", "ray"]
BACKENDS: tuple[BackendName, ...] = ("local", "ray")


def _alt_result(alt: AlternativeTrace, top: int) -> AltResult:
    messages = [f"{st.name}: {st.message}" for st in alt.stages if st.status == "error"]
    bad_verdicts = sorted({it.verdict for it in alt.final if it.verdict in ("error", "timeout")})
    if bad_verdicts:
        messages.append("validator verdicts: " + ", ".join(bad_verdicts))
    validate = alt.stage("validate")
    return AltResult(
        status="error" if alt.status == "error" or messages else "ok",
        messages=messages,
        validated=validate.status if validate is not None else "not_run",
        accepted=[AcceptedRecord(record_id=it.record_id, source=it.source, doc_path=it.doc_path,
                                 evidence=it.evidence) for it in alt.final if it.accepted],
        top=[RankedRecord(rank=it.rank, record_id=it.record_id, source=it.source, doc_path=it.doc_path,
                          score=round(it.score, 6), verdict=it.verdict) for it in alt.final[:top]],
    )


def _line_fields(chunk: Chunk, settings: Settings, kb_hash: str, duplicates: Sequence[Chunk]) -> dict[str, Any]:
    """Where a chunk's line is from and what it is valid for, whatever its outcome."""
    return {**chunk.location(), "kind": chunk.kind, "name": chunk.name, "part": chunk.part,
            "sha256": chunk.sha256, "key": chunk_key(chunk.input_sha256, settings, kb_hash), "kb": kb_hash,
            "settings": SettingsSummary.of(settings), "duplicates": [d.location() for d in duplicates] or None}


def error_line(chunk: Chunk, settings: Settings, kb_hash: str, exc: BaseException,
               duplicates: Sequence[Chunk] = (), ms: float | None = None) -> ResultLine:
    """The line of a chunk that has no result, saying why."""
    return ResultLine(**_line_fields(chunk, settings, kb_hash, duplicates), **error_fields(exc), ms=ms)


def process_chunk(engine: Engine, chunk: Chunk, settings: Settings, *, top: int = 5,
                  truncate: bool = False, duplicates: Sequence[Chunk] = ()) -> ResultLine:
    """Run one chunk and return its result line; a bad chunk or a failing model gives an error line."""
    kb_hash = engine.store.content_hash
    t0 = time.perf_counter()
    try:
        info = prepare_chunk(chunk.text, truncate=truncate).model_copy(update={"context": chunk.context})
        trace = engine.run(info, settings)
    except Exception as exc:  # one bad chunk or model failure must not stop the batch
        if not isinstance(exc, InputError):
            log.warning("chunk %s#%d failed: %s", chunk.file, chunk.index, exc, exc_info=True)
        return error_line(chunk, settings, kb_hash, exc, duplicates, ms=round((time.perf_counter() - t0) * 1000, 1))
    base = _line_fields(chunk, settings, kb_hash, duplicates)
    alts = {name: _alt_result(alt, top) for name, alt in trace.alternatives.items()}
    return ResultLine(**base, language=info.language, notices=[*chunk.notices, *info.notices], alternatives=alts,
                      ok=all(a.status == "ok" for a in alts.values()),
                      ms=round((time.perf_counter() - t0) * 1000, 1))


def warm_up(engine: Engine, settings: Settings, progress: ProgressFn | None = None) -> None:
    """Load (or compute) embeddings and load the models ``settings`` use, before the first chunk.

    The first chunk would do it anyway; doing it first keeps the chunk bar's ETA
    about chunks. A model that fails here is reported per chunk by the run itself.
    """
    quiet: ProgressFn = progress or (lambda *_: None)
    models = {settings.embedder} if "D" in settings.alternatives else set()
    if "F" in settings.alternatives:
        models.add(settings.f_embedder or settings.embedder)
    # "trained" names the query map of this KB, not a folder: resolve it as a run does (its fallback is said per chunk)
    for model in {engine.resolve_embedder(m)[0] for m in models}:
        try:
            emb, _ = engine.dense(model, quiet)
            # a query loads the route runs use (ONNX Runtime when exported), not the torch model besides it
            getattr(emb, "encode_query", emb.encode)(["func _ready():\n\tpass"])
        except Exception as exc:
            log.warning("embedder %s unavailable: %s", model or "default", exc)
    try:
        if "F" in settings.alternatives and settings.reranker != "none":
            engine.reranker(settings)
        if settings.run_validator and settings.accept_policy != "evidence_only" and settings.validator_top_k:
            engine.validator(settings)
    except Exception as exc:
        log.warning("model unavailable: %s", exc)


@dataclass(frozen=True)
class WorkerMemory:
    """A worker process's memory: ``rss`` counts pages it shares (libraries, the page cache of
    memory-mapped files), ``uss`` only what this process alone holds (what one more worker costs)."""

    pid: int
    rss: int  # bytes
    uss: int | None  # bytes; None where the OS does not say
    peak_rss: int | None  # bytes, the most this process has held


def process_memory() -> WorkerMemory:
    import psutil

    proc = psutil.Process()
    try:
        uss: int | None = int(proc.memory_full_info().uss)
    except (psutil.Error, AttributeError):
        uss = None
    peak: int | None = None
    with contextlib.suppress(ImportError):
        import resource  # POSIX only

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return WorkerMemory(os.getpid(), int(proc.memory_info().rss), uss, peak)


def _open_engine(kb: Sequence[Path] | None, kb_hash: str, progress: ProgressFn | None) -> Engine:
    from pipeline.engine import Engine

    engine = Engine.open(kb, progress=progress or (lambda *_: None))
    if engine.store.content_hash != kb_hash:  # the KB changed under us, or another node has another: keys would lie
        raise BatchError(f"this worker's KB ({engine.store.content_hash[:12]}) is not the driver's ({kb_hash[:12]}): "
                         "the KB changed while the batch was starting, or this machine has another; run it again")
    return engine


class ChunkWorker:
    """One Engine, opened and warmed up once, then chunk after chunk (models are per process).

    The local backend runs one in the driver; the Ray backend makes each a Ray actor (its own process).
    """

    def __init__(self, settings: Settings, *, kb: Sequence[Path | str] | None = None, kb_hash: str = "",
                 engine: Engine | None = None, top: int = 5, truncate: bool = False,
                 progress: ProgressFn | None = None) -> None:
        self.settings, self.top, self.truncate = settings, top, truncate
        self.engine = engine or _open_engine([Path(p) for p in kb] if kb else None, kb_hash, progress)
        warm_up(self.engine, settings, progress)

    def run(self, job: Job) -> ResultLine:
        # process_chunk is looked up at call time: tests wrap it to kill the driver at a known chunk.
        return process_chunk(self.engine, job.chunk, self.settings, top=self.top, truncate=self.truncate,
                             duplicates=job.duplicates)

    def memory(self) -> WorkerMemory:
        return process_memory()


class Backend(Protocol):
    """Where chunks run. ``start`` loads the models (the set-up phase, before the bar), ``results``
    yields one line per job as each finishes (any order), ``close`` frees the workers."""

    lost: list[str]  # jobs run but not returned (a worker died): said in words, redone by the next run

    def start(self) -> None: ...

    def results(self, jobs: Sequence[Job]) -> Iterator[ResultLine]: ...

    def memory(self) -> list[WorkerMemory]: ...

    def close(self) -> None: ...


@dataclass
class LocalBackend:
    """Every chunk in this process, one after another, on one Engine (opened on ``start``, or given)."""

    settings: Settings
    kb: Sequence[Path] | None
    kb_hash: str
    engine: Engine | None = None
    top: int = 5
    truncate: bool = False
    progress: ProgressFn | None = None
    lost: list[str] = field(default_factory=list)
    _worker: ChunkWorker | None = None

    def start(self) -> None:
        self._worker = ChunkWorker(self.settings, kb=self.kb, kb_hash=self.kb_hash, engine=self.engine, top=self.top,
                                   truncate=self.truncate, progress=self.progress)

    def results(self, jobs: Sequence[Job]) -> Iterator[ResultLine]:
        assert self._worker is not None, "start() first"
        for job in jobs:
            yield self._worker.run(job)

    def memory(self) -> list[WorkerMemory]:
        return [process_memory()]

    def close(self) -> None:
        self._worker = None


@dataclass
class BatchReport:
    out: Path
    backend: str = "local"
    files: int = 0
    chunks: int = 0  # chunk jobs (distinct keys) in this batch
    skipped: int = 0  # already in the results file
    done: int = 0  # run now
    errors: int = 0  # error lines written now (chunks and files)
    degraded: int = 0  # results written now with a stage error (e.g. validator unavailable)
    lost: list[str] = field(default_factory=list)  # run but not written (a worker died); the next run redoes them
    empty_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # torn line, unreadable lines: said to the user
    setup_s: float = 0.0  # opening the engines and loading the models
    run_s: float = 0.0  # from the first chunk handed out to the last line written
    workers: list[WorkerMemory] = field(default_factory=list)  # each worker's memory at the end

    def count(self, line: ResultLine) -> None:
        if line.error is not None:
            self.errors += 1
        elif not line.ok:
            self.degraded += 1

    @property
    def chunks_per_minute(self) -> float | None:
        return self.done / self.run_s * 60 if self.done and self.run_s > 0 else None


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_backend(backend: str, settings: Settings, *, kb: Sequence[Path] | None, kb_hash: str,
                 engine: Engine | None = None, workers: int | None = None, address: str | None = None,
                 top: int = 5, truncate: bool = False, progress: ProgressFn | None = None,
                 echo: Callable[[str], None] = _stderr) -> Backend:
    """The backend by name; options that do not fit it are refused with a message that says why."""
    if backend == "local":
        if workers not in (None, 1) or address:
            raise BatchError("--workers and --address need --backend ray (the local backend runs in this process)")
        return LocalBackend(settings, kb, kb_hash, engine, top, truncate, progress)
    if backend == "ray":
        if engine is not None:
            raise BatchError("the ray backend opens an Engine in each worker; do not pass one")
        from pipeline.batch.ray_backend import RayBackend

        return RayBackend(settings, kb=kb, kb_hash=kb_hash, workers=workers, address=address, top=top,
                          truncate=truncate, echo=echo)
    raise BatchError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")


def run_batch(paths: Sequence[Path | str], out: Path, settings: Settings, *,
              kb: Sequence[Path] | None = None, engine: Engine | None = None,
              max_lines: int = DEFAULT_MAX_LINES, retry_errors: bool = False, top: int = 5,
              truncate: bool = False, show_progress: bool = True, echo: Callable[[str], None] = _stderr,
              engine_progress: ProgressFn | None = None, backend: str = "local", workers: int | None = None,
              address: str | None = None) -> BatchReport:
    """Run every chunk under ``paths`` not yet in ``out``; append one line per chunk as it finishes.

    This process is the only writer of ``out`` whatever the backend: workers return lines, the
    driver appends them (one fsynced line each). The backend (its engines, its workers) starts
    only if there is work left. KeyboardInterrupt propagates after the results file is closed;
    everything written stays valid.
    """
    kb = [Path(p).resolve() for p in kb] if kb else None  # workers may run elsewhere: absolute paths
    p = plan(paths, max_lines)
    if not p.files:
        raise BatchError("no .gd files found in " + ", ".join(map(str, paths)))
    if engine is not None:  # the caller opened the KB: telling its skipped lines is the caller's part
        kb_hash, skipped = engine.store.content_hash, []
    elif kb:  # a user KB is read here anyway, for its hash: the notes say which of its lines were skipped
        from pipeline.kb.store import open_kb

        store = open_kb(kb)
        kb_hash, skipped = store.content_hash, store.skipped()
    else:
        kb_hash, skipped = kb_content_hash(), []
    runner = make_backend(backend, settings, kb=kb, kb_hash=kb_hash, engine=engine, workers=workers,
                          address=address, top=top, truncate=truncate, progress=engine_progress, echo=echo)
    jobs = jobs_for(p, settings, kb_hash)
    report = BatchReport(out=Path(out), backend=backend, files=len(p.files), chunks=len(jobs))
    report.empty_files = [i.file for i in p.issues if i.error is None]
    file_errors = [file_error_line(i, settings, kb_hash) for i in p.issues if i.error is not None]

    with ResultsLog(Path(out)) as results:
        state = results.open()
        for note in skipped + ([state.torn] if state.torn else []) + state.bad:
            report.notes.append(note)
            echo(f"note: {note}")
        done = state.done(retry_errors)
        for line in file_errors:
            if line.key not in done:
                results.append(line)
                done.add(line.key)
                report.count(line)
        todo = [j for j in jobs if j.key not in done]
        report.skipped = len(jobs) - len(todo)
        if todo:
            _run_jobs(runner, todo, results, report, total=len(jobs), show_progress=show_progress)
    return report


def _run_jobs(runner: Backend, todo: list[Job], results: ResultsLog, report: BatchReport, *, total: int,
              show_progress: bool) -> None:
    from tqdm import tqdm

    t0 = time.perf_counter()
    try:
        runner.start()
        report.setup_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        with tqdm(total=total, initial=report.skipped, desc="batch", unit="chunk", file=sys.stderr,
                  disable=not show_progress, dynamic_ncols=True) as bar, \
                contextlib.closing(runner.results(todo)) as lines:  # closed (workers stopped) on any exit
            for line in lines:
                results.append(line)  # the driver is the only writer: one fsynced line per chunk
                report.done += 1
                report.count(line)
                bar.update(1)
                bar.set_postfix(errors=report.errors, refresh=False)
        report.run_s = time.perf_counter() - t1
        report.workers = runner.memory()
        report.lost = list(runner.lost)
    finally:
        runner.close()
