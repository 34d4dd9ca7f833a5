"""Build the built-in KB from the Godot docs corpus, deterministically.

Output: one JSONL file per kind plus ``manifest.json``; records sorted by id
and serialised with sorted keys, so the same corpus gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline import atomic
from pipeline.config import FIXTURES
from pipeline.kb import class_records, classref, migrating, rst
from pipeline.kb.load import load_jsonl
from pipeline.records import AnyRecord, record_line  # older callers still import record_line from here

log = logging.getLogger(__name__)

KIND_FILES = {
    "docs_chunk": "docs_chunks.jsonl",
    "api_mapping": "api_mapping.jsonl",
    "label_prototype": "label_prototypes.jsonl",
}
LABELS_FILE = FIXTURES / "labels" / "labels.jsonl"

Progress = Callable[[Iterable[Path], str, int], Iterable[Path]]


@dataclass(frozen=True)
class BuildReport:
    out: Path
    counts: dict[str, int]
    code_blocks: int
    seconds: float
    content_hash: str


def builder_digest(docs: Path) -> str:
    """What the build depends on: the reader code, the labels and the corpus files (names and sizes).

    ``kb ensure`` rebuilds when it changes, so a checkout with new reader code never serves a stale KB.
    """
    h = hashlib.sha256()
    code = [*sorted(Path(__file__).parent.glob("*.py")), Path(__file__).parents[1] / "records.py", LABELS_FILE]
    for f in code:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    for f in sorted(docs.rglob("*.rst")):
        h.update(f"{f.relative_to(docs).as_posix()}:{f.stat().st_size}\n".encode())
    return h.hexdigest()


def no_progress(items: Iterable[Path], desc: str, total: int) -> Iterable[Path]:
    return items


def collect(docs: Path, progress: Progress = no_progress) -> list[AnyRecord]:
    """Parse the corpus into records (class reference first: its member index feeds tutorials)."""
    class_files = sorted(p for p in (docs / "classes").glob("class_*.rst"))
    classes = [
        classref.parse_class(p.read_text(encoding="utf-8"), p.relative_to(docs).as_posix())
        for p in progress(class_files, "class reference", len(class_files))
    ]
    members = classref.member_index(classes)
    migration = migrating.MIGRATION_DOC
    renames = migrating.rename_records((docs / migration).read_text(encoding="utf-8"), migration)
    rename_map = migrating.rename_map(renames)

    records: list[AnyRecord] = list(renames)
    for cls in classes:
        records.extend(class_records.class_records(cls, rename_map))

    pages = sorted(
        p for top in ("getting_started", "tutorials") for p in (docs / top).rglob("*.rst")
    )
    for page in progress(pages, "tutorial pages", len(pages)):
        records.extend(
            rst.parse_page(page.read_text(encoding="utf-8"), page.relative_to(docs).as_posix(), members)
        )

    labels = load_jsonl([LABELS_FILE])
    if labels.errors:
        raise ValueError("label fixtures are invalid:\n" + "\n".join(map(str, labels.errors)))
    records.extend(labels.records)
    return records


def content_hash(records: Iterable[AnyRecord]) -> str:
    """Identity of a record set, independent of file layout and order."""
    h = hashlib.sha256()
    for line in sorted(record_line(r) for r in records):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def build(docs: Path, out: Path, progress: Progress = no_progress) -> BuildReport:
    if not (docs / "classes").is_dir() or not (docs / "tutorials").is_dir():
        raise FileNotFoundError(
            f"{docs} does not look like the Godot docs corpus (expected classes/ and tutorials/); "
            "pass --docs PATH or set GODOT_DOCS"
        )
    t0 = time.perf_counter()
    records = collect(docs, progress)
    ids: dict[str, int] = {}
    for r in records:
        ids[r.id] = ids.get(r.id, 0) + 1
    dupes = sorted(i for i, n in ids.items() if n > 1)
    if dupes:
        raise ValueError(f"the build produced duplicate ids, e.g. {dupes[:5]}")

    by_kind: dict[str, list[str]] = {k: [] for k in KIND_FILES}
    for r in sorted(records, key=lambda r: r.id):
        by_kind[r.kind].append(record_line(r))
    digest = content_hash(records)
    for kind, name in KIND_FILES.items():
        atomic.write_text(out / name, "".join(line + "\n" for line in by_kind[kind]))
    counts = {k: len(v) for k, v in by_kind.items()}
    code_blocks = sum(len(getattr(r, "code_blocks", [])) for r in records if r.kind == "docs_chunk")
    manifest = {"counts": counts, "code_blocks": code_blocks, "content_hash": digest,
                "files": KIND_FILES, "builder": builder_digest(docs)}
    atomic.write_text(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return BuildReport(out, counts, code_blocks, time.perf_counter() - t0, digest)
