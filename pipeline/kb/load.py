"""Load KB records from JSONL files or folders, reporting every bad line.

Nothing is dropped silently: each rejected line becomes a ``LoadIssue`` with
``file:line: reason``; the good lines still load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from pipeline.errors import NotUtf8, decode_line, describe
from pipeline.records import RECORD_ADAPTER, AnyRecord

MAX_LINE_BYTES = 2_000_000  # a single record larger than this is refused, not parsed


@dataclass(frozen=True)
class LoadIssue:
    file: str
    line: int
    reason: str
    severity: str = "error"  # "error": line skipped; "warning": line loaded

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class LoadResult:
    records: list[AnyRecord] = field(default_factory=list)
    issues: list[LoadIssue] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[LoadIssue]:
        return [i for i in self.issues if i.severity == "error"]


def parse_lines(lines: Iterable[bytes], name: str, result: LoadResult, seen: dict[str, str]) -> None:
    """Parse JSONL byte lines into ``result``; ``seen`` maps id -> first location."""
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            result.issues.append(
                LoadIssue(name, lineno, f"line is {len(raw):,} bytes, over the {MAX_LINE_BYTES:,}-byte limit")
            )
            continue
        try:
            text = decode_line(raw)
        except NotUtf8 as exc:
            result.issues.append(LoadIssue(name, lineno, str(exc)))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            result.issues.append(LoadIssue(name, lineno, f"invalid JSON: {exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(obj, dict):
            result.issues.append(LoadIssue(name, lineno, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        try:
            record = RECORD_ADAPTER.validate_python(obj)
        except ValidationError as exc:
            result.issues.append(LoadIssue(name, lineno, f"invalid record: {describe(exc)}"))
            continue
        where = f"{name}:{lineno}"
        if record.id in seen:
            result.issues.append(
                LoadIssue(name, lineno, f"duplicate id {record.id!r} (first at {seen[record.id]}); kept the first")
            )
            continue
        seen[record.id] = where
        result.records.append(record)


def jsonl_files(paths: Iterable[Path]) -> list[Path]:
    """Expand folders to their ``*.jsonl`` files, sorted for a deterministic order."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(p.rglob("*.jsonl")))
        else:
            out.append(p)
    return out


def load_jsonl(paths: Iterable[Path | str]) -> LoadResult:
    result = LoadResult()
    seen: dict[str, str] = {}
    for path in jsonl_files(Path(p) for p in paths):
        name = str(path)
        try:
            with path.open("rb") as fh:
                result.files.append(name)
                parse_lines(fh, name, result, seen)
        except OSError as exc:
            result.issues.append(LoadIssue(name, 0, f"cannot read file: {exc.strerror or exc}"))
    return result


def load_bytes(data: bytes, name: str) -> LoadResult:
    """Load one uploaded JSONL file held in memory (the dashboard's upload)."""
    result = LoadResult(files=[name])
    parse_lines(data.splitlines(), name, result, {})
    return result
