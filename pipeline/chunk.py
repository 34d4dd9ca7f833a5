"""Turn raw user input (bytes or text) into a chunk the pipeline can trust.

Bad input is refused with an ``InputError`` whose message a user can act on;
recoverable oddities (non-UTF-8 bytes, an oversized chunk) are repaired
losslessly where possible and recorded as notices in the trace.
"""

from __future__ import annotations

import hashlib
import re

from pipeline.gdlex import code_only
from pipeline.trace import ChunkInfo

MAX_CHUNK_BYTES = 64 * 1024


class InputError(ValueError):
    """The input cannot be used as a chunk; the message says why and what to do."""


_LANG_HINTS: list[tuple[str, re.Pattern[str]]] = [
    ("gdscript", re.compile(r"^\s*(func|extends|@export|@onready|signal|class_name)\b|\$[A-Z]\w*", re.M)),
    ("csharp", re.compile(r"^\s*(using [\w.]+;|public (partial )?class|namespace )|\bvoid \w+\(", re.M)),
    ("python", re.compile(r"^\s*(def \w+\(.*\):|import \w+|from \w+ import|if __name__ ==)", re.M)),
    ("javascript", re.compile(r"^\s*(const|let) \w+ =|=> \{|function \w+\(|console\.log\(", re.M)),
]


def guess_language(text: str) -> str:
    """The language whose hints the code (not its comments or strings) holds most often; the first 64 KiB decide."""
    code = code_only(text[:MAX_CHUNK_BYTES])
    scores = {lang: len(rx.findall(code)) for lang, rx in _LANG_HINTS}
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] else "unknown"


def _decode(data: bytes, notices: list[str]) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        notices.append(
            f"The input is not valid UTF-8 (byte 0x{data[exc.start]:02x} on line {line}); "
            "it was read as Latin-1 so no byte is lost."
        )
        return data.decode("latin-1")


def prepare_chunk(data: bytes | str, *, max_bytes: int = MAX_CHUNK_BYTES, truncate: bool = True) -> ChunkInfo:
    notices: list[str] = []
    raw = data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else data
    if b"\x00" in raw[:8192]:
        raise InputError("The input looks like a binary file (it contains NUL bytes); give GDScript source text.")
    text = data if isinstance(data, str) else _decode(raw, notices)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise InputError("The chunk is empty; paste some GDScript code or pick an example.")
    controls = sum(1 for c in text[:8192] if ord(c) < 32 and c not in "\n\t\f\v")
    if controls > 0.05 * min(len(text), 8192):
        raise InputError("The input looks like a binary file (many control characters); give GDScript source text.")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        if not truncate:
            raise InputError(
                f"The chunk is {size:,} bytes, over the {max_bytes:,}-byte limit; split it "
                "(e.g. `python -m pipeline batch`, which splits files by function) or pass --truncate."
            )
        cut = text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
        if "\n" in cut:
            cut = cut[: cut.rindex("\n") + 1]
        notices.append(
            f"The chunk was {size:,} bytes; only its first {len(cut.encode('utf-8')):,} bytes "
            f"({cut.count(chr(10))} lines) were used, the limit being {max_bytes:,}."
        )
        text = cut
    return ChunkInfo(
        text=text,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        n_bytes=len(text.encode("utf-8")),
        n_lines=text.count("\n") + (0 if text.endswith("\n") else 1),
        language=guess_language(text),
        notices=notices,
    )
