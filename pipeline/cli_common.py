"""What the CLI commands (pipeline/cli.py, pipeline/cli_batch.py) share: the one way to stop with
a message, and every fixed choice as an Enum, so typer lists the values in --help and refuses
anything else with a clear message before a command runs.

The Enums are made from the ``Literal`` types of :class:`~pipeline.settings.Settings` (and the
model registry), so a new choice there is a new choice here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NoReturn, get_args

import typer
from pydantic import ValidationError

from pipeline.errors import describe
from pipeline.models.provision import MODELS
from pipeline.settings import FusionMethod, RerankerBackend, Settings


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` in red on stderr and exit with ``code`` (2: a usage error), no traceback."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def warn(lines: list[str]) -> None:
    """Yellow ``warning:`` lines on stderr (the first one starts the warning), leaving stdout to the output."""
    for n, line in enumerate(lines):
        typer.secho(("warning: " if n == 0 else "  ") + line, fg=typer.colors.YELLOW, err=True)


def message(exc: BaseException) -> str:
    """What to tell the user about ``exc``: a pydantic error as ``field: problem`` lines, anything else as is."""
    return describe(exc) if isinstance(exc, ValidationError) else str(exc)


class Alt(StrEnum):
    """``--alt``: which alternatives to run."""

    D = "D"
    F = "F"
    both = "both"

    @property
    def alternatives(self) -> tuple[Any, ...]:  # Settings.alternatives: ("D",), ("F",) or ("D", "F")
        return ("D", "F") if self is Alt.both else (self.value,)


def _choices(name: str, values: tuple[str, ...]) -> Any:
    return StrEnum(name, [(v, v) for v in values])


Fusion = _choices("Fusion", get_args(FusionMethod))  # rrf | minmax | zscore
Reranker = _choices("Reranker", get_args(RerankerBackend))  # qwen | bge | none
ModelKey = _choices("ModelKey", tuple(MODELS))  # qwen-1.5b | qwen-0.5b
Backend = _choices("Backend", ("local", "ray"))  # pipeline.batch.BACKENDS (kept apart: the CLI imports no batch code)

# Option defaults: the Settings defaults.
DEFAULT_FUSION = Fusion(Settings.model_fields["fusion"].default)
DEFAULT_RERANKER = Reranker(Settings.model_fields["reranker"].default)
DEFAULT_BACKEND = Backend("local")
