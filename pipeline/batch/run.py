"""Running chunks: one chunk -> one :class:`ResultLine` (the task a cluster worker runs), and
:func:`run_batch`, which runs a whole batch on this machine, resumably."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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


def process_chunk(engine: Engine, chunk: Chunk, settings: Settings, *, top: int = 5,
                  truncate: bool = False, duplicates: Sequence[Chunk] = ()) -> ResultLine:
    """Run one chunk and return its result line; a bad chunk or a failing model gives an error line."""
    kb_hash = engine.store.content_hash
    base = {**chunk.location(), "kind": chunk.kind, "name": chunk.name, "part": chunk.part,
            "sha256": chunk.sha256, "key": chunk_key(chunk.sha256, settings, kb_hash), "kb": kb_hash,
            "settings": SettingsSummary.of(settings), "duplicates": [d.location() for d in duplicates] or None}
    t0 = time.perf_counter()
    try:
        info = prepare_chunk(chunk.text, truncate=truncate)
        trace = engine.run(info, settings)
    except Exception as exc:  # one bad chunk or model failure must not stop the batch
        if not isinstance(exc, InputError):
            log.warning("chunk %s#%d failed: %s", chunk.file, chunk.index, exc, exc_info=True)
        return ResultLine(**base, **error_fields(exc), ms=round((time.perf_counter() - t0) * 1000, 1))
    alts = {name: _alt_result(alt, top) for name, alt in trace.alternatives.items()}
    return ResultLine(**base, language=info.language, notices=[*chunk.notices, *info.notices], alternatives=alts,
                      ok=all(a.status == "ok" for a in alts.values()),
                      ms=round((time.perf_counter() - t0) * 1000, 1))


@dataclass
class BatchReport:
    out: Path
    files: int = 0
    chunks: int = 0  # chunk jobs (distinct keys) in this batch
    skipped: int = 0  # already in the results file
    done: int = 0  # run now
    errors: int = 0  # error lines written now (chunks and files)
    degraded: int = 0  # results written now with a stage error (e.g. validator unavailable)
    empty_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # torn line, unreadable lines: said to the user

    def count(self, line: ResultLine) -> None:
        if line.error is not None:
            self.errors += 1
        elif not line.ok:
            self.degraded += 1


def warm_up(engine: Engine, settings: Settings, progress: ProgressFn | None = None) -> None:
    """Load (or compute) embeddings and load the models ``settings`` use, before the first chunk.

    The first chunk would do it anyway; doing it first keeps the chunk bar's ETA
    about chunks. A model that fails here is reported per chunk by the run itself.
    """
    quiet: ProgressFn = progress or (lambda *_: None)
    models = {settings.embedder} if "D" in settings.alternatives else set()
    if "F" in settings.alternatives:
        models.add(settings.f_embedder or settings.embedder)
    for model in models:
        try:
            emb, _ = engine.dense(model, quiet)
            load = getattr(emb, "load", None)
            if callable(load):
                load()
        except Exception as exc:
            log.warning("embedder %s unavailable: %s", model or "default", exc)
    try:
        if "F" in settings.alternatives and settings.reranker != "none":
            engine.reranker(settings)
        if settings.run_validator and settings.accept_policy != "evidence_only" and settings.validator_top_k:
            engine.validator(settings)
    except Exception as exc:
        log.warning("model unavailable: %s", exc)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _open_engine(kb: Sequence[Path] | None, kb_hash: str, progress: ProgressFn | None) -> Engine:
    from pipeline.engine import Engine

    engine = Engine.open(kb, progress=progress or (lambda *_: None))
    if engine.store.content_hash != kb_hash:  # the KB changed under us: keys would lie
        raise BatchError("the KB changed while the batch was starting; run it again")
    return engine


def run_batch(paths: Sequence[Path | str], out: Path, settings: Settings, *,
              kb: Sequence[Path] | None = None, engine: Engine | None = None,
              max_lines: int = DEFAULT_MAX_LINES, retry_errors: bool = False, top: int = 5,
              truncate: bool = False, show_progress: bool = True, echo: Callable[[str], None] = _stderr,
              engine_progress: ProgressFn | None = None) -> BatchReport:
    """Run every chunk under ``paths`` not yet in ``out``; append one line per chunk as it finishes.

    ``engine`` is opened (once) only if there is work left. KeyboardInterrupt
    propagates after the results file is closed; everything written stays valid.
    """
    p = plan(paths, max_lines)
    if not p.files:
        raise BatchError("no .gd files found in " + ", ".join(map(str, paths)))
    kb_hash = engine.store.content_hash if engine is not None else kb_content_hash(kb)
    jobs = jobs_for(p, settings, kb_hash)
    report = BatchReport(out=Path(out), files=len(p.files), chunks=len(jobs))
    report.empty_files = [i.file for i in p.issues if i.error is None]
    file_errors = [file_error_line(i, settings, kb_hash) for i in p.issues if i.error is not None]

    with ResultsLog(Path(out)) as results:
        state = results.open()
        for note in ([state.torn] if state.torn else []) + state.bad:
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
            engine = engine or _open_engine(kb, kb_hash, engine_progress)
            warm_up(engine, settings, engine_progress)
        _run_jobs(engine, todo, results, report, settings, top=top, truncate=truncate, total=len(jobs),
                  show_progress=show_progress)
    return report


def _run_jobs(engine: Engine | None, todo: list[Job], results: ResultsLog, report: BatchReport,
              settings: Settings, *, top: int, truncate: bool, total: int, show_progress: bool) -> None:
    from tqdm import tqdm

    with tqdm(total=total, initial=report.skipped, desc="batch", unit="chunk", file=sys.stderr,
              disable=not show_progress, dynamic_ncols=True) as bar:
        for job in todo:
            assert engine is not None  # opened by run_batch whenever there is work
            line = process_chunk(engine, job.chunk, settings, top=top, truncate=truncate, duplicates=job.duplicates)
            results.append(line)
            report.done += 1
            report.count(line)
            bar.update(1)
            bar.set_postfix(errors=report.errors, refresh=False)
