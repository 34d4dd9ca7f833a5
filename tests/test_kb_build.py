"""The full KB build on the real corpus: counts, the acceptance records, determinism; opening it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.kb.build import KIND_FILES, build
from pipeline.kb.load import load_jsonl
from pipeline.kb.store import KBNotBuiltError, ensure_builtin, open_kb
from pipeline.records import record_line

CSHARP = re.compile(r"using Godot;|public partial class|GD\.Print\(|public override void")


@pytest.fixture(scope="session")
def built(docs_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kb")
    build(docs_root, out)
    return out


@pytest.fixture(scope="session")
def records(built: Path) -> dict[str, object]:
    result = load_jsonl([built / name for name in KIND_FILES.values()])
    assert not result.issues, result.issues[:5]
    return {r.id: r for r in result.records}


def test_counts_and_gdscript_blocks(built: Path, records: dict[str, object]) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    # The corpus is pinned (shared/godot-docs), so the counts are exact.
    assert manifest["counts"] == {"docs_chunk": 7858, "api_mapping": 21202, "label_prototype": 39}
    # GDScript blocks in docs chunks: 747 from tutorial pages, the rest from class-reference examples.
    assert manifest["code_blocks"] == 1586
    blocks = [b for r in records.values() if r.kind == "docs_chunk" for b in r.code_blocks]
    assert len(blocks) == manifest["code_blocks"]
    assert not [b for b in blocks if CSHARP.search(b)], "C# leaked into code_blocks"


def test_acceptance_records_exist(records: dict[str, object]) -> None:
    play = records["api:AnimatedSprite2D.play"]
    assert re.search(play.source_pattern, "$AnimatedSprite2D.play()")
    assert not re.search(play.source_pattern, '$AnimationPlayer.play("idle")')
    renames = {r.before_code: r.after_code for r in records.values()
               if r.kind == "api_mapping" and r.id.startswith("rename:")}
    assert renames["KinematicBody2D"] == "CharacterBody2D"
    assert renames["AnimatedSprite"] == "AnimatedSprite2D"
    sources = {r.source for r in records.values() if r.kind == "docs_chunk"}
    assert {"first_2d_game/coding_the_player", "first_3d_game/player_movement_code",
            "class/AnimatedSprite2D", "physics/using_character_body_2d"} <= sources


def test_records_are_stored_as_their_canonical_line(built: Path, records: dict[str, object]) -> None:
    lines = (built / KIND_FILES["api_mapping"]).read_text(encoding="utf-8").splitlines()
    assert lines[0] == record_line(records[json.loads(lines[0])["id"]])


def test_open_kb_never_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDPOC_KB", str(tmp_path / "kb"))
    with pytest.raises(KBNotBuiltError, match=r"python -m pipeline kb ensure` \(or `make kb`\)") as err:
        open_kb()
    assert isinstance(err.value, FileNotFoundError)  # callers that catch FileNotFoundError keep working
    assert not (tmp_path / "kb").exists()


def test_build_is_byte_identical(
    built: Path, docs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second build, made by ensure_builtin as ``kb ensure`` does, has the same bytes; open_kb then reads it."""
    monkeypatch.setenv("GDPOC_KB", str(tmp_path / "kb"))
    monkeypatch.setenv("GODOT_DOCS", str(docs_root))
    out = ensure_builtin()
    assert out == tmp_path / "kb"
    for name in [*KIND_FILES.values(), "manifest.json"]:
        assert (out / name).read_bytes() == (built / name).read_bytes(), name
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert ensure_builtin() == out and (out / "manifest.json").stat().st_mtime_ns == stamp  # not rebuilt
    store = open_kb()
    manifest = json.loads((built / "manifest.json").read_text())
    assert store.counts == manifest["counts"] and store.content_hash == manifest["content_hash"]


def test_ensure_rebuilds_a_kb_built_by_other_reader_code(
    built: Path, docs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout with changed reader code must not keep serving the KB an older checkout built."""
    monkeypatch.setenv("GDPOC_KB", str(tmp_path / "kb"))
    monkeypatch.setenv("GODOT_DOCS", str(docs_root))
    out = ensure_builtin()
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "docs_chunks.jsonl").write_text("stale\n")
    (out / "manifest.json").write_text(json.dumps({**manifest, "builder": "older reader code"}))
    ensure_builtin()
    assert (out / "docs_chunks.jsonl").read_bytes() == (built / "docs_chunks.jsonl").read_bytes()
    assert json.loads((out / "manifest.json").read_text())["builder"] == manifest["builder"]
