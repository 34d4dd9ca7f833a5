"""Batch mode: split files or folders of GDScript into chunks and run the engine on each.

The building blocks are plain functions so a cluster engine (Ray, Spark,
joblib) can use them as tasks, see docs/scaling.md:

* :func:`plan` turns paths into :class:`Chunk` jobs (top-level functions and
  classes, a header chunk for non-trivial top-level declarations, long blocks
  split at blank lines), deduplicated by :func:`chunk_key`.
* :func:`process_chunk` runs one chunk on an opened :class:`Engine` and
  returns its result line; it never raises for a bad chunk or a model failure.
* :class:`ResultsLog` is the append-only results JSONL: one fsynced line per
  chunk, a torn last line (a kill mid-write) cut off and its chunk redone, one
  writer at a time (file lock).
* :func:`run_batch` wires them together on one machine, resumably.

A chunk's key is sha256(chunk sha256, ``Settings.cache_key()``, KB content
hash): the same code under the same settings and KB is never run twice, and
changing any of the three runs it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.chunk import InputError, prepare_chunk
from pipeline.settings import Settings
from pipeline.trace import ProgressEvent

if TYPE_CHECKING:
    from pipeline.engine import Engine

try:  # POSIX only; elsewhere two concurrent writers are simply not detected
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

RESULT_VERSION = 1
DEFAULT_MAX_LINES = 120
MIN_HEADER_LINES = 2  # a header with fewer substantive lines says too little to retrieve for
SOURCE_SUFFIXES = (".gd",)

ProgressFn = Callable[[ProgressEvent], None]


class BatchError(RuntimeError):
    """The batch cannot start (nothing to do, output locked, ...); the message says why."""


# --------------------------------------------------------------------------
# Splitting a file into chunks

_FUNC_RE = re.compile(r"^(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:static\s+)?func\b\s*(\w*)")
_CLASS_RE = re.compile(r"^class\s+(\w+)")
_ANNOTATION_RE = re.compile(r"^@[\w.]+\s*(?:\(.*\))?\s*(?:#.*)?$")  # an annotation alone on its line
_DECL_RE = re.compile(r"^(?:extends|class_name|@tool|@icon|@static_unload)\b")  # say nothing to retrieve for


@dataclass(frozen=True)
class _Item:
    """One top-level statement: its first row, its kind and (for func/class) its name."""

    start: int
    kind: str  # func | class | comment | annotation | decl | stmt
    name: str | None = None
    end: int = -1  # last row: the one before the next item's start


def _classify(line: str) -> tuple[str, str | None]:
    if line.startswith("#"):
        return "comment", None
    if m := _FUNC_RE.match(line):
        return "func", m.group(1) or None
    if m := _CLASS_RE.match(line):
        return "class", m.group(1)
    if _DECL_RE.match(line):
        return "decl", None
    if _ANNOTATION_RE.match(line):
        return "annotation", None
    return "stmt", None


def _at_column_0(line: str) -> bool:
    return bool(line.strip()) and line[0] not in " \t"


def _scan_line(line: str, depth: int, triple: str | None) -> tuple[int, str | None, bool]:
    """Bracket depth and open triple-quoted string after ``line``, and whether it continues with ``\\``.

    Enough of GDScript's lexer to know where a logical line starts: a multi-line
    dict, call or string may have lines at column 0 that start no statement.
    """
    i, n = 0, len(line)
    while i < n:
        if triple is not None:
            j = line.find(triple, i)
            if j < 0:
                return depth, triple, False
            i, triple = j + 3, None
            continue
        c = line[i]
        if c == "#":
            break
        if c in "\"'":
            if line.startswith(c * 3, i):
                triple, i = c * 3, i + 3
                continue
            i += 1
            while i < n and line[i] != c:
                i += 2 if line[i] == "\\" else 1
            i += 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        i += 1
    cont = triple is None and line.rstrip().endswith("\\") and "#" not in line
    return depth, triple, cont


def _starts_by_lines(lines: Sequence[str]) -> list[int]:
    """Rows where a top-level statement starts, by a line scan (any text, also broken code)."""
    starts: list[int] = []
    depth, triple, cont = 0, None, False
    for row, line in enumerate(lines):
        if depth == 0 and triple is None and not cont and _at_column_0(line):
            starts.append(row)
        depth, triple, cont = _scan_line(line, depth, triple)
    # A column-0 comment followed by indented code is inside a body (commented-out code), not a statement.
    # One backward pass: for each row, is the next line of code (not blank, not a column-0 comment) indented?
    start_set = set(starts)
    body_follows = [False] * (len(lines) + 1)
    for row in range(len(lines) - 1, -1, -1):
        line = lines[row]
        if not line.strip() or (row in start_set and line.startswith("#")):
            body_follows[row] = body_follows[row + 1]
        else:
            body_follows[row] = row not in start_set
    return [row for i, row in enumerate(starts)
            if not (i > 0 and lines[row].startswith("#") and body_follows[row + 1])]


def _starts_by_tree_sitter(text: str) -> list[int] | None:
    """Rows where top-level statements start, from tree-sitter-gdscript; None if it cannot parse the text."""
    from pipeline.analyzer import _get_parser

    parser = _get_parser()
    if parser is None:
        return None
    tree = parser.parse(text.encode("utf-8"))
    if tree.root_node.has_error:
        return None
    rows = [n.start_point.row for n in tree.root_node.children if n.start_point.column == 0]
    return sorted(set(rows))


def _items(lines: Sequence[str], starts: list[int]) -> list[_Item]:
    first = next((r for r, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return []
    if not starts or starts[0] > first:
        starts = [first, *starts]  # indented code before any statement: keep it, as a statement
    items = []
    for i, row in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines) - 1
        kind, name = _classify(lines[row]) if row != first or _at_column_0(lines[row]) else ("stmt", None)
        items.append(_Item(row, kind, name, end))
    return items


@dataclass(frozen=True)
class Span:
    kind: str  # header | func | class
    name: str | None
    start: int  # 0-based rows, inclusive
    end: int


def _substantive_lines(lines: Sequence[str], items: Sequence[_Item]) -> int:
    n = 0
    for it in items:
        if it.kind in ("comment", "annotation", "decl"):
            continue
        n += sum(1 for r in range(it.start, it.end + 1) if lines[r].strip() and not lines[r].lstrip().startswith("#"))
    return n


def top_level_spans(lines: Sequence[str], starts: list[int], min_header_lines: int = MIN_HEADER_LINES) -> list[Span]:
    """Group top-level statements into func/class spans plus an optional header.

    Comment and annotation lines directly above a function (no blank line
    between) belong to it; statements between two functions go with the next
    one; statements after the last one go with it; statements before the first
    function form the header, kept only when it has ``min_header_lines``
    substantive lines (``extends``/``class_name``/``@tool`` do not count).
    """
    items = _items(lines, starts)
    spans: list[Span] = []
    pending: list[_Item] = []
    seen_def = False

    def header(group: list[_Item]) -> None:
        if group and _substantive_lines(lines, group) >= min_header_lines:
            spans.append(Span("header", None, group[0].start, group[-1].end))

    for it in items:
        if it.kind not in ("func", "class"):
            pending.append(it)
            continue
        k = len(pending)
        while k > 0 and pending[k - 1].kind in ("comment", "annotation") and pending[k - 1].end == pending[k - 1].start:
            k -= 1
        if seen_def:
            start = pending[0].start if pending else it.start
        else:
            header(pending[:k])
            start = pending[k].start if k < len(pending) else it.start
        spans.append(Span(it.kind, it.name, start, it.end))
        seen_def, pending = True, []
    if pending:
        if seen_def:
            last = spans[-1]
            spans[-1] = Span(last.kind, last.name, last.start, pending[-1].end)
        else:
            header(pending)
    return spans


def _trim(lines: Sequence[str], start: int, end: int) -> tuple[int, int] | None:
    while start <= end and not lines[start].strip():
        start += 1
    while end >= start and not lines[end].strip():
        end -= 1
    return (start, end) if start <= end else None


def split_long(lines: Sequence[str], start: int, end: int, max_lines: int) -> list[tuple[int, int]]:
    """Cut rows start..end into pieces of at most ``max_lines``, at the last blank line that fits.

    A stretch with no blank line is cut hard at ``max_lines``.
    """
    out: list[tuple[int, int]] = []
    span = _trim(lines, start, end)
    while span is not None:
        s, e = span
        if e - s + 1 <= max_lines:
            out.append((s, e))
            break
        limit = s + max_lines  # a blank line here still lets s..limit-1 fit
        cut = next((r for r in range(limit, s, -1) if not lines[r].strip()), None)
        piece = _trim(lines, s, (cut if cut is not None else limit) - 1)
        if piece:
            out.append(piece)
        span = _trim(lines, cut + 1 if cut is not None else limit, e)
    return out


@dataclass(frozen=True)
class Chunk:
    """One unit of batch work: a piece of one file, with where it came from."""

    file: str
    index: int  # 0-based position among the file's chunks
    start_line: int  # 1-based, inclusive
    end_line: int
    kind: str  # header | func | class
    name: str | None
    part: str | None  # "2/3" when a long block was split at blank lines
    text: str
    notices: tuple[str, ...] = ()  # from reading the file (e.g. decoded as Latin-1)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def location(self) -> dict[str, Any]:
        return {"file": self.file, "chunk": self.index, "start_line": self.start_line, "end_line": self.end_line}


def split_source(text: str, file: str = "<text>", max_lines: int = DEFAULT_MAX_LINES, *,
                 parser: str = "auto", notices: Sequence[str] = (),
                 min_header_lines: int = MIN_HEADER_LINES) -> list[Chunk]:
    """Split GDScript source into chunks by top-level function/class.

    ``parser``: "tree-sitter", "lines", or "auto" (tree-sitter when it parses the
    text without errors, else the line scanner, which copes with broken code
    and other languages). Tabs and spaces are both indentation.
    """
    if max_lines < 1:
        raise ValueError("max_lines must be at least 1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    starts = _starts_by_tree_sitter(text) if parser in ("auto", "tree-sitter") else None
    if starts is None:
        if parser == "tree-sitter":
            raise ValueError("tree-sitter-gdscript cannot parse this text")
        starts = _starts_by_lines(lines)
    chunks: list[Chunk] = []
    for span in top_level_spans(lines, starts, min_header_lines):
        pieces = split_long(lines, span.start, span.end, max_lines)
        for p, (s, e) in enumerate(pieces, start=1):
            chunks.append(Chunk(file, len(chunks), s + 1, e + 1, span.kind, span.name,
                                f"{p}/{len(pieces)}" if len(pieces) > 1 else None,
                                "\n".join(lines[s:e + 1]) + "\n", tuple(notices)))
    return chunks


# --------------------------------------------------------------------------
# Planning: paths -> deduplicated jobs


def chunk_key(chunk_sha256: str, settings: Settings, kb_hash: str) -> str:
    """What a result line is valid for: this code, these settings, this KB."""
    return hashlib.sha256(f"{chunk_sha256}\n{settings.cache_key()}\n{kb_hash}".encode()).hexdigest()


def settings_summary(s: Settings) -> dict[str, Any]:
    """The settings a reader of results needs; the full set is behind ``settings_hash``."""
    return {"alternatives": list(s.alternatives), "fusion": s.fusion, "final_k": s.final_k,
            "alpha": s.alpha, "embedder": s.embedder, "reranker": s.reranker, "run_validator": s.run_validator,
            "validator_model": s.validator_model, "accept_policy": s.accept_policy,
            "settings_hash": hashlib.sha256(s.cache_key().encode()).hexdigest()[:16]}


@dataclass(frozen=True)
class FileIssue:
    """A file that yields no chunk job: unreadable or binary (``error``), or empty (``error`` None)."""

    file: str
    sha256: str
    error: str | None


@dataclass
class Plan:
    chunks: list[Chunk] = field(default_factory=list)
    issues: list[FileIssue] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def source_files(paths: Iterable[Path | str]) -> list[Path]:
    """Files given, plus every ``.gd`` under folders given (hidden folders like .godot skipped), sorted."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SOURCE_SUFFIXES
                           and not any(part.startswith(".") for part in f.relative_to(p).parts))
        elif p.exists():
            found = [p]
        else:
            raise BatchError(f"no such file or folder: {p}")
        for f in found:
            real = f.resolve()
            if real not in seen:
                seen.add(real)
                out.append(f)
    return out


