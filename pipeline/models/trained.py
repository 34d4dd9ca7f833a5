"""Where the models trained here are, for a KB, at run time (training itself: pipeline/train)."""

from __future__ import annotations

from pathlib import Path

from pipeline.models.provision import ModelError


def query_encoder(kb_hash: str) -> str:
    """F's code embedder folder; ModelError (with the fix) when it is not trained or did not beat MiniLM."""
    from pipeline.train import defaults
    from pipeline.train.run import query_encoder_path

    path = query_encoder_path(kb_hash)
    if path is None:
        why = ("did not beat MiniLM where it was selected" if defaults.ready("query_map", kb_hash)
               else "is not trained yet (`python -m pipeline models train`)")
        raise ModelError(f"the code embedder trained from the docs {why}")
    return path


def _ready(kind: str, kb_hash: str, missing: str) -> Path:
    """The finished artifact folder of ``kind`` for this KB; ModelError(``missing``) when there is none."""
    from pipeline.train import defaults

    folder = defaults.ready(kind, kb_hash)
    if folder is None:
        raise ModelError(missing)
    return folder


def ranker(kb_hash: str) -> Path:
    return _ready("ranker", kb_hash, "the learned ranker is not trained yet; train it with `python -m pipeline "
                  "models train` (make test and make demo do it on the first run)")


def cross_encoder(kb_hash: str) -> Path:
    return _ready("cross_encoder", kb_hash, "no cross-encoder: set GDPOC_BGE_RERANKER or the reranker model setting "
                  "to a bge folder, or train one here with `python -m pipeline models train --cross-encoder`") / "model"


def accept(kb_hash: str) -> Path:
    return _ready("accept", kb_hash,
                  "the accept model is not trained yet; train it with `python -m pipeline models train`")


KINDS = ("data", "query_map", "query_encoder", "ranker", "cross_encoder", "accept")
WHAT = {"data": "training set (docs code ↔ sections)", "query_map": "code query map (D's and F's embedding leg)",
        "query_encoder": "fine-tuned query encoder (option)", "ranker": "F's learned ranker",
        "cross_encoder": "cross-encoder reranker (option)", "accept": "accept model"}


def training_set(kb_hash: str) -> dict | None:
    """The training set's stats for this KB (what ``train data`` prints), or None when it is not built."""
    from pipeline.train import defaults

    return defaults.info("data", kb_hash) or None


def models_table(kb_hash: str) -> list[dict[str, str]]:
    """One row per model learned from the docs: what it is, whether it is trained, its folder."""
    from pipeline.train import defaults

    rows = []
    for kind in KINDS:
        folder = defaults.ready(kind, kb_hash)
        rows.append({"model": WHAT[kind], "status": "ready" if folder else "not trained",
                     "folder": str(folder) if folder else ""})
    return rows


def status_lines(kb_hash: str) -> list[str]:
    from pipeline.train import defaults

    out = []
    for kind in KINDS:
        folder = defaults.ready(kind, kb_hash)
        if folder is None:
            extra = {"cross_encoder": " --cross-encoder", "query_encoder": " --mnrl"}.get(kind, "")
            out.append(f"{kind:<14} not trained   `python -m pipeline models train{extra}`")
            continue
        d = defaults.info(kind, kb_hash)
        detail = {k: v for k, v in d.items() if k in ("queries", "steps", "val_ndcg@10", "val_ndcg@10_base", "rows",
                                                       "val", "threshold", "ask_above", "asked_share",
                                                       "uses_qwen", "oof_auc_tune_free",
                                                       "oof_auc_tune_with_qwen", "oof_auc_dev_tune",
                                                       "oof_recall_dev_tune", "oof_auc_rule_tune")}
        out.append(f"{kind:<14} ready         {folder}\n{'':<14} {detail}")
    return out
