"""Files or folders -> chunk jobs, one per distinct key (what a driver does before any model runs).

A chunk's key is sha256(chunk input sha256, ``Settings.cache_key()``, KB content hash), the input being the
chunk's text and its file's declarations (``Chunk.context``): the same code in the same file context under the
same settings and KB is never run twice, and changing any of them runs it again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.batch.splitter import DEFAULT_MAX_LINES, Chunk, split_source
from pipeline.chunk import InputError, prepare_chunk
from pipeline.settings import Settings

SOURCE_SUFFIXES = (".gd",)


class BatchError(RuntimeError):
    """The batch cannot start (nothing to do, output locked, ...); the message says why."""


def chunk_key(chunk_sha256: str, settings: Settings, kb_hash: str) -> str:
    """What a result line is valid for: this code, these settings, this KB."""
    return hashlib.sha256(f"{chunk_sha256}\n{settings.cache_key()}\n{kb_hash}".encode()).hexdigest()


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


@dataclass
class Job:
    key: str
    chunk: Chunk
    duplicates: list[Chunk] = field(default_factory=list)  # same code elsewhere: run once, listed


def jobs_for(p: Plan, settings: Settings, kb_hash: str) -> list[Job]:
    """One job per distinct key, in file order; identical chunks are run once."""
    by_key: dict[str, Job] = {}
    for c in p.chunks:
        key = chunk_key(c.input_sha256, settings, kb_hash)
        if key in by_key:
            by_key[key].duplicates.append(c)
        else:
            by_key[key] = Job(key, c)
    return list(by_key.values())


def kb_content_hash(kb: Sequence[Path] | None = None) -> str:
    """The KB's content hash without building indexes (what a driver needs to compute keys).

    Equal to ``Engine.open(kb).store.content_hash``: the built-in KB's comes from its
    manifest (as ``open_kb`` does), a user KB's from loading it.
    """
    from pipeline.kb.store import ensure_builtin, open_kb

    if kb:
        return open_kb(kb).content_hash
    return str(json.loads((ensure_builtin() / "manifest.json").read_text())["content_hash"])
