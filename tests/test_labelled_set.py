"""Reading a labelled chunk set: every bad line is named with its file and line, in words a user can act on."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from pipeline.evaluate import DEV_SET, LabelledSetError, load_set
from pipeline.ui.evaluation import parse_uploaded_set, set_error


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


def test_a_latin1_line_is_named_not_a_codec_error(tmp_path: Path) -> None:
    # The Evaluation page showed "'utf-8' codec can't decode byte 0xe9 in position 1234".
    path = tmp_path / "latin1.jsonl"
    good = json.dumps({"id": "ok", "code": "func f():\n\tpass\n"}).encode()
    bad = json.dumps({"id": "caf", "code": "var name = 'café'\n"}, ensure_ascii=False).encode("latin-1")
    path.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(ValueError) as info:
        load_set(path)
    assert str(info.value).splitlines()[1:] == [
        f"{path}:2: not UTF-8 text (byte 0xe9 at column {bad.index(0xe9) + 1}); save the file as UTF-8"]


def test_the_column_of_a_bad_byte_counts_characters_and_the_error_survives_a_process_boundary(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_bytes('{"id": "é", "code": "'.encode() + b"\xe9" + b'"}\n')  # é (2 bytes) before the bad byte
    with pytest.raises(LabelledSetError) as info:
        load_set(path)
    assert info.value.lines == [f"{path}:1: not UTF-8 text (byte 0xe9 at column 22); save the file as UTF-8"]  # byte 23
    again = pickle.loads(pickle.dumps(info.value))  # as from a batch worker
    assert again.lines == info.value.lines and str(again) == str(info.value)


def test_an_uploaded_sets_errors_name_the_upload_line_by_line() -> None:
    data = json.dumps({"id": "ok", "code": "pass"}).encode() + b"\n{oops\n" + b'{"id": "b"}\n'
    with pytest.raises(LabelledSetError) as info:
        parse_uploaded_set(data, "mine.jsonl")
    assert info.value.lines == [
        "mine.jsonl:2: invalid JSON: Expecting property name enclosed in double quotes at column 2",
        "mine.jsonl:3: code: Field required"]
    # the page shows each line on its own, and no heading the exception carries for the CLI
    assert set_error(info.value) == ("Cannot use this labelled set:  \n" + "  \n".join(info.value.lines))
    assert set_error(ValueError("mine.jsonl has no labelled chunk")).endswith("mine.jsonl has no labelled chunk")


def test_the_dev_set_halves_split_it() -> None:
    every = load_set(DEV_SET)
    tune, test = load_set(DEV_SET, "tune"), load_set(DEV_SET, "test")
    assert tune and test and len(tune) + len(test) == len(every)
    assert not {c.id for c in tune} & {c.id for c in test}


@pytest.mark.parametrize(("name", "size", "split"), [("blind", 18, None), ("rule_tune", 16, "tune")])
def test_the_rule_labelled_sets_name_only_real_pages_and_labels_by_their_rule(docs_root: Path, name: str, size: int,
                                                                               split: str | None) -> None:
    """fixtures/eval/README.md states the rule: one grade-3 page per chunk, grades 1..3, no page both relevant
    and must-not-accept, and only pages of the corpus and prototypes of the KB."""
    path = DEV_SET.parent / f"{name}.jsonl"
    labels = {json.loads(ln)["label"] for ln in (path.parents[1] / "labels" / "labels.jsonl").read_text()
              .splitlines() if ln.strip()}
    chunks = load_set(path)
    assert len(chunks) == size and len({c.id for c in chunks}) == size
    for c in chunks:
        assert c.split == split  # the blind set is never split into halves: nothing is tuned on it
        assert sorted(c.relevant.values()).count(3) == 1, c.id
        assert set(c.relevant.values()) <= {1, 2, 3}, c.id
        assert not set(c.relevant) & set(c.must_not_accept), c.id
        missing = [p for p in [*c.relevant, *c.must_not_accept] if not (docs_root / p).is_file()]
        assert not missing, (c.id, missing)
        assert set(c.labels) <= labels, (c.id, set(c.labels) - labels)


def test_the_rule_labelled_sets_are_not_docs_code(engine) -> None:
    """Their chunks were written for them: none shares more than boilerplate (`extends X`, `move_and_slide()`) with
    any docs code block, so no model met them in training. The reference chunk, a docs block, is the control."""
    from pipeline.evaluate import BLIND_SET, RULE_TUNE_SET
    from pipeline.train.data import _norm_lines

    blocks = [_norm_lines(b) for r in engine.store.records for b in (getattr(r, "code_blocks", None) or [])]

    def most_shared(code: str) -> float:
        """The largest share of the chunk's identifying lines found in one docs block."""
        mine = _norm_lines(code)
        return max(len(mine & b) for b in blocks) / len(mine)

    assert most_shared(load_set(DEV_SET)[0].code) > 0.8  # dev-00 is the tutorial's own _process
    for c in [*load_set(BLIND_SET), *load_set(RULE_TUNE_SET)]:
        assert most_shared(c.code) < 0.2, c.id


def _class_ones(c) -> set[str]:
    """The chunk's class pages of grade 1: the only grades the rule's relabelling may change."""
    return {p for p, g in c.relevant.items() if p.startswith("classes/") and g == 1}


def test_the_dev_set_relabelled_by_the_rule_changes_only_grade_1_class_pages(docs_root: Path) -> None:
    """fixtures/eval/dev_rule.jsonl: the dev set with its grade-1 class pages re-graded by the blind set's rule,
    for the owner to compare the two conventions. Code, halves and every other grade are the dev set's own."""
    from pipeline.evaluate import DEV_RULE_SET
    from pipeline.stages.classuse import TOO_COMMON

    excluded = {c.lower() for c in TOO_COMMON} | {"@globalscope", "@gdscript"}  # the rule's exclusions
    dev, rule = load_set(DEV_SET), load_set(DEV_RULE_SET)
    assert [c.id for c in dev] == [c.id for c in rule]
    changed = 0
    for old, new in zip(dev, rule, strict=True):
        assert (old.code, old.split, old.must_not_accept, old.labels) == (new.code, new.split, new.must_not_accept,
                                                                          new.labels)
        ones = _class_ones(new)
        assert {p: g for p, g in old.relevant.items() if p not in _class_ones(old)} == \
            {p: g for p, g in new.relevant.items() if p not in ones}, old.id
        assert all((docs_root / p).is_file() for p in ones), old.id
        assert not {p.removeprefix("classes/class_").removesuffix(".rst") for p in ones} & excluded, old.id
        changed += ones != _class_ones(old)
    assert changed >= 20  # the two conventions differ on most chunks
