"""Fitting the accept model on the committed table (fast: no LLM, the table holds Qwen's margins)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pipeline.accept import FREE, page_rows, rank_scores
from pipeline.train.accept import TABLE, AcceptRecipe, _auc, _fit_linear, fit, load_table, margin_key, reusable_margins


@pytest.fixture(scope="module")
def table() -> list[dict]:
    return load_table(TABLE)


def test_the_table_names_its_origins_and_labels(table: list[dict]) -> None:
    origins = {r["origin"] for r in table}
    assert origins == {"dev-tune", "rule-tune", "docs", "docs-own"}
    labels = [r for r in table if r["kind_label"] == 1]
    # label prototypes are labelled by the tune sets' hand labels, so some are relevant, and none come from docs
    assert labels and any(r["label"] for r in labels) and all(r["origin"].endswith("tune") for r in labels)
    # a crop's own records are on its own page: every one is relevant, and a good share hold much of the crop
    own = [r for r in table if r["origin"] == "docs-own"]
    assert own and all(r["label"] == 1 for r in own)
    assert sum(r["coverage"] >= 0.5 for r in own) >= len(own) / 3


def test_the_fit_is_deterministic_and_reaches_its_precision_on_the_tune_rows(table: list[dict]) -> None:
    recipe = AcceptRecipe()
    model, stats = fit(table, recipe)
    again, _ = fit(table, recipe)
    assert model.to_json() == again.to_json()
    # the threshold reaches the precision out of fold on each tune set, and accepts a fair share there
    for origin in recipe.tune_origins:
        key = origin.replace("-", "_")
        assert stats[f"oof_precision_{key}"] >= recipe.precision
        assert stats[f"oof_recall_{key}"] > 0.3
    assert stats["rows"] == len([r for r in table if r["margin"] is not None])


def test_the_rule_tune_rows_weigh_in_the_fit(table: list[dict]) -> None:
    # the weight lands on those rows: the more they weigh, the better p ranks them, out of fold
    aucs = [fit(table, AcceptRecipe(rule_weight=w))[1]["oof_auc_rule_tune"] for w in (0.0, 0.25, 1.0)]
    assert aucs[0] < aucs[1] < aucs[2], aucs


def test_the_fits_out_of_fold_p_is_the_run_times_p(table: list[dict]) -> None:
    # fit chooses the threshold on Linear.calibrate of raw scores; the engine decides on Linear.p
    lin = fit(table, AcceptRecipe())[0].full
    for r in table[:60]:
        raw = lin.intercept + sum(w * (r[n] - m) / s for n, m, s, w in zip(lin.names, lin.mean, lin.scale,
                                                                             lin.weights, strict=True))
        assert lin.p(r)[0] == pytest.approx(float(lin.calibrate(np.array([raw]))[0]), abs=1e-9)


def test_qwen_joins_the_model_only_when_it_helps(table: list[dict]) -> None:
    # On the real table Qwen's margins do not raise out-of-fold AUC, so the decision is the free features'.
    model, stats = fit(table, AcceptRecipe())
    assert stats["uses_qwen"] is False and not model.uses_llm
    assert stats["oof_auc_tune_with_qwen"] < stats["oof_auc_tune_free"] + AcceptRecipe().llm_gain
    # A margin that does carry the label is kept: the rule can go the other way.
    rng = random.Random(5)
    informed = [{**r, "margin": (3.0 if r["label"] else -3.0) + rng.gauss(0, 1.0)} for r in table]
    model2, stats2 = fit(informed, AcceptRecipe())
    assert stats2["uses_qwen"] is True and model2.uses_llm
    assert stats2["oof_auc_tune_with_qwen"] > stats2["oof_auc_tune_free"] + 0.05
    assert 0.0 < model2.ask_above < 1.0  # and Qwen is asked only above the band where it can flip a decision
    p = np.array([model2.free.p(r)[0] for r in informed])
    assert 0.0 < float((p >= model2.ask_above).mean()) < 1.0


def test_page_rows_counts_the_judged_records_of_each_page() -> None:
    # top 4 judged: page a twice; a record without a page is its own; one judged past the top 4 counts itself
    assert page_rows(["a", "b", "a", None, "a"], 4) == [2.0, 1.0, 2.0, 1.0, 3.0]


def test_rank_scores_scale_over_the_top_k_and_clip_past_it() -> None:
    # the scale is the top 3's (4 .. 2); a record judged past them (scope) is clipped, not rescaling the others
    assert rank_scores([4.0, 3.0, 2.0, 1.0], 3) == [1.0, 0.5, 0.0, 0.0]
    assert rank_scores([2.0, 2.0], 8) == [1.0, 1.0]  # no spread: every judged record at the top
    assert rank_scores([], 8) == []


def test_records_of_one_page_in_the_judged_list_separate_better_out_of_fold(table: list[dict]) -> None:
    rows = [r for r in table if r["margin"] is not None]
    y = np.array([r["label"] for r in rows])
    groups = [r["group"] for r in rows]
    tune = np.array([r["origin"] == "dev-tune" for r in rows])
    auc = {}
    for key, names in (("with", list(FREE)), ("without", [n for n in FREE if n != "page_rows"])):
        _, oof = _fit_linear(np.array([[r[n] for n in names] for r in rows]), y, groups, names, AcceptRecipe(),
                             np.ones(len(y)))
        auc[key] = _auc(y[tune], oof[tune])
    assert auc["with"] > auc["without"] + 0.03, auc


def test_the_class_use_rules_classes_separate_better_out_of_fold_on_each_tune_set(table: list[dict]) -> None:
    """A class page of a class the code names or whose members it uses (stages/classuse.py) is likelier relevant
    than another: the feature raises out-of-fold AUC on the dev tune rows and on the rule tune rows."""
    rows = [r for r in table if r["margin"] is not None]
    y = np.array([r["label"] for r in rows])
    groups = [r["group"] for r in rows]
    origin = np.array([r["origin"] for r in rows])
    weight = np.where(origin == "rule-tune", AcceptRecipe().rule_weight, 1.0)
    auc: dict[tuple[str, str], float] = {}
    for key, names in (("with", list(FREE)), ("without", [n for n in FREE if n != "class_rule"])):
        _, oof = _fit_linear(np.array([[r[n] for n in names] for r in rows]), y, groups, names, AcceptRecipe(),
                             weight)
        for o in ("dev-tune", "rule-tune"):
            auc[key, o] = _auc(y[origin == o], oof[origin == o])
    assert auc["with", "dev-tune"] > auc["without", "dev-tune"] + 0.005, auc
    assert auc["with", "rule-tune"] > auc["without", "rule-tune"] + 0.03, auc


def test_a_recollected_table_reuses_only_the_margins_whose_inputs_are_unchanged(table: list[dict]) -> None:
    """`train accept-table` keeps a committed margin only for the same judge and prompt, code and record: each
    row carries the hash of what its margin and its record's empty-chunk margin were computed from."""
    judge = "qwen-1.5b|model.gguf|v4"
    key = margin_key(judge, "code a", "record r1")
    assert len({key, margin_key(judge, "code b", "record r1"), margin_key(judge, "code a", "record r1 edited"),
                margin_key("qwen-1.5b|model.gguf|v5", "code a", "record r1")}) == 4
    old = [{"margin_key": key, "empty_key": margin_key(judge, "", "record r1"), "margin": 0.5, "pmi_margin": 0.25},
           {"margin_key": "k2", "empty_key": "e2", "margin": None, "pmi_margin": None}]
    assert reusable_margins(old) == {key: 0.5, margin_key(judge, "", "record r1"): 0.25}
    # the committed table: every row keeps its keys, and one key never names two different margins
    assert all(r["margin_key"] and r["empty_key"] for r in table)
    margins: dict[str, set[float]] = {}
    for r in table:
        margins.setdefault(r["margin_key"], set()).add(r["margin"])
    assert all(len(v) == 1 for v in margins.values())
