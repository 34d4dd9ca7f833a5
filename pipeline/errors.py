"""One way to turn a pydantic ``ValidationError`` into a line a user can act on."""

from __future__ import annotations

from pydantic import ValidationError


def describe(exc: ValidationError, limit: int = 3) -> str:
    """``field.sub: message; other: message`` for the first ``limit`` errors (and how many more)."""
    errors = exc.errors()
    parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"… and {len(errors) - limit} more")
    return "; ".join(parts)
