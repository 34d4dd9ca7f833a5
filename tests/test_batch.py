"""Batch mode: splitting, the results file, resume after a kill and a torn line, errors per chunk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import NoReturn

import pytest
import typer
from typer.testing import CliRunner

from pipeline.batch import (
    BatchError,
    Chunk,
    ResultLine,
    ResultsLog,
    SettingsSummary,
    chunk_key,
    jobs_for,
    kb_content_hash,
    parse_result_line,
    plan,
    process_chunk,
    run_batch,
    split_source,
)
from pipeline.chunk import InputError
from pipeline.cli_batch import batch_command
from pipeline.engine import Engine
from pipeline.features import ChunkFacts
from pipeline.models.qwen import YesNo
from pipeline.models.validator import QwenValidator
from pipeline.settings import TRAINED, Settings

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
# D without the validator: BM25 + MiniLM only, no Qwen (the machine has 2 cores).
FAST = Settings(alternatives=("D",), run_validator=False)


def dev_gdscript() -> list[dict]:
    rows = [json.loads(line) for line in (FIX / "eval" / "dev.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["lang"] == "gdscript"]


def spans(chunks: list[Chunk]) -> list[tuple[str, str | None, int, int]]:
    return [(c.kind, c.name, c.start_line, c.end_line) for c in chunks]


# --------------------------------------------------------------------------- splitting

SCRIPT = """\
@tool
extends CharacterBody2D
## Speed in px/s.
@export var speed := 200.0
signal hit(amount: int)
var table = {
"a": 1,
}

# Reads the input every frame.
@warning_ignore("unused_parameter")
func _process(delta):
\tvar v = Vector2.ZERO
#\tv.x += 1  (commented out, at column 0 inside the body)
\tv.y += 1

