"""The Ray backend of ``pipeline batch``: N Ray actors, each a :class:`~pipeline.batch.run.ChunkWorker`
with its own Engine (KB, indexes, embedder, models: nothing is shared between workers), fed one chunk
at a time; the driver (:func:`~pipeline.batch.run.run_batch`) writes each line as ``ray.wait`` returns it.

Without an address Ray starts a private single-node instance on this machine with ``num_cpus=workers``,
bound to 127.0.0.1, without the dashboard and with usage stats off: it needs no network. With an address
(``auto``, ``ray://head:10001``) the same actors run on an existing cluster, whose nodes need this project
at the same path with its KB and caches (docs/scaling.md).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.batch.plan import BatchError, Job
from pipeline.batch.results import ResultLine
from pipeline.batch.run import ChunkWorker, WorkerMemory, error_line
from pipeline.settings import Settings

if TYPE_CHECKING:
    from ray import ObjectRef

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
IN_FLIGHT = 2  # chunks queued per worker: the next one is there when a chunk finishes, few are lost with a worker
TRIES = 2  # a chunk whose worker died is tried once more elsewhere (it may be what killed the worker)
OBJECT_STORE_BYTES = 128 * 1024**2  # result lines are a few KiB: do not reserve 30 % of RAM
# Set before Ray starts (its local processes inherit them): nothing phones home, nothing is installed.
RAY_OFFLINE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
                   "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
_PASSED_ON = ("GDPOC_", "GODOT_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_")


def worker_env() -> dict[str, str]:
    """What each worker needs in its environment: offline models, the driver's cache and KB settings,
    and this project importable (a worker on another node needs it at the same path)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ON)}
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                  "PYTHONPATH": path}


