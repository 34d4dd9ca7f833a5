"""Training budgets and progress for the Hugging Face trainers.

``--budget`` caps a run in steps or minutes, so tests run the real training code in
seconds and a user can trade quality for time. The callback stops the trainer
cleanly (the checkpoint logic still runs) and reports progress with an ETA.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

Progress = Callable[[str, int, int], None]  # (what, done, total)


class Budget(BaseModel):
    model_config = ConfigDict(frozen=True)

    steps: int | None = None  # at most this many optimiser steps per model
    minutes: float | None = None  # at most this long per model (checked after each step)

    @classmethod
    def parse(cls, text: str | None) -> Budget:
        """``"40"`` or ``"40steps"`` → 40 steps; ``"3m"`` / ``"3min"`` → 3 minutes; None → unlimited."""
        if not text:
            return cls()
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(steps?|m|min|minutes?)?\s*", text)
        if not m:
            raise ValueError(f"budget {text!r}: use a number of steps (e.g. 40) or minutes (e.g. 3min)")
        value, unit = float(m.group(1)), (m.group(2) or "steps")
        return cls(minutes=value) if unit.startswith("m") else cls(steps=max(1, int(value)))

    def cap(self, steps: int) -> int:
        return min(steps, self.steps) if self.steps else steps

    @property
    def limited(self) -> bool:
        return self.steps is not None or self.minutes is not None
