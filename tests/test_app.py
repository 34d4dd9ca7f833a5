"""Dashboard tests through Streamlit's AppTest (no browser).

Most tests search the small user KB in fixtures/ (seconds, no Qwen); the one
``model`` test runs the reference chunk through D and F on the built-in KB
with the real Qwen models (minutes on 2 cores; verdicts are cached on disk).
``app.py`` is the ``st.navigation`` router: AppTest opens it (the Pipeline page)
or one page script directly.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder must never reach for a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Finished traces go to a temp folder: a trace cached by an earlier test run must not stand in for a run.
if "GDPOC_TRACE_CACHE" not in os.environ:
    os.environ["GDPOC_TRACE_CACHE"] = tempfile.mkdtemp(prefix="gdpoc-traces-")
    atexit.register(shutil.rmtree, os.environ["GDPOC_TRACE_CACHE"], ignore_errors=True)  # no folder left per run

from streamlit.testing.v1 import AppTest

from pipeline.kb.load import load_bytes
from pipeline.kb.store import from_load
from pipeline.settings import Settings
from pipeline.trace import ProgressEvent, Trace
from pipeline.ui import common, flow
from pipeline.ui.engines import UserKB
from pipeline.ui.highlight import Mark, mark_line, marked_block
from pipeline.ui.jobs import Job

REPO = Path(__file__).resolve().parents[1]
# The app opens the built-in KB with its indexes; the session's `engine` fixture builds any that are
# missing (with progress) before the first app starts, so no app run can time out on a cold cache.
pytestmark = pytest.mark.usefixtures("engine")
APP = REPO / "app.py"
PAGES = sorted((REPO / "pages").glob("*.py"))
PIPELINE_PAGE, COMPARE_PAGE = REPO / "pages" / "0_Pipeline.py", REPO / "pages" / "1_Compare_D_vs_F.py"
KB_PAGE = REPO / "pages" / "3_Knowledge_base.py"
SMALL_KB = REPO / "fixtures" / "user_kb" / "small.jsonl"
BAD_KB = REPO / "fixtures" / "bad" / "malformed.jsonl"
REFERENCE_CHUNK = (REPO / "fixtures" / "reference_chunk.gd").read_text()
DASH_CHUNK = "func _physics_process(delta):\n\tif Input.is_action_just_pressed(\"dash\"):\n\t\tstart_dash()\n"
PANELS = ["1 · Raw chunk", "2 · BM25 candidates", "3 · Embedding candidates", "4 · Union of both legs",
          "5 · Fusion (D) / reranker (F)", "6 · Validator", "7 · Final records"]


def _small_kb() -> UserKB:
    data = SMALL_KB.read_bytes()
    result = load_bytes(data, SMALL_KB.name)
    return UserKB(SMALL_KB.name, "test-small-kb", from_load(result, SMALL_KB.name), list(result.issues), len(data))


def _app(script: Path, *, small_kb: bool = True, timeout: float = 300) -> AppTest:
    at = AppTest.from_file(str(script), default_timeout=timeout)
    if small_kb:  # keeps these tests independent of the ~29k-record built-in index
        at.session_state["user_kb"] = _small_kb()
        at.session_state["kb_choice"] = "uploaded"
    return at


def _no_models(at: AppTest) -> None:
    at.toggle(key="s_run_validator").set_value(False)
    at.selectbox(key="s_reranker").set_value("none")


def _problems(at: AppTest) -> list[str]:
    return [f"{e.message}\n{e.stack_trace}" for e in at.exception]


def _finish_model_phase(at: AppTest, timeout: float = 900) -> None:
    """The model phase runs in a worker thread: wait on its done event, then draw the page again."""
    run = at.session_state["run"]
    if run.job is not None:
        assert run.job.wait(timeout), "the model phase did not finish"
    at.run()


def _final_decisions(at: AppTest) -> dict[str, dict[str, set[str]]]:
    """alternative -> decision -> record sources, read from the final panel's tables."""
    out: dict[str, dict[str, set[str]]] = {}
    for tab in at.tabs:
        if not tab.label.endswith("final"):
            continue
        alt = out.setdefault(tab.label.split(" ")[0], {})
        for df in tab.dataframe:
            table = df.value
            if "decision" in table.columns:
                for decision, source in zip(table["decision"], table["source"], strict=True):
                    alt.setdefault(decision, set()).add(source)
    return out


