"""Paths and settings shared by the CLI, the app and the tests.

Everything heavy (assembled models, embedding matrices, verdicts) lives in a
cache folder outside the checkout, keyed by content hashes, so a fresh clone
on the same machine reuses it. ``GDPOC_CACHE`` moves it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "fixtures"


def docs_root() -> Path:
    """The Godot docs corpus: ``GODOT_DOCS`` or ``../shared/godot-docs`` beside the repo."""
    env = os.environ.get("GODOT_DOCS")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "godot-docs"


def cache_dir() -> Path:
    env = os.environ.get("GDPOC_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "godot-retrieval-poc"
    path.mkdir(parents=True, exist_ok=True)
    return path


def prefix_state_dir() -> Path:
    """Where Qwen keeps the KV cache of prompt starts that never change (read back by fresh processes)."""
    return cache_dir() / "prefix_states"


def kb_dir() -> Path:
    """Where ``kb build`` writes the built-in KB by default."""
    env = os.environ.get("GDPOC_KB")
    return Path(env) if env else REPO_ROOT / "build" / "kb"
