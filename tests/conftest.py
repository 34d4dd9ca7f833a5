"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def docs_root() -> Path:
    """The Godot docs corpus: $GODOT_DOCS, else ``shared/godot-docs`` next to the repo."""
    root = Path(os.environ.get("GODOT_DOCS") or REPO.parent / "shared" / "godot-docs")
    if not (root / "tutorials").is_dir():
        pytest.fail(f"Godot docs corpus not found at {root} (set GODOT_DOCS)")
    return root
