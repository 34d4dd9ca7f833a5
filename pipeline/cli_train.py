"""``python -m pipeline train data`` and ``python -m pipeline models train``: the models trained here."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from tqdm import tqdm

from pipeline.cli_common import fail, message

train_app = typer.Typer(no_args_is_help=True, help="Training data and models learned from the Godot docs.")


# What each training bar counts; other bars count optimiser steps or epochs.
UNITS = {"embedding index": "text", "encode crops": "crop", "hard negatives": "crop", "ranker features": "crop",
         "Qwen margins": "pair", "train query map": "epoch"}


def _bars() -> tuple[dict[str, tqdm], object]:
    bars: dict[str, tqdm] = {}

    def progress(what: str, done: int, total: int) -> None:
        bar = bars.get(what)
        if bar is None:
            bar = bars[what] = tqdm(total=total, desc=what, file=sys.stderr, leave=False, unit=UNITS.get(what, "step"))
        bar.total = total
        bar.update(done - bar.n)

    return bars, progress


def _open():
    from pipeline.kb import index as kb_index
    from pipeline.kb.store import ensure_builtin, open_kb

    ensure_builtin()
    store = open_kb()
    return store, kb_index.open_bm25(store)


@train_app.command("data")
def train_data(
    show: Annotated[bool, typer.Option("--show", help="print a few queries with their labels")] = False,
) -> None:
    """Build the training set from the KB (deterministic, cached) and print its stats."""
    from pipeline.kb import index as kb_index
    from pipeline.models.embedder import SentenceTransformerEmbedder
    from pipeline.train import defaults
    from pipeline.train.data import ensure_data, load_queries

    bars, progress = _bars()
    try:
        store, bm25 = _open()
        base = SentenceTransformerEmbedder(None)
        vectors = kb_index.open_vectors(store, base, lambda d, t: progress("embedding index", d, t))
        folder = ensure_data(store, defaults.DATA, bm25, vectors, base, progress)
    except Exception as exc:
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    typer.echo(f"training data: {folder}")
    typer.echo((folder / "stats.json").read_text())
    if show:
        for q in load_queries(folder)[:3]:
            typer.echo(json.dumps(q.model_dump(), indent=1)[:1500])


def models_train(
    budget: Annotated[str | None, typer.Option(help="cap each model: steps (e.g. 20) or minutes (e.g. 3min)")] = None,
    cross_encoder: Annotated[bool, typer.Option("--cross-encoder/--no-cross-encoder",
                                                help="also train the FlagEmbedding cross-encoder (~10 min)")] = False,
    mnrl: Annotated[bool, typer.Option("--mnrl/--no-mnrl", help="also fine-tune the whole query tower with "
                                       "MultipleNegativesRankingLoss (~15-25 min; measured, not the default)")]
    = False,
) -> None:
    """Train the models learned from the docs (once; cached by KB and recipe), with progress and ETA."""
    from pipeline.train.budget import Budget
    from pipeline.train.run import train_all

    bars, progress = _bars()
    try:
        cap = Budget.parse(budget)
        store, bm25 = _open()
        report = train_all(store, bm25, budget=cap, cross_encoder=cross_encoder, mnrl=mnrl, progress=progress,
                           say=lambda m: typer.echo(m, err=True))
    except Exception as exc:
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    for kind in report.steps:
        typer.echo(report.line(kind))


@train_app.command("accept-table")
def train_accept_table(
    docs_queries: Annotated[int, typer.Option(help="docs crops to add to the tune sets' rows")] = 30,
    reuse: Annotated[bool, typer.Option(help="keep the committed table's Qwen margins whose judge, prompt, code "
                                             "and record are unchanged")] = True,
) -> None:
    """Collect the accept model's training table (1,200 Qwen margins; ~50 min cold, resumable) into fixtures/accept/."""
    from pipeline.engine import Engine
    from pipeline.train.accept import TABLE, collect_table, load_table, write_table

    bars, progress = _bars()
    try:
        old = load_table() if reuse and TABLE.exists() else []
        rows = collect_table(Engine.open(), docs_queries, progress=progress, reuse=old)
        write_table(rows)
    except Exception as exc:
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    typer.echo(f"{len(rows)} rows ({sum(r['label'] for r in rows)} relevant) → {TABLE}")
