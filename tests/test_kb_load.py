"""User JSONL loading: bad lines are reported as file:line, good lines still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.kb.load import load_bytes, load_jsonl
from pipeline.kb.store import open_kb

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_malformed_fixture_keeps_good_lines_and_numbers_errors() -> None:
    path = FIX / "bad" / "malformed.jsonl"
    result = load_jsonl([path])
    assert [r.id for r in result.records] == [
        "bad:docs:area-coin", "bad:api:rand-range", "bad:label:coin-pickup", "bad:docs:timer-signal"]
    errors = {i.line: str(i) for i in result.errors}
    assert sorted(errors) == [2, 4, 5, 7, 9, 10]
    assert all(msg.startswith(f"{path}:{line}: ") for line, msg in errors.items())
    assert "invalid JSON" in errors[2]
    assert "expected a JSON object, got list" in errors[4]
    assert "tutorial_video" in errors[5]
    assert "doc_path" in errors[7]
    assert "code_blocks" in errors[9]
    assert "duplicate id 'bad:docs:area-coin'" in errors[10] and f"{path}:1" in errors[10]


def test_unknown_fields_survive_a_round_trip() -> None:
    result = load_jsonl([FIX / "user_kb" / "small.jsonl"])
    assert not result.issues
    rec = next(r for r in result.records if r.id == "user:docs:dash-ability")
    assert json.loads(rec.model_dump_json())["team"] == "gameplay"


def test_non_utf8_and_huge_lines_are_reported_not_dropped_silently() -> None:
    good = json.dumps({"id": "x", "kind": "label_prototype", "label": "x", "description": "d",
                       "prototype_code": "pass"}).encode()
    data = good + b"\n" + b'{"id": "caf\xe9"}\n' + b'{"id": "' + b"a" * 3_000_000 + b'"}\n'
    result = load_bytes(data, "upload.jsonl")
    assert [r.id for r in result.records] == ["x"]
    assert [(i.line, i.reason.split(" ")[0]) for i in result.errors] == [(2, "not"), (3, "line")]
    # the same words as a labelled set's (tests/test_labelled_set.py): the byte and its column in the line
    assert str(result.errors[0]).startswith(
        "upload.jsonl:2: not UTF-8 text (byte 0xe9 at column 12); save the file as UTF-8")


def test_empty_user_kb_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="the KB is empty"):
        open_kb([empty])


def test_folder_of_jsonl_files_loads_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_bytes((FIX / "user_kb" / "small.jsonl").read_bytes())
    (tmp_path / "a.jsonl").write_text("not json\n")
    store = open_kb([tmp_path])
    assert len(store.records) == 6
    assert store.issues == [f"{tmp_path / 'a.jsonl'}:1: invalid JSON: Expecting value at column 1"]
