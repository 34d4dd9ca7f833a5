"""F's FlagEmbedding path, proved with a tiny randomly initialised cross-encoder built here.

No bge weights can be installed offline, so this checks loading and scoring, not quality.
A tiny BERT is used: FINDINGS.md records that a tiny XLM-R with a trained BPE tokenizer
fails inside FlagEmbedding's padding, while BERT's WordPiece works.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.models.provision import ModelError
from pipeline.models.reranker import FlagEmbeddingReranker

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-reranker")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "func", "process", "input", "is", "action",
             "pressed", "animated", "sprite", "play", "clamp", "position", "vector", "move", "character", "body",
             ".", "(", ")", "_", "$", "2", "3", "d"]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    # 512 positions as in BERT: the hub's FlagEmbedding reranker reads up to 512 tokens.
    cfg = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    return folder


def test_flag_reranker_loads_and_scores_every_pair(tiny_model: Path) -> None:
    rr = FlagEmbeddingReranker(tiny_model, max_length=64)
    docs = ["AnimatedSprite2D.play", "CharacterBody3D move", "clamp position vector"]
    scores = rr.score("func _process input is action pressed", docs)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert len(set(scores)) == 3  # random weights still give distinct scores per document
    assert rr.score("func _process input is action pressed", docs) == scores  # deterministic
    assert "bge reranker" in rr.name


def test_missing_reranker_folder_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="GDPOC_BGE_RERANKER"):
        FlagEmbeddingReranker(tmp_path / "nothing")


def test_f_reranks_through_flagembedding_end_to_end(tiny_model: Path) -> None:
    """F with reranker "bge" and a model folder: the hub loads it via FlagEmbedding and the rerank stage
    scores the union's top N with it (the path a trained cross-encoder will take)."""
    from pipeline.engine import Engine
    from pipeline.settings import Settings

    engine = Engine.open([Path(__file__).resolve().parents[1] / "fixtures" / "user_kb" / "small.jsonl"])
    s = Settings(alternatives=("F",), run_validator=False, reranker="bge", reranker_model=str(tiny_model),
                 rerank_top_n=4)
    f = engine.run("func _process(delta):\n\tstart_dash()\n\tmove_and_slide()\n", s).alternatives["F"]
    rr = f.rerank
    assert rr is not None and rr.status == "ok", rr
    assert rr.reranker == f"bge reranker ({tiny_model.name})" and rr.scored == min(4, len(f.union.rows))
    scored = [r for r in rr.rows if r.reranker_score is not None]
    assert len(scored) == rr.scored
    assert [r.reranker_score for r in scored] == sorted((r.reranker_score for r in scored), reverse=True)
    assert [it.record_id for it in f.final] == [r.record_id for r in rr.rows][: len(f.final)]
    assert engine.hub.flag_reranker(str(tiny_model)) is engine.hub.flag_reranker(str(tiny_model))  # loaded once
