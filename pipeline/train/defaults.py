"""The recipes `make demo`, `make test` and `python -m pipeline models train` use, and where their artifacts live.

Each artifact folder is named by (KB content hash, recipe hash): a change to either trains
again, nothing else does. The recipes chain (the ranker's names the query encoder it was
trained with), so a change upstream retrains what depends on it. A capped run (``--budget``,
or ``GDPOC_TRAIN_BUDGET`` for tests) carries its budget in its recipes: its artifacts never
stand in for the full ones.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from pipeline.train.accept import TABLE, AcceptRecipe
from pipeline.train.adapter import AdapterRecipe
from pipeline.train.biencoder import BiEncoderRecipe
from pipeline.train.budget import Budget
from pipeline.train.crossencoder import CrossEncoderRecipe
from pipeline.train.data import DataRecipe
from pipeline.train.ltr import RankerRecipe
from pipeline.train.recipe import Recipe, artifact_dir, is_complete, read_done

BUDGET_ENV = "GDPOC_TRAIN_BUDGET"


@dataclass(frozen=True)
class Recipes:
    data: DataRecipe
    query_map: AdapterRecipe  # F's code query encoder (default)
    query_encoder: BiEncoderRecipe  # the MNRL fine-tune (measured, trained on request)
    ranker: RankerRecipe
    cross_encoder: CrossEncoderRecipe
    accept: AcceptRecipe

    def of(self, kind: str) -> Recipe:
        return getattr(self, kind)

    @classmethod
    def make(cls, budget: Budget | None = None) -> Recipes:
        cap = budget if budget is not None and budget.limited else None
        data = DataRecipe()
        query_map = AdapterRecipe(data=data, budget=cap)
        return cls(data, query_map, BiEncoderRecipe(data=data, budget=cap),
                   RankerRecipe(data=data, query_encoder=query_map, budget=cap),
                   CrossEncoderRecipe(data=data, budget=cap), AcceptRecipe(table_digest=table_digest()))


def table_digest() -> str:
    """The accept table's content: a new table (new Qwen margins, new rows) is a new accept model."""
    try:
        return hashlib.sha256(TABLE.read_bytes()).hexdigest()
    except OSError:
        return "no table"


def env_budget() -> Budget:
    """The budget runs use when none is given: ``GDPOC_TRAIN_BUDGET`` (tests), else none."""
    return Budget.parse(os.environ.get(BUDGET_ENV))


def recipes(budget: Budget | None = None) -> Recipes:
    return Recipes.make(env_budget() if budget is None else budget)


def folder(kind: str, kb_hash: str, budget: Budget | None = None) -> Path:
    return artifact_dir(kind, kb_hash, recipes(budget).of(kind))


def ready(kind: str, kb_hash: str, budget: Budget | None = None) -> Path | None:
    """The artifact folder when it is complete, else None."""
    f = folder(kind, kb_hash, budget)
    return f if is_complete(f) else None


def info(kind: str, kb_hash: str) -> dict:
    f = ready(kind, kb_hash)
    return read_done(f) if f else {}
