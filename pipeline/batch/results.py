"""The results file: one :class:`ResultLine` per chunk, appended, fsynced, resumable, one writer at a time.

Each line is written whole and fsynced before the next chunk starts, so a killed run loses at
most the chunk in progress. A write that fails midway (disk full) is cut back off at once; a
kill mid-write leaves a last line without its newline, which the next open cuts off (and
reports), so the file only ever holds complete lines and that chunk is simply redone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from filelock import lock_descriptor
from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from pipeline.batch.plan import BatchError, FileIssue, chunk_key
from pipeline.chunk import InputError
from pipeline.settings import Settings
from pipeline.trace import Status, Verdict

log = logging.getLogger(__name__)

RESULT_VERSION = 1


class _Row(BaseModel):
    # "ignore": a line written by a later version with more fields still reads (and still skips its chunk).
    model_config = ConfigDict(frozen=True, extra="ignore")


class Location(_Row):
    file: str
    chunk: int | None  # 0-based position among the file's chunks; None: the line is about the whole file
    start_line: int | None  # 1-based, inclusive
    end_line: int | None


class AcceptedRecord(_Row):
    record_id: str
    source: str
    doc_path: str | None
    evidence: list[str]  # verified strings found in both the chunk and the record


class RankedRecord(_Row):
    rank: int
    record_id: str
    source: str
    doc_path: str | None
    score: float
    verdict: Verdict


class AltResult(_Row):
    """What one alternative (D or F) made of the chunk."""

    status: Literal["ok", "error"]  # error: a stage failed or some verdict is error/timeout
    messages: list[str]  # why, in words
    validated: Status  # the validate stage's status ("not_run" without the validator)
    accepted: list[AcceptedRecord]
    top: list[RankedRecord]


class SettingsSummary(_Row):
    """The settings a reader of results needs; the full set is behind ``settings_hash``."""

    alternatives: list[str]
    fusion: str
    final_k: int
    alpha: float
    embedder: str | None
    reranker: str
    run_validator: bool
    validator_model: str
    accept_policy: str
    settings_hash: str

    @classmethod
    def of(cls, s: Settings) -> SettingsSummary:
        return cls(alternatives=list(s.alternatives), fusion=s.fusion, final_k=s.final_k, alpha=s.alpha,
                   embedder=s.embedder, reranker=s.reranker, run_validator=s.run_validator,
                   validator_model=s.validator_model, accept_policy=s.accept_policy,
                   settings_hash=hashlib.sha256(s.cache_key().encode()).hexdigest()[:16])


# Left out of a line when empty: a line says either how the chunk went or why it failed.
_OMIT_IF_NONE = frozenset({"duplicates", "error", "error_type", "language", "notices", "alternatives", "ms"})


class ResultLine(Location):
    """One line of the results file: a chunk's result, or why a chunk (or a whole file) has none.

    ``key`` = sha256(chunk sha256, settings, KB hash): the newest line per key is current.
    Exactly one of ``error`` (then ``ok`` is False) and ``alternatives`` is set.
    """

    kind: str | None = None  # header | func | class; None for a whole-file error
    name: str | None = None
    part: str | None = None  # "2/3" when a long block was split
    sha256: str  # of the chunk text (of the file's bytes for a file error)
    key: str
    kb: str  # KB content hash
    settings: SettingsSummary
    version: int = RESULT_VERSION
    ok: bool
    duplicates: list[Location] | None = None  # the same code elsewhere, run once
    error: str | None = None
    error_type: str | None = None
    language: str | None = None
    notices: list[str] | None = None
    alternatives: dict[str, AltResult] | None = None
    ms: float | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> ResultLine:
        if (self.error is None) == (self.alternatives is None):
            raise ValueError("a result line has either an error or alternatives")
        if self.error is not None and self.ok:
            raise ValueError("an error line cannot be ok")
        return self

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None or k not in _OMIT_IF_NONE}

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error``/``error_type``/``ok`` of a line whose chunk failed: an InputError says it in its own words."""
    kind = type(exc).__name__
    return {"error": str(exc) if isinstance(exc, InputError) else f"{kind}: {exc}", "error_type": kind, "ok": False}


