"""Reading a labelled chunk set: every bad line is named with its file and line, in words a user can act on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.evaluate import DEV_SET, load_set


def test_each_bad_line_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    lines = [json.dumps({"id": "ok", "code": "func f():\n\tpass\n"}), "{oops", "",
             json.dumps({"id": "b", "code": "", "relevant": {"p.rst": "high"}}), "[1]"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        load_set(path)
    assert str(info.value).splitlines() == [
        "invalid labelled set:",
        f"{path}:2: invalid JSON: Expecting property name enclosed in double quotes at column 2",
        f"{path}:4: code: String should have at least 1 character; "
        "relevant.p.rst: Input should be a valid integer, unable to parse string as an integer",
        f"{path}:5: value: Input should be a valid dictionary or instance of LabelledChunk",
    ]


def test_the_dev_set_halves_split_it() -> None:
    every = load_set(DEV_SET)
    tune, test = load_set(DEV_SET, "tune"), load_set(DEV_SET, "test")
    assert tune and test and len(tune) + len(test) == len(every)
    assert not {c.id for c in tune} & {c.id for c in test}
