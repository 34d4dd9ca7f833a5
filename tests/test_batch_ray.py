"""The Ray backend of ``pipeline batch``: same lines as the local backend, a killed driver and a dead worker
lose nothing and duplicate nothing, bad options are refused before anything starts.

A real local Ray instance (2 workers, offline, no dashboard) over fixtures/batch; no Qwen: --no-validate and
F's reranker "none", so each worker loads only the KB, its indexes and MiniLM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from pipeline.batch import BACKENDS, BatchError, Job, ResultLine, jobs_for, plan, run_batch
from pipeline.batch.ray_backend import RayBackend
from pipeline.cli_batch import batch_command
from pipeline.cli_common import Backend
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "fixtures" / "batch"
# D and F, no model beyond MiniLM: the KB, BM25 and embeddings per worker, nothing else.
SETTINGS = Settings(alternatives=("D", "F"), run_validator=False, reranker="none")
ARGS = ["--alt", "both", "--no-validate", "--reranker", "none"]
KILL_AFTER = 4

# The batch command, SIGKILLed by itself right after its KILL_AFTER-th line is written and fsynced, while
# the Ray workers still have chunks in flight: a kill at a known point, so the test does not hang on timing.
KILLER = textwrap.dedent("""
    import os, signal, sys
    from pipeline.batch.results import ResultsLog
    from pipeline import cli_batch
    real, written = ResultsLog.append, [0]
    def append(self, line):
        real(self, line)
        written[0] += 1
        if written[0] == int(os.environ["KILL_AFTER"]):
            os.kill(os.getpid(), signal.SIGKILL)
    ResultsLog.append = append
    sys.argv = ["batch", *sys.argv[1:]]
    cli_batch.main()
""")


def without_timing(path: Path) -> list[str]:
    """The file's lines, minus the timing field, in key order (workers finish in any order)."""
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for row in rows:
        row.pop("ms", None)
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def test_ray_matches_local_and_a_killed_driver_or_worker_loses_nothing(engine, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = jobs_for(plan([SRC]), SETTINGS, engine.store.content_hash)
    expected = {j.key for j in jobs}
    assert len(expected) == 25  # 5 scripts: 5 headers, 20 functions

    local_out = tmp_path / "local.jsonl"
    local = run_batch([SRC], local_out, SETTINGS, engine=engine, show_progress=False, echo=lambda _m: None)
    assert (local.backend, local.done, local.errors, local.lost) == ("local", 25, 0, [])

    # 1. Ray, 2 workers, the driver killed after 4 lines: those 4 stay, nothing partial is written.
    out = tmp_path / "ray.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "KILL_AFTER": str(KILL_AFTER)}
    killed = subprocess.run([sys.executable, "-c", KILLER, str(SRC), *ARGS, "--out", str(out), "--backend", "ray",
                             "--workers", "2", "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=900)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert "starting 2 Ray workers" in killed.stderr
    first = out.read_text().splitlines()
    assert len(first) == KILL_AFTER and {json.loads(x)["key"] for x in first} <= expected
    with out.open("a") as fh:  # and a write cut short by a kill: half a line
        fh.write(first[0][: len(first[0]) // 2])

    # 2. Resume on Ray (in this process), and kill worker 0 after the second line: its chunks go to worker 1.
    real_results = RayBackend.results
    said: list[str] = []

    def one_worker_dies(self: RayBackend, todo: Sequence[Job]) -> Iterator[ResultLine]:
        import ray

        for n, line in enumerate(real_results(self, todo), start=1):
            if n == 2:
                ray.kill(self._actors[0])
            yield line

    monkeypatch.setattr(RayBackend, "results", one_worker_dies)
    report = run_batch([SRC], out, SETTINGS, backend="ray", workers=2, show_progress=False, echo=said.append)
    assert (report.skipped, report.done, report.errors, report.lost) == (KILL_AFTER, 25 - KILL_AFTER, 0, [])
    assert any("the last line was cut off" in s for s in said) and any("Ray worker 0 died" in s for s in said)
    assert len(report.workers) == 1 and report.workers[0].rss > 100 * 1024**2  # the worker left holds a KB

    lines = out.read_text().splitlines()
    assert lines[:KILL_AFTER] == first  # earlier results untouched, the torn line gone
    counts = Counter(json.loads(x)["key"] for x in lines)
    assert set(counts) == expected and set(counts.values()) == {1}  # nothing lost, nothing twice
    # 3. The same lines as the local backend, byte for byte but for the timing.
    assert without_timing(out) == without_timing(local_out)


def test_backend_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    assert tuple(b.value for b in Backend) == BACKENDS
    app = typer.Typer()
    app.command()(batch_command)
    runner = CliRunner()
    out = tmp_path / "r.jsonl"
    res = runner.invoke(app, [str(SRC), "--out", str(out), "--workers", "2"])  # local is the default
    assert res.exit_code == 2 and "--workers and --address need --backend ray" in res.output
    res = runner.invoke(app, [str(SRC), "--out", str(out), "--address", "auto"])
    assert res.exit_code == 2 and "need --backend ray" in res.output
    res = runner.invoke(app, [str(SRC), "--out", str(out), "--backend", "spark"])
    assert res.exit_code == 2 and "Invalid value for '--backend'" in res.output and "'ray'" in res.output
    res = runner.invoke(app, [str(SRC), "--out", str(out), "--backend", "ray", "--workers", "0"])
    assert res.exit_code == 2 and "--workers" in res.output
    assert not out.exists()  # refused before the results file was opened
    with pytest.raises(BatchError, match="opens an Engine in each worker"):
        run_batch([SRC], out, SETTINGS, engine=SimpleNamespace(store=SimpleNamespace(content_hash="kb")),
                  backend="ray")  # type: ignore[arg-type]