def plan(paths: Iterable[Path | str], max_lines: int = DEFAULT_MAX_LINES, parser: str = "auto") -> Plan:
    result = Plan()
    for path in source_files(paths):
        name = str(path)
        result.files.append(name)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            result.issues.append(FileIssue(name, "", f"cannot read {name}: {exc.strerror or exc}"))
            continue
        sha = hashlib.sha256(raw).hexdigest()
        if not raw.strip():
            result.issues.append(FileIssue(name, sha, None))
            continue
        try:
            # The same checks and decoding as a single chunk (binary refused, non-UTF-8 read as Latin-1).
            info = prepare_chunk(raw, max_bytes=len(raw) * 4 + 16, truncate=False)
        except InputError as exc:
            result.issues.append(FileIssue(name, sha, str(exc)))
            continue
        notices = [f"{name}: {n}" for n in info.notices]
        chunks = split_source(info.text, name, max_lines, parser=parser, notices=notices)
        if not chunks:
            result.issues.append(FileIssue(name, sha, None))
        result.chunks.extend(chunks)
    return result


# --------------------------------------------------------------------------
# One chunk -> one result line (the task a cluster worker runs)


def _alt_result(alt: Any, top: int) -> dict[str, Any]:
    messages = [f"{st.name}: {st.message}" for st in alt.stages if st.status == "error"]
    bad_verdicts = sorted({it.verdict for it in alt.final if it.verdict in ("error", "timeout")})
    if bad_verdicts:
        messages.append("validator verdicts: " + ", ".join(bad_verdicts))
    validate = alt.stage("validate")
    return {
        "status": "error" if alt.status == "error" or messages else "ok",
        "messages": messages,
        "validated": validate.status if validate is not None else "not_run",
        "accepted": [{"record_id": it.record_id, "source": it.source, "doc_path": it.doc_path,
                      "evidence": it.evidence} for it in alt.final if it.accepted],
        "top": [{"rank": it.rank, "record_id": it.record_id, "source": it.source, "doc_path": it.doc_path,
                 "score": round(it.score, 6), "verdict": it.verdict} for it in alt.final[:top]],
    }


