"""The full KB build on the real corpus: counts, the acceptance records, determinism."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.kb.build import KIND_FILES, build
from pipeline.kb.load import load_jsonl

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
    assert manifest["counts"]["docs_chunk"] > 3000
    assert manifest["counts"]["api_mapping"] > 10000
    assert manifest["counts"]["label_prototype"] >= 30
    # 778 GDScript blocks exist in the corpus (tutorials plus class reference examples).
    assert manifest["code_blocks"] >= 740
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


def test_build_is_byte_identical(built: Path, docs_root: Path, tmp_path: Path) -> None:
    build(docs_root, tmp_path)
    for name in [*KIND_FILES.values(), "manifest.json"]:
        assert (tmp_path / name).read_bytes() == (built / name).read_bytes(), name
