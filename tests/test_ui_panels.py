"""Panel text and chart specs built from hand-made trace rows (no KB, no model, one AppTest run)."""

from __future__ import annotations

from typing import Any

import altair as alt
import pytest
from streamlit.testing.v1 import AppTest

from pipeline.settings import Settings
from pipeline.trace import (
    LIST_EMPTY,
    LIST_PENDING,
    LISTED,
    AlternativeTrace,
    ChunkInfo,
    Contribution,
    EvidenceRow,
    FactRow,
    FinalItem,
    KBInfo,
    ProgressEvent,
    RerankRow,
    RerankTrace,
    Trace,
    ValidateRow,
    ValidateTrace,
)
from pipeline.ui import charts, judging, ranking, runs
from pipeline.ui.charts import Shift
from pipeline.ui.highlight import mark_line

CHUNK = "var player's = clamping\nposition = position.clamp(Vector2.ZERO, screen_size)\n$AnimatedSprite2D.play()\n"
CONTRIBUTIONS = [Contribution(feature=f, value=v, contribution=c) for f, v, c in [
    ("class_rule", 0, -0.7), ("class_used", 1, 0.6), ("page_rows", 2, -0.4), ("kind_tutorial", 0, -0.3),
    ("api_facts", 2, -0.2), ("label_terms", 0.571429, 0.2), ("facts", 1, -0.1), ("coverage", 0.5, 0.1)]]


def _row(rank: int, **fields: Any) -> ValidateRow:
    return ValidateRow(record_id=f"docs:r{rank}", kind="docs_chunk", source=f"page_{rank}", rank=rank, **fields)


# Decided without Qwen, accepted; Qwen then listed the evidence, read from the cache.
LISTED_ROW = _row(1, p=0.87, p_threshold=0.76, asked_qwen=False, accepted=True, cached=True,
                  how="decided without Qwen", listing=LISTED, contributions=CONTRIBUTIONS,
                  evidence=[EvidenceRow(text="clamp", field="code_blocks", verified=True)],
                  facts=[FactRow(n=1, text="clamp", field="code_blocks")])
SKIPPED_ROW = _row(2, p=0.56, p_threshold=0.76, asked_qwen=False, accepted=False,
                   how="decided without Qwen", contributions=CONTRIBUTIONS)
ASKED_ROW = _row(3, p=0.91, p_threshold=0.76, asked_qwen=True, accepted=True, verdict="yes", margin=1.5,
                 threshold=0.9, how="Qwen asked", contributions=CONTRIBUTIONS)


def _calibrated(rows: list[ValidateRow]) -> ValidateTrace:
    return ValidateTrace(policy="calibrated", policy_text="accept when p reaches its threshold", model="qwen-1.5b",
                         threshold=0.9, accept_model="accept model (test)", p_threshold=0.76, top_k=8, rows=rows,
                         skipped=2)


def _records(chart: alt.TopLevelMixin) -> list[dict[str, Any]]:
    """Every data row of a chart spec (inline datasets of all layers)."""
    return [r for rows in chart.to_dict().get("datasets", {}).values() for r in rows]


# --- 1, 2: the validator panel's words ---------------------------------------------------------
def test_threshold_is_the_one_that_decides() -> None:
    calibrated = judging.threshold_text(_calibrated([]))
    assert "0.76" in calibrated and "0.9" not in calibrated
    rules = ValidateTrace(policy="qwen_and_evidence", model="qwen-1.5b", threshold=0.9)
    assert "0.9" in judging.threshold_text(rules)
    assert judging.threshold_text(ValidateTrace(policy="evidence_only")) == ""


def test_record_lines_say_each_thing_once_and_truthfully() -> None:
    line = judging.decision_line(SKIPPED_ROW)
    assert line.count("decided without Qwen") == 1 and line.count("0.56") == 1
    rule = _row(4, p=0.4, p_threshold=0.76, asked_qwen=False, accepted=True,
                how="decided without Qwen", notes=["judged past the top 8: the code uses the class"],
                rule="accepted by the class-use rule: the code uses Input (`Input.is_action_pressed`)")
    assert judging.decision_line(rule) == (
        "**p = 0.400** (threshold 0.76) · decided without Qwen · accepted by the class-use rule: the code uses "
        "Input (`Input.is_action_pressed`) · judged past the top 8: the code uses the class")
    assert "listed" not in judging.decision_line(LISTED_ROW)  # the verdict line says it
    verdict = judging.verdict_line(LISTED_ROW)
    assert "not run" not in verdict and "from cache" not in verdict
    assert "no verdict" in verdict and "evidence list by Qwen (cached)" in verdict
    assert "evidence list" in judging.evidence_heading(LISTED_ROW)
    assert judging.verdict_line(SKIPPED_ROW) == "Qwen: **not asked**"
    failed = LISTED_ROW.model_copy(update={"evidence": [], "listing": LIST_EMPTY})  # the call failed or found nothing
    assert judging.verdict_line(failed).endswith("came back empty, so the shared facts are shown")
    assert "yes" in judging.verdict_line(ASKED_ROW) and "threshold 0.9" in judging.verdict_line(ASKED_ROW)


