"""The trainers' budget callback (transformers), apart from ``budget`` so a run never imports torch for it."""

from __future__ import annotations

import time

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from pipeline.train.budget import Budget, Progress


class BudgetCallback(TrainerCallback):
    """Stops training when the time budget is spent; forwards step progress to ``progress``."""

    def __init__(self, what: str, budget: Budget, progress: Progress | None = None) -> None:
        self.what, self.budget, self.progress = what, budget, progress
        self.started = time.monotonic()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: object) -> TrainerControl:
        if self.progress:
            self.progress(self.what, state.global_step, state.max_steps)
        if self.budget.minutes is not None and time.monotonic() - self.started > 60 * self.budget.minutes:
            control.should_training_stop = True
            control.should_save = True
        return control
