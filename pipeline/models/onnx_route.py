"""MiniLM's query route on ONNX Runtime: a chunk's vector without importing torch.

Encoding one chunk takes ~30 ms, but importing torch and sentence-transformers to do it took ~6 s of
every fresh process (the CLI, a batch worker, the dashboard's start). `python -m pipeline models prepare`
exports the base model once with ``torch.onnx.export``, checks the export against sentence-transformers
on probe texts, and writes it atomically under the cache, keyed by the model's file fingerprint.
Queries then run on onnxruntime with the model's own ``tokenizer.json``: mean pooling over the
attention mask, an optional bias-free linear map (F's learned query map), L2 normalisation, which is
what the sentence-transformers modules do. KB documents are still encoded by sentence-transformers
(the vectors are computed once and cached); the two agree to ~1e-7.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline import config

log = logging.getLogger(__name__)

EXPORT_VERSION = 1
MODEL_FILE = "model.onnx"
SUB_BATCH = 8
TOLERANCE = 1e-4  # the largest difference from sentence-transformers an export may show on the probes
PROBES = ["func _process(delta):\n\tposition += velocity * delta",
          "Input.is_action_pressed(\"move_right\")", "A short sentence about nodes and scenes.",
          "extends CharacterBody2D\n" + "var speed = 400\n" * 40]


def export_dir(fingerprint: str) -> Path:
    return config.cache_dir() / "onnx" / f"{fingerprint[:24]}-v{EXPORT_VERSION}"


def export(model_path: str, fingerprint: str) -> Path:
    """Export the transformer of a sentence-transformers folder (MiniLM) to ONNX, checked, atomically."""
    out = export_dir(fingerprint)
    if (out / MODEL_FILE).is_file():
        return out
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = AutoModel.from_pretrained(model_path, local_files_only=True).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = tok(PROBES[:2], padding=True, return_tensors="pt")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on the attention mask: the check below decides
            torch.onnx.export(model, tuple(sample[n] for n in names), str(tmp / MODEL_FILE), input_names=names,
                              output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]})
        st = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        route = OnnxQueryRoute(tmp / MODEL_FILE, Path(model_path) / "tokenizer.json", st.max_seq_length)
        diff = float(np.abs(route.encode(PROBES) - st.encode(PROBES, normalize_embeddings=True)).max())
        if diff > TOLERANCE:
            raise ValueError(f"the ONNX export differs from sentence-transformers by {diff:.1e}")
        (tmp / "export.json").write_text(json.dumps({
            "fingerprint": fingerprint, "max_length": st.max_seq_length,
            "max_abs_diff": diff, "version": EXPORT_VERSION}))
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


class OnnxQueryRoute:
    """Transformer (ONNX) → mean pooling → optional linear map → L2 normalisation."""

    def __init__(self, onnx_file: Path, tokenizer_file: Path, max_length: int,
                 dense: np.ndarray | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = os.cpu_count() or 2
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.dense = dense  # (out, in), as torch.nn.Linear stores it
        self._lock = threading.Lock()
        self.pooled_cache = pooled_cache(onnx_file, tokenizer_file, max_length)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if len(texts) == 1:
            return self._finish(self._query(texts[0]))
        if len(texts) <= SUB_BATCH:
            return self._finish(self._run(texts))
        # A batch pads to its longest text: sorted sub-batches of 8 ran 2.6x faster than one padded batch.
        # Each is finished on its own: the map's matmul over 8 rows and over 64 differ in their last bits, and
        # the learned ranker's rank features turn such bits into another model.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vecs = np.vstack([self._finish(self._run([texts[i] for i in order[s : s + SUB_BATCH]]))
                          for s in range(0, len(order), SUB_BATCH)])
        out = np.empty_like(vecs)
        out[order] = vecs
        return out

    def _query(self, text: str) -> np.ndarray:
        """One text (a chunk, or one function of a long chunk): every route on the same transformer (MiniLM,
        the query map on it) shares the cache, so D's leg and F's leg encode a text once between them.
        Only one-text calls are cached: a text's vector from a padded batch differs in its last bits, and
        what the models learned from (the training's batches) must not change with what was asked before."""
        row = self.pooled_cache.get(text)
        if row is None:
            row = self._run([text])[0]
            row.setflags(write=False)  # the cache hands this row to other routes
            self.pooled_cache.put(text, row)
        return row[None, :]

    def _finish(self, vec: np.ndarray) -> np.ndarray:
        """Pooled vectors → the optional linear map → L2 normalisation."""
        if self.dense is not None:
            vec = vec @ self.dense.T
        return (vec / np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(list(texts))
        feeds = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        with self._lock:
            hidden = self.session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        return (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)


class PooledCache:
    """The last ``size`` texts' pooled vectors for one exported model and tokenizer (an LRU, thread-safe)."""

    def __init__(self, size: int = 4096) -> None:  # a 64 KiB paste of 3-line functions has ~2,000; 1.5 KB each
        self.size, self._lock = size, threading.Lock()
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            row = self._data.get(text)
            if row is not None:
                self._data.move_to_end(text)
            return row

    def put(self, text: str, row: np.ndarray) -> None:
        with self._lock:
            self._data[text] = row
            self._data.move_to_end(text)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


_SHARED: dict[tuple[str, str, int], PooledCache] = {}
_SHARED_LOCK = threading.Lock()


def pooled_cache(onnx_file: Path, tokenizer_file: Path, max_length: int) -> PooledCache:
    """One cache per (export, tokenizer, length): every route on the same transformer reads it."""
    key = (str(onnx_file.resolve()), _tokenizer_hash(tokenizer_file), max_length)
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, PooledCache())


def _tokenizer_hash(path: Path) -> str:
    """The tokenizer's identity without the truncation and padding it was saved with (the route sets both):
    a trained query map's copy of MiniLM's tokenizer differs from the original only there."""
    spec = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("truncation", "padding")}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _same_weights(folder: Path, base: Path) -> bool:
    """Whether a saved transformer holds the base's very tensors (a fine-tuned one does not)."""
    from safetensors.numpy import load_file

    mine, theirs = load_file(str(folder / "model.safetensors")), load_file(str(base / "model.safetensors"))
    return all(k in theirs and np.array_equal(v, theirs[k]) for k, v in mine.items())


