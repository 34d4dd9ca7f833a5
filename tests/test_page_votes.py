"""On a long file, the pages that several of their sections support move up (stages/pagevotes.py).

The rule only re-orders what D's fusion or F's ranker ranked; the engine test runs a real 63-line
script through the real KB, BM25, the query map and the learned ranker.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.engine import Engine
from pipeline.evaluate import system_rankings
from pipeline.settings import Settings
from pipeline.stages.pagevotes import VOTE_K, PageVotes
from tests.fakes import ranked_items

ROOT = Path(__file__).resolve().parent.parent
PLAYER = ROOT / "fixtures" / "batch" / "player.gd"  # a platformer character: run, coyote-time jump, animations


def _ids(items) -> list[str]:
    return [it.candidate.record_id for it in items]


def test_a_page_that_several_sections_support_moves_up() -> None:
    # k = 10: page a's three sections at ranks 3-5 sum to 0.215, above b's one section at rank 1 (0.091)
    items = ranked_items(["t/b.rst", "t/x.rst", "t/a.rst", "t/a.rst", "t/a.rst", None, "t/c.rst"])
    out = PageVotes().run(items)
    # a's best section leads; its other sections and the label (which counts alone) keep their own scores
    assert _ids(out.items) == ["r3", "r1", "r2", "r4", "r5", "r6", "r7"]
    assert [it.rank for it in out.items] == list(range(1, 8))
    assert out.moved == ["r3"] and out.message == "long file: 1 page that several sections support moved up (a)"


def test_records_moved_down_before_keep_their_places_and_do_not_vote() -> None:
    # r2 is the other dimension's page, which the dimension rule put below; its two sections must not lift it
    items = ranked_items(["t/b.rst", "t/three_d.rst", "t/a.rst", "t/a.rst", "t/three_d.rst"])
    out = PageVotes().run(items, fixed={"r2", "r5"})
    assert _ids(out.items) == ["r3", "r2", "r1", "r4", "r5"]
    assert out.moved == ["r3"]


def test_nothing_moves_when_the_first_occurrences_already_agree() -> None:
    items = ranked_items(["t/a.rst", "t/a.rst", "t/b.rst", None])
    out = PageVotes().run(items)
    assert out.items == items and out.moved == [] and out.message == ""


def test_d_ranks_the_platformer_page_first_on_a_long_platformer_script(engine: Engine) -> None:
    code = PLAYER.read_text()
    assert len(code.splitlines()) > Settings().long_lines  # searched function by function
    on = engine.run(code, Settings(run_validator=False))
    off = engine.run(code, Settings(run_validator=False, page_votes=False))
    page = "tutorials/physics/using_character_body_2d.rst"
    d_on, d_off = system_rankings(on)["D"], system_rankings(off)["D"]
    # the page that teaches a CharacterBody2D platformer has several sections in D's list; the generic
    # physics introduction, first without the votes, has one strong match
    assert d_on[0] == page and d_off.index(page) > 0, (d_on[:5], d_off[:5])
    fusion = on.alternatives["D"].fusion
    assert "long file:" in fusion.message and "using_character_body_2d" in fusion.message
    assert "long file:" not in off.alternatives["D"].fusion.message
    # the other dimension's sections stay where the dimension rule put them
    down = set(fusion.moved_down)
    assert down and [r.record_id for r in fusion.rows if r.record_id in down] == \
        [r.record_id for r in off.alternatives["D"].fusion.rows if r.record_id in down]
    assert [r.rank for r in fusion.rows if r.record_id in down] == \
        [r.rank for r in off.alternatives["D"].fusion.rows if r.record_id in down]
    # F votes too, with its own k (1: its learned order holds unless a page's sections agree)
    rerank = on.alternatives["F"].rerank
    assert VOTE_K["F"] < VOTE_K["D"] and "long file:" in rerank.message
    f_on, f_off = system_rankings(on)["F"], system_rankings(off)["F"]
    assert f_on[:2] == f_off[:2] and f_on != f_off


def test_a_short_chunk_is_not_voted_on(engine: Engine) -> None:
    code = "\n".join(PLAYER.read_text().splitlines()[:40]) + "\n"
    trace = engine.run(code, Settings(run_validator=False))
    assert "long file:" not in trace.alternatives["D"].fusion.message
    assert "long file:" not in trace.alternatives["F"].rerank.message
