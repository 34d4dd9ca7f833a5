"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Nothing may download at run time: every model comes from an installed package.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# A panel that fails to draw raises in tests instead of becoming a message (pipeline/ui/common.py).
os.environ["GDPOC_STRICT_UI"] = "1"


@pytest.fixture(scope="session")
def docs_root() -> Path:
    """The Godot docs corpus: $GODOT_DOCS, else ``shared/godot-docs`` next to the repo."""
    root = Path(os.environ.get("GODOT_DOCS") or REPO.parent / "shared" / "godot-docs")
    if not (root / "tutorials").is_dir():
        pytest.fail(f"Godot docs corpus not found at {root} (set GODOT_DOCS)")
    return root


@pytest.fixture(scope="session")
def engine():
    """The built-in KB with its BM25 index and MiniLM vectors (cached on disk after the first build)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pipeline.engine import Engine

    eng = Engine.open()
    eng.dense(None)
    return eng