def _query_map(folder: Path) -> tuple[Path, np.ndarray] | None:
    """A trained query map's (transformer folder, map), when its query route is exactly MiniLM + a bias-free Dense."""
    try:
        router = json.loads((folder / "router_config.json").read_text())
        steps = router["structure"]["query"]
        types = [router["types"][s].rsplit(".", 1)[-1] for s in steps]
        if types != ["Transformer", "Pooling", "Dense", "Normalize"]:
            return None
        dense_cfg = json.loads((folder / steps[2] / "config.json").read_text())
        pooling = json.loads((folder / steps[1] / "config.json").read_text())
        if dense_cfg.get("bias") or "Identity" not in dense_cfg.get("activation_function", "") or \
                pooling.get("pooling_mode", "mean") != "mean":
            return None
        from safetensors.numpy import load_file

        weights = load_file(str(folder / steps[2] / "model.safetensors"))
        return folder / steps[0], next(iter(weights.values())).astype(np.float32)
    except (OSError, KeyError, ValueError, StopIteration) as exc:
        log.info("no ONNX route for %s: %s", folder, exc)
        return None


def route_for(folder: Path, base: Path, base_fingerprint: str, query_map: bool) -> OnnxQueryRoute | None:
    """The ONNX query route of an embedder folder, or None (no export yet, or a shape it cannot run).

    ``base`` is a folder of the exported model (its files have ``base_fingerprint``); a query map's
    transformer is checked against it tensor by tensor.
    """
    exported = export_dir(base_fingerprint)
    if not (exported / MODEL_FILE).is_file():
        return None
    try:
        meta = json.loads((exported / "export.json").read_text())
        dense, tokenizer_dir = None, folder
        if query_map:
            found = _query_map(folder)
            # the map must sit on the very transformer that was exported (a fine-tuned one has its own weights)
            if found is None or not _same_weights(found[0], base):
                return None
            tokenizer_dir, dense = found
        return OnnxQueryRoute(exported / MODEL_FILE, tokenizer_dir / "tokenizer.json", int(meta["max_length"]), dense)
    except Exception as exc:  # a damaged export: sentence-transformers encodes instead
        log.warning("ONNX query route unusable (%s); encoding with sentence-transformers", exc)
        return None
