"""Recipes and artifact folders for everything trained here.

A recipe is data: a frozen pydantic model whose hash, with the KB hash, names the
artifact folder. A change to either trains again; nothing else does. Artifacts are
written to a temp folder beside their final place and renamed when complete, so a
killed run never leaves a folder that loads.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline import config

DONE = "DONE.json"  # written last: a folder without it is not an artifact


class Recipe(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


def artifact_dir(kind: str, kb_hash: str, recipe: Recipe) -> Path:
    return config.cache_dir() / "trained" / kind / f"{kb_hash[:12]}-{recipe.digest()[:12]}"


def is_complete(folder: Path) -> bool:
    return (folder / DONE).is_file()


def read_done(folder: Path) -> dict:
    try:
        return json.loads((folder / DONE).read_text())
    except (OSError, ValueError):
        return {}


@contextmanager
def building(folder: Path) -> Iterator[Path]:
    """A scratch folder that becomes ``folder`` only if the block finishes (then write DONE inside it).

    The scratch folder is stable (``.<name>.partial``) so a trainer can resume from its checkpoints.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.parent / f".{folder.name}.partial"
    partial.mkdir(exist_ok=True)
    yield partial
    if not (partial / DONE).is_file():
        raise RuntimeError(f"{partial} finished without {DONE}")
    old = None
    if folder.exists():  # an incomplete or stale folder: move it aside, then drop it
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.old."))
        folder.rename(old / folder.name)
    partial.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_done(folder: Path, info: dict) -> None:
    from pipeline import atomic

    atomic.write_text(folder / DONE, json.dumps(info, indent=1, sort_keys=True))