def _why(exc: BaseException) -> str:
    """The worker's own error, in one line, out of Ray's wrapping (which holds the whole traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return f"{type(cause).__name__}: {cause}"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    named = [ln for ln in lines if ln.split(":", 1)[0].endswith(("Error", "Exception"))]
    return (named or lines or [type(exc).__name__])[-1][:400]


class RayBackend:
    """Chunks on Ray actors; see the module docstring. ``workers`` None: one per CPU Ray has."""

    def __init__(self, settings: Settings, *, kb: Sequence[Path] | None, kb_hash: str, workers: int | None = None,
                 address: str | None = None, top: int = 5, truncate: bool = False,
                 echo: Callable[[str], None] = print) -> None:
        if importlib.util.find_spec("ray") is None:
            raise BatchError("the ray backend needs Ray: .venv/bin/pip install ray==2.60.0 (it is in "
                             "requirements.txt; `make install` installs it)")
        if workers is not None and workers < 1:
            raise BatchError("--workers must be at least 1")
        self.settings, self.kb_hash, self.top, self.truncate, self.echo = settings, kb_hash, top, truncate, echo
        self.kb = [str(p) for p in kb] if kb else None
        self.workers, self.address = workers, address
        self.lost: list[str] = []
        self._owns_ray = False
        self._actors: list[Any] = []
        self._alive: list[bool] = []

    # --- set-up -----------------------------------------------------------------------------
    def _init_ray(self) -> Any:
        os.environ.update(RAY_OFFLINE_ENV)
        import ray

        if not ray.is_initialized():
            local = {} if self.address else {"num_cpus": self.workers or os.cpu_count() or 1,
                                             "object_store_memory": OBJECT_STORE_BYTES,
                                             "_node_ip_address": "127.0.0.1"}
            try:
                ray.init(address=self.address, include_dashboard=False, logging_level=logging.WARNING,
                         log_to_driver=True, **local)
            except Exception as exc:  # a bad address, a cluster of another Ray version, no /tmp space, ...
                raise BatchError(f"cannot start Ray{' at ' + self.address if self.address else ''}: {exc}") from exc
            self._owns_ray = True
        return ray

    def start(self) -> None:
        ray = self._init_ray()
        cpus = int(ray.cluster_resources().get("CPU", 0))
        n = self.workers or cpus
        if n > cpus:  # an actor takes one CPU: more would wait for ever
            raise BatchError(f"--workers {n} but the Ray cluster has {cpus} CPUs")
        actor = ray.remote(num_cpus=1, max_restarts=0)(ChunkWorker).options(
            runtime_env={"env_vars": worker_env()})
        self.echo(f"starting {n} Ray workers; each opens its own Engine (KB, indexes, embedder"
                  f"{', models' if self.settings.needs_models else ''})")
        self._actors = [actor.remote(self.settings, kb=self.kb, kb_hash=self.kb_hash, top=self.top,
                                     truncate=self.truncate) for _ in range(n)]
        self._alive = [True] * n
        reasons = []
        for i, ref in enumerate([a.memory.remote() for a in self._actors]):  # returns once __init__ is done
            try:
                ray.get(ref)
            except ray.exceptions.RayError as exc:
                self._alive[i] = False
                reasons.append(_why(exc))
                self.echo(f"warning: Ray worker {i} did not start: {reasons[-1]}")
        if not any(self._alive):
            raise BatchError(f"no Ray worker started: {reasons[0]}")

    # --- the run ----------------------------------------------------------------------------
    def results(self, jobs: Sequence[Job]) -> Iterator[ResultLine]:
        import ray

        queue: deque[Job] = deque(jobs)
        tries: Counter[str] = Counter()
        pending: dict[ObjectRef, tuple[int, Job]] = {}
        self._fill(queue, pending, tries)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            i, job = pending.pop(ref)
            line: ResultLine | None = None
            try:
                line = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # ``run`` itself raised: the chunk gets an error line
                line = error_line(job.chunk, self.settings, self.kb_hash, exc.cause or exc, job.duplicates)
            except ray.exceptions.RayError as exc:  # the worker died (killed, out of memory, a crash) or is lost
                self._worker_died(i, exc)
                if tries[job.key] < TRIES:
                    queue.appendleft(job)
                else:
                    self._lose(job)
            self._fill(queue, pending, tries)  # before yielding: the workers go on while the driver writes
            if line is not None:
                yield line
        for job in queue:  # every worker died
            self._lose(job)

    def _fill(self, queue: deque[Job], pending: dict[ObjectRef, tuple[int, Job]], tries: Counter[str]) -> None:
        """Hand out chunks until each live worker has ``IN_FLIGHT``: a free worker takes the next chunk."""
        busy = Counter(i for i, _ in pending.values())
        for i, actor in enumerate(self._actors):
            while queue and self._alive[i] and busy[i] < IN_FLIGHT:
                job = queue.popleft()
                tries[job.key] += 1
                pending[actor.run.remote(job)] = (i, job)
                busy[i] += 1

    def _worker_died(self, i: int, exc: BaseException) -> None:
        if self._alive[i]:
            import ray

            self._alive[i] = False
            ray.kill(self._actors[i])  # in case it is only unreachable: its chunks are handed out again
            left = sum(self._alive)
            self.echo(f"warning: Ray worker {i} died ({_why(exc)}); its chunks go to the {left} left"
                      if left else f"warning: the last Ray worker died ({_why(exc)})")

    def _lose(self, job: Job) -> None:
        self.lost.append(f"{job.chunk.file}:{job.chunk.start_line}-{job.chunk.end_line}")

    # --- after ------------------------------------------------------------------------------
    def memory(self) -> list[WorkerMemory]:
        import ray

        live = [a.memory.remote() for a, ok in zip(self._actors, self._alive, strict=True) if ok]
        try:
            return list(ray.get(live, timeout=60))
        except ray.exceptions.RayError as exc:
            log.warning("could not read the workers' memory: %s", _why(exc))
            return []

    def close(self) -> None:
        if not self._actors and not self._owns_ray:
            return
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors, self._alive = [], []
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