static func helper() -> int:
\treturn 1
var between := 3
class Inner:
\tfunc c():
\t\tpass
# trailing note
"""


@pytest.mark.parametrize("parser", ["tree-sitter", "lines"])
def test_split_by_top_level_function_and_class(parser: str) -> None:
    chunks = split_source(SCRIPT, "x.gd", parser=parser)
    assert spans(chunks) == [
        ("header", None, 1, 8),  # the multi-line dict's column-0 lines start no statement
        ("func", "_process", 10, 15),  # comment + annotation directly above; column-0 comment inside kept
        ("func", "helper", 17, 18),
        ("class", "Inner", 19, 23),  # the var between functions goes with the next; trailing lines with the last
    ]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    lines = SCRIPT.split("\n")
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line]) + "\n"


def test_a_function_carries_its_files_declarations_an_inner_class_none() -> None:
    chunks = {c.name or c.kind: c for c in split_source(SCRIPT, "x.gd")}
    # the extends and the members outside the chunk, each statement whole (the dict's three lines)
    assert chunks["_process"].context == ('extends CharacterBody2D\n@export var speed := 200.0\n'
                                          'var table = {\n"a": 1,\n}\nvar between := 3\n')
    assert "speed" not in chunks["header"].context and "between" in chunks["header"].context  # its own rows: no
    assert chunks["Inner"].context == ""  # an inner class has its own base and cannot see the file's members


def test_spaces_split_like_tabs() -> None:
    with_tabs = split_source(SCRIPT, parser="lines")
    with_spaces = split_source(SCRIPT.replace("\t", "    "), parser="lines")
    assert spans(with_spaces) == spans(with_tabs)


def test_trivial_header_is_dropped_and_a_blank_line_detaches_a_comment() -> None:
    src = "extends Node\nclass_name Foo\n@export var one := 1\n\n# section\n\nfunc f():\n\tpass\n"
    assert spans(split_source(src)) == [("func", "f", 7, 8)]
    src2 = "extends Node\nvar a := 1\nvar b := $B\n# section\n\nfunc f():\n\tpass\n"
    assert spans(split_source(src2)) == [("header", None, 1, 4), ("func", "f", 6, 7)]


def test_long_function_is_split_at_blank_lines() -> None:
    body = ["func long():"] + [f"\tprint({i})" for i in range(1, 10)] + [""] + [f"\tprint({i})" for i in range(10, 20)]
    src = "\n".join(body) + "\n"  # 20 lines, one blank at line 11
    chunks = split_source(src, max_lines=12)
    assert spans(chunks) == [("func", "long", 1, 10), ("func", "long", 12, 21)]
    assert [c.part for c in chunks] == ["1/2", "2/2"]
    # No blank line at all: cut hard at max_lines.
    hard = split_source("func f():\n" + "\tpass\n" * 9, max_lines=4)
    assert [(c.start_line, c.end_line) for c in hard] == [(1, 4), (5, 8), (9, 10)]


def test_strings_with_brackets_and_column_0_text_do_not_split() -> None:
    src = 'func f():\n\tvar s = """\nfunc not_a_function():\n"""\n\tvar t = "(["\n\tprint(s)\nfunc g():\n\tpass\n'
    assert spans(split_source(src, parser="lines")) == [("func", "f", 1, 6), ("func", "g", 7, 8)]


def test_line_scanner_reads_comments_strings_and_continuations_like_gdscript() -> None:
    src = (
        'var colours = ["#f00", # a comment with a ( and a "quote\n'
        "'#0f0']\n"  # still inside the list: a string at column 0, not a statement
        "var total = 1 + \\\n"
        "2\n"  # after a backslash continuation: not a statement either
        "func f():\n\tpass\n"
    )
    for parser in ("lines", "tree-sitter"):
        assert spans(split_source(src, parser=parser)) == [("header", None, 1, 4), ("func", "f", 5, 6)], parser
    # A "#" inside a string does not hide the continuation that follows it (the old line scanner's mistake).
    src = 'func f():\n\tvar total = "#" + \\\n"x"\n\tpass\nfunc g():\n\tpass\n'
    for parser in ("lines", "tree-sitter"):
        assert spans(split_source(src, parser=parser)) == [("func", "f", 1, 4), ("func", "g", 5, 6)], parser


def test_tree_sitter_and_line_scanner_agree_on_the_dev_set() -> None:
    assert len(dev_gdscript()) == 30  # the dev set's GDScript chunks
    for row in dev_gdscript():
        assert spans(split_source(row["code"], parser="lines")) == spans(
            split_source(row["code"], parser="tree-sitter")), row["id"]


def test_every_line_lands_in_one_chunk_except_a_trivial_header() -> None:
    for row in dev_gdscript():
        lines = row["code"].split("\n")
        chunks = split_source(row["code"], max_lines=8)
        covered = [n for c in chunks for n in range(c.start_line, c.end_line + 1)]
        assert len(covered) == len(set(covered)), row["id"]
        first_def = min((c.start_line for c in chunks if c.kind != "header"), default=len(lines) + 1)
        has_header = any(c.kind == "header" for c in chunks)
        must = {i + 1 for i, ln in enumerate(lines) if ln.strip() and (has_header or i + 1 >= first_def)}
        assert must <= set(covered), row["id"]
        assert all(c.end_line - c.start_line < 8 for c in chunks)


def test_other_languages_split_without_error() -> None:
    cs = (FIX / "chunks" / "unity_player.cs").read_text()
    chunks = split_source(cs, "p.cs")
    assert spans(chunks) == [("header", None, 1, 21)]  # no func: the whole file is one header chunk
    with pytest.raises(ValueError, match="tree-sitter-gdscript cannot parse"):
        split_source(cs, parser="tree-sitter")


def test_plan_reads_folders_decodes_latin1_and_reports_bad_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / ".godot").mkdir()
    latin1 = (FIX / "chunks" / "latin1.gd").read_bytes() + b'\nfunc menu():\n\tprint("Caf\xe9")\n'
    (tmp_path / "a" / "latin1.gd").write_bytes(latin1)
    (tmp_path / "bin.gd").write_bytes((FIX / "chunks" / "binary.bin").read_bytes())
    (tmp_path / "empty.gd").write_bytes(b"  \n\t\n")
    (tmp_path / ".godot" / "cached.gd").write_text("func x():\n\tpass\n")
    (tmp_path / "notes.txt").write_text("func y():\n\tpass\n")
    p = plan([tmp_path])
    assert p.files == [str(tmp_path / "a" / "latin1.gd"), str(tmp_path / "bin.gd"), str(tmp_path / "empty.gd")]
    assert [(i.file, i.error is None) for i in p.issues] == [(str(tmp_path / "bin.gd"), False),
                                                            (str(tmp_path / "empty.gd"), True)]
    assert "binary file" in (p.issues[0].error or "")
    latin = [c for c in p.chunks if c.file.endswith("latin1.gd")]
    assert latin and all("Latin-1" in c.notices[0] for c in latin)
    assert latin[-1].text == 'func menu():\n\tprint("Café")\n'  # decoded, not replaced
    with pytest.raises(BatchError, match="no such file or folder"):
        plan([tmp_path / "missing"])


def test_identical_chunks_are_one_job() -> None:
    a = split_source("func f():\n\treturn 1\n", "a.gd")
    b = split_source("func f():\n\treturn 1\n", "b.gd")
    p = plan([])
    p.chunks = a + b
    jobs = jobs_for(p, FAST, "kbhash")
    assert len(jobs) == 1 and [d.file for d in jobs[0].duplicates] == ["b.gd"]
    assert jobs[0].key == chunk_key(a[0].sha256, FAST, "kbhash")
    assert chunk_key(a[0].sha256, FAST, "other") != jobs[0].key
    assert chunk_key(a[0].sha256, Settings(alternatives=("F",), run_validator=False), "kbhash") != jobs[0].key
    # the same function in files with other bases is run once per base: the class-use rule reads the base
    c = split_source("extends Node2D\nfunc f():\n\treturn 1\n", "c.gd")[-1]
    p.chunks = a + b + [c]
    assert c.text == a[0].text and [len(j.duplicates) for j in jobs_for(p, FAST, "kbhash")] == [1, 0]


# --------------------------------------------------------------------------- results file


def result(key: str, **extra: object) -> ResultLine:
    fields: dict = {"file": "a.gd", "chunk": 0, "start_line": 1, "end_line": 2, "kind": "func", "name": "f",
                    "sha256": "0" * 64, "key": key, "kb": "kbhash", "settings": SettingsSummary.of(FAST),
                    "ok": True, "alternatives": {}}
    return ResultLine(**(fields | extra))


def test_torn_last_line_is_cut_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    good = result("k1").to_json() + "\n"
    out.write_text(good + result("k2").to_json()[:20])
    with ResultsLog(out) as log:
        state = log.open()
        assert set(state.lines) == {"k1"}
        assert state.torn is not None and f"{out}:2:" in state.torn and "cut off" in state.torn
        log.append(result("k2"))
    assert out.read_text() == good + result("k2").to_json() + "\n"


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_text(result("k1").to_json())
    with ResultsLog(out) as log:
        state = log.open()
        assert set(state.lines) == {"k1"} and state.torn is None
        log.append(result("k2"))
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == ["k1", "k2"]


def test_unreadable_lines_are_reported_and_redone(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    both = result("k3").model_dump(mode="json") | {"error": "boom", "ok": False}  # an error line cannot be ok
    out.write_text("\n".join([result("k1").to_json(), "garbage", json.dumps({"key": 3}), json.dumps(both),
                              result("k2", alternatives=None, error="boom", ok=False).to_json(), ""]))
    with ResultsLog(out) as log:
        state = log.open()
    assert [b.split(": ")[0] for b in state.bad] == [f"{out}:2", f"{out}:3", f"{out}:4"]
    assert state.done() == {"k1", "k2"}
    assert state.done(retry_errors=True) == {"k1"}


def test_result_lines_keep_their_documented_shape() -> None:
    """The JSON a reader (docs/scaling.md) relies on, and a line of the previous, dict-built version still reads."""
    ok = json.loads(result("k1", part=None).to_json())
    assert set(ok) == {"file", "chunk", "start_line", "end_line", "kind", "name", "part", "sha256", "key", "kb",
                       "settings", "version", "ok", "alternatives"}
    assert ok["part"] is None and ok["version"] == 1 and ok["settings"]["settings_hash"] == \
        SettingsSummary.of(FAST).settings_hash
    err = json.loads(result("k2", alternatives=None, error="boom", error_type="RuntimeError", ok=False).to_json())
    assert set(err) - set(ok) == {"error", "error_type"} and "alternatives" not in err
    old = ('{"chunk": null, "end_line": null, "error": "cannot read x.gd", "error_type": "InputError", "file": "x.gd", '
           '"kb": "k", "key": "abc", "ok": false, "settings": ' + SettingsSummary.of(FAST).model_dump_json() +
           ', "sha256": "", "start_line": null, "version": 1}')
    line = parse_result_line(old.encode())
    assert line is not None and (line.key, line.chunk, line.error, line.kind) == ("abc", None, "cannot read x.gd", None)


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ResultsLog(out) as first:
        first.open()
        with pytest.raises(BatchError, match="being written by another batch run"):
            ResultsLog(out).open()
    with ResultsLog(out) as again:  # released on close
        again.open()


# --------------------------------------------------------------------------- errors per chunk


def _model_failure(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("llama_decode returned -3")  # as llama.cpp fails mid-run


def test_a_model_failure_or_bad_chunk_becomes_an_error_line(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real engine, failing like a model would; prepare_chunk's own errors come before it runs.
    monkeypatch.setattr(engine, "run", _model_failure)
    chunk = split_source("func f():\n\tpass\n", "a.gd")[0]
    line = process_chunk(engine, chunk, FAST)
    assert line.error == "RuntimeError: llama_decode returned -3" and line.ok is False
    assert line.key == chunk_key(chunk.sha256, FAST, engine.store.content_hash)
    assert (line.file, line.chunk, line.start_line, line.end_line) == ("a.gd", 0, 1, 2)
    huge = Chunk("b.gd", 0, 1, 1, "func", "g", None, "func g(): print('" + "x" * 70_000 + "')\n")
    line = process_chunk(engine, huge, FAST)
    assert line.error_type == InputError.__name__ and "over the 65,536-byte limit" in (line.error or "")


def test_batch_continues_past_failing_chunks_and_retries_them(engine, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.gd").write_text("func a():\n\tposition += velocity\n\nfunc boom():\n\tqueue_free()\n")
    (src / "b.gd").write_bytes(b"\x00\x01binary")
    out = tmp_path / "r.jsonl"
    real_run = engine.run

    def flaky(data, settings=None, **kw):
        if "boom" in data.text:
            raise RuntimeError("model crashed")
        return real_run(data, settings, **kw)

    monkeypatch.setattr(engine, "run", flaky)
    report = run_batch([src], out, FAST, engine=engine, show_progress=False, echo=lambda _m: None)
    assert (report.chunks, report.done, report.errors) == (2, 2, 2)  # one chunk error + one file error
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    by_name = {x.get("name") or x["file"]: x for x in lines}
    assert by_name["boom"]["error"] == "RuntimeError: model crashed"
    assert by_name["a"]["ok"] is True and by_name["a"]["alternatives"]["D"]["top"]
    assert "binary file" in by_name[str(src / "b.gd")]["error"]
    # A plain re-run skips everything; --retry-errors redoes the failed chunk (the binary file fails again).
    monkeypatch.setattr(engine, "run", real_run)
    again = run_batch([src], out, FAST, engine=engine, show_progress=False, echo=lambda _m: None)
    assert (again.skipped, again.done) == (2, 0)
    retry = run_batch([src], out, FAST, engine=engine, retry_errors=True, show_progress=False,
                      echo=lambda _m: None)
    assert (retry.skipped, retry.done, retry.errors) == (1, 1, 1)
    last = {}
    for x in (json.loads(x) for x in out.read_text().splitlines()):
        last[x["key"]] = x
    assert next(x for x in last.values() if x.get("name") == "boom")["ok"] is True


class _YesQwen:
    """A stand-in GGUF that answers "yes" with a large margin and cites fact 1 (no real model)."""

    path = Path("/nonexistent/yes-qwen.gguf")

    def load(self) -> None:
        pass

    def tokenize(self, text: str) -> list[int]:
        return [len(text)]

    def yes_no(self, tokens: list[int], **kw: object) -> YesNo:
        return YesNo(9.0, "yes", 1, 0, 1.0)

    def complete(self, tokens: list[int], grammar: str, **kw: object) -> str:
        return "1]}"


def test_accepted_records_carry_their_evidence(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # D's embedder (the trained query map) is named by its folder and opened in the shared cache first: under the
    # empty cache below, "trained" would fall back to MiniLM, and the session's engine would keep MiniLM without
    # its ONNX route for every later test
    folder = engine.resolve_embedder(TRAINED)[0]
    engine.dense(folder)
    # the top 3 only: labels that fit the code are judged past it too (tests/test_scope.py)
    s = Settings(alternatives=("D",), validator_top_k=3, label_fit=2.0, embedder=folder)
    monkeypatch.setenv("GDPOC_CACHE", str(tmp_path))  # the verdict cache is created here, not in the shared one
    monkeypatch.setattr(engine, "verdicts", None)
    monkeypatch.setattr(engine, "validator", lambda s: QwenValidator(_YesQwen(), "qwen-1.5b"))
    chunk = split_source((FIX / "reference_chunk.gd").read_text(), "reference_chunk.gd")[0]
    line = process_chunk(engine, chunk, s)
    assert line.alternatives is not None
    d = line.alternatives["D"]
    assert line.ok is True and d.status == "ok" and d.validated == "ok"
    assert 1 <= len(d.accepted) <= 3
    for acc in d.accepted:
        assert acc.evidence and all(e in chunk.text for e in acc.evidence)  # verified: each string is in the code
    assert [t.verdict for t in d.top[:3]] == ["yes"] * 3 and d.top[3].verdict == "not_run"
    assert {a.record_id for a in d.accepted} <= {t.record_id for t in d.top[:3]}


# --------------------------------------------------------------------------- the command, killed and resumed


def write_dev_tree(root: Path, n_files: int = 9) -> None:
    """Dev-set chunks as .gd files in three folders (each file holds 1-4 functions plus a header)."""
    for i, row in enumerate(dev_gdscript()[:n_files]):
        folder = root / f"part{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{row['id']}.gd").write_text(row["code"])


# Runs the batch command, but SIGKILLs itself while chunk number KILL_AT is in progress (its result
# computed, not yet written): a kill at a known point, so the test does not depend on timing.
KILLER = textwrap.dedent("""
    import os, signal, sys
    import pipeline.batch.run as batch
    from pipeline import cli_batch
    real, calls = batch.process_chunk, [0]
    def dying(*a, **kw):
        line = real(*a, **kw)
        calls[0] += 1
        if calls[0] == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)
        return line
    batch.process_chunk = dying
    sys.argv = ["batch", *sys.argv[1:]]
    cli_batch.main()