def file_error_line(issue: FileIssue, settings: Settings, kb_hash: str) -> ResultLine:
    return ResultLine(file=issue.file, chunk=None, start_line=None, end_line=None, sha256=issue.sha256,
                      key=chunk_key(issue.sha256, settings, kb_hash), kb=kb_hash,
                      settings=SettingsSummary.of(settings), error=issue.error, error_type="InputError", ok=False)


def parse_result_line(raw: bytes) -> ResultLine | None:
    """A result line as written by this module, or None for anything else."""
    try:
        return ResultLine.model_validate_json(raw)
    except (ValidationError, ValueError):
        return None


@dataclass
class ResumeState:
    """What an existing results file holds, as read when a batch (re)starts."""

    lines: dict[str, ResultLine] = field(default_factory=dict)  # key -> last result line for it
    n_lines: int = 0
    torn: str | None = None  # what was cut off the end, said in words
    bad: list[str] = field(default_factory=list)  # unreadable complete lines (their chunks are redone)

    def done(self, retry_errors: bool = False) -> set[str]:
        return {k for k, v in self.lines.items() if not retry_errors or v.ok}


class ResultsLog:
    """Append-only JSONL of :class:`ResultLine`; one writer at a time (the file itself is locked)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def open(self) -> ResumeState:
        existed = self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._lock(fd)
            state = self._scan(fd)  # under the lock: no other writer is mid-line
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        if not existed:
            _fsync_dir(self.path.parent)  # the new file's name must survive a crash too
        return state

    def _lock(self, fd: int) -> None:
        """Lock the results file itself (flock; LockFileEx on Windows); closing the descriptor releases it."""
        try:
            locked = lock_descriptor(fd, blocking=False)
        except OSError as exc:  # e.g. a network filesystem without locks
            log.warning("cannot lock %s (%s); a second batch writing it at the same time would not be noticed",
                        self.path, exc)
            return
        if not locked:
            raise BatchError(f"{self.path} is being written by another batch run; wait for it to "
                             "finish or choose another --out")

    def _scan(self, fd: int) -> ResumeState:
        state = ResumeState()
        good_end = 0
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(iter(fh.readline, b""), start=1):
                if not raw.endswith(b"\n"):
                    self._last_line(fd, raw, lineno, good_end, state)
                    break
                good_end += len(raw)
                line = parse_result_line(raw)
                if line is None:
                    if raw.strip():
                        state.bad.append(f"{self.path}:{lineno}: not a result line; ignored (its chunk is redone)")
                    continue
                state.lines[line.key] = line
                state.n_lines += 1
        return state

    def _last_line(self, fd: int, raw: bytes, lineno: int, good_end: int, state: ResumeState) -> None:
        """A last line without its newline: whole (only the separator was lost) or torn (cut off)."""
        line = parse_result_line(raw)
        if line is not None:
            _write_all(fd, b"\n")
            state.lines[line.key] = line
            state.n_lines += 1
        else:
            os.ftruncate(fd, good_end)
            preview = raw[:60].decode("utf-8", errors="replace")
            state.torn = (f"{self.path}:{lineno}: the last line was cut off by an interrupted write "
                          f"({len(raw):,} bytes, starting {preview!r}); removed, its chunk is redone")
        os.fsync(fd)

    def append(self, line: ResultLine) -> None:
        if self._fd is None:
            raise RuntimeError("ResultsLog.append before open()")
        data = (line.to_json() + "\n").encode("utf-8")
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except BaseException:
            # Never leave half a line for the next append to glue onto; if even this fails,
            # the next open() finds the torn line and cuts it.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None

    def __enter__(self) -> ResultsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
