"""``python -m pipeline eval``: ranking and accept metrics on a labelled set, or on the held-out docs pages."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from pipeline.cli_common import Alt, fail, message, warn

METRIC_NAMES = ("ndcg@10", "mrr", "recall@50")


class Half(StrEnum):
    """Which half of the dev set: constants are tuned on "tune"; figures are claimed on "test"."""

    test = "test"
    tune = "tune"
    all = "all"


def _table(title: str, rows: dict[str, dict[str, float]]) -> None:
    typer.echo(title)
    width = max((len(k) for k in rows), default=10) + 2
    spans = any("ndcg@10_low" in v for v in rows.values())
    typer.echo(f"{'system':<{width}}" + "".join(f"{m:>11}" for m in METRIC_NAMES)
               + (f"{'nDCG@10 95% CI':>18}" if spans else ""))
    for system, vals in rows.items():
        ci = f"[{vals['ndcg@10_low']:.3f}, {vals['ndcg@10_high']:.3f}]" if "ndcg@10_low" in vals else ""
        typer.echo(f"{system:<{width}}" + "".join(f"{vals.get(m, float('nan')):>11.4f}" for m in METRIC_NAMES)
                   + (f"{ci:>18}" if spans else ""))


def _with_intervals(report) -> dict[str, dict[str, float]]:
    """The report's metrics, each system with its nDCG@10 bootstrap interval over chunks."""
    return {s: report.row(s) for s in report.metrics}


def _p(p_value: float) -> str:
    from pipeline.intervals import p_text

    text = p_text(p_value)
    return text if text.startswith("<") else f"= {text}"


def _comparisons(report) -> None:
    if not report.comparisons:
        return
    typer.echo("paired over the same chunks (nDCG@10; two-sided permutation test):")
    for p in report.comparisons:
        typer.echo(f"  {p.left} vs {p.right}: {p.difference:+.4f}  p {_p(p.p_value)}  ({p.n} chunks)")


