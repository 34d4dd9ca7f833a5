"""Batch mode across processes or machines with Ray, using the same ``pipeline`` functions as tasks.

    .venv/bin/python examples/ray_batch.py PATH... --out results.jsonl [--alt D] [--no-validate]
        [--workers 2] [--chunks-per-task 8] [--address auto] [--backend ray|processes]

The shape (see docs/scaling.md):

* the driver plans the chunks (``pipeline.batch.plan``), drops those already in
  the results file (same keys as ``python -m pipeline batch``), and is the only
  writer of that file (``ResultsLog``: one fsynced line per chunk, resumable);
* each worker opens its own ``Engine`` once — models are per process — and
  maps ``process_chunk`` (``engine.run`` plus its ``ResultLine``) over the chunks
  it is sent; a failing chunk comes back as an error line, never as a crash.
  A ``ResultLine`` is a pydantic model: it pickles to the driver as it is.

Without ``--address`` Ray starts a local single-node instance on this machine
(Ray 2.60 has no ``local_mode`` any more); with ``--address auto`` (or
``ray://head:10001``) the same code runs on an existing cluster, whose nodes
each need this project installed with its KB and indexes (``make index``).
``--backend processes`` runs the same task structure with
``concurrent.futures`` and no Ray.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from examples/: make `pipeline` importable

from tqdm import tqdm  # noqa: E402

from pipeline.batch import (  # noqa: E402
    Job,
    ResultLine,
    ResultsLog,
    file_error_line,
    jobs_for,
    kb_content_hash,
    plan,
    process_chunk,
    warm_up,
)
from pipeline.cli_common import DEFAULT_RERANKER, Alt, Reranker  # noqa: E402
from pipeline.settings import Settings  # noqa: E402

# What workers need in their environment: offline models, and the same cache and KB as the driver.
WORKER_ENV = {k: v for k, v in os.environ.items() if k.startswith(("GDPOC_", "GODOT_"))} | {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    "PYTHONPATH": str(REPO)}


class BatchWorker:
    """One per process: opens the Engine (KB, BM25, embeddings, models) once, then runs chunk after chunk."""

    def __init__(self, kb: list[str] | None, settings: Settings) -> None:
        from pipeline.engine import Engine

        self.settings = settings
        self.engine = Engine.open([Path(p) for p in kb] if kb else None)
        warm_up(self.engine, settings)

    def run(self, jobs: list[Job]) -> list[ResultLine]:
        return [process_chunk(self.engine, j.chunk, self.settings, duplicates=j.duplicates) for j in jobs]


def batches(jobs: Sequence[Job], size: int) -> Iterator[list[Job]]:
    for i in range(0, len(jobs), size):
        yield list(jobs[i : i + size])


# --------------------------------------------------------------------------- Ray


def run_with_ray(todo: list[Job], kb: list[str] | None, settings: Settings, workers: int, per_task: int,
                 address: str | None, emit: Callable[[list[ResultLine]], None]) -> int:
    import ray

    ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
             runtime_env={"env_vars": WORKER_ENV}, log_to_driver=False)
    try:
        # An actor is a process that keeps its state: the Engine is opened once per worker.
        actor_cls = ray.remote(num_cpus=1)(BatchWorker)
        actors = [actor_cls.remote(kb, settings) for _ in range(workers)]
        # Round-robin: each actor runs its queue of tasks one after another.
        pending = {actors[i % workers].run.remote(b): b for i, b in enumerate(batches(todo, per_task))}
        failed = 0
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            batch = pending.pop(done[0])
            try:
                emit(ray.get(done[0]))
            except ray.exceptions.RayError as exc:  # a worker died: its chunks are redone on the next run
                failed += len(batch)
                print(f"warning: {len(batch)} chunks lost with a worker ({exc.__class__.__name__}); "
                      "run again to redo them", file=sys.stderr)
        return failed
    finally:
        ray.shutdown()


# --------------------------------------------------------------------------- the same shape without Ray

_worker: BatchWorker | None = None


def _init_process(kb: list[str] | None, settings: Settings) -> None:
    global _worker
    os.environ.update(WORKER_ENV)
    _worker = BatchWorker(kb, settings)


def _run_in_process(jobs: list[Job]) -> list[ResultLine]:
    assert _worker is not None
    return _worker.run(jobs)


def run_with_processes(todo: list[Job], kb: list[str] | None, settings: Settings, workers: int, per_task: int,
                       emit: Callable[[list[ResultLine]], None]) -> int:
    failed = 0
    with ProcessPoolExecutor(workers, initializer=_init_process, initargs=(kb, settings)) as pool:
        futures = {pool.submit(_run_in_process, b): b for b in batches(todo, per_task)}
        for fut in as_completed(futures):
            try:
                emit(fut.result())
            except Exception as exc:
                failed += len(futures[fut])
                print(f"warning: {len(futures[fut])} chunks lost ({exc}); run again to redo them", file=sys.stderr)
    return failed


# --------------------------------------------------------------------------- driver


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("results.jsonl"))
    ap.add_argument("--alt", choices=list(Alt), type=Alt, default=Alt.both)
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--reranker", choices=list(Reranker), type=Reranker, default=DEFAULT_RERANKER)
    ap.add_argument("--kb", action="append", help="your own JSONL files or folder (default: built-in KB)")
    ap.add_argument("--max-lines", type=int, default=120)
    ap.add_argument("--workers", type=int, default=2, help="worker processes (each loads the models once)")
    ap.add_argument("--chunks-per-task", type=int, default=8)
    ap.add_argument("--address", default=None, help="an existing Ray cluster (e.g. auto); default: start one here")
    ap.add_argument("--backend", choices=["ray", "processes"], default="ray")
    args = ap.parse_args(argv)

    settings = Settings(alternatives=args.alt.alternatives, run_validator=not args.no_validate,
                        reranker=args.reranker.value)
    kb_paths = [Path(p) for p in args.kb] if args.kb else None
    p = plan(args.paths, args.max_lines)
    kb_hash = kb_content_hash(kb_paths)  # the driver needs the KB's hash for the keys, not an Engine
    jobs = jobs_for(p, settings, kb_hash)

    with ResultsLog(args.out) as results:
        state = results.open()
        if state.torn:
            print(f"note: {state.torn}", file=sys.stderr)
        done = state.done()
        for issue in p.issues:  # unreadable or binary files: an error line each, as in `pipeline batch`
            if issue.error is not None and (line := file_error_line(issue, settings, kb_hash)).key not in done:
                results.append(line)
        todo = [j for j in jobs if j.key not in done]
        print(f"{len(jobs)} chunks, {len(jobs) - len(todo)} already in {args.out}, {len(todo)} to run "
              f"on {args.workers} {args.backend} workers", file=sys.stderr)
        bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), unit="chunk", file=sys.stderr)

        def emit(lines: list[ResultLine]) -> None:
            for line in lines:  # the driver is the only writer: one fsynced line per chunk
                results.append(line)
            bar.update(len(lines))

        if not todo:
            failed = 0
        elif args.backend == "ray":
            failed = run_with_ray(todo, args.kb, settings, args.workers, args.chunks_per_task, args.address, emit)
        else:
            failed = run_with_processes(todo, args.kb, settings, args.workers, args.chunks_per_task, emit)
        bar.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
