"""F's learned ranker at run time: a LightGBM model over pipeline.features, with its explanation.

Each score splits exactly into one contribution per feature plus a bias (LightGBM's
``pred_contrib``: SHAP values of the trees), so the dashboard can say why a record rose.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from pipeline.features import FEATURES_VERSION, NAMES
from pipeline.models.provision import ModelError

MODEL_FILE = "ranker.txt"


class LearnedRanker:
    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.name = f"learned ranker (LightGBM, {self.folder.name})"
        self._booster = None
        self._lock = threading.Lock()

    def load(self) -> None:
        if self._booster is not None:
            return
        meta = self.folder / "features.json"
        try:
            names = json.loads(meta.read_text())
        except (OSError, ValueError) as exc:
            raise ModelError(f"no learned ranker in {self.folder} ({exc}); train it with "
                             "`python -m pipeline models train`") from exc
        if names.get("version") != FEATURES_VERSION or names.get("names") != NAMES:
            raise ModelError(f"the learned ranker in {self.folder} was trained on other features; "
                             "train it again with `python -m pipeline models train`")
        try:
            import lightgbm as lgb

            # LightGBM aborts the process on a truncated file (no exception to catch): check it first.
            path = self.folder / MODEL_FILE
            if b"end of trees" not in path.read_bytes():
                raise ValueError(f"{MODEL_FILE} is truncated (no 'end of trees')")
            self._booster = lgb.Booster(model_file=str(path))
        except Exception as exc:  # a truncated or corrupt file: say so, F falls back to the union order
            raise ModelError(f"cannot load the learned ranker from {self.folder}: {exc}") from exc

    def score(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores, and per-feature contributions (rows: candidates; columns: NAMES then the bias)."""
        with self._lock:
            self.load()
            assert self._booster is not None
            if len(features) == 0:
                return np.zeros(0), np.zeros((0, len(NAMES) + 1))
            contrib = np.asarray(self._booster.predict(features, pred_contrib=True, num_threads=1))
        return contrib.sum(axis=1), contrib