def eval_command(
    set_: Annotated[Path | None, typer.Option("--set", help="labelled JSONL (default: the dev set)")] = None,
    blind: Annotated[bool, typer.Option("--blind", help="the blind set (fixtures/eval/blind.jsonl), never tuned on")]
    = False,
    split: Annotated[Half | None, typer.Option(
        case_sensitive=False, help="which half (default: the dev set's test half; all of a --set or --blind set)")]
    = None,
    alt: Annotated[Alt, typer.Option(case_sensitive=False, help="which alternatives to run")] = Alt.both,
    validate: Annotated[bool, typer.Option("--validate/--no-validate")] = False,
    policy: Annotated[list[str] | None, typer.Option(
        help="with --validate: only this accept policy (repeatable; default: all four side by side; "
             "the Qwen-for-every-candidate ones take about 2 min a chunk)")] = None,
    variants: Annotated[bool, typer.Option("--variants", help="every ranker side by side (no validation)")] = False,
    with_qwen: Annotated[bool, typer.Option("--with-qwen", help="with --variants: also F + Qwen reranker (slow)")]
    = False,
    with_cross_encoder: Annotated[bool, typer.Option("--with-cross-encoder",
                                                     help="with --variants: also F + the trained cross-encoder")]
    = False,
    heldout: Annotated[bool, typer.Option("--heldout", help="the training data's held-out test pages instead")]
    = False,
    long: Annotated[bool, typer.Option("--long", help="long scripts (held-out pages' code) whole vs by function")]
    = False,
    class_accepts: Annotated[bool, typer.Option(
        "--class-accepts", help="with --validate: also accept the class records of the classes the code uses")]
    = False,
    kb: Annotated[list[Path] | None, typer.Option(help="your own JSONL files or folder")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    from pipeline.engine import Engine
    from pipeline.evaluate import (
        BLIND_SET,
        DEV_SET,
        evaluate_policies,
        evaluate_set,
        evaluate_variants,
        load_set,
        ranking_variants,
    )
    from pipeline.settings import Settings

    try:
        engine = Engine.open(kb)
        warn(engine.store.skipped())
        if heldout:
            from pipeline.train.heldout import evaluate_heldout

            rows = evaluate_heldout(engine)
            _emit(f"held-out docs pages (training data 'test' split, the crop's own records hidden): "
                  f"{rows.pop('_queries', {}).get('n', 0):.0f} queries", rows, as_json)
            return
        if long:
            from pipeline.train.heldout import evaluate_long

            rows = evaluate_long(engine)
            _emit(f"long scripts (the code of held-out pages, its records hidden): "
                  f"{rows.pop('_queries', {}).get('n', 0):.0f} files", rows, as_json)
            return
        if blind and set_ is not None:
            raise ValueError("--blind and --set each name a labelled set: give one of them")
        if blind:
            set_ = BLIND_SET
        half = split or (Half.all if set_ else Half.test)
        chunks = load_set(set_ or DEV_SET, None if half is Half.all else half.value)
        where = f"{set_ or DEV_SET}" + ("" if half is Half.all else f", {half.value} half")
        bar = tqdm(total=len(chunks), desc="eval", file=sys.stderr, leave=False)
        tick = lambda ev: bar.update(ev.done - bar.n)  # noqa: E731
        if variants:
            rows = evaluate_variants(engine, chunks, ranking_variants(with_qwen, with_cross_encoder), tick)
            bar.close()
            _emit(f"{where}: {sum(1 for c in chunks if c.relevant)} labelled chunks", rows, as_json)
            return
        settings = Settings(alternatives=alt.alternatives, run_validator=validate, class_accepts=class_accepts)
        if validate:  # every accept policy side by side; verdicts are cached, so only the first run pays
            reports = evaluate_policies(engine, chunks, settings, tick, policy or ())
            bar.close()
            _policies(where, reports, as_json)
            return
        report = evaluate_set(engine, chunks, settings, tick)
        bar.close()
    except Exception as exc:  # a clear line, never a traceback
        fail(message(exc))
    if as_json:
        typer.echo(json.dumps({"set": where, "metrics": report.metrics, "accept": report.accept,
                               "per_chunk": report.per_chunk, "n_ranked_chunks": report.n_ranked,
                               "intervals": {s: asdict(i) for s, i in report.intervals.items()},
                               "comparisons": [asdict(p) for p in report.comparisons]},
                              indent=1, sort_keys=True))
        return
    _table(f"{where}: {report.n_ranked} chunks with relevance labels, {len(chunks)} in all",
           _with_intervals(report))
    _comparisons(report)
    for system, vals in report.accept.items():
        typer.echo(f"{system} accept: " + ", ".join(f"{k} {v:.3f}" for k, v in vals.items()))


def _emit(title: str, rows: dict[str, dict[str, float]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"set": title, "metrics": rows}, indent=1, sort_keys=True))
    else:
        _table(title, rows)


def _policies(where: str, reports: dict, as_json: bool) -> None:
    rows = []
    for policy, report in reports.items():
        for alt, acc in report.accept.items():
            cal = report.calibration.get(alt, {})
            rows.append({"policy": policy, "alternative": alt, **acc, "auc_p": cal.get("auc"),
                         "qwen_calls_per_chunk": cal.get("qwen_calls_per_chunk"),
                         "decided_without_qwen": cal.get("decided_without_qwen"), "reliability": cal.get("bins")})
    if as_json:
        typer.echo(json.dumps({"set": where, "policies": rows,
                               "ranking": next(iter(reports.values())).metrics}, indent=1, sort_keys=True))
        return
    _table(where, _with_intervals(next(iter(reports.values()))))
    typer.echo(f"{'policy':<18}{'alt':>4}{'precision':>11}{'recall':>9}{'AUC p':>8}{'must-not':>10}{'accepted':>10}"
               f"{'Qwen/chunk':>12}")
    for r in rows:
        auc = f"{r['auc_p']:.3f}" if r["auc_p"] is not None else "—"
        calls = f"{r['qwen_calls_per_chunk']:.1f}" if r["qwen_calls_per_chunk"] is not None else "—"
        typer.echo(f"{r['policy']:<18}{r['alternative']:>4}{r['accept_precision']:>11.3f}{r['accept_recall']:>9.3f}"
                   f"{auc:>8}{r['must_not_accept_violations']:>10.0f}{r['accepted']:>10.0f}{calls:>12}")
