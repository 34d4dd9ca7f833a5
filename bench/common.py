"""Timing helpers and machine description shared by the benchmarks."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int

    def __str__(self) -> str:
        return f"{self.median_ms:,.1f} ms (min {self.min_ms:,.1f}, max {self.max_ms:,.1f}, n={self.runs})"


def timeit(fn: Callable[[], object], runs: int = 5, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return Timing(statistics.median(samples), min(samples), max(samples), runs)


def machine() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines()
                   if x.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = 0
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 1024 / 1024, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def save(name: str, data: dict[str, object]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {"machine": machine(), "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **data}
    path.write_text(json.dumps(data, indent=1, default=lambda o: asdict(o)) + "\n")
    return path


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def spread_s(seconds: Iterable[float]) -> dict[str, float]:
    """Median, min and max of wall times in seconds, rounded as the stored results keep them."""
    xs = list(seconds)
    return {"median_s": round(statistics.median(xs), 2), "min_s": round(min(xs), 2), "max_s": round(max(xs), 2)}


def run_child(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh, offline Python process at the repo root; it prints one ``RESULT <json>`` line."""
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=True,
                          env=full)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))
