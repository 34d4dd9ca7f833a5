"""End-to-end test in a real browser: Debian's chromium drives the dashboard through Playwright.

The app runs as a real ``streamlit run`` server on a free localhost port. The test pastes the
reference chunk, runs D and F with the real local models, waits for the validator, reads the
accepted records out of the final panel's tables, checks that the flow overview (both alternatives'
counts) sits above the fold at 1366×900 on the Pipeline and the Compare page, and saves screenshots
(the fold and the full page) of both under ``artifacts/``. The server gets its own empty trace cache,
so the run really runs (a demo-warmed trace on disk would otherwise answer at once).

Slow on a cold cache (Qwen 1.5B judges ~3–5 s per candidate, F's Qwen 0.5B reranks ~30); verdicts
and reranker scores are cached on disk, so a second run takes about a minute.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.server import ServerFailed, serve

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

REPO = Path(__file__).resolve().parents[1]
# The app opens the built-in KB with its indexes; the session's `engine` fixture builds any that are
# missing (with progress) before the first app starts, so no app run can time out on a cold cache.
pytestmark = pytest.mark.usefixtures("engine")
ARTIFACTS = REPO / "artifacts"
REFERENCE_CHUNK = REPO / "fixtures" / "reference_chunk.gd"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
VIEWPORT: ViewportSize = {"width": 1366, "height": 900}  # the stakeholder's screen: the overview must fit
MAX_SHOT_HEIGHT = 32_000  # px: a bound on the temporary viewport used for the full-page screenshots

# Bounded waits (the test never asserts on how long anything took).
SERVER_START_S = 120.0
ENGINE_READY_S = 600.0  # first page load opens the KB, its BM25 index and the MiniLM vectors
RUN_DONE_S = 900.0  # cold caches: Qwen reranks and validates for minutes on 2 cores
PAGE_READY_S = 180.0
POLL_S = 2.0

TWO_D = "first_2d_game/coding_the_player"
THREE_D = "first_3d_game/player_movement_code"

# Texts the app shows when something went wrong; seeing one ends the wait at once.
FAILURE_TEXTS = ("The model stages failed", "The run failed", "could not be drawn", "Cannot load the knowledge base",
                 "Cancelled: the stages that finished")

# Cells of the table that follows the "Accepted by X" heading in the visible tab of the final panel:
# null while it is not drawn yet, [] when the panel says "Nothing accepted.". Streamlit's dataframe is
# a canvas; glide-data-grid keeps an accessible <table> of the drawn cells inside it.
ACCEPTED_CELLS_JS = """
(panel) => {
  let seen = false;
  for (const box of panel.querySelectorAll('[data-testid="stElementContainer"]')) {
    const text = box.textContent || '';
    if (!seen) { seen = text.includes('Accepted by '); continue; }
    if (text.includes('Nothing accepted') || text.includes('Validation was off')) return [];
    const grid = box.querySelector('[data-testid="data-grid-canvas"]');
    if (grid) {
      const cells = [...grid.querySelectorAll('td[role="gridcell"]')].map((td) => td.textContent || '');
      return cells.length ? cells : null;
    }
    if (text.includes('Rejected by ')) return null;
  }
  return null;
}
"""

# The dashboard scrolls inside stMain, not the document: its height is what a full page needs.
CONTENT_HEIGHT_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return Math.max(main ? main.scrollHeight : 0, document.documentElement.scrollHeight);
}
"""
FITS_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return !main || main.scrollHeight <= main.clientHeight + 2;
}
"""


# --- the server --------------------------------------------------------------------------------
def _require_chromium() -> None:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (`apt-get install chromium`, or `make browser`)")


@contextlib.contextmanager
def _serve(log_name: str) -> Iterator[str]:
    """A real ``streamlit run app.py`` on a free localhost port, always stopped at the end."""
    _require_chromium()  # before the server: no point in loading models for a missing browser
    try:
        with serve(ARTIFACTS / log_name, start_s=SERVER_START_S) as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


@contextlib.contextmanager
def _browser(app_url: str) -> Iterator[Page]:
    """A headless Debian chromium page at 1366×900 that may use the clipboard on the app's origin."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url)
            pg = context.new_page()
            pg.set_default_timeout(60_000)
            yield pg
        finally:
            browser.close()


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    with _serve("e2e_streamlit.log") as url:
        yield url


