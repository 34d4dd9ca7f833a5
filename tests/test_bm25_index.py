"""BM25Index must score exactly like rank_bm25.BM25Okapi, and persist safely."""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from pipeline.analyzer import analyze_code, analyze_text
from pipeline.bm25_index import ARRAYS_FILE, META_FILE, BM25Index

REPO = Path(__file__).resolve().parents[1]
N_FILES = 40
N_DOCS = 300
# Present in ~80% of the fixture docs: drives rank-bm25's negative-idf path
# even if no real word of the sample happens to be in more than half the docs.
COMMON = "commonterm"

_HEADING = re.compile(r"\n[=\-~^\"'`#*+]{3,}\n")
_GDSCRIPT_BLOCK = re.compile(r"^( *)\.\. (?:code-tab|code-block):: gdscript.*\n((?:\1 +.*\n|[ \t]*\n)+)", re.MULTILINE)


def _docs_dir() -> Path:
    # Not a skip: without the corpus the parity test would prove nothing.
    root = Path(os.environ.get("GODOT_DOCS") or REPO.parent / "shared" / "godot-docs")
    tutorials = root / "tutorials"
    assert (tutorials / "2d").is_dir(), f"Godot docs corpus missing: expected {tutorials / '2d'} (or set GODOT_DOCS)"
    return tutorials


def _sections(path: Path) -> list[str]:
    return [s for s in _HEADING.split(path.read_text(encoding="utf-8")) if s.strip()]


def _doc_terms(section: str) -> list[str]:
    """A record's terms the way the KB builds them: prose by text, GDScript blocks by code."""
    terms: list[str] = []
    prose = section
    for m in _GDSCRIPT_BLOCK.finditer(section):
        terms.extend(analyze_code(textwrap.dedent(m.group(2))).terms)
        prose = prose.replace(m.group(0), "\n")
    return analyze_text(prose) + terms


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    tutorials = _docs_dir()
    files = sorted((tutorials / "2d").glob("*.rst"))
    # tutorials/2d has fewer than 40 pages: top up from sibling folders, in a fixed order.
    for sub in ("inputs", "physics", "animation", "scripting"):
        files += sorted((tutorials / sub).glob("*.rst"))
    files = files[:N_FILES]
    docs = [_doc_terms(s) for f in files for s in _sections(f)][:N_DOCS]
    assert len(docs) == N_DOCS, f"only {len(docs)} sections in {len(files)} files"
    for i, d in enumerate(docs):
        if i % 5:
            d.append(COMMON)
    docs[7] = []  # an empty record must score 0, not NaN
    return docs


@pytest.fixture(scope="module")
def reference(corpus: list[list[str]]) -> BM25Okapi:
    return BM25Okapi(corpus)


@pytest.fixture(scope="module")
def index(corpus: list[list[str]]) -> BM25Index:
    return BM25Index.build(corpus)


def _queries(corpus: list[list[str]]) -> list[list[str]]:
    chunk = analyze_code(
        "func _physics_process(delta):\n"
        '\tvar direction = Input.get_vector("move_left", "move_right", "move_up", "move_down")\n'
        "\tvelocity = direction * speed\n"
        "\tmove_and_slide()\n"
        '\t$AnimatedSprite2D.play("walk")\n'
    ).terms
    return [
        chunk,  # a real query: repeats included
        ["velocity", "velocity", "velocity", "sprite"],  # repeated term
        ["no_such_term_xyz", "velocity", "another_unknown"],  # unknown terms
        ["no_such_term_xyz"],  # nothing known
        [COMMON],  # negative idf only
        [COMMON, COMMON, "tilemap", "animation"],
        corpus[3][:60],  # a doc's own terms
        [],
    ]


def test_fixture_exercises_the_idf_quirks(reference: BM25Okapi, corpus: list[list[str]]) -> None:
    n = len(corpus)
    df = Counter(t for d in corpus for t in set(d))
    assert max(df.values()) > n / 2  # some idf is negative -> replaced by epsilon * average_idf
    assert reference.idf[COMMON] == pytest.approx(0.25 * reference.average_idf)


def test_scores_match_rank_bm25(index: BM25Index, reference: BM25Okapi, corpus: list[list[str]]) -> None:
    for q in _queries(corpus):
        expected = reference.get_scores(q)
        got = index.scores(q)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6, err_msg=f"query {q[:8]}")
    assert not np.isnan(index.scores(_queries(corpus)[0])).any()


def test_idf_matches_rank_bm25(index: BM25Index, reference: BM25Okapi) -> None:
    assert index.vocab == list(reference.idf)  # same first-seen order
    np.testing.assert_array_equal(index.idf, np.array(list(reference.idf.values())))


def _reference_top(scores: np.ndarray, k: int) -> list[int]:
    order = np.lexsort((np.arange(len(scores)), -scores))  # score desc, then index asc
    return [int(i) for i in order if scores[i] > 0][:k]