def _validator_script() -> None:
    import streamlit as st

    from pipeline.ui import judging

    judging._validate(st.session_state["stage"], st.session_state["chunk"], None, "t")


def test_validator_panel_renders_without_contradictions() -> None:
    at = AppTest.from_function(_validator_script, default_timeout=60)
    at.session_state["stage"] = _calibrated([LISTED_ROW, SKIPPED_ROW, ASKED_ROW])
    at.session_state["chunk"] = CHUNK
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    text = [m.value for m in at.markdown]
    header = next(t for t in text if t.startswith("**Model:**"))
    assert "p ≥ 0.76" in header and "0.9" not in header
    assert not any(t.count("decided without Qwen") > 1 for t in text)
    assert not any(t.startswith("Qwen: ") and "decided without Qwen" in t for t in text)  # the p line says it
    assert not any("not run" in t and "from cache" in t for t in text)
    table = next(df.value for df in at.dataframe if "Qwen asked" in df.value.columns)
    assert set(table.loc[table["Qwen asked"] != "yes", "Qwen"]) == {"not asked"}  # no "not run" for a skipped call


def _pending_script() -> None:
    import streamlit as st

    from pipeline.ui import judging, render

    judging.panel_validate(st.session_state["trace"], None, pending={"D"})
    render.panel_final(st.session_state["trace"], None, pending={"D"})


def test_decisions_show_while_qwen_writes_the_evidence_lists() -> None:
    """The validator has decided; Qwen is still writing the accepted record's evidence list."""
    writing = LISTED_ROW.model_copy(update={"evidence": [], "cached": False, "listing": LIST_PENDING})
    stage = _calibrated([writing, SKIPPED_ROW]).model_copy(update={
        "status": "pending", "message": "decided: Qwen is now writing the evidence lists of 1 accepted record(s)"})
    final = [FinalItem(record_id=r.record_id, kind=r.kind, source=r.source, rank=r.rank, score=1.0 / r.rank,
                       accepted=r.accepted, p=r.p) for r in stage.rows]
    trace = Trace(chunk=ChunkInfo(text=CHUNK, sha256="0" * 64, n_bytes=len(CHUNK), n_lines=3, language="gdscript"),
                  kb=KBInfo(name="test", content_hash="0", counts={}), settings=Settings(alternatives=("D",)),
                  alternatives={"D": AlternativeTrace(name="D", validation=stage, final=final)})
    at = AppTest.from_function(_pending_script, default_timeout=60)
    at.session_state["trace"] = trace
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    infos = [i.value for i in at.info]
    assert any(i.startswith("Decided: Qwen is now writing the evidence lists of 1 accepted record(s). The "
                            "decisions below are final") for i in infos), infos
    assert not any("Qwen is judging" in i or "nothing is accepted yet" in i for i in infos), infos
    assert next(m.value for m in at.metric if m.label == "evidence lists") == "1 being written"
    assert any(m.value.endswith(LIST_PENDING) for m in at.markdown if m.value.startswith("Qwen: "))
    # the final panel already splits accepted from rejected; its downloads wait for the lists
    assert [m.value for m in at.metric if m.label in ("accepted", "rejected")] == ["1", "1"]
    assert any("the downloads wait for it" in i for i in infos)
    assert [b.label for b in at.get("download_button")] == ["Download the full trace (JSON)"]


# --- 3, 5: F's reranker table and chart --------------------------------------------------------
def _rerank() -> RerankTrace:
    rows = [RerankRow(record_id=f"docs:r{i}", kind="docs_chunk", source=f"first_2d_game/page_{i}", rank=i, before=i,
                      shift=0, provenance="both", score=s, reranker_score=raw, prior=prior)
            for i, (raw, s, prior) in enumerate([(2.14, 5.100712, 2.293349), (1.74, 4.610849, 2.126851)], 1)]
    return RerankTrace(reranker="learned ranker (LightGBM) + RRF prior × 1", top_n=2, scored=2, rows=rows)


def test_rerank_table_adds_up_as_displayed() -> None:
    df, cfg, caption = ranking.rerank_table(_rerank())
    assert ranking.STANDARDISED in df.columns and ranking.STANDARDISED in caption
    for z, prior, final in zip(df[ranking.STANDARDISED], df["RRF prior"], df["final score"], strict=True):
        assert f"{z + prior:.4f}" == f"{final:.4f}"  # the terms shown sum to the total shown
    assert "learned ranker" in cfg["reranker score"]["help"]


