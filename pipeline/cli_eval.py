"""``python -m pipeline eval``: ranking and accept metrics on a labelled set, or on the held-out docs pages."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from pipeline.cli_common import Alt, fail, message

METRIC_NAMES = ("ndcg@10", "mrr", "recall@50")


class Half(StrEnum):
    """Which half of the dev set: constants are tuned on "tune"; figures are claimed on "test"."""

    test = "test"
    tune = "tune"
    all = "all"


def _table(title: str, rows: dict[str, dict[str, float]]) -> None:
    typer.echo(title)
    width = max((len(k) for k in rows), default=10) + 2
    typer.echo(f"{'system':<{width}}" + "".join(f"{m:>11}" for m in METRIC_NAMES))
    for system, vals in rows.items():
        typer.echo(f"{system:<{width}}" + "".join(f"{vals.get(m, float('nan')):>11.4f}" for m in METRIC_NAMES))


def eval_command(
    set_: Annotated[Path | None, typer.Option("--set", help="labelled JSONL (default: the dev set)")] = None,
    split: Annotated[Half, typer.Option(case_sensitive=False, help="the dev set's half (ignored for --set)")]
    = Half.test,
    alt: Annotated[Alt, typer.Option(case_sensitive=False, help="which alternatives to run")] = Alt.both,
    validate: Annotated[bool, typer.Option("--validate/--no-validate")] = False,
    variants: Annotated[bool, typer.Option("--variants", help="every ranker side by side (no validation)")] = False,
    with_qwen: Annotated[bool, typer.Option("--with-qwen", help="with --variants: also F + Qwen reranker (slow)")]
    = False,
    with_cross_encoder: Annotated[bool, typer.Option("--with-cross-encoder",
                                                     help="with --variants: also F + the trained cross-encoder")]
    = False,
    heldout: Annotated[bool, typer.Option("--heldout", help="the training data's held-out test pages instead")]
    = False,
    kb: Annotated[list[Path] | None, typer.Option(help="your own JSONL files or folder")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    from pipeline.engine import Engine
    from pipeline.evaluate import DEV_SET, evaluate_set, evaluate_variants, load_set, ranking_variants
    from pipeline.settings import Settings

    try:
        engine = Engine.open(kb)
        if heldout:
            from pipeline.train.heldout import evaluate_heldout

            rows = evaluate_heldout(engine)
            _emit(f"held-out docs pages (training data 'test' split, the crop's own records hidden): "
                  f"{rows.pop('_queries', {}).get('n', 0):.0f} queries", rows, as_json)
            return
        chunks = load_set(set_ or DEV_SET, None if set_ or split is Half.all else split.value)
        where = f"{set_ or DEV_SET}" + ("" if set_ or split is Half.all else f", {split.value} half")
        bar = tqdm(total=len(chunks), desc="eval", file=sys.stderr, leave=False)
        tick = lambda ev: bar.update(ev.done - bar.n)  # noqa: E731
        if variants:
            rows = evaluate_variants(engine, chunks, ranking_variants(with_qwen, with_cross_encoder), tick)
            bar.close()
            _emit(f"{where}: {sum(1 for c in chunks if c.relevant)} labelled chunks", rows, as_json)
            return
        report = evaluate_set(engine, chunks, Settings(alternatives=alt.alternatives, run_validator=validate), tick)
        bar.close()
    except Exception as exc:  # a clear line, never a traceback
        fail(message(exc))
    if as_json:
        typer.echo(json.dumps({"set": where, "metrics": report.metrics, "accept": report.accept,
                               "per_chunk": report.per_chunk, "n_ranked_chunks": report.n_ranked},
                              indent=1, sort_keys=True))
        return
    _table(f"{where}: {report.n_ranked} chunks with relevance labels, {len(chunks)} in all", report.metrics)
    for system, vals in report.accept.items():
        typer.echo(f"{system} accept: " + ", ".join(f"{k} {v:.3f}" for k, v in vals.items()))


def _emit(title: str, rows: dict[str, dict[str, float]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"set": title, "metrics": rows}, indent=1, sort_keys=True))
    else:
        _table(title, rows)
