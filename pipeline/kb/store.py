"""An opened knowledge base: records plus their identity (content hash) and load issues."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import config
from pipeline.kb.build import KIND_FILES, Progress, build, builder_digest, content_hash, no_progress
from pipeline.kb.load import LoadResult, load_jsonl
from pipeline.records import AnyRecord


@dataclass
class KBStore:
    name: str
    records: list[AnyRecord]
    content_hash: str
    issues: list[str] = field(default_factory=list)
    by_id: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {r.id: i for i, r in enumerate(self.records)}

    @property
    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in KIND_FILES}
        for r in self.records:
            out[r.kind] += 1
        return out

    def get(self, record_id: str) -> AnyRecord:
        return self.records[self.by_id[record_id]]

    def skipped(self, shown: int = 3) -> list[str]:
        """What to tell a user whose KB files had bad lines: how many were skipped, then the first (file:line)."""
        if not self.issues:
            return []
        n = len(self.issues)
        rest = f"; `python -m pipeline kb stats --kb …` lists all {n}" if n > shown else ""
        return [f"{n} line(s) of the KB skipped{rest}:", *self.issues[:shown]]


def from_load(result: LoadResult, name: str) -> KBStore:
    records = sorted(result.records, key=lambda r: r.id)
    return KBStore(name, records, content_hash(records), [str(i) for i in result.issues])


class KBNotBuiltError(FileNotFoundError):
    """The built-in KB has not been built in this checkout yet."""


def ensure_builtin(progress: Progress | None = None) -> Path:
    """Build the built-in KB if it is missing (first start on a fresh clone); its folder.

    The one place that builds on demand: ``python -m pipeline kb ensure`` (``make kb``) and
    the engine call it before :func:`open_kb`, which only reads.
    """
    out = config.kb_dir()
    manifest = out / "manifest.json"
    try:
        current = json.loads(manifest.read_text()).get("builder") == builder_digest(config.docs_root())
    except (OSError, ValueError):
        current = False  # missing or unreadable: build
    if not current:  # missing, or built by other reader code or from another corpus
        build(config.docs_root(), out, progress or no_progress)
    return out


def open_kb(paths: Sequence[Path] | None = None) -> KBStore:
    """The KB in ``paths`` (JSONL files or folders), or else the built-in one, which must have been built.

    Raises ``KBNotBuiltError`` (a ``FileNotFoundError``) naming the fix when the built-in KB is missing.
    """
    if paths:
        return _open_user(paths)
    out = config.kb_dir()
    if not (out / "manifest.json").is_file():
        raise KBNotBuiltError(
            f"the built-in KB has not been built yet ({out / 'manifest.json'} is missing); "
            "build it with `python -m pipeline kb ensure` (or `make kb`)"
        )
    result = load_jsonl([out / name for name in KIND_FILES.values()])
    if result.errors:
        raise ValueError(f"the built-in KB in {out} is damaged; rebuild it with `python -m pipeline kb build`:\n  "
                         + "\n  ".join(map(str, result.errors[:5])))
    manifest = json.loads((out / "manifest.json").read_text())
    return KBStore("built-in Godot 4.7 docs", sorted(result.records, key=lambda r: r.id),
                   manifest["content_hash"], [])


def _open_user(paths: Sequence[Path]) -> KBStore:
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"KB path not found: {', '.join(missing)}")
    result = load_jsonl(paths)
    if not result.records:
        raise ValueError("the KB is empty: no valid records in " + ", ".join(map(str, paths))
                         + ("".join(f"\n  {i}" for i in result.issues[:20])))
    return from_load(result, ", ".join(Path(p).name for p in paths))