""")


def batch_cli(*args: str, kill_at: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "pipeline.cli_batch", *args]
    if kill_at is not None:
        env["KILL_AT"] = str(kill_at)
        cmd = [sys.executable, "-c", KILLER, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def test_killed_batch_resumes_every_chunk_exactly_once(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "results.jsonl"
    write_dev_tree(src)
    args = [str(src), "--alt", "D", "--no-validate", "--out", str(out), "--max-lines", "12"]
    expected = {j.key for j in jobs_for(plan([src], 12), FAST, kb_content_hash())}
    assert len(expected) == 26  # 9 dev-set files of 1-4 functions (plus headers), long ones split at 12 lines

    killed = batch_cli(*args, kill_at=6)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first = out.read_text().splitlines()
    assert len(first) == 5  # the 6th chunk was in progress: lost, nothing partial written
    assert all(json.loads(x)["key"] in expected for x in first)

    # A kill during a write leaves a partial line: simulate one, then resume.
    with out.open("a") as fh:
        fh.write(first[0][: len(first[0]) // 2])
    resumed = batch_cli(*args, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "the last line was cut off" in resumed.stderr and f"{out}:6:" in resumed.stderr
    assert f"{len(expected) - 5} run now, 5 already in" in resumed.stdout

    lines = [json.loads(x) for x in out.read_text().splitlines()]  # every line parses: the torn one is gone
    counts = Counter(x["key"] for x in lines)
    assert set(counts) == expected and set(counts.values()) == {1}
    assert all(x["ok"] and x["alternatives"]["D"]["top"] and x["settings"]["run_validator"] is False for x in lines)
    assert out.read_text().splitlines()[:5] == first  # earlier results untouched

    # A third run has nothing left to do.
    done = batch_cli(*args, "--no-progress")
    assert done.returncode == 0 and f"0 run now, {len(expected)} already in" in done.stdout
    assert len(out.read_text().splitlines()) == len(expected)


def test_cli_usage_errors(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(batch_command)
    runner = CliRunner()
    res = runner.invoke(app, [str(tmp_path), "--alt", "X"])
    assert res.exit_code == 2 and "Invalid value for '--alt'" in res.output and "'both'" in res.output
    res = runner.invoke(app, [str(tmp_path), "--reranker", "cohere"])
    assert res.exit_code == 2 and "Invalid value for '--reranker'" in res.output and "'bge'" in res.output
    res = runner.invoke(app, [str(tmp_path / "nope"), "--alt", "D"])
    assert res.exit_code == 2 and "no such file or folder" in res.output
    res = runner.invoke(app, [str(tmp_path), "--alt", "D"])  # an empty folder
    assert res.exit_code == 2 and "no .gd files found" in res.output


def test_batch_is_registered_in_the_main_cli() -> None:
    from pipeline.cli import app

    assert [c.callback for c in app.registered_commands if c.name == "batch"] == [batch_command]
    res = CliRunner().invoke(app, ["batch", "--help"])
    assert res.exit_code == 0 and "--max-lines" in res.output and "--out" in res.output


def test_a_later_part_of_a_long_function_knows_its_parameters_and_earlier_locals(engine: Engine) -> None:
    head = ["extends Node", "", "func chase(body: Node2D):", "\tvar nav: NavigationAgent2D = $Nav",
            "\tvar unrelated := 3"]
    filler = [f"\tprint({i})" for i in range(12)]
    tail = ["\tnav.target_position = body.global_position"]
    src = "\n".join([*head, *filler, "", *tail]) + "\n"
    first, second = split_source(src, max_lines=16)
    assert (first.part, second.part) == ("1/2", "2/2")
    assert second.context == ("extends Node\nfunc chase(body: Node2D):\n\tvar nav: NavigationAgent2D = $Nav\n"
                              "\tvar unrelated := 3\n")
    assert "chase" not in first.context  # the first part holds its own signature
    # the class-use rule reads the part as the whole function would (pipeline/stages/classuse.py)
    facts = ChunkFacts(terms=[], idf_total=0.0, classes=set(), is_2d=True, is_3d=False)  # GDScript, not foreign
    found = {h.ref.source for h in engine.class_rule.run(second.text, facts, second.context).hits}
    assert "class/NavigationAgent2D" in found
    bare = {h.ref.source for h in engine.class_rule.run(second.text, facts).hits}
    assert "class/NavigationAgent2D" not in bare  # without the earlier locals it could not tell


def test_warm_up_loads_the_query_route_a_run_uses(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """The default embedders are "trained" (this KB's query map), not folders: warm-up resolves them as a run
    does, without a warning, and loads the query route (ONNX Runtime), not the torch model as well."""
    import logging

    from pipeline.batch.run import warm_up
    from pipeline.models.hub import ModelHub

    fresh = Engine.for_store(engine.store, hub=ModelHub())
    s = Settings(run_validator=False)
    assert s.embedder == TRAINED
    with caplog.at_level(logging.WARNING, logger="pipeline.batch.run"):
        warm_up(fresh, s)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    emb, _ = fresh.dense(fresh.resolve_embedder(s.embedder)[0])
    assert emb.runtime == "onnxruntime"
    assert emb._model is None  # the torch model was not loaded besides the route
