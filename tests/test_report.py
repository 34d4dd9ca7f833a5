"""The HTML report (pipeline/report.py) of a real run of the reference chunk.

The traces come from the real engine on the built-in KB: retrieval only (validator off, F's reranker
"none": seconds), and — marked ``model`` — the same with the Qwen 1.5B validator (verdicts are cached
on disk, so only a cold cache costs ~1 min). The browser tests open the file in Debian's chromium with
every request that is not ``file://`` aborted, check that each chart was drawn as SVG, and print it to
PDF; the PDF and screenshots go to ``artifacts/``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipeline.engine import Engine
from pipeline.report import SECTIONS, render_report, write_report
from pipeline.settings import Settings
from pipeline.trace import FinalItem, Trace

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
REFERENCE = ROOT / "fixtures" / "reference_chunk.gd"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
FAST = Settings(run_validator=False, reranker="none")
CHART_DIV = re.compile(r'<div class="chart" id="(chart-\d+)">')


@pytest.fixture(scope="module")
def fast_trace(engine: Engine) -> Trace:
    return engine.run(REFERENCE.read_text(), FAST)


@pytest.fixture(scope="module")
def validated_trace(engine: Engine) -> Trace:
    return engine.run(REFERENCE.read_text(), Settings(reranker="none"))


# --- the HTML itself ---------------------------------------------------------------------------
def test_report_has_every_section_chart_and_the_final_jsonl(fast_trace: Trace) -> None:
    html = render_report(fast_trace, origin="reference chunk")
    for sid, *_ in SECTIONS:
        assert f'<section id="{sid}">' in html, sid
    charts = CHART_DIV.findall(html)
    # flow + per alternative (embedding, fusion: 2) + compare (slope, latency); F's reranker is off: no charts
    assert len(charts) == 1 + 2 + 2 + 2, charts
    assert '"href"' in html and "#panel-bm25" in html  # the flow's nodes link to the sections
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', html), "nothing is loaded from a network"
    jsonl = re.findall(r'<pre class="jsonl">(.*?)</pre>', html, re.S)
    assert len(jsonl) == 2
    import html as html_lib

    for block, alt in zip(jsonl, fast_trace.alternatives.values(), strict=True):
        items = [FinalItem.model_validate_json(line) for line in html_lib.unescape(block).splitlines()]
        assert items == alt.final
    assert "<script>alert" not in render_report(fast_trace, origin="<script>alert(1)</script>")
    assert "Godot 3 rename rule" not in html  # Godot 4 code: no rename rows, no count
    # the classes it uses (Input, AnimatedSprite2D) are counted, each with the code that uses it
    union = fast_trace.alternatives["D"].union
    assert union is not None
    classes = [r for r in union.rows if r.rule]
    assert {r.source for r in classes} == {"class/Input", "class/AnimatedSprite2D"}, classes
    assert '<b>2</b><span>classes used (rule)</span>' in html
    assert all(html_lib.escape(r.rule or "") in html for r in classes)


def test_report_counts_the_godot3_renames_and_shows_the_code_they_matched(engine: Engine) -> None:
    trace = engine.run((ROOT / "fixtures" / "chunks" / "godot3_player.gd").read_text(), FAST)
    union = trace.alternatives["D"].union
    assert union is not None and union.provenance_counts["rule"] > 0  # D's legs find no rename for it
    html = render_report(trace, origin="godot3_player.gd")
    renames = [r for r in union.rows if r.rule and r.source.startswith("migrating/")]
    assert renames and "Godot 3 rename rule" in html
    import html as html_lib

    assert all(html_lib.escape(r.rule or "") in html for r in renames)


def test_cli_run_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = subprocess.run([sys.executable, "-m", "pipeline", "run", "--alt", "D", "--no-validate", "--html", str(out),
                          str(REFERENCE)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    html = out.read_text()
    assert "Run report: reference_chunk.gd" in html and '<section id="panel-final">' in html
    assert "opens offline" in res.stderr
    bad = subprocess.run([sys.executable, "-m", "pipeline", "run", "--alt", "D", "--no-validate", "--html",
                          str(tmp_path / "missing" / "dir" / "r.html"), "/nonexistent.gd"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


# --- in chromium, offline ----------------------------------------------------------------------
@pytest.fixture
def offline_page() -> Iterator[tuple[Page, list[str]]]:
    """A chromium page that may load file:// only; the list collects every other request and every failure."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (`make browser`)")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 900})

            def route(r: Route) -> None:
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    problems.append(f"network request: {r.request.url}")
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("requestfailed", lambda req: problems.append(f"failed: {req.url}"))
            page.on("console", lambda m: problems.append(f"console error: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            yield page, problems
        finally:
            browser.close()


def _open(page: Page, path: Path) -> None:
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.charts !== undefined", timeout=60_000)


def _pdf_pages(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page[^s]", data))


@pytest.mark.browser
def test_report_opens_offline_with_every_chart_drawn_and_prints(fast_trace: Trace,
                                                                 offline_page: tuple[Page, list[str]]) -> None:
    page, problems = offline_page
    ARTIFACTS.mkdir(exist_ok=True)
    path = write_report(fast_trace, ARTIFACTS / "report.html", origin="Reference: Dodge the Creeps player _process")
    n_charts = len(CHART_DIV.findall(path.read_text()))
    _open(page, path)
    assert page.evaluate("document.body.dataset.charts") == "ready", problems
    drawn = page.locator(".chart svg.marks").count()
    assert drawn == n_charts, f"{drawn} of {n_charts} charts drawn"
    assert page.locator(".chart svg .mark-rect path, .chart svg .mark-rect rect").count() > 0
    assert page.locator('.chart svg text', has_text="50 hits").count() >= 1  # the flow strip's BM25 node of D
    page.screenshot(path=str(ARTIFACTS / "report.png"))
    # A node is a link to its section.
    union = fast_trace.alternatives["D"].union
    assert union is not None
    page.locator('.chart svg text', has_text=f"{union.count} candidates").first.click()
    page.wait_for_function("location.hash === '#panel-union'", timeout=10_000)

    pdf = ARTIFACTS / "report.pdf"
    page.emulate_media(media="print")
    page.pdf(path=str(pdf), prefer_css_page_size=True, print_background=True)
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    # One page at least per section (each starts a page), far fewer than one per table row.
    assert len(SECTIONS) <= _pdf_pages(data) <= 80, _pdf_pages(data)
    assert 30_000 < len(data) < 20_000_000
    assert page.evaluate("getComputedStyle(document.querySelector('.top')).position") == "static"
    page.set_viewport_size({"width": 1123, "height": 794})  # A4 landscape at 96 dpi
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "report_print_page1.png"))
    assert problems == []
    print(f"\nreport {path.stat().st_size / 1e6:.2f} MB, {n_charts} charts; PDF {_pdf_pages(data)} pages, "
          f"{len(data) / 1e6:.2f} MB")


@pytest.mark.browser
@pytest.mark.model
def test_report_of_a_validated_run_draws_the_validator(validated_trace: Trace,
                                                       offline_page: tuple[Page, list[str]]) -> None:
    page, problems = offline_page
    ARTIFACTS.mkdir(exist_ok=True)
    path = write_report(validated_trace, ARTIFACTS / "report_validated.html", origin="reference chunk, validated")
    html = path.read_text()
    _open(page, path)
    assert page.evaluate("document.body.dataset.charts") == "ready", problems
    assert page.locator(".chart svg.marks").count() == len(CHART_DIV.findall(html))
    # D's and F's p charts (policy "calibrated")
    assert page.locator("#panel-validate .chart svg text", has_text="calibrated probability").count() == 2
    accepted = page.locator("#panel-final h4.accepted")
    assert accepted.count() >= 1
    assert page.locator("#panel-final").get_by_text("first_2d_game/coding_the_player").count() >= 1
    page.emulate_media(media="print")
    page.pdf(path=str(ARTIFACTS / "report_validated.pdf"), prefer_css_page_size=True, print_background=True)
    assert problems == []


def test_the_p_chart_colours_a_rule_accept_apart_from_a_p_accept() -> None:
    from pipeline.trace import ValidateRow
    from pipeline.ui.charts import p_chart

    def row(rid: str, p: float, accepted: bool, rule: str = "") -> ValidateRow:
        return ValidateRow(record_id=rid, kind="api_mapping", source="class/Input", rank=1, p=p, accepted=accepted,
                           asked_qwen=False, rule=rule)

    rule = "accepted by the class-use rule: the code uses Input (`Input.is_action_pressed`)"
    rows = [row("api:a", 0.9, True), row("api:b", 0.56, True, rule), row("api:c", 0.3, False)]
    data = p_chart(rows, 0.757).to_dict()["datasets"]
    values = next(v for v in data.values() if len(v) == 3)
    assert [v["accepted"] for v in values] == ["accepted", "accepted by a rule", "not accepted"]
    assert values[1]["why"] == rule  # the tooltip says which rule, since p sits below the threshold