@pytest.fixture
def page(app_url: str) -> Iterator[Page]:
    with _browser(app_url) as pg:
        yield pg


# --- waiting on the page -----------------------------------------------------------------------
def _app_text(page: Page) -> str:
    """All text of the app, hidden tab panels included (they are mounted, only hidden)."""
    return str(page.locator('[data-testid="stApp"]').first.text_content() or "")


def _idle(page: Page) -> bool:
    return page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').count() > 0


def _problem(page: Page, text: str) -> str | None:
    if page.locator('[data-testid="stException"]').count():
        return "exception: " + str(page.locator('[data-testid="stException"]').first.text_content())[:2000]
    return next((t for t in FAILURE_TEXTS if t in text), None)


def _wait_for(page: Page, what: str, ready: Callable[[str], bool], timeout_s: float, shot: str) -> None:
    """Poll the page until ``ready(text)`` holds twice in a row while the script is idle (bounded)."""
    deadline = time.monotonic() + timeout_s
    hits = 0
    text = ""
    while time.monotonic() < deadline:
        text = _app_text(page)
        problem = _problem(page, text)
        if problem:
            page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
            pytest.fail(f"while waiting for {what}: {problem}")
        hits = hits + 1 if _idle(page) and ready(text) else 0
        if hits >= 2:
            return
        page.wait_for_timeout(POLL_S * 1000)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    pytest.fail(f"{what} not shown within {timeout_s:.0f} s; the page ends with:\n{text[-1500:]}")


def _run_finished(text: str) -> bool:
    return ("7 · Final records" in text and "Download D's accepted records" in text
            and "Download F's accepted records" in text and "Waiting for the model stages" not in text
            and "Model stages ·" not in text)


def _accepted_records(page: Page, alt: str) -> list[str]:
    """Open the final panel's tab of ``alt`` and read the cells of its "Accepted by" table."""
    tabs = page.locator('[data-testid="stTabs"]').filter(has=page.get_by_role("tab", name=f"{alt} · final"))
    tabs.get_by_role("tab", name=f"{alt} · final").click()
    panel = tabs.locator('[data-testid="stTabPanel"]').filter(visible=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cells = panel.evaluate(ACCEPTED_CELLS_JS)
        if cells is not None:
            return [str(c) for c in cells]
        page.wait_for_timeout(500)
    pytest.fail(f"the accepted table of {alt} in the final panel was not drawn")


def _full_page_screenshot(page: Page, path: Path) -> None:
    """Grow the viewport to the app's content height for the shot (stMain scrolls, not the page)."""
    height = min(max(int(page.evaluate(CONTENT_HEIGHT_JS)), VIEWPORT["height"]), MAX_SHOT_HEIGHT)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # content still taller than the bound: shoot what fits
        page.wait_for_function(FITS_JS, timeout=15_000)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)


def _overview_above_the_fold(page: Page, shot: Path) -> str:
    """The flow strip's accessible description (vega draws on a canvas); fails unless it fits the first screen."""
    page.locator('[data-testid="stMain"]').evaluate("(main) => main.scrollTo(0, 0)")
    strip = page.locator('[aria-label^="Flow overview"]').first
    strip.wait_for(state="visible")
    box = strip.bounding_box()
    assert box is not None and box["height"] > 100, box
    assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], f"the overview is below the fold: {box}"
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.screenshot(path=str(shot))
    return str(strip.get_attribute("aria-label"))


def _assert_both_alternatives(label: str) -> None:
    # Default settings: D's legs take the top 50, F's the top 80; every node shows its count.
    assert "D · fusion: BM25 · top 50: 50 hits" in label and "F · reranker: BM25 · top 80: 80 hits" in label, label
    for alt in ("D · fusion", "F · reranker"):
        part = label.split(alt, 1)[1]
        assert "Union:" in part and " candidates" in part and "judged" in part and "Accepted:" in part, label


