"""F's optional Qwen query-likelihood reranker (PMI) on the real 0.5B GGUF (marked ``model``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.kb.views import embed_text
from pipeline.models import provision
from pipeline.models.qwen import QwenGGUF
from pipeline.models.reranker import QwenPMIReranker

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()
CLAMP = "docs:first_2d_game/coding_the_player#coding-the-player-p4"
THREE_D = "first_3d_game/player_movement_code"


@pytest.mark.model
def test_pmi_prefers_the_2d_page_to_its_3d_twin_and_caches_the_record_prior(engine: Engine, tmp_path: Path) -> None:
    three_d = next(r for r in engine.store.records if r.source == THREE_D)
    docs = [embed_text(engine.store.get(CLAMP)), embed_text(three_d)]
    model = QwenGGUF(provision.model_path("qwen-0.5b"), n_ctx=1024, logits_all=True)
    ranker = QwenPMIReranker(model, "qwen-0.5b", cache_folder=tmp_path)
    try:
        first = ranker.score(REFERENCE, docs)
        assert first[0] > first[1]  # the clamp section explains this code; the 3D page does not
        model.llm.reset()  # a second scoring reads every term from the cache, not from the model
        assert ranker.score(REFERENCE, docs) == first
        assert model.llm.n_tokens == 0
    finally:
        ranker.close()
