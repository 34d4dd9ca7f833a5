"""``python -m pipeline batch PATH... --out results.jsonl``: the batch command.

Registered in pipeline/cli.py with ``app.command("batch")(batch_command)``; also runs
on its own as ``python -m pipeline.cli_batch PATH...``. Nothing heavy is imported
until the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline.cli_common import DEFAULT_BACKEND, DEFAULT_RERANKER, Alt, Backend, Reranker, fail, message

if TYPE_CHECKING:
    from pipeline.batch import BatchReport
    from pipeline.trace import ProgressEvent


def batch_command(
    paths: Annotated[list[Path], typer.Argument(help="GDScript files, or folders searched for *.gd")],
    out: Annotated[Path, typer.Option(help="results JSONL; appended to, and read to resume")] = Path("results.jsonl"),
    alt: Annotated[Alt, typer.Option(case_sensitive=False, help="which alternatives to run")] = Alt.both,
    validate: Annotated[bool, typer.Option("--validate/--no-validate", help="run the Qwen validator")] = True,
    max_lines: Annotated[int, typer.Option(min=1, help="longest chunk; longer blocks are split at blank lines")
                         ] = 120,
    kb: Annotated[list[Path] | None, typer.Option(help="your own JSONL files or folder")] = None,
    reranker: Annotated[Reranker, typer.Option(case_sensitive=False,
                                               help="F's reranker (none: union order, no model)")
                        ] = DEFAULT_RERANKER,
    top: Annotated[int, typer.Option(min=0, help="ranked records kept per alternative besides the accepted")
                   ] = 5,
    retry_errors: Annotated[bool, typer.Option(
        help="redo chunks whose newest result is an error or not ok (e.g. a validator timeout)")] = False,
    truncate: Annotated[bool, typer.Option(help="cut a chunk over 64 KiB instead of recording an error")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar on stderr")] = True,
    backend: Annotated[Backend, typer.Option(case_sensitive=False, help=(
        "where chunks run: local (this process, one Engine) or ray (Ray workers, each with its own Engine); "
        "this process writes --out either way"))] = DEFAULT_BACKEND,
    workers: Annotated[int | None, typer.Option(min=1, help=(
        "Ray workers (default: one per CPU); each holds its own KB, indexes and models in memory"))] = None,
    address: Annotated[str | None, typer.Option(help=(
        "join an existing Ray cluster (auto, ray://head:10001) instead of starting one on this machine"))] = None,
    class_accepts: Annotated[bool, typer.Option(
        "--class-accepts", help="also accept the class records of the classes the code uses")] = False,
) -> None:
    """Run D and/or F over every chunk (top-level function or class) of files or folders; resumable.

    One JSON line per chunk is appended to --out as soon as it is done. A re-run
    skips chunks already there (same code, settings and KB), so an interrupted
    batch continues where it stopped. With --backend ray the chunks run on Ray
    workers (a local Ray started offline, or --address) and this process still
    writes every line.
    """
    from pydantic import ValidationError
    from tqdm import tqdm

    from pipeline.batch import BatchError, run_batch
    from pipeline.errors import describe
    from pipeline.models.provision import ModelError
    from pipeline.settings import Settings

    try:
        settings = Settings(alternatives=alt.alternatives, run_validator=validate, reranker=reranker.value,
                            class_accepts=class_accepts)
    except ValidationError as exc:
        fail("invalid setting: " + describe(exc))

    bars: dict[str, tqdm] = {}

    def engine_progress(event: ProgressEvent) -> None:
        bar = bars.get(event.label)
        if bar is None:
            bar = bars[event.label] = tqdm(total=event.total, desc=event.label, file=sys.stderr, leave=False,
                                           disable=not progress)
        bar.update(event.done - bar.n)

    try:
        report = run_batch(paths, out, settings, kb=kb, max_lines=max_lines, retry_errors=retry_errors, top=top,
                           truncate=truncate, show_progress=progress, engine_progress=engine_progress,
                           backend=backend.value, workers=workers, address=address)
    except KeyboardInterrupt:
        typer.secho(f"interrupted; every finished chunk is in {out}: run the same command again to resume",
                    fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130) from None
    except (BatchError, OSError, ValueError, ModelError) as exc:  # OSError: unreadable input, full disk
        fail(message(exc))
    finally:
        for bar in bars.values():
            bar.close()
    typer.echo(f"{report.chunks} chunks in {report.files} files: {report.done} run now, {report.skipped} already "
               f"in {report.out}, {report.errors} errors, {report.degraded} with a stage error")
    if report.empty_files:
        typer.echo(f"{len(report.empty_files)} files had no code to run: " + ", ".join(report.empty_files[:5])
                   + (" ..." if len(report.empty_files) > 5 else ""))
    if report.errors and not retry_errors:
        typer.echo("error lines carry an \"error\" field; --retry-errors redoes those chunks")
    _say_speed(report)
    if report.lost:
        typer.secho(f"{len(report.lost)} chunks were not run (a worker died): " + ", ".join(report.lost[:5])
                    + (" ..." if len(report.lost) > 5 else "") + "; run the same command again to redo them",
                    fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(1)


def _say_speed(report: BatchReport) -> None:
    """Throughput after start-up, and what each worker holds in memory."""
    if not report.done:
        return
    mib = 1024**2
    memory = ", ".join(f"{w.rss / mib:,.0f}" + (f" ({w.uss / mib:,.0f} own)" if w.uss is not None else "")
                       for w in report.workers)
    typer.echo(f"{report.backend}: {report.done} chunks in {report.run_s:.1f} s "
               f"({report.chunks_per_minute or 0:.0f} chunks/min) after {report.setup_s:.1f} s of start-up; "
               f"memory per worker, MiB RSS: {memory or 'unknown'}")


def main() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    typer.run(batch_command)


if __name__ == "__main__":
    main()
