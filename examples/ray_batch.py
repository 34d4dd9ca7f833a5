"""Batch mode on Ray: ``python -m pipeline batch --backend ray`` under its own name (see docs/scaling.md).

    .venv/bin/python examples/ray_batch.py PATH... --out results.jsonl [--alt D] [--no-validate]
        [--workers 2] [--address auto]

Every option of ``pipeline batch`` works; ``--backend`` defaults to ``ray`` here. The work is done by
``pipeline.batch`` (``run_batch`` with ``pipeline/batch/ray_backend.py``), not by this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from examples/

from pipeline.cli_batch import main


def ray_argv(args: list[str]) -> list[str]:
    """``args`` with ``--backend ray`` added unless a backend is chosen."""
    return args if any(a == "--backend" or a.startswith("--backend=") for a in args) else ["--backend", "ray", *args]


if __name__ == "__main__":
    sys.argv = [sys.argv[0], *ray_argv(sys.argv[1:])]
    main()
