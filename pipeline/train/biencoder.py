"""A code-tuned query encoder for the embedding leg, fine-tuned from the shipped MiniLM.

sentence-transformers' ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss``
over (code crop, record, hard negative) triples, a no-duplicates batch sampler (several
crops share a record), selected by ``InformationRetrievalEvaluator`` on the validation
pages. The model is asymmetric (a ``Router``): the query route learns, the document route
stays the shipped MiniLM — so every record vector already cached for MiniLM stays valid,
and training adds no re-embedding of the KB (about 10 minutes on these 2 cores).
"""

from __future__ import annotations

import json
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
DOCUMENT_TOWER = "gdpoc_document_tower.json"  # read by pipeline/models/embedder.py: documents use the base


class BiEncoderRecipe(Recipe):
    version: int = 1
    budget: Budget | None = None  # a capped run (tests, --budget) is its own artifact, never the default
    data: DataRecipe = DataRecipe()
    seed: int = 13
    steps: int = 80
    batch_size: int = 32
    lr: float = 3e-5
    warmup_ratio: float = 0.1
    query_max_length: int = 192
    mask_share: float = 0.7  # how often the positive is shown without the code the query was cut from
    eval_queries: int = 120


def triples(queries: list[Query], store: KBStore, recipe: BiEncoderRecipe) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {"anchor": [], "positive": [], "negative": []}
    for q in queries:
        if q.primary not in store.by_id or not q.negatives:
            continue
        rng = random.Random(f"{recipe.seed}:bi:{q.qid}")
        pos = store.get(q.primary)
        rows["anchor"].append(q.text)
        rows["positive"].append(masked_view(pos, q.text, rng) if rng.random() < recipe.mask_share else embed_text(pos))
        rows["negative"].append(embed_text(store.get(q.negatives[0])))  # the 2D/3D twin first, when there is one
    return rows


def _ir_evaluator(queries: list[Query], store: KBStore, recipe: BiEncoderRecipe):
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    qs = {q.qid: q.text for q in queries[: recipe.eval_queries]}
    relevant = {q.qid: {q.primary, *q.positives, *q.api_records} for q in queries[: recipe.eval_queries]}
    corpus_ids = {rid for q in queries[: recipe.eval_queries] for rid in (*relevant[q.qid], *q.negatives)}
    corpus = {rid: embed_text(store.get(rid)) for rid in sorted(corpus_ids) if rid in store.by_id}
    return InformationRetrievalEvaluator(qs, corpus, relevant, name="val", ndcg_at_k=[10], mrr_at_k=[10],
                                         accuracy_at_k=[1, 5], precision_recall_at_k=[10], map_at_k=[10],
                                         write_csv=False, batch_size=64)


def asymmetric(base: str, query_max_length: int):
    """MiniLM twice behind a Router: a trainable query route, a frozen document route."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Router, Transformer

    def tower(max_len: int) -> list:
        tr = Transformer(base, max_seq_length=max_len, model_kwargs={"local_files_only": True},
                         processor_kwargs={"local_files_only": True}, config_kwargs={"local_files_only": True})
        return [tr, Pooling(tr.get_embedding_dimension(), "mean"), Normalize()]

    doc = tower(256)
    for module in doc:
        for p in module.parameters():
            p.requires_grad = False
    return SentenceTransformer(modules=[Router.for_query_document(tower(query_max_length), doc)], device="cpu")


def train(base: str, base_fingerprint: str, out: Path, queries: list[Query], store: KBStore,
          recipe: BiEncoderRecipe, progress: Progress | None = None) -> dict:
    """Fine-tune into ``out`` (a scratch folder; its checkpoints make a killed run resume)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import (
        BatchSamplers,
        SentenceTransformerTrainingArguments,
    )
    from transformers import set_seed

    from pipeline.train.callback import BudgetCallback

    budget = recipe.budget or Budget()
    set_seed(recipe.seed)
    train_q = [q for q in queries if q.split == "train"]
    val_q = [q for q in queries if q.split == "val"]
    random.Random(recipe.seed).shuffle(val_q)
    data = Dataset.from_dict(triples(train_q, store, recipe)).shuffle(seed=recipe.seed)
    model = asymmetric(base, recipe.query_max_length)
    if budget.limited:  # a capped run (tests): a small validation set keeps the evaluator to seconds
        val_q = val_q[:20]
    evaluator = _ir_evaluator(val_q, store, recipe)
    steps = budget.cap(recipe.steps)
    ckpt = out / "checkpoints"
    args = SentenceTransformerTrainingArguments(
        output_dir=str(ckpt), max_steps=steps, per_device_train_batch_size=recipe.batch_size,
        learning_rate=recipe.lr, warmup_ratio=recipe.warmup_ratio, seed=recipe.seed, data_seed=recipe.seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        router_mapping={"anchor": "query", "positive": "document", "negative": "document"},
        save_strategy="steps", save_steps=max(10, steps // 4), save_total_limit=1, logging_steps=10,
        eval_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=progress is not None,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data,
                                         loss=MultipleNegativesRankingLoss(model),
                                         callbacks=[BudgetCallback("train query encoder", budget, progress)])
    resume = any(ckpt.glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if resume else None)
    before = evaluator(asymmetric(base, recipe.query_max_length))
    after = evaluator(model)
    key = "val_cosine_ndcg@10"
    final = out / "model"
    model.save(str(final))
    (final / DOCUMENT_TOWER).write_text(json.dumps({"base": base, "fingerprint": base_fingerprint}))
    shutil.rmtree(ckpt, ignore_errors=True)  # optimiser state: only needed to resume
    info = {"kind": "query_encoder", "recipe": recipe.digest(), "steps": trainer.state.global_step,
            "triples": len(data), "val_ndcg@10_base": round(float(before.get(key, 0.0)), 4),
            "val_ndcg@10": round(float(after.get(key, 0.0)), 4), "base": base}
    write_done(out, info)
    return info