# --- pure helpers --------------------------------------------------------------------------------
def test_highlight_escapes_html_and_marks_terms() -> None:
    line = 'if this < 3: $AnimatedSprite2D.play("<b>run</b>") # Input.is_action_pressed'
    out = mark_line(line, [Mark("pressed"), Mark("AnimatedSprite2D"), Mark("is")])
    assert "<b>" not in out and "&lt;b&gt;" in out and "&lt; 3" in out
    assert ">pressed</mark>" in out  # an identifier part counts
    assert ">AnimatedSprite2D</mark>" in out
    assert "th<mark" not in out  # "is" glued to letters ("this") is not a match
    block = marked_block("a\n\nb <i>", [], line_numbers=True)
    assert "&lt;i&gt;" in block and block.count("\n") == 2  # blank lines survive, nothing unescaped


def test_job_cancel_stops_at_the_next_check_and_errors_become_messages() -> None:
    started, release = threading.Event(), threading.Event()
    steps: list[int] = []

    def work(job: Job) -> str:
        for i in range(100):
            job.progress(ProgressEvent("validate", i, 100, "D", note=f"record {i}"))
            steps.append(i)
            started.set()
            release.wait(5)  # one step at a time, released by the test
            job.check()
        return "done"

    job = Job("t", work).start()
    assert started.wait(5)
    job.cancel.set()
    release.set()
    assert job.wait(5) and job.cancelled and job.result is None
    assert steps == [0]  # stopped at the first check after Cancel
    (event,) = job.snapshot()
    assert (event.label, event.done, event.total) == ("validate D", 0, 100) and job.note == "validate D: record 0"
    job.finish("D")
    assert [(e.done, e.total) for e in job.snapshot()] == [(100, 100)]

    def boom(job: Job) -> None:
        raise ValueError("the model is missing")

    failed = Job("t", boom).start()
    assert failed.wait(5) and failed.error == "the model is missing" and not failed.cancelled


def test_a_session_bound_job_stops_once_its_page_has_been_gone_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.ui import jobs

    alive = {"s1": True}
    clock = [100.0]
    monkeypatch.setattr(jobs, "session_alive", lambda sid: alive[sid])
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])
    job = Job("evaluation", lambda j: None, session_id="s1")
    job.check()  # connected: nothing happens
    alive["s1"] = False
    job.check()  # gone just now: a reconnect may follow
    clock[0] += jobs.ORPHAN_GRACE_S / 2
    alive["s1"] = True
    job.check()  # it came back: the grace starts again
    alive["s1"] = False
    job.check()
    clock[0] += jobs.ORPHAN_GRACE_S
    with pytest.raises(jobs.JobCancelled):
        job.check()
    assert job.cancel.is_set()
    unbound = Job("run", lambda j: None)  # a run is not bound: its trace is cached for the next visit
    unbound.check()


# --- pages ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", [APP, *PAGES], ids=lambda p: p.name)
def test_page_loads(script: Path) -> None:
    at = _app(script)
    at.run()
    assert not at.exception, _problems(at)
    assert at.title, "every page has a title"


def test_main_fast_run_renders_all_panels_and_caches() -> None:
    at = _app(APP)
    at.run()
    _no_models(at)
    at.radio(key="main_alts").set_value("Both")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    heads = [h.value for h in at.subheader]
    assert [h for h in heads if h in PANELS] == PANELS
    assert {t.label for t in at.tabs} >= {"D · final", "F · final"}
    assert not at.error
    at.button(key="main_run").click()
    at.run()
    assert any("from this session's cache" in m.value for m in at.markdown)


def test_background_validation_fills_in_the_validator_and_final_panels() -> None:
    """The model phase as a job (evidence-only policy: no Qwen), drawn when it ends."""
    at = _app(APP)
    at.run()
    at.selectbox(key="s_reranker").set_value("none")
    at.selectbox(key="s_accept_policy").set_value("evidence_only")
    at.radio(key="main_mode").set_value("Paste")
    at.run()
    at.text_area(key="main_text").set_value(DASH_CHUNK)
    at.radio(key="main_alts").set_value("Both")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    assert at.session_state["run"].job is not None, "validation runs in the background"
    _finish_model_phase(at)
    assert not at.exception, _problems(at)
    assert not [i.value for i in at.info if "Waiting for the model stages" in i.value]
    decisions = _final_decisions(at)
    for alt in ("D", "F"):
        assert "team/dash_ability" in decisions[alt].get("accepted", set()), decisions
        assert "label/checkpoint" not in decisions[alt].get("accepted", set()), decisions
    validator = next(df.value for df in at.dataframe if "shared facts" in df.value.columns)
    assert validator["accepted"].any() and (validator["shared facts"] > 0).any()


