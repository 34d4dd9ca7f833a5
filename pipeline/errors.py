"""One way to say what is wrong with a line of input: a pydantic ``ValidationError``, or bytes that are not UTF-8."""

from __future__ import annotations

from pydantic import ValidationError


def describe(exc: ValidationError, limit: int = 3) -> str:
    """``field.sub: message; other: message`` for the first ``limit`` errors (and how many more)."""
    errors = exc.errors()
    parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"… and {len(errors) - limit} more")
    return "; ".join(parts)


class NotUtf8(ValueError):
    """A JSONL line that is not UTF-8; ``str`` says which byte and column, in words a user can act on."""


def decode_line(raw: bytes) -> str:
    """``raw`` as UTF-8 text, or :class:`NotUtf8` naming the byte and its column in the line (not the codec's
    offset in the whole file)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8")) + 1  # what comes before the bad byte is valid text
        raise NotUtf8(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {column}); "
                      "save the file as UTF-8") from None
