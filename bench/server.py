"""A real ``streamlit run app.py`` on a free localhost port, for the browser tests and the dashboard bench."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from bench.common import ROOT

START_S = 120.0


class ServerFailed(RuntimeError):
    """The server exited or did not answer in time; the message ends with its log's tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, start_s: float) -> None:
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerFailed(f"streamlit exited with code {proc.returncode} before answering:\n{log_tail(log)}")
        with contextlib.suppress(urllib.error.URLError, OSError), urllib.request.urlopen(url, timeout=5) as resp:
            if resp.status == 200:
                return
        time.sleep(1.0)
    raise ServerFailed(f"streamlit did not answer {url} within {start_s:.0f} s:\n{log_tail(log)}")


@contextlib.contextmanager
def serve(log: Path, extra_env: dict[str, str] | None = None, start_s: float = START_S) -> Iterator[str]:
    """The app's URL while it runs, with ``extra_env`` in its environment, its output in ``log`` and its own
    empty trace cache (a trace warmed by a demo would otherwise answer at once); always stopped at the end."""
    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    traces = tempfile.mkdtemp(prefix="gdpoc-serve-traces-")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "GDPOC_TRACE_CACHE": traces, **(extra_env or {})}
    cmd = [str(ROOT / ".venv" / "bin" / "streamlit"), "run", "app.py", "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_healthy(proc, f"http://127.0.0.1:{port}/_stcore/health", log, start_s)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
            shutil.rmtree(traces, ignore_errors=True)