# --- the test ----------------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.model
def test_browser_reference_chunk_through_d_and_f(page: Page, app_url: str) -> None:
    chunk = REFERENCE_CHUNK.read_text()
    page.goto(app_url)
    # The first load opens the KB and the embedder; touching a widget before that would restart it.
    _wait_for(page, "the loaded knowledge base", lambda t: "then press Run" in t, ENGINE_READY_S, "main_failed.png")

    page.get_by_text("Paste code", exact=True).click()
    area = page.get_by_label("GDScript chunk")
    area.wait_for(state="visible")
    _wait_for(page, "the paste box", lambda t: "GDScript chunk" in t and "Example chunk" not in t, PAGE_READY_S,
              "main_failed.png")
    area.click()
    page.evaluate("text => navigator.clipboard.writeText(text)", chunk)
    page.keyboard.press("ControlOrMeta+V")
    pasted = area.input_value() == chunk
    if not pasted:  # no clipboard in this chromium: put the same text in directly
        area.fill(chunk)
    print(f"\nchunk entered by {'clipboard paste' if pasted else 'fill (clipboard unavailable)'}")
    assert area.input_value() == chunk

    page.get_by_text("D and F", exact=True).click()
    page.get_by_role("button", name="Run", exact=True).click()
    _wait_for(page, "the validator's final records for D and F", _run_finished, RUN_DONE_S, "main_failed.png")

    text = _app_text(page)
    assert "Chunk: pasted chunk" in text
    assert "is not ready:" not in text, "a model is missing (run `make models`)"
    decisions = {alt: _accepted_records(page, alt) for alt in ("F", "D")}  # D's tab stays open for the shot
    for alt, cells in decisions.items():
        print(f"accepted by {alt}: " + "; ".join(c for c in cells if "/" in c and ":" not in c))
    accepted = [cell for cells in decisions.values() for cell in cells]
    assert any(TWO_D in cell for cell in accepted), decisions
    assert not any(THREE_D in cell for cell in accepted), decisions
    label = _overview_above_the_fold(page, ARTIFACTS / "main_fold.png")
    _assert_both_alternatives(label)
    print(label)
    nav = page.locator('[data-testid="stSidebarNav"] a')
    assert "Pipeline" in nav.first.inner_text() and not nav.filter(has_text="app").count()
    _full_page_screenshot(page, ARTIFACTS / "main.png")

    # Same session (a fresh URL load would start a new one without the run): follow the sidebar link.
    page.locator('[data-testid="stSidebarNav"] a', has_text="Compare D vs F").click()
    page.wait_for_url("**/Compare_D_vs_F")
    _wait_for(page, "the comparison", lambda t: "Where they agree" in t and "Cost" in t
              and "Model stages" not in t, PAGE_READY_S, "compare_failed.png")
    text = _app_text(page)
    assert "Final ranked lists" in text and "accepted by both" in text
    _assert_both_alternatives(_overview_above_the_fold(page, ARTIFACTS / "compare_fold.png"))
    _full_page_screenshot(page, ARTIFACTS / "compare.png")


@pytest.mark.browser
def test_a_page_opened_first_on_a_fresh_server_keeps_the_apps_navigation() -> None:
    """A bookmarked page URL as a new server's first visit: Streamlit would run the page on its own from
    pages/ (a bogus "app" entry, no icons) until some run went through app.py's st.navigation."""
    with _serve("e2e_fresh_page.log") as url, _browser(url) as pg:
        pg.goto(f"{url}/Evaluation")
        _wait_for(pg, "the Evaluation page", lambda text: "Labelled set" in text, PAGE_READY_S,
                  "e2e_fresh_page.png")
        entries = [t.strip() for t in pg.get_by_test_id("stSidebarNav").inner_text().splitlines() if t.strip()]
        assert [e for e in entries if " " in e or e[0].isupper()] == \
            ["Pipeline", "Compare D vs F", "Evaluation", "Knowledge base"], entries
        assert "app" not in entries and "analytics" in entries  # app.py's pages, with their icons
        assert pg.url.endswith("/Evaluation")
        assert "Evaluation" in pg.locator("h1").first.inner_text()