@pytest.mark.parametrize("k", [1, 5, 20, 1000])
def test_top_k_order_matches_reference(index: BM25Index, reference: BM25Okapi, corpus: list[list[str]], k: int) -> None:
    for q in _queries(corpus):
        hits = index.search(q, k)
        assert [h.doc for h in hits] == _reference_top(reference.get_scores(q), k)
        assert all(h.score > 0 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_ties_break_by_doc_index() -> None:
    corpus = [["a", "x"], ["b", "y"], ["a", "x"], ["c", "z"], ["a", "x"], ["d", "w"], ["e", "v"], ["f", "u"]]
    hits = BM25Index.build(corpus).search(["a"], 2)
    assert [h.doc for h in hits] == [0, 2]
    assert hits[0].score == hits[1].score


def test_contributions_sum_to_score(index: BM25Index, corpus: list[list[str]]) -> None:
    q = _queries(corpus)[0]
    hits = index.search(q, 50)
    assert hits
    for h in hits:
        assert set(h.contributions) <= set(q)
        assert all(t in corpus[h.doc] for t in h.contributions)  # only matched terms
        assert sum(h.contributions.values()) == pytest.approx(h.score, abs=1e-9)


def test_contributions_include_query_repeats(index: BM25Index) -> None:
    once = index.search(["velocity"], 3)
    thrice = index.search(["velocity", "velocity", "velocity"], 3)
    assert [h.doc for h in once] == [h.doc for h in thrice]
    for a, b in zip(once, thrice, strict=True):
        assert b.contributions["velocity"] == pytest.approx(3 * a.contributions["velocity"])


def test_unknown_only_query_returns_nothing(index: BM25Index) -> None:
    assert index.search(["no_such_term_xyz"], 10) == []
    assert index.search([], 10) == []
    assert index.search(["velocity"], 0) == []


def test_custom_params_match_rank_bm25(corpus: list[list[str]]) -> None:
    q = _queries(corpus)[0]
    ref = BM25Okapi(corpus, k1=1.2, b=0.5, epsilon=0.1)
    got = BM25Index.build(corpus, k1=1.2, b=0.5, epsilon=0.1).scores(q)
    np.testing.assert_allclose(got, ref.get_scores(q), rtol=0, atol=1e-6)


def test_zero_idf_term_is_kept_at_zero() -> None:
    # n = N/2 gives idf exactly 0: not negative, so rank-bm25 keeps 0 (no epsilon floor).
    corpus = [["a", "b"], ["a", "c"], ["d", "e"], ["f", "g"]]
    ref = BM25Okapi(corpus)
    idx = BM25Index.build(corpus)
    assert ref.idf["a"] == 0.0
    np.testing.assert_allclose(idx.scores(["a", "b"]), ref.get_scores(["a", "b"]), atol=1e-12)
    hits = idx.search(["a", "b"], 10)
    assert [h.doc for h in hits] == [0]
    assert hits[0].contributions["a"] == 0.0


def test_save_load_round_trip(tmp_path: Path, index: BM25Index, corpus: list[list[str]]) -> None:
    index.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([ARRAYS_FILE, META_FILE])  # no temp files left
    loaded = BM25Index.load(tmp_path)
    assert loaded.vocab == index.vocab and loaded.n_docs == index.n_docs
    assert (loaded.k1, loaded.b, loaded.epsilon) == (index.k1, index.b, index.epsilon)
    for q in _queries(corpus):
        np.testing.assert_array_equal(loaded.scores(q), index.scores(q))
        assert loaded.search(q, 10) == index.search(q, 10)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    assert {"numpy", "scipy", "python"} <= set(meta["versions"])
    assert meta["params"] == {"k1": 1.5, "b": 0.75, "epsilon": 0.25}


def test_save_overwrites_previous_index(tmp_path: Path, index: BM25Index) -> None:
    BM25Index.build([["old", "doc"]]).save(tmp_path)
    index.save(tmp_path)
    assert BM25Index.load(tmp_path).n_docs == index.n_docs


@pytest.mark.parametrize("name", [ARRAYS_FILE, META_FILE])
def test_truncated_file_raises_value_error(tmp_path: Path, index: BM25Index, name: str) -> None:
    index.save(tmp_path)
    path = tmp_path / name
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=re.escape(name)):
        BM25Index.load(tmp_path)


def test_missing_file_raises_value_error(tmp_path: Path, index: BM25Index) -> None:
    index.save(tmp_path)
    (tmp_path / ARRAYS_FILE).unlink()
    with pytest.raises(ValueError, match=re.escape(ARRAYS_FILE)):
        BM25Index.load(tmp_path)
    with pytest.raises(ValueError, match=re.escape(META_FILE)):
        BM25Index.load(tmp_path / "nowhere")


def test_empty_corpus() -> None:
    idx = BM25Index.build([])
    assert idx.n_docs == 0
    assert idx.search(["anything"], 5) == []
    assert idx.scores(["anything"]).shape == (0,)