def test_compare_page_draws_agreement_shifts_and_cost() -> None:
    at = _app(COMPARE_PAGE)
    at.run()
    _no_models(at)
    at.button(key="compare_run").click()
    at.run()
    assert not at.exception, _problems(at)
    heads = {h.value for h in at.subheader}
    assert {"Final ranked lists", "Where they agree", "Rank shifts between them", "Cost"} <= heads
    usage = next(df.value for df in at.dataframe if "candidates sent" in df.value.columns)
    assert set(usage["stage"]) == {"embedding", "rerank"}  # no validator ran
    assert set(usage[usage["stage"] == "rerank"]["candidates sent"]) == {"0"}  # union order: nothing scored


def test_bad_chunk_is_a_message_not_a_traceback() -> None:
    at = _app(APP)
    at.run()
    _no_models(at)
    at.radio(key="main_mode").set_value("Paste")
    at.run()
    at.text_area(key="main_text").set_value("   \n\t\n")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    assert any("empty" in e.value for e in at.error) and not any("Still showing" in i.value for i in at.info)
    # after a good run, a bad input says that the run on screen is the last one, not this input's
    at.text_area(key="main_text").set_value("func _ready():\n\tprint(position)\n")
    at.button(key="main_run").click()
    at.run()
    at.text_area(key="main_text").set_value("   \n")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    assert any("empty" in e.value for e in at.error)
    assert "Still showing the last run (pasted chunk, 2 lines); this input was not run." in [i.value for i in at.info]


def test_a_long_chunk_is_searched_function_by_function_behind_a_bar_that_goes_away() -> None:
    at = _app(APP)
    at.run()
    _no_models(at)
    at.radio(key="main_mode").set_value("Paste")
    at.run()
    at.text_area(key="main_text").set_value("".join(
        f"func f{n}():\n\tvar hp = {n}\n\tprint(hp)\n\tposition.x += hp\n\n" for n in range(40)))
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    assert "best over 40 functions" in at.session_state["run"].fast.alternatives["D"].bm25.scorer
    assert [h for h in (h.value for h in at.subheader) if h in PANELS] == PANELS
    assert not any(getattr(e, "type", "") == "progress" for e in at.main)  # the bar is gone once the run is drawn


def test_kb_page_reports_bad_lines_and_uses_good_ones() -> None:
    at = _app(KB_PAGE)
    at.run()
    at.file_uploader(key="kb_upload_page").upload(BAD_KB.name, BAD_KB.read_bytes(), "application/jsonl")
    at.run()
    assert not at.exception, _problems(at)
    issues = next(df.value for df in at.dataframe if "reason" in df.value.columns)
    errors = issues[issues["severity"] == "error"]
    assert [int(w.rsplit(":", 1)[1]) for w in errors["where"]] == [2, 4, 5, 7, 9, 10]
    assert at.session_state["kb_choice"] == "uploaded"
    assert len(at.session_state["user_kb"].store.records) == 4
    table = next(df.value for df in at.dataframe if "doc_path" in df.value.columns and "id" in df.value.columns)
    assert set(table["id"]) == {"bad:docs:area-coin", "bad:api:rand-range", "bad:label:coin-pickup",
                                "bad:docs:timer-signal"}


def test_a_failed_reupload_keeps_the_good_kb_and_stays_in_sight() -> None:
    at = _app(KB_PAGE)  # the small KB is loaded and chosen
    at.run()
    good = at.session_state["user_kb"]
    at.file_uploader(key="kb_upload_page").upload("nothing.jsonl", b"{oops\n[1]\n", "application/jsonl")
    at.run()
    assert not at.exception, _problems(at)
    assert at.session_state["user_kb"] is good and at.session_state["kb_choice"] == "uploaded"
    assert any("nothing.jsonl: no valid record; 2 bad line(s). Still searching" in e.value for e in at.error)
    assert at.expander[0].proto.expanded  # the upload's result is not folded away
    issues = next(df.value for df in at.dataframe if "reason" in df.value.columns)
    assert len(issues) == 2


