"""The models learned from the docs: the training data, a real training run on a tiny budget, loading, fallbacks."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.models.learned import MODEL_FILE, LearnedRanker
from pipeline.models.provision import ModelError
from pipeline.settings import Settings
from pipeline.train import defaults
from pipeline.train.budget import Budget
from pipeline.train.data import DataRecipe, LeakGuard, Query, build_queries, load_queries

REFERENCE = (Path(__file__).resolve().parents[1] / "fixtures" / "reference_chunk.gd").read_text()
TINY = "2"  # steps per model: the real training code, in a minute or two


@pytest.fixture(scope="module")
def queries(engine: Engine) -> list[Query]:
    return build_queries(engine.store, DataRecipe())[0]


def test_training_queries_are_deterministic_and_split_by_page(engine: Engine, queries: list[Query]) -> None:
    again, _ = build_queries(engine.store, DataRecipe())
    assert [q.model_dump() for q in again] == [q.model_dump() for q in queries]
    splits = defaultdict(set)
    for q in queries:
        splits[q.page].add(q.split)
        assert q.relevant_pages[q.page] == 3 and q.primary in q.positives
    assert all(len(s) == 1 for s in splits.values())  # no page's code in two splits
    counts = {s: sum(1 for q in queries if q.split == s) for s in ("train", "val", "test")}
    assert counts["train"] > 8 * counts["test"] > 0 and counts["val"] > 0


def test_no_training_query_is_a_near_copy_of_a_dev_chunk(queries: list[Query]) -> None:
    dev = [c.code for c in load_set()]
    guard = LeakGuard(dev, DataRecipe().near_copy)
    assert guard.is_near_copy(REFERENCE)  # the guard does fire: the reference chunk is a docs block
    assert not [q.qid for q in queries if guard.is_near_copy(q.text)]
    assert not any("position.clamp(Vector2.ZERO, screen_size)" in q.text and "is_action_pressed" in q.text
                   for q in queries)


def test_hard_negatives_include_the_other_dimension(engine: Engine) -> None:
    folder = defaults.ready("data", engine.store.content_hash)
    assert folder is not None, "`make train` builds the training data before the tests"
    qs = [q for q in load_queries(folder) if "first_2d_game" in q.page]
    assert qs and all(q.negatives for q in qs)
    twin = [q for q in qs if any("first_3d_game" in (engine.store.get(n).doc_path or "") for n in q.negatives)]
    assert len(twin) == len(qs)  # the twin page's best record is always among the negatives


@pytest.fixture(scope="module")
def tiny(engine: Engine) -> dict[str, Path]:
    """Train every model on a tiny budget with the real code (its own artifact folders, never the defaults)."""
    from pipeline.train.run import train_all

    report = train_all(engine.store, engine.bm25, budget=Budget.parse(TINY), cross_encoder=True, mnrl=True)
    assert set(report.steps) == {"data", "query_map", "query_encoder", "ranker", "accept", "cross_encoder"}
    return {k: defaults.folder(k, engine.store.content_hash, Budget.parse(TINY)) for k in report.steps}


@pytest.mark.model
def test_a_tiny_training_run_gives_models_that_load(engine: Engine, tiny: dict[str, Path]) -> None:
    assert all((f / "DONE.json").is_file() for f in tiny.values())
    assert tiny["ranker"] != defaults.folder("ranker", engine.store.content_hash, Budget())  # never the default
    ranker = LearnedRanker(tiny["ranker"])
    ranker.load()
    encoder = SentenceTransformerEmbedder(str(tiny["query_encoder"] / "model"))
    # The query encoder reads documents with MiniLM unchanged: the KB's cached vectors stay valid.
    assert encoder.fingerprint == SentenceTransformerEmbedder(None).fingerprint
    q = encoder.encode_query([REFERENCE])
    assert q.shape == (1, 384)
    from FlagEmbedding import FlagReranker  # the cross-encoder is a plain folder FlagEmbedding loads

    scores = FlagReranker(str(tiny["cross_encoder"] / "model"), devices="cpu").compute_score([["a", "b"]])
    assert len(scores) == 1


@pytest.mark.model
def test_f_runs_the_learned_ranker_and_explains_it(engine: Engine, tiny: dict[str, Path]) -> None:
    s = Settings(alternatives=("F",), run_validator=False, reranker_model=str(tiny["ranker"]))
    alt = engine.run(REFERENCE, s).alternatives["F"]
    assert alt.rerank is not None and alt.rerank.status == "ok" and "learned ranker" in alt.rerank.reranker
    assert alt.rerank.scored == len(alt.union.rows)  # every union candidate is scored
    top = alt.rerank.rows[0]
    assert top.contributions and abs(sum(c.contribution for c in top.contributions)) > 0
    # the contributions shown are the largest of a sum that gives the score exactly (bias included)
    assert alt.rerank.bias is not None


def test_a_missing_or_corrupt_learned_ranker_keeps_f_on_the_union_order(engine: Engine, tmp_path: Path) -> None:
    s = Settings(alternatives=("F",), run_validator=False, reranker_model=str(tmp_path / "nothing-here"))
    alt = engine.run(REFERENCE, s).alternatives["F"]
    assert alt.rerank is not None and alt.rerank.status == "error"
    assert "union order kept" in alt.rerank.message and "models train" in alt.rerank.message
    assert [r.record_id for r in alt.rerank.rows] == [r.record_id for r in alt.union.rows]


@pytest.mark.model
def test_a_truncated_model_file_is_refused_not_loaded(tiny: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "ranker"
    shutil.copytree(tiny["ranker"], broken)
    data = (broken / MODEL_FILE).read_bytes()
    (broken / MODEL_FILE).write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelError, match="cannot load the learned ranker"):
        LearnedRanker(broken).load()


def test_an_unfinished_training_folder_is_not_a_model(engine: Engine, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed run leaves its scratch folder (to resume from); nothing reads it as a model."""
    monkeypatch.setenv("GDPOC_CACHE", str(tmp_path))
    target = defaults.folder("ranker", engine.store.content_hash)
    partial = target.parent / f".{target.name}.partial"
    partial.mkdir(parents=True)
    (partial / MODEL_FILE).write_text("tree\n")
    assert defaults.ready("ranker", engine.store.content_hash) is None
    with pytest.raises(ModelError, match="not trained yet"):
        engine.reranker(Settings())


def test_a_ranker_trained_on_other_features_is_not_found_cached(engine: Engine, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranker's folder is named by its feature names, not just their version: a ranker of other features
    (a probe that reused a version number) would never load, and `models train` must not call it cached."""
    from pipeline.features import NAMES
    from pipeline.train.ltr import RankerRecipe
    from pipeline.train.recipe import artifact_dir

    monkeypatch.setenv("GDPOC_CACHE", str(tmp_path))
    kb = engine.store.content_hash
    shipped = defaults.recipes().ranker
    assert shipped.feature_names == tuple(NAMES)
    other = shipped.model_copy(update={"feature_names": (*NAMES, "some_probe_feature")})
    assert isinstance(other, RankerRecipe) and other.features == shipped.features
    assert artifact_dir("ranker", kb, other) != defaults.folder("ranker", kb)