def error_line(base: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    kind = type(exc).__name__
    msg = str(exc) if isinstance(exc, InputError) else f"{kind}: {exc}"
    return {**base, "error": msg, "error_type": kind, "ok": False}


def process_chunk(engine: Engine, chunk: Chunk, settings: Settings, *, top: int = 5,
                  truncate: bool = False, duplicates: Sequence[Chunk] = ()) -> dict[str, Any]:
    """Run one chunk and return its result line; a bad chunk or a failing model gives an error line."""
    kb_hash = engine.store.content_hash
    line: dict[str, Any] = {
        **chunk.location(), "kind": chunk.kind, "name": chunk.name, "part": chunk.part,
        "sha256": chunk.sha256, "key": chunk_key(chunk.sha256, settings, kb_hash), "kb": kb_hash,
        "settings": settings_summary(settings), "version": RESULT_VERSION,
    }
    if duplicates:
        line["duplicates"] = [d.location() for d in duplicates]
    t0 = time.perf_counter()
    try:
        info = prepare_chunk(chunk.text, truncate=truncate)
        trace = engine.run(info, settings)
    except Exception as exc:  # one bad chunk or model failure must not stop the batch
        if not isinstance(exc, InputError):
            log.warning("chunk %s#%d failed: %s", chunk.file, chunk.index, exc, exc_info=True)
        return error_line(line, exc) | {"ms": round((time.perf_counter() - t0) * 1000, 1)}
    alts = {name: _alt_result(alt, top) for name, alt in trace.alternatives.items()}
    line.update(language=info.language, notices=[*chunk.notices, *info.notices], alternatives=alts,
                ok=all(a["status"] == "ok" for a in alts.values()),
                ms=round((time.perf_counter() - t0) * 1000, 1))
    return line


def file_error_line(issue: FileIssue, settings: Settings, kb_hash: str) -> dict[str, Any]:
    base = {"file": issue.file, "chunk": None, "start_line": None, "end_line": None, "sha256": issue.sha256,
            "key": chunk_key(issue.sha256, settings, kb_hash), "kb": kb_hash,
            "settings": settings_summary(settings), "version": RESULT_VERSION}
    return {**base, "error": issue.error, "error_type": "InputError", "ok": False}


# --------------------------------------------------------------------------
# The results file


@dataclass
class ResumeState:
    """What an existing results file holds, as read when a batch (re)starts."""

    lines: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> last result line for it
    n_lines: int = 0
    torn: str | None = None  # what was cut off the end, said in words
    bad: list[str] = field(default_factory=list)  # unreadable complete lines (their chunks are redone)

    def done(self, retry_errors: bool = False) -> set[str]:
        return {k for k, v in self.lines.items() if not retry_errors or v.get("ok") is True}


def parse_result_line(raw: bytes) -> dict[str, Any] | None:
    """A result line as written by this module, or None for anything else."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("key"), str):
        return None
    if not (isinstance(obj.get("error"), str) or isinstance(obj.get("alternatives"), dict)):
        return None
    return obj


class ResultsLog:
    """Append-only JSONL of result lines; one writer at a time.

    Each line is written whole and fsynced before the next chunk starts, so a
    killed run loses at most the chunk in progress. A write that fails midway
    (disk full) is cut back off at once; a kill mid-write leaves a last line
    without its newline, which the next open cuts off (and reports), so the
    file only ever holds complete lines and that chunk is simply redone.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def open(self) -> ResumeState:
        existed = self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise BatchError(f"{self.path} is being written by another batch run; wait for it to "
                                     "finish or choose another --out") from None
            state = self._scan(fd)  # under the lock: no other writer is mid-line
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        if not existed:
            _fsync_dir(self.path.parent)  # the new file's name must survive a crash too
        return state

    def _scan(self, fd: int) -> ResumeState:
        state = ResumeState()
        good_end = 0
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(iter(fh.readline, b""), start=1):
                if not raw.endswith(b"\n"):
                    obj = parse_result_line(raw)
                    if obj is not None:
                        # Complete JSON whose newline was lost: the result is whole, only the separator is missing.
                        _write_all(fd, b"\n")
                        state.lines[obj["key"]] = obj
                        state.n_lines += 1
                    else:
                        os.ftruncate(fd, good_end)
                        preview = raw[:60].decode("utf-8", errors="replace")
                        state.torn = (f"{self.path}:{lineno}: the last line was cut off by an interrupted write "
                                      f"({len(raw):,} bytes, starting {preview!r}); removed, its chunk is redone")
                    os.fsync(fd)
                    break
                good_end += len(raw)
                obj = parse_result_line(raw)
                if obj is None:
                    if raw.strip():
                        state.bad.append(f"{self.path}:{lineno}: not a result line; ignored (its chunk is redone)")
                    continue
                state.lines[obj["key"]] = obj
                state.n_lines += 1
        return state

    def append(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            raise RuntimeError("ResultsLog.append before open()")
        data = (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")
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


# --------------------------------------------------------------------------
# Running a batch on this machine


def kb_content_hash(kb: Sequence[Path] | None = None) -> str:
    """The KB's content hash without building indexes (what a driver needs to compute keys).

    Equal to ``Engine.open(kb).store.content_hash``: the built-in KB's comes from its
    manifest (as ``open_kb`` does), a user KB's from loading it.
    """
    from pipeline.kb.store import ensure_builtin, open_kb

    if kb:
        return open_kb(kb).content_hash
    return str(json.loads((ensure_builtin() / "manifest.json").read_text())["content_hash"])


@dataclass
class Job:
    key: str
    chunk: Chunk
    duplicates: list[Chunk] = field(default_factory=list)  # same code elsewhere: run once, listed


def jobs_for(p: Plan, settings: Settings, kb_hash: str) -> list[Job]:
    """One job per distinct key, in file order; identical chunks are run once."""
    by_key: dict[str, Job] = {}
    for c in p.chunks:
        key = chunk_key(c.sha256, settings, kb_hash)
        if key in by_key:
            by_key[key].duplicates.append(c)
        else:
            by_key[key] = Job(key, c)
    return list(by_key.values())


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


def run_batch(paths: Sequence[Path | str], out: Path, settings: Settings, *,
              kb: Sequence[Path] | None = None, engine: Engine | None = None,
              max_lines: int = DEFAULT_MAX_LINES, retry_errors: bool = False, top: int = 5,
              truncate: bool = False, show_progress: bool = True, echo: Callable[[str], None] = _stderr,
              engine_progress: ProgressFn | None = None) -> BatchReport:
    """Run every chunk under ``paths`` not yet in ``out``; append one line per chunk as it finishes.

    ``engine`` is opened (once) only if there is work left. KeyboardInterrupt
    propagates after the results file is closed; everything written stays valid.
    """
    from tqdm import tqdm

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
            if line["key"] not in done:
                results.append(line)
                done.add(line["key"])
                report.errors += 1
        todo = [j for j in jobs if j.key not in done]
        report.skipped = len(jobs) - len(todo)
        if todo and engine is None:
            from pipeline.engine import Engine

            engine = Engine.open(kb, progress=engine_progress or (lambda *_: None))
            if engine.store.content_hash != kb_hash:  # the KB changed under us: keys would lie
                raise BatchError("the KB changed while the batch was starting; run it again")
        if todo and engine is not None:
            warm_up(engine, settings, engine_progress)
        bar = tqdm(total=len(jobs), initial=report.skipped, desc="batch", unit="chunk", file=sys.stderr,
                   disable=not show_progress, dynamic_ncols=True)
        try:
            for job in todo:
                assert engine is not None
                line = process_chunk(engine, job.chunk, settings, top=top, truncate=truncate,
                                     duplicates=job.duplicates)
                results.append(line)
                report.done += 1
                if "error" in line:
                    report.errors += 1
                elif not line["ok"]:
                    report.degraded += 1
                bar.update(1)
                bar.set_postfix(errors=report.errors, refresh=False)
        finally:
            bar.close()
    return report
