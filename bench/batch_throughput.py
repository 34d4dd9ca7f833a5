"""Batch throughput: ``pipeline batch`` with the local backend and with Ray (1 and 2 workers), chunks per minute.

    .venv/bin/python -m bench.batch_throughput [--runs 3] [--chunks 150]

Input: fixtures/batch (5 scripts, 25 chunks), the dev set's GDScript chunks, then GDScript code blocks of
the Godot docs' tutorials (from the built KB, in record order) until the plan has ``--chunks`` chunk jobs.
Settings: D and F, ``--no-validate``, F's reranker ``none``: no Qwen, each worker holds the KB, BM25,
the MiniLM vectors and the code query map's ONNX route. Every run is its own process (``--one``) with a
fresh results file, so each pays its start-up: opening the Engine(s), and for Ray starting Ray and its
actors. Throughput is chunks run / seconds from the first chunk handed out to the last line written (the
set-up is reported apart). Memory is each worker process's RSS (and USS: what it alone holds) when the
batch ends; for the local backend the worker is the batch process itself. Writes bench/results/batch_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import save

if TYPE_CHECKING:
    from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_ARGS = {"alternatives": ("D", "F"), "run_validator": False, "reranker": "none"}
# (label, backend, workers, extra environment)
CONFIGS: list[tuple[str, str, int | None, dict[str, str]]] = [
    ("local", "local", None, {}),
    ("local, OMP_NUM_THREADS=1", "local", None, {"OMP_NUM_THREADS": "1"}),
    ("ray, 1 worker", "ray", 1, {}),
    ("ray, 2 workers", "ray", 2, {}),
]


def _settings() -> Settings:
    from pipeline.settings import Settings

    return Settings(**SETTINGS_ARGS)


def make_input(folder: Path, target: int) -> tuple[int, dict[str, int]]:
    """Write .gd files into ``folder`` until the plan holds ``target`` chunk jobs; say where they came from."""
    from pipeline.batch import jobs_for, kb_content_hash, plan
    from pipeline.kb.store import ensure_builtin

    shutil.copytree(ROOT / "fixtures" / "batch", folder / "fixtures")
    (folder / "dev").mkdir()
    for line in (ROOT / "fixtures" / "eval" / "dev.jsonl").read_text().splitlines():
        row = json.loads(line) if line.strip() else None
        if row and row["lang"] == "gdscript":
            (folder / "dev" / f"{row['id']}.gd").write_text(row["code"])
    settings, kb_hash = _settings(), kb_content_hash()

    def count() -> int:
        return len(jobs_for(plan([folder]), settings, kb_hash))

    sources = {"fixtures/batch": len(jobs_for(plan([folder / "fixtures"]), settings, kb_hash))}
    sources["dev set"] = count() - sources["fixtures/batch"]
    (folder / "docs").mkdir()
    blocks = 0
    with (ensure_builtin() / "docs_chunks.jsonl").open() as fh:
        for line in fh:
            rec = json.loads(line)
            if not rec["doc_path"].startswith("tutorials/"):
                continue
            for code in rec.get("code_blocks") or []:
                if code.count("\n") >= 4 and "func " in code:
                    blocks += 1
                    (folder / "docs" / f"block_{blocks:04d}.gd").write_text(code)
            if blocks % 10 == 0 and count() >= target:
                break
    sources["docs tutorial code blocks"] = count() - sources["fixtures/batch"] - sources["dev set"]
    return count(), sources


def one_run(src: Path, backend: str, workers: int | None) -> dict:
    """One batch, in this process, into a fresh results file: its report as a dict."""
    from pipeline.batch import run_batch

    with tempfile.TemporaryDirectory() as tmp:
        report = run_batch([src], Path(tmp) / "results.jsonl", _settings(), backend=backend, workers=workers,
                           show_progress=False, echo=lambda _m: None)
    return {"done": report.done, "errors": report.errors, "lost": len(report.lost), "setup_s": report.setup_s,
            "run_s": report.run_s, "chunks_per_minute": report.chunks_per_minute,
            "workers": [asdict(w) for w in report.workers]}


def _spawn(src: Path, backend: str, workers: int | None, env: dict[str, str]) -> dict:
    cmd = [sys.executable, "-m", "bench.batch_throughput", "--one", str(src), backend, str(workers or 0)]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    return run | {"wall_s": wall, "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _summary(label: str, backend: str, workers: int | None, env: dict[str, str], runs: list[dict]) -> dict:
    n_workers = len(runs[0]["workers"])
    per_worker = [{k: statistics.median(r["workers"][i][k] for r in runs if len(r["workers"]) > i)
                   for k in ("rss", "uss", "peak_rss")} for i in range(n_workers)]
    return {"label": label, "backend": backend, "workers": workers or 1, "env": env, "runs": runs,
            "chunks": runs[0]["done"], "median_chunks_per_minute": _median(runs, "chunks_per_minute"),
            "min_chunks_per_minute": min(r["chunks_per_minute"] for r in runs),
            "max_chunks_per_minute": max(r["chunks_per_minute"] for r in runs),
            "median_setup_s": _median(runs, "setup_s"), "median_run_s": _median(runs, "run_s"),
            "median_wall_s": _median(runs, "wall_s"),
            "median_end_to_end_chunks_per_minute": statistics.median(r["done"] / r["wall_s"] * 60 for r in runs),
            "memory_per_worker": per_worker}


def main(runs: int = 3, chunks: int = 150) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        n_jobs, sources = make_input(src, chunks)
        print(f"{n_jobs} chunk jobs: {sources}", file=sys.stderr)
        load_start = os.getloadavg()
        results = []
        for label, backend, workers, env in CONFIGS:
            samples = []
            for i in range(runs):
                samples.append(_spawn(src, backend, workers, env))
                print(f"{label} run {i + 1}: {samples[-1]['chunks_per_minute']:.0f} chunks/min, set-up "
                      f"{samples[-1]['setup_s']:.1f} s, load {samples[-1]['load_1min_after']:.2f}", file=sys.stderr)
            results.append(_summary(label, backend, workers, env, samples))
    path = save("batch_throughput", {
        "command": f".venv/bin/python -m bench.batch_throughput --runs {runs} --chunks {chunks}",
        "input": {"chunk_jobs": n_jobs, "sources": sources},
        "settings": {"alt": "both", "validate": False, "reranker": "none"},
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "configs": results})
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=150)
    ap.add_argument("--one", nargs=3, metavar=("SRC", "BACKEND", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        src, backend, workers = args.one
        print(json.dumps(one_run(Path(src), backend, int(workers) or None)))
    else:
        main(args.runs, args.chunks)