def test_reranker_chart_titles_fit_a_half_width_column() -> None:
    spec = charts.reranker_bars(_rerank().rows).to_dict()
    title = spec["encoding"]["x"]["title"]
    assert all(len(line) <= 30 for line in ([title] if isinstance(title, str) else title))
    legend = spec["encoding"]["color"]["legend"]
    assert legend["direction"] == "vertical" and legend["labelLimit"] >= 300
    parts = {r["part"] for r in _records(charts.reranker_bars(_rerank().rows))}
    assert ranking.STANDARDISED in parts


# --- 4: feature contributions ------------------------------------------------------------------
def test_contribution_chart_labels_every_bar() -> None:
    spec = charts.contribution_chart(CONTRIBUTIONS).to_dict()
    axis = spec["encoding"]["y"]["axis"]
    assert axis["labelOverlap"] is False and axis["labelLimit"] >= 300
    assert spec["height"]["step"] >= 20


# --- 6: highlighting ---------------------------------------------------------------------------
@pytest.mark.parametrize(("fact", "line", "hit"), [
    ("play", "the player's sprite", False),
    ("clamp", "clamping the position", False),
    ("clamp", "position.clamp(x)", True),
    ("$AnimatedSprite2D", "$AnimatedSprite2D.play()", True),
    ("position.clamp(", "p = position.clamp(x)", True),
    ("screen_size", "screen_size_max", False),
    ("screen_size", "clamp(Vector2.ZERO, screen_size)", True),
])
def test_evidence_marks_whole_identifiers(fact: str, line: str, hit: bool) -> None:
    row = _row(1, facts=[FactRow(n=1, text=fact, field="code_blocks")])
    out = mark_line(line, judging._evidence_marks(row))
    assert (f">{fact}</mark>" in out) is hit, out


# --- 7: rank shifts beyond the cap -------------------------------------------------------------
def test_slope_chart_marks_ranks_beyond_the_cap() -> None:
    rows = [Shift("a", "class/Input", 63, 7), Shift("b", "label/player_input", 2, 39), Shift("c", "label/clamp", 3, 45),
            Shift("d", "page", 1, 1)]
    chart = charts.slope_chart(rows, "D rank", "F rank", top=len(rows), cap=30)
    points = [r for r in _records(chart) if "id" in r]
    after = {r["id"]: r for r in points if r["x"] == 1}
    assert after["b"]["y"] != after["c"]["y"] and min(after["b"]["y"], after["c"]["y"]) > 30
    assert after["b"]["y"] < after["c"]["y"]  # rank order kept beyond the cap
    assert "39" in after["b"]["label"] and after["b"]["where"] == charts.BEYOND
    assert after["d"]["where"] == charts.IN_RANGE and after["d"]["label"] == "page"
    before = {r["id"]: r for r in points if r["x"] == 0}
    assert before["a"]["y"] > 30 and before["a"]["where"] == charts.BEYOND and before["a"]["before"] == 63
    layers = _layers(chart.to_dict())
    assert any(enc.get("text", {}).get("field") == "before" for enc in layers)  # left triangles' real ranks
    shapes = [enc["shape"] for enc in layers if "shape" in enc]
    assert shapes and all(sh.get("legend", "default") is None for sh in shapes)  # no 2nd legend to overflow


def _layers(spec: dict) -> list[dict]:
    """Every layer's encoding, nested layers included."""
    out = [spec.get("encoding", {})]
    for layer in spec.get("layer", []):
        out += _layers(layer)
    return out


def test_final_records_say_qwen_was_not_asked_where_the_accept_model_decided_without_it() -> None:
    from pipeline.trace import FinalItem
    from pipeline.ui import views

    items = [FinalItem(record_id="docs:a", kind="docs_chunk", rank=1, score=1.0, verdict="not_run", p=0.9,
                       accepted=True),
             FinalItem(record_id="docs:b", kind="docs_chunk", rank=2, score=0.5, verdict="yes", p=0.8, accepted=True),
             FinalItem(record_id="docs:c", kind="docs_chunk", rank=30, score=0.1, verdict="not_run")]
    qwen = list(views.final_frame(items)["Qwen"])
    assert qwen[0] == "not asked" and qwen[1] == "yes" and qwen[2] == "not run"  # decided without / asked / unjudged


def test_the_fast_phase_bar_counts_a_long_chunks_functions_and_nothing_else() -> None:
    calls: list[tuple[float, str]] = []

    class Bar:
        def progress(self, value: float, text: str = "") -> None:
            calls.append((value, text))

    show = runs.fast_progress(Bar())
    show(ProgressEvent("embedding index", 3, 10))  # loading the index has its own bars on the loading screen
    show(ProgressEvent("functions", 42, 168, "F"))
    assert calls == [(0.25, "F: searching the long chunk function by function, 42 of 168")]
