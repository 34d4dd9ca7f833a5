"""The CLI: bad input gives a clear message and a non-zero exit; --json has the promised shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

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


def test_missing_file_and_bad_choices() -> None:
    res = cli("run", "nope.gd")
    assert res.returncode == 2 and "no such file: nope.gd" in res.stderr.decode()
    res = cli("run", str(CHUNKS))  # a folder is batch's job, and the message says so
    assert res.returncode == 2 and "is a folder" in res.stderr.decode() and "batch" in res.stderr.decode()
    for option, value, listed in [("--alt", "X", "'both'"), ("--fusion", "borda", "'zscore'")]:
        res = cli("run", option, value, str(CHUNKS / "unity_player.cs"))
        err = res.stderr.decode()
        assert res.returncode == 2 and f"Invalid value for '{option}'" in err and listed in err, err
        assert "Traceback" not in err


def test_a_bad_setting_is_one_line_naming_the_field() -> None:
    res = cli("run", "--alt", "d", "--alpha", "2", str(CHUNKS / "unity_player.cs"))  # --alt is case-insensitive
    err = res.stderr.decode()
    assert res.returncode == 2
    assert err == "error: invalid setting: alpha: Input should be less than or equal to 1\n"


def _command_paths(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [(*prefix, c.name or (c.callback.__name__ if c.callback else "")) for c in group.registered_commands]
    for sub in group.registered_groups:
        assert sub.name and sub.typer_instance
        paths += [(*prefix, sub.name), *_command_paths(sub.typer_instance, (*prefix, sub.name))]
    return paths


def test_every_command_has_help() -> None:
    from pipeline.cli import app

    paths = _command_paths(app)
    assert sorted(paths) == [("batch",), ("eval",), ("kb",), ("kb", "build"), ("kb", "ensure"), ("kb", "index"),
                             ("kb", "stats"), ("models",), ("models", "prepare"), ("models", "status"),
                             ("models", "train"), ("run",), ("train",), ("train", "accept-table"), ("train", "data"),
                             ("warm",)]
    runner = CliRunner()
    for path in [(), *paths]:
        res = runner.invoke(app, [*path, "--help"])
        assert res.exit_code == 0 and "Usage:" in res.output, (path, res.output)


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


def test_run_and_batch_on_a_user_kb_say_which_lines_they_skipped(tmp_path: Path) -> None:
    """`kb stats` lists bad lines, and so must the commands that search the KB, or they vanish unseen."""
    kb = str(ROOT / "fixtures" / "bad" / "malformed.jsonl")
    res = cli("run", "--alt", "D", "--no-validate", "--kb", kb, str(CHUNKS / "latin1.gd"))
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    err = res.stderr.decode()
    assert "warning: " in err and "line(s) of the KB skipped" in err and "malformed.jsonl:2:" in err, err
    assert "of the KB skipped" not in res.stdout.decode()  # stdout stays the trace
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.gd").write_bytes((CHUNKS / "latin1.gd").read_bytes())
    res = cli("batch", str(src), "--out", str(tmp_path / "out.jsonl"), "--alt", "D", "--no-validate", "--kb", kb,
              "--no-progress")
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert "line(s) of the KB skipped" in res.stderr.decode() and "malformed.jsonl:2:" in res.stderr.decode()


def test_eval_blind_reads_the_blind_set() -> None:
    res = cli("eval", "--blind", "--alt", "d", "--json")
    assert res.returncode == 0, res.stderr.decode()[-800:]
    out = json.loads(res.stdout)
    assert out["set"].endswith("blind.jsonl") and out["n_ranked_chunks"] == 18
    both = cli("eval", "--blind", "--set", "fixtures/eval/dev.jsonl")
    assert both.returncode == 2 and "give one of them" in both.stderr.decode()


def test_eval_split_picks_a_half_of_any_set() -> None:
    """A --set is read whole unless --split names a half; a half the set lacks is refused in words."""
    res = cli("eval", "--set", "fixtures/eval/dev_rule.jsonl", "--split", "tune", "--alt", "d", "--json")
    assert res.returncode == 0, res.stderr.decode()[-800:]
    out = json.loads(res.stdout)
    assert out["set"].endswith("dev_rule.jsonl, tune half") and out["n_ranked_chunks"] == 14
    whole = cli("eval", "--set", "fixtures/eval/rule_tune.jsonl", "--alt", "d", "--json")
    assert whole.returncode == 0 and json.loads(whole.stdout)["n_ranked_chunks"] == 16
    none = cli("eval", "--blind", "--split", "test", "--alt", "d")
    assert none.returncode == 2 and "has no chunk in the 'test' half" in none.stderr.decode()
