"""MiniLM's query route on ONNX Runtime: the same vectors as sentence-transformers, without importing torch.

`make test` runs `models prepare` (which exports the route) and `models train` (the query map) first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.engine import Engine
from pipeline.evaluate import load_set
from pipeline.models import onnx_route
from pipeline.models.embedder import SentenceTransformerEmbedder
from pipeline.settings import TRAINED, Settings
from pipeline.stages.dense import QUERY_CHARS

REPO = Path(__file__).resolve().parents[1]
CODES = [c.code[:QUERY_CHARS] for c in load_set()]


def _torch_route(emb: SentenceTransformerEmbedder, texts: list[str]) -> np.ndarray:
    return emb._encode(texts, None, query=True)


@pytest.mark.parametrize("setting", [None, TRAINED], ids=["MiniLM", "MiniLM + query map (D and F)"])
def test_the_onnx_route_gives_sentence_transformers_vectors_and_rankings(engine: Engine, setting) -> None:
    path, notice = engine.resolve_embedder(setting)
    assert not notice, notice
    emb, vectors = engine.dense(path)
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.query_route() is not None, "export missing"
    fast, slow = emb.encode_query(CODES), _torch_route(emb, CODES)
    assert emb.runtime == "onnxruntime"
    assert float(np.abs(fast - slow).max()) < 1e-4
    for a, b in zip(fast, slow, strict=True):  # the leg's top 50 is the same list
        assert [i for i, _ in vectors.search(a, 50)] == [i for i, _ in vectors.search(b, 50)]


def test_a_fresh_process_encodes_a_query_without_importing_torch() -> None:
    code = ("import sys; from pipeline.models.embedder import SentenceTransformerEmbedder as E; e = E(); "
            "v = e.encode_query(['func _ready():\\n\\tpass']); print(v.shape, 'torch' in sys.modules, e.runtime)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
                              **{k: v for k, v in os.environ.items() if k.startswith("GDPOC_")}})
    assert out.stdout.split() == ["(1,", "384)", "False", "onnxruntime"], out.stderr[-2000:]


def test_a_damaged_or_missing_export_falls_back_to_sentence_transformers(tmp_path: Path, monkeypatch) -> None:
    emb = SentenceTransformerEmbedder()
    good = onnx_route.export_dir(emb.fingerprint)
    monkeypatch.setenv("GDPOC_CACHE", str(tmp_path))
    assert SentenceTransformerEmbedder().query_route() is None  # nothing exported in this cache
    broken = onnx_route.export_dir(emb.fingerprint)
    shutil.copytree(good, broken)
    (broken / onnx_route.MODEL_FILE).write_bytes((broken / onnx_route.MODEL_FILE).read_bytes()[:4096])
    fallback = SentenceTransformerEmbedder()
    assert fallback.query_route() is None and fallback.runtime == "sentence-transformers"
    v = fallback.encode_query(["func _ready():\n\tpass"])  # still encodes, through torch
    assert v.shape == (1, 384) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert json.loads((broken / "export.json").read_text())["max_abs_diff"] < onnx_route.TOLERANCE


def test_kb_documents_encode_on_the_export_in_input_order(engine: Engine) -> None:
    """Documents take the export too (sorted by length inside), and each row is its own text's vector."""
    emb, vectors = engine.dense(None)
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.document_route() is not None, "export missing"
    from pipeline.kb.views import embed_text

    picks = list(range(0, len(engine.store.records), len(engine.store.records) // 70))[:70]
    texts = [embed_text(engine.store.records[i]) for i in picks]
    assert len({len(t) for t in texts}) > 20  # lengths vary, so the sort really reorders
    fast = emb.encode(texts)
    assert float(np.abs(fast - vectors.matrix[picks]).max()) < 1e-4
    assert float(np.abs(fast - emb._encode(texts, None, query=False)).max()) < 1e-4


# D on the query map (the default, the same route as F's) and D on MiniLM (another route on the same transformer)
@pytest.mark.parametrize("d_embedder", [TRAINED, None], ids=["D on the query map", "D on MiniLM"])
def test_d_and_f_encode_a_long_chunks_functions_once_and_say_how_far_they_are(engine: Engine, monkeypatch,
                                                                             d_embedder) -> None:
    # A 2,450-line file took 11-24 s behind a spinner: D's MiniLM and F's query map each ran the transformer
    # on every function, though they share it.
    tag = os.urandom(4).hex()  # texts no earlier test encoded, so the shared cache starts empty for them
    text = "".join(f"func f{n}_{tag}():\n\tvar hp_{n} = {n}\n\tprint(hp_{n})\n\tposition.x += {n}\n\n"
                   for n in range(30))
    encoded: list[str] = []
    for setting in (None, TRAINED):
        emb, _ = engine.dense(engine.resolve_embedder(setting)[0])
        route = emb.query_route()
        assert route is not None, "export missing"
        run = route._run
        monkeypatch.setattr(route, "_run", lambda texts, run=run: encoded.extend(texts) or run(texts))
    events = []
    prepared = engine.prepare(text, Settings(run_validator=False, reranker="none", embedder=d_embedder),
                              events.append)
    pieces = [p.text[:QUERY_CHARS] for p, _ in prepared.pieces or []]
    assert len(pieces) == 30 and sorted(encoded) == sorted(pieces)  # once each, for both alternatives
    for alt in ("D", "F"):  # and both legs found something (a failing leg is caught and reported, not raised)
        leg = prepared.trace.alternatives[alt].embedding
        assert leg.status == "ok" and not leg.message and len(leg.rows) == leg.k, (alt, leg.message)
    for alt in ("D", "F"):
        done = [e.done for e in events if e.stage == "functions" and e.alternative == alt]
        assert done == list(range(31)) and all(e.total == 30 for e in events if e.stage == "functions")


def test_what_was_asked_before_does_not_change_a_vector(engine: Engine) -> None:
    # Training encodes its queries in batches of 64; a cache that leaked into batches moved the learned
    # ranker's features in their last bits, and the retrained ranker's blind MRR by 0.06.
    tag = os.urandom(4).hex()
    texts = [f"{code}\n# {tag}" for code in CODES[:20]]
    for setting in (None, TRAINED):
        emb, _ = engine.dense(engine.resolve_embedder(setting)[0])
        route = emb.query_route()
        assert route is not None, "export missing"
        batch_cold = route.encode(texts)
        singles_cold = np.vstack([route.encode([t]) for t in texts])  # fills the cache (the other leg's, too)
        assert np.array_equal(route.encode(texts), batch_cold)  # bit for bit
        assert np.array_equal(np.vstack([route.encode([t]) for t in texts]), singles_cold)
        assert float(np.abs(batch_cold - singles_cold).max()) < 1e-5  # padding moves only the last bits
