"""Batch mode: split files or folders of GDScript into chunks and run the engine on each.

The building blocks are plain functions so a cluster engine (Ray, Spark, joblib) can use
them as tasks, see docs/scaling.md:

* :mod:`~pipeline.batch.splitter`: :func:`split_source`, a file's text -> :class:`Chunk`\\ s
  (top-level functions and classes, a header chunk for non-trivial top-level declarations,
  long blocks split at blank lines), each function with its file's declarations as ``context``;
* :mod:`~pipeline.batch.plan`: :func:`plan` (paths -> chunks) and :func:`jobs_for` (one
  :class:`Job` per distinct :func:`chunk_key`);
* :mod:`~pipeline.batch.results`: :class:`ResultLine`, the typed line, and :class:`ResultsLog`,
  the append-only results JSONL (one fsynced line per chunk, a torn last line cut off and its
  chunk redone, one writer at a time);
* :mod:`~pipeline.batch.run`: :func:`process_chunk` runs one chunk on an opened ``Engine``
  and never raises for a bad chunk or a model failure; :class:`ChunkWorker` holds one Engine
  and runs chunk after chunk; :func:`run_batch` is the driver: plan, resume, hand the jobs to
  a backend (``local``: this process; ``ray``: one ChunkWorker per Ray actor), and write every
  line it returns, resumably;
* :mod:`~pipeline.batch.ray_backend`: :class:`RayBackend` (imports Ray only when it starts).
"""

from pipeline.batch.plan import (
    BatchError,
    FileIssue,
    Job,
    Plan,
    chunk_key,
    jobs_for,
    kb_content_hash,
    plan,
    source_files,
)
from pipeline.batch.results import (
    AltResult,
    Location,
    ResultLine,
    ResultsLog,
    ResumeState,
    SettingsSummary,
    file_error_line,
    parse_result_line,
)
from pipeline.batch.run import (
    BACKENDS,
    BatchReport,
    ChunkWorker,
    LocalBackend,
    WorkerMemory,
    error_line,
    make_backend,
    process_chunk,
    run_batch,
    warm_up,
)
from pipeline.batch.splitter import DEFAULT_MAX_LINES, Chunk, split_source

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_LINES",
    "AltResult",
    "BatchError",
    "BatchReport",
    "Chunk",
    "ChunkWorker",
    "FileIssue",
    "Job",
    "LocalBackend",
    "Location",
    "Plan",
    "ResultLine",
    "ResultsLog",
    "ResumeState",
    "SettingsSummary",
    "WorkerMemory",
    "chunk_key",
    "error_line",
    "file_error_line",
    "jobs_for",
    "kb_content_hash",
    "make_backend",
    "parse_result_line",
    "plan",
    "process_chunk",
    "run_batch",
    "source_files",
    "split_source",
    "warm_up",
]