def test_kb_page_shows_the_training_set_and_which_learned_models_are_ready(engine) -> None:
    from pipeline.models import trained

    stats = trained.training_set(engine.store.content_hash)
    assert stats is not None and stats["queries"] > 1000  # make test trains before the tests run
    at = _app(KB_PAGE, small_kb=False)
    at.run()
    assert not at.exception, _problems(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["training queries"] == f"{stats['queries']:,}"
    assert metrics["pages with code"] == f"{stats['pages_with_code']:,}"
    models = next(df.value for df in at.dataframe if "model" in df.value.columns and "status" in df.value.columns)
    status = dict(zip(models["model"], models["status"], strict=True))
    assert status["F's learned ranker"] == "ready" and status["accept model"] == "ready"


# --- the flow overview, the navigation and the caches ----------------------------------------------
def _flattened(at: AppTest) -> list[Any]:
    """Every element of the main area in page order (containers opened)."""
    out: list[Any] = []

    def walk(node: Any) -> None:
        out.append(node)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return out


def test_sidebar_defaults_are_the_settings_the_demo_warmer_uses() -> None:
    """The warmer caches traces under Settings(); the sidebar's untouched widgets must build exactly that."""
    def script() -> None:
        import streamlit as st

        from pipeline.ui import sidebar

        st.session_state["built"] = sidebar.settings_sidebar()

    at = AppTest.from_function(script, default_timeout=60)
    at.run()
    assert not at.exception, _problems(at)
    assert at.session_state["built"] == Settings()
    # the margin threshold is Qwen's yes: live for the "Qwen yes" policies only, not the calibrated default
    assert at.checkbox(key="s_custom_thr").disabled
    at.selectbox(key="s_accept_policy").set_value("qwen_only")
    at.run()
    assert not at.checkbox(key="s_custom_thr").disabled


def test_navigation_names_the_main_page_pipeline_and_reaches_every_page() -> None:
    at = _app(APP)
    at.run()
    assert not at.exception, _problems(at)
    assert "Godot chunk" in at.title[0].value  # the default page is the Pipeline page
    nav = APP.read_text()
    assert 'title="Pipeline"' in nav and "st.navigation(" in nav
    for script, title in ((COMPARE_PAGE, "Compare D vs F"), (REPO / "pages" / "2_Evaluation.py", "Evaluation"),
                          (KB_PAGE, "Knowledge base"), (PIPELINE_PAGE, "Godot chunk")):
        at.switch_page(str(script.relative_to(REPO)))
        at.run()
        assert not at.exception, _problems(at)
        assert title in at.title[0].value


def test_flow_overview_sits_above_the_input_and_counts_every_stage() -> None:
    at = _app(APP)
    at.run()
    _no_models(at)
    at.radio(key="main_alts").set_value("Both")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    elements = _flattened(at)
    kinds = [getattr(e, "type", "") for e in elements]
    charts = [i for i, k in enumerate(kinds) if k == "vega_lite_chart"]
    assert charts and charts[0] < kinds.index("form"), "the flow strip comes before the input form"
    spec = json.loads(elements[charts[0]].proto.spec)
    assert "count_text" in json.dumps(spec) and "href" in json.dumps(spec)  # node texts, links to the panels
    trace: Trace = at.session_state["run"].full
    nodes = {(n.alternative, n.column): n for n in flow.flow_nodes(trace)}
    for name, alt in trace.alternatives.items():
        assert alt.bm25 is not None and alt.union is not None
        assert nodes[(name, "bm25")].count == alt.bm25.count and nodes[(name, "union")].count == alt.union.count
        assert nodes[(name, "validate")].status == "skipped" and nodes[(name, "final")].count is None
    report = next(b for b in at.get("download_button") if "Report" in b.proto.label)
    assert not report.proto.disabled


def test_flow_nodes_and_eta_while_the_model_stages_are_pending() -> None:
    from pipeline.engine import Engine

    engine = Engine.open([SMALL_KB])
    s = Settings()
    prepared = engine.prepare(DASH_CHUNK, s)
    nodes = {(n.alternative, n.column): n for n in flow.flow_nodes(prepared.trace)}
    union_f = prepared.trace.alternatives["F"].union
    assert union_f is not None
    assert nodes[("F", "ranking")].status == "pending"
    assert nodes[("F", "ranking")].count_text == f"{min(s.rerank_top_n, union_f.count)} to score"
    assert {nodes[(a, "validate")].status for a in "DF"} == {"pending"}
    chars = len(prepared.trace.chunk.text)
    assert nodes[("D", "validate")].time_text == f"~{s.judge_seconds(chars):.0f} s est."
    assert nodes[("D", "ranking")].status == "ok"  # fusion is part of the fast phase
    estimate = s.rerank_seconds() + 2 * s.judge_seconds(chars)
    first = flow.eta(prepared.trace, prepared.trace, 0.0)
    assert (first.estimate_s, first.left_s) == pytest.approx((estimate, estimate))
    assert set(first.running) == {"D validate", "F rerank", "F validate"}
    assert flow.eta(prepared.trace, prepared.trace, 10.0).left_s == pytest.approx(estimate - 10.0)
    late = flow.eta(prepared.trace, prepared.trace, estimate + 5)
    assert late.left_s == 0.0 and "over the" in late.text
    done = prepared.trace.model_copy(deep=True)
    done.close_pending("finished")
    assert flow.eta(prepared.trace, done, 3.0).text == "model stages done"


def test_the_pending_rerank_node_counts_what_the_reranker_will_score(engine) -> None:
    # The learned ranker scores the whole union; only the model rerankers stop at "Rerank the top N".
    for s in (Settings(), Settings(reranker="qwen")):
        prepared = engine.prepare(REFERENCE_CHUNK, s)
        union_f = prepared.trace.alternatives["F"].union
        assert union_f is not None and union_f.count > s.rerank_top_n
        node = next(n for n in flow.flow_nodes(prepared.trace) if (n.alternative, n.column) == ("F", "ranking"))
        want = union_f.count if s.reranker == "learned" else s.rerank_top_n
        assert node.count_text == f"{want} to score"


def test_loading_bars_eta_is_the_rate_since_the_bar_started() -> None:
    # 3,000 of 29,000 texts 60 s after the bar started at 1,000 (cached ones): 13 min left at that rate.
    assert common.eta_seconds((100.0, 1_000), 160.0, 3_000, 29_000) == 60.0 / 2_000 * 26_000
    assert common.eta_seconds((100.0, 1_000), 160.0, 1_000, 29_000) is None  # no rate yet
    assert common.eta_seconds((100.0, 0), 160.0, 29_000, 29_000) is None  # done
    assert common.fmt_duration(common.eta_seconds((100.0, 1_000), 160.0, 3_000, 29_000) or 0) == "13 min"


def test_a_finished_trace_comes_back_from_disk_in_a_new_session() -> None:
    def fast_run(at: AppTest) -> None:
        at.run()
        _no_models(at)
        at.radio(key="main_mode").set_value("Paste")
        at.run()
        at.text_area(key="main_text").set_value(DASH_CHUNK + "\n# disk cache test\n")
        at.button(key="main_run").click()
        at.run()
        assert not at.exception, _problems(at)

    first = _app(APP)
    fast_run(first)
    assert not first.session_state["run"].from_cache
    second = _app(APP)  # a new session: its own session cache is empty
    fast_run(second)
    run = second.session_state["run"]
    assert run.from_cache and run.cache_origin == "disk"
    assert run.full == first.session_state["run"].full
    assert any("cache on disk" in m.value for m in second.markdown)


# --- the reference case, with the real models ------------------------------------------------------
@pytest.mark.model
def test_union_panel_says_which_godot3_renames_joined_by_rule() -> None:
    at = _app(APP, small_kb=False)
    at.run()
    _no_models(at)
    at.radio(key="main_mode").set_value("Paste")
    at.run()
    at.text_area(key="main_text").set_value((REPO / "fixtures" / "chunks" / "godot3_player.gd").read_text())
    at.radio(key="main_alts").set_value("D")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    assert any("Joined as `rule`" in c.value and "Godot 3 → 4 rename" in c.value and "rule matched" in c.value
               for c in at.caption), \
        [c.value for c in at.caption]


def test_reference_chunk_accepts_the_2d_tutorial_not_the_3d_one() -> None:
    at = _app(APP, small_kb=False, timeout=600)
    at.run()
    assert not at.exception, _problems(at)
    at.radio(key="main_mode").set_value("Example")
    at.run()
    at.selectbox(key="main_example").set_value(0)  # the reference chunk comes first
    at.radio(key="main_alts").set_value("Both")
    at.button(key="main_run").click()
    at.run()
    assert not at.exception, _problems(at)
    _finish_model_phase(at)
    assert not at.exception, _problems(at)
    decisions = _final_decisions(at)
    assert set(decisions) == {"D", "F"}, decisions
    accepted = decisions["D"].get("accepted", set()) | decisions["F"].get("accepted", set())
    assert "first_2d_game/coding_the_player" in accepted, decisions
    assert "first_3d_game/player_movement_code" not in accepted, decisions
    assert not [w.value for w in at.warning if "not ready" in w.value]


def test_cancelling_an_evaluation_reaches_the_running_chunks_model_stages(engine) -> None:
    """Cancel once stopped only between chunks, and a chunk under F's Qwen reranker runs about a minute."""
    from pipeline.evaluate import evaluate_set, load_set
    from pipeline.models.base import Cancelled

    asked: list[int] = []

    def cancelled() -> bool:
        asked.append(1)
        return True

    with pytest.raises(Cancelled):
        evaluate_set(engine, load_set(split="test")[:3], Settings(run_validator=False), cancelled=cancelled)
    assert len(asked) >= 2, "the first chunk's reranker was never asked whether to stop"


def test_evaluation_report_shows_each_figures_interval_and_the_paired_tests(engine) -> None:
    from pipeline.evaluate import evaluate_set, load_set

    chunks = load_set(split="test")[:5]
    report = evaluate_set(engine, chunks, Settings(run_validator=False))

    def script() -> None:
        import streamlit as st

        from pipeline.ui import evaluation

        evaluation.render_report(st.session_state["report"], st.session_state["chunks"])

    at = AppTest.from_function(script, default_timeout=60)
    at.session_state["report"], at.session_state["chunks"] = report, chunks
    at.run()
    assert not at.exception, _problems(at)
    specs = [e.proto.spec for e in _flattened(at) if getattr(e, "type", "") == "vega_lite_chart"]
    assert any("95% interval over chunks" in s for s in specs)
    table = at.dataframe[0].value
    f_row = table[table["system"] == "F (reranker)"].iloc[0]
    ci = report.intervals["F"]
    assert f_row["nDCG@10 95% CI"] == f"{ci.low:.3f} – {ci.high:.3f}"
    tests = next(d.value for d in at.dataframe if "comparison" in d.value.columns)
    assert "F (reranker) vs D (fusion)" in set(tests["comparison"])


@pytest.mark.parametrize(("key", "caption"), [
    ("blind", "blind set (blind.jsonl): 18 chunks"),
    ("rule_tune", "rule tune set (rule_tune.jsonl): 16 chunks"),
    ("dev_rule", "dev set, class pages by the rule (dev_rule.jsonl), test half: 17 chunks")])
def test_evaluation_page_offers_each_shipped_set(key: str, caption: str) -> None:
    at = _app(REPO / "pages" / "2_Evaluation.py")
    at.run()
    at.radio(key="eval_source").set_value(key)
    at.run()
    assert not at.exception, _problems(at)
    assert any(caption in c.value for c in at.caption), [c.value for c in at.caption]


def test_evaluation_page_evaluates_one_half_of_the_dev_set() -> None:
    at = _app(REPO / "pages" / "2_Evaluation.py")
    at.run()
    half = at.radio(key="eval_half")
    assert half.options == ["whole set", "tune half (where constants were chosen)",
                            "test half (where figures are claimed)"]
    assert half.value == "test"  # like `pipeline eval`: the half nothing was tuned on
    assert any("dev set (dev.jsonl), test half: 17 chunks. Rough time for 17 chunk(s)" in c.value
               for c in at.caption), [c.value for c in at.caption]
    half.set_value("all")
    at.run()
    at.slider(key="eval_n").set_value(30)
    at.run()
    at.radio(key="eval_half").set_value("tune")
    at.run()
    assert not at.exception, _problems(at)
    assert any("dev set (dev.jsonl), tune half: 16 chunks. Rough time for 16 chunk(s)" in c.value
               for c in at.caption), [c.value for c in at.caption]
    at.radio(key="eval_source").set_value("blind")  # not split: no choice of half
    at.run()
    assert not at.exception, _problems(at)
    assert not [r for r in at.radio if r.key == "eval_half"]
