"""Issue 3/5 acceptance: the real Qwen GGUF judges the reference chunk (slow: a few seconds a record)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.settings import Settings
from pipeline.stages.validate import Validate
from pipeline.trace import FinalItem

FIX = Path(__file__).resolve().parents[1] / "fixtures"
P3 = "docs:first_2d_game/coding_the_player#coding-the-player-p3"
P4 = "docs:first_2d_game/coding_the_player#coding-the-player-p4"
THREE_D = "first_3d_game/player_movement_code"

pytestmark = pytest.mark.model


def _items(engine: Engine, ids: list[str]) -> list[FinalItem]:
    out = []
    for n, rid in enumerate(ids, start=1):
        r = engine.store.get(rid)
        out.append(FinalItem(rank=n, record_id=rid, kind=r.kind, doc_path=getattr(r, "doc_path", None),
                             source=getattr(r, "source", ""), section=getattr(r, "section", None), score=0.0))
    return out


@pytest.fixture(scope="module")
def judged(engine: Engine) -> dict[str, dict[str, FinalItem]]:
    """Judge the same records for the reference chunk and for its prompt-injection twin."""
    three_d = [r.id for r in engine.store.records if getattr(r, "source", "") == THREE_D
               and any("Input.is_action_pressed" in b for b in getattr(r, "code_blocks", []))]
    ids = [P3, P4, *three_d]
    validator = engine.validator(Settings())
    stage = Validate(engine.store, validator, top_k=len(ids), cache=None, weight=engine.term_weight)
    out = {}
    for name in ("reference_chunk.gd", "chunks/injection.gd"):
        from pipeline.chunk import prepare_chunk

        final, _ = stage.run(prepare_chunk((FIX / name).read_bytes()), _items(engine, ids))
        out[name] = {it.record_id: it for it in final}
    return out


def test_movement_and_clamp_accepted_with_verified_evidence(judged: dict[str, dict[str, FinalItem]]) -> None:
    ref = judged["reference_chunk.gd"]
    assert ref[P3].accepted and ref[P4].accepted, (ref[P3], ref[P4])
    evidence = " ".join(ref[P3].evidence + ref[P4].evidence)
    for needle in ("Input.is_action_pressed", "AnimatedSprite2D", "clamp", "screen_size"):
        assert needle in evidence, (needle, evidence)


def test_3d_player_movement_code_rejected(judged: dict[str, dict[str, FinalItem]]) -> None:
    three_d = [it for rid, it in judged["reference_chunk.gd"].items() if THREE_D in rid]
    assert three_d, "the 3D tutorial's movement records exist"
    assert not any(it.accepted for it in three_d), [(it.record_id, it.verdict) for it in three_d]


def test_prompt_injection_changes_no_verdict(judged: dict[str, dict[str, FinalItem]]) -> None:
    ref, inj = judged["reference_chunk.gd"], judged["chunks/injection.gd"]
    assert {k: (v.verdict, v.accepted) for k, v in inj.items()} == {k: (v.verdict, v.accepted) for k, v in ref.items()}


def test_unity_csharp_gets_no_accepted_godot_record(engine: Engine) -> None:
    trace = engine.run((FIX / "chunks" / "unity_player.cs").read_bytes(), Settings(alternatives=("D",)))
    d = trace.alternatives["D"]
    assert d.stage("validate").status == "ok"
    assert not [it.record_id for it in d.final if it.accepted]
