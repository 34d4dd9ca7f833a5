"""Quality regression on the dev set: pinned metrics with a tolerance (the Pyserini way)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.engine import Engine
from pipeline.evaluate import evaluate_set, load_set
from pipeline.settings import Settings

EXPECTED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "expected_metrics.json")
                      .read_text())


@pytest.fixture(scope="module")
def report(engine: Engine):
    return evaluate_set(engine, load_set(), Settings(alternatives=("D",), run_validator=False))


def test_no_metric_drops_below_the_pinned_value(report) -> None:
    tol = EXPECTED["tolerance"]
    for system, metrics in EXPECTED["metrics"].items():
        for name, value in metrics.items():
            assert report.metrics[system][name] >= value - tol, (system, name, report.metrics[system][name])


def test_d_beats_each_leg_alone(report) -> None:
    d = report.metrics["D"]["ndcg@10"]
    assert d > report.metrics["bm25"]["ndcg@10"]
    assert d > report.metrics["embedding"]["ndcg@10"]
    assert report.n_ranked == 30  # the three non-Godot chunks have no relevant page
