"""D's cold validation as the dashboard runs it: a real server, a real browser, both on this machine's cores.

`python -m bench.dashboard [--runs 3]`. The CLI figures (bench/cold_start.py) leave out what the dashboard
adds: the page drawing itself while Qwen works, and the browser rendering it. Each run pastes the reference
chunk with one local renamed (``velocity`` → ``velocity_<n>``: the same code to every stage, but a key the
verdict and evidence-list caches have never seen), picks D, presses Run, and reads the finished trace
through the page's own download button. It times, from the click:
- until the validator's decisions show (the validate stage in two phases: decisions, then Qwen's lists);
- until the run is done; and the validate stage's own seconds from the trace.

The naive baseline, measured in the same run, is the dashboard as it was before 2026-12-07: Streamlit's full
garbage collection after every script run (``runner.postScriptGC``) and the progress box redrawn every 0.5 s.
Each setting gets its own server; one warm-up run per server loads the models and is not counted. Settings
alternate between blocks, so drifting load touches both alike. Needs Debian's chromium and Playwright.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import ROOT, save, spread_s
from bench.server import serve

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
SETTINGS: dict[str, dict[str, str]] = {
    "naive": {"STREAMLIT_RUNNER_POST_SCRIPT_GC": "true", "GDPOC_POLL_S": "0.5"},
    "shipped": {},
}
TIMEOUT_MS = 240_000


def one(page: Page, url: str, code: str) -> dict:
    page.goto(url)
    page.get_by_text("Paste code").click()
    page.locator("textarea").first.fill(code)
    page.keyboard.press("Control+Enter")
    page.get_by_text("D · fusion", exact=True).click()
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Run").click()
    t0 = time.perf_counter()
    page.wait_for_selector("text=now writing the evidence lists", timeout=TIMEOUT_MS)
    decided = time.perf_counter() - t0
    page.wait_for_selector("text=Report (HTML)", timeout=TIMEOUT_MS)
    done = time.perf_counter() - t0
    with page.expect_download() as dl:
        page.get_by_text("Download the full trace (JSON)").click()
    trace = json.loads(Path(dl.value.path()).read_text())
    v = trace["alternatives"]["D"]["validation"]
    return {"decided_s": decided, "done_s": done, "validate_s": v["ms"] / 1000, "lists": v["lists"],
            "lists_s": v["lists_ms"] / 1000}


def main(runs: int = 3) -> dict:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():  # the other suites still run; the stored result stays
        print(f"skipping bench.dashboard: {CHROMIUM} not found (`make browser` installs it)", file=sys.stderr)
        return {}
    reference = (ROOT / "fixtures" / "reference_chunk.gd").read_text()
    samples: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    stamp = time.strftime("%H%M%S")
    n = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        for block in range(2):  # naive, shipped, naive, shipped
            for name, extra in SETTINGS.items():
                with serve(Path(tempfile.gettempdir()) / f"gdpoc-bench-dashboard-{name}.log", extra) as url:
                    page = browser.new_page(viewport={"width": 1366, "height": 900}, accept_downloads=True)
                    for k in range(1 + (runs + 1 - block) // 2):  # run 0 warms the server up
                        n += 1
                        r = one(page, url, reference.replace("velocity", f"velocity_{stamp}_{n}"))
                        if k:
                            samples[name].append(r)
                        print(f"{name} {'run' if k else 'warm-up'}: decisions {r['decided_s']:.1f} s, "
                              f"done {r['done_s']:.1f} s, validate {r['validate_s']:.1f} s "
                              f"({r['lists']} lists, {r['lists_s']:.1f} s)", flush=True)
                    page.close()
        browser.close()
    summary = {name: {key: spread_s(r[key] for r in rows) for key in ("decided_s", "done_s", "validate_s")}
               | {"runs": len(rows), "lists": statistics.median(r["lists"] for r in rows)}
               for name, rows in samples.items()}
    summary["ratio_validate"] = round(summary["naive"]["validate_s"]["median_s"]
                                      / summary["shipped"]["validate_s"]["median_s"], 2)
    data = {"runs": runs, "summary": summary}
    save("dashboard", data)
    return data


def section(data: dict | None) -> list[str]:
    """The BENCHMARKS.md rows of a stored run."""
    if not data:
        return []
    s = data["summary"]

    def cell(name: str, key: str) -> str:
        d = s[name][key]
        return f"{d['median_s']:.1f} s (min {d['min_s']:.1f}, max {d['max_s']:.1f})"

    return [
        "", f"### D cold in the dashboard, in a browser (`python -m bench.dashboard`, {data['measured_at']})", "",
        "The reference chunk with one local renamed, so that no verdict or evidence list is cached; D only; "
        "the server and Debian's chromium on the same 2 cores; one warm-up run per server not counted; "
        f"{s['shipped']['runs']} runs per setting. Times from the click on Run.", "",
        "| setting | decisions shown | run done | validate stage | evidence lists |",
        "|---|---|---|---|---|",
        *(f"| {label} | {cell(name, 'decided_s')} | {cell(name, 'done_s')} | {cell(name, 'validate_s')} | "
          f"{s[name]['lists']:g} |"
          for name, label in (("naive", "naive: full GC after every script run, progress every 0.5 s"),
                              ("shipped", "shipped: no GC after script runs, progress every 1 s"))),
        f"| validate stage, naive / shipped | | | **{s['ratio_validate']:.1f}×** | |", "",
    ]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    main(ap.parse_args().runs)
