"""The metrics behind every figure: ranx through `pipeline.evaluate._ranx`, on rankings whose answers are known."""

from __future__ import annotations

import math

import pytest

from pipeline.evaluate import _one_width, _ranx


def _case(width: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[str]]]]:
    page = lambda name: (name + "/" + "x" * width)[:width]  # noqa: E731
    qrels = {"q1": {page("a"): 1}, "q2": {page("b"): 2, page("c"): 1}}
    runs = {"sys": {"q1": [page("z"), page("a")], "q2": [page("c"), page("b")]}}
    return qrels, runs


@pytest.mark.parametrize("width", [3, 9, 40, 41, 75])
def test_known_scores_hold_for_any_page_name_width(width: int) -> None:
    # Pages of every width in one process: ranx compiles per doc-id width unless _ranx renames them.
    overall, per_q = _ranx(*_case(width))
    q1 = 1 / math.log2(3)  # the one relevant page at rank 2
    q2 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))  # grades 1 then 2, ideal 2 then 1
    assert per_q["q1"]["sys"]["ndcg@10"] == pytest.approx(q1)
    assert per_q["q2"]["sys"]["ndcg@10"] == pytest.approx(q2)
    assert overall["sys"]["mrr"] == pytest.approx((0.5 + 1.0) / 2)
    assert overall["sys"]["recall@50"] == pytest.approx(1.0)


def test_every_page_gets_an_id_of_one_width() -> None:
    qrels, runs = _one_width(*_case(75))
    ids = {p for docs in qrels.values() for p in docs} | {p for r in runs["sys"].values() for p in r}
    assert len(ids) == 4 and len({len(p) for p in ids}) == 1
    assert runs["sys"]["q1"][1] == next(iter(qrels["q1"]))  # the same page keeps the same id


_RACE = """
import threading
from pipeline.evaluate import _ranx
qrels = {f"q{i}": {f"p{j}": 1 + j % 3 for j in range(5)} for i in range(40)}
runs = {f"s{k}": {f"q{i}": [f"p{(j * 7 + i + k) % 30}" for j in range(30)] for i in range(40)} for k in range(6)}
def go():
    for _ in range(20):
        _ranx(qrels, runs)
threads = [threading.Thread(target=go) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("survived")
"""


def test_two_evaluations_at_once_do_not_abort_the_process() -> None:
    # The dashboard runs evaluations in worker threads; numba's workqueue layer aborts the whole
    # process (SIGABRT, the server gone) when two threads enter it at once. Own process: an abort
    # here fails this test instead of killing pytest.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _RACE], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    assert "survived" in done.stdout
