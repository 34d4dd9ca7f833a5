"""The CLI: bad input gives a clear message and a non-zero exit; --json has the promised shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHUNKS = ROOT / "fixtures" / "chunks"


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=ROOT, input=stdin,
                          capture_output=True, timeout=600)


@pytest.mark.parametrize(("name", "message"), [
    ("empty.gd", "The chunk is empty"),
    ("whitespace.gd", "The chunk is empty"),
    ("binary.bin", "binary file"),
])
def test_bad_input_exits_non_zero_with_a_message(name: str, message: str) -> None:
    res = cli("run", "--no-validate", str(CHUNKS / name))
    assert res.returncode == 2
    err = res.stderr.decode()
    assert message in err and "Traceback" not in err


def test_oversized_chunk_is_refused_unless_truncated(tmp_path: Path) -> None:
    big = tmp_path / "big.gd"
    line = 'func f():\n\tprint("x")\n'
    big.write_text(line * (70_000 // len(line)))
    res = cli("run", "--no-validate", "--alt", "D", str(big))
    assert res.returncode == 2 and "over the 65,536-byte limit" in res.stderr.decode()


def test_missing_file_and_bad_alt() -> None:
    assert "no such file" in cli("run", "nope.gd").stderr.decode()
    assert "--alt must be D, F or both" in cli("run", "--alt", "X", str(CHUNKS / "unity_player.cs")).stderr.decode()


def test_json_trace_shape_from_stdin() -> None:
    code = (ROOT / "fixtures" / "reference_chunk.gd").read_bytes()
    res = cli("run", "--alt", "D", "--no-validate", "--json", "-", stdin=code)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    data = json.loads(res.stdout)
    d = data["alternatives"]["D"]
    assert d["status"] == "ok"
    stages = [d[k] for k in ("bm25", "embedding", "union", "fusion", "validation")]  # one typed field per stage
    assert all({"name", "ms", "status", "rows"} <= set(s) for s in stages)
    item = d["final"][0]
    assert set(item) >= {"rank", "record_id", "kind", "doc_path", "source", "section", "score", "verdict",
                         "evidence", "accepted"}
    assert item["verdict"] == "not_run" and item["accepted"] is None


def test_non_utf8_chunk_runs_with_a_notice() -> None:
    res = cli("run", "--alt", "D", "--no-validate", str(CHUNKS / "latin1.gd"))
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert "not valid UTF-8" in res.stdout.decode()


def test_user_kb_and_malformed_lines(tmp_path: Path) -> None:
    res = cli("kb", "stats", "--kb", str(ROOT / "fixtures" / "bad" / "malformed.jsonl"))
    out = res.stdout.decode()
    assert res.returncode == 0
    assert "malformed.jsonl:2:" in out and "malformed.jsonl:10: duplicate id" in out
