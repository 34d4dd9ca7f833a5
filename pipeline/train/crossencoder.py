"""A cross-encoder reranker for F, trained on the docs' own code ↔ record pairs.

Starts from a sentence-transformers checkpoint (the tuned bi-encoder, or MiniLM),
adds a one-logit head, and learns with binary cross-entropy: the record that holds
the code (1), the class-reference records of its API calls (a softer label), and
hard negatives from the union (0). The artifact is a plain Hugging Face
sequence-classification folder, so FlagEmbedding's ``FlagReranker`` loads it like
any bge-reranker.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
from pathlib import Path

from pipeline.kb.store import KBStore
from pipeline.kb.views import embed_text
from pipeline.train.budget import Budget, Progress
from pipeline.train.data import DataRecipe, Query, masked_view
from pipeline.train.recipe import Recipe, write_done

log = logging.getLogger(__name__)


class CrossEncoderRecipe(Recipe):
    version: int = 1
    budget: Budget | None = None  # a capped run (tests, --budget) is its own artifact, never the default
    data: DataRecipe = DataRecipe()
    seed: int = 13
    max_length: int = 256
    steps: int = 160
    batch_size: int = 16
    lr: float = 4e-5
    warmup_ratio: float = 0.1
    negatives_per_query: int = 3
    api_label: float = 0.5  # a class-reference record of an API the code calls: related, not the explanation
    mask_share: float = 0.7  # how often a document is shown without the code the query was cut from
    eval_queries: int = 80


def pairs(queries: list[Query], store: KBStore, recipe: CrossEncoderRecipe) -> dict[str, list]:
    """(query, document, label) rows, deterministic: the primary record, one API record, k negatives."""
    rows: dict[str, list] = {"query": [], "document": [], "label": []}
    for q in queries:
        rng = random.Random(f"{recipe.seed}:pairs:{q.qid}")
        take = [(q.primary, 1.0)]
        if q.api_records:
            take.append((rng.choice(q.api_records), recipe.api_label))
        # The first negative is the 2D/3D twin when there is one: always keep it.
        rest = q.negatives[1:]
        negs = q.negatives[:1] + rng.sample(rest, min(len(rest), recipe.negatives_per_query - 1))
        take += [(n, 0.0) for n in negs]
        for rid, label in take:
            if rid in store.by_id:
                record = store.get(rid)
                masked = rng.random() < recipe.mask_share
                rows["query"].append(q.text)
                rows["document"].append(masked_view(record, q.text, rng) if masked else embed_text(record))
                rows["label"].append(label)
    return rows


def eval_samples(queries: list[Query], store: KBStore, limit: int) -> list[dict[str, str | list[str]]]:
    out: list[dict[str, str | list[str]]] = []
    for q in queries[:limit]:
        if q.primary in store.by_id and q.negatives:
            rng = random.Random(f"eval:{q.qid}")
            out.append({"query": q.text, "positive": [masked_view(store.get(q.primary), q.text, rng)],
                        "negative": [embed_text(store.get(n)) for n in q.negatives if n in store.by_id]})
    return out


def train(base: str, out: Path, queries: list[Query], store: KBStore, recipe: CrossEncoderRecipe,
          progress: Progress | None = None) -> dict:
    """Train into ``out`` (a scratch folder; checkpoints there make a killed run resume)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import set_seed

    from pipeline.train.callback import BudgetCallback

    budget = recipe.budget or Budget()
    set_seed(recipe.seed)
    train_q = [q for q in queries if q.split == "train"]
    val_q = [q for q in queries if q.split == "val"]
    random.Random(recipe.seed).shuffle(val_q)
    data = Dataset.from_dict(pairs(train_q, store, recipe)).shuffle(seed=recipe.seed)
    model = CrossEncoder(base, num_labels=1, max_length=recipe.max_length, device="cpu", local_files_only=True)
    n_eval = 10 if budget.limited else recipe.eval_queries  # a capped run (tests) evaluates on a few queries
    evaluator = CrossEncoderRerankingEvaluator(eval_samples(val_q, store, n_eval), at_k=10,
                                               name="val", batch_size=32, write_csv=False)
    steps = budget.cap(recipe.steps)
    ckpt = out / "checkpoints"
    args = CrossEncoderTrainingArguments(
        output_dir=str(ckpt), max_steps=steps, per_device_train_batch_size=recipe.batch_size,
        learning_rate=recipe.lr, warmup_ratio=recipe.warmup_ratio, seed=recipe.seed, data_seed=recipe.seed,
        save_strategy="steps", save_steps=max(10, steps // 4), save_total_limit=1, logging_steps=10,
        eval_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=progress is not None,
    )
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=data,
                                  loss=BinaryCrossEntropyLoss(model),
                                  callbacks=[BudgetCallback("train reranker", budget, progress)])
    resume = any(ckpt.glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if resume else None)
    scores = evaluator(model)
    final = out / "model"
    model.save_pretrained(str(final))
    shutil.rmtree(ckpt, ignore_errors=True)  # optimiser state: only needed to resume
    info = {"kind": "reranker", "recipe": recipe.digest(), "steps": trainer.state.global_step,
            "pairs": len(data), "val": {k: round(float(v), 4) for k, v in scores.items()}, "base": base}
    write_done(out, info)
    return info
