"""Vectorised BM25 that reproduces ``rank_bm25.BM25Okapi`` scores.

rank-bm25 is the reference (its quirks included), but it scores a query with
one Python-level pass over every document per query term, which is far too
slow for a ~30k-record KB. Here the per-(doc, term) BM25 weight is computed
once at build time and stored in a CSC matrix (docs x terms); a query is then
a handful of column slices added into a dense score vector.

Reference formulas (rank_bm25 0.2.2, ``BM25Okapi``):

* ``idf(t) = log(N - n_t + 0.5) - log(n_t + 0.5)``; every negative idf is
  replaced by ``epsilon * average_idf`` (average over the whole vocabulary,
  taken *before* the replacement); an idf of exactly 0 stays 0.
* ``w(t, d) = idf(t) * tf*(k1+1) / (tf + k1*(1 - b + b*dl/avgdl))``.
* ``score(q, d) = sum over query tokens (repeats included) of w(t, d)``;
  a term outside the vocabulary adds 0.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import sys
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp

from pipeline import atomic

FORMAT_VERSION = 1
ARRAYS_FILE = "bm25_arrays.npz"  # CSC arrays, idf, doc lengths
META_FILE = "params.json"  # vocab, params, versions, checksum of the npz


@dataclass(frozen=True)
class Hit:
    doc: int  # row index into the corpus the index was built from
    score: float
    # unique matched query term -> what it added to ``score`` (query repeats included)
    contributions: dict[str, float]


class BM25Index:
    """Immutable BM25Okapi index; build with :meth:`build` or :meth:`load`."""

    def __init__(
        self,
        vocab: list[str],
        matrix: sp.csc_matrix,
        idf: np.ndarray,
        doc_len: np.ndarray,
        k1: float,
        b: float,
        epsilon: float,
    ) -> None:
        self.vocab = vocab
        self.term_ids: dict[str, int] = {t: i for i, t in enumerate(vocab)}
        self.matrix = matrix  # docs x terms, float64 BM25 weights
        self.idf = idf
        self.doc_len = doc_len
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon
        # Raw CSC arrays, so a query slices columns without scipy overhead.
        self._indptr: np.ndarray = matrix.indptr
        self._indices: np.ndarray = matrix.indices
        self._data: np.ndarray = matrix.data

    @property
    def n_docs(self) -> int:
        return int(self.matrix.shape[0])

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        corpus_tokens: Sequence[Sequence[str]],
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> BM25Index:
        n_docs = len(corpus_tokens)
        # Vocabulary in first-seen order: rank-bm25 sums idfs in this (dict
        # insertion) order, so average_idf comes out bit-identical.
        term_ids: dict[str, int] = {}
        doc_len = np.zeros(n_docs, dtype=np.int64)
        flat_ids: list[int] = []
        setdefault = term_ids.setdefault
        for d, doc in enumerate(corpus_tokens):
            doc_len[d] = len(doc)
            flat_ids.extend([setdefault(t, len(term_ids)) for t in doc])
        return cls.from_ids(np.asarray(flat_ids, dtype=np.int32), doc_len, list(term_ids), k1, b, epsilon)

    @classmethod
    def from_ids(
        cls,
        flat_ids: np.ndarray,
        doc_len: np.ndarray,
        vocab: list[str],
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> BM25Index:
        """Build from token ids laid end to end (``doc_len`` per doc): the path for very large corpora."""
        n_docs = len(doc_len)
        n_terms = len(vocab)
        rows = np.repeat(np.arange(n_docs, dtype=np.int32), doc_len)
        cols = flat_ids
        ones = np.ones(len(cols), dtype=np.float64)
        # COO -> CSC sums duplicates: the values become term frequencies.
        tf = sp.coo_matrix((ones, (rows, cols)), shape=(n_docs, n_terms)).tocsc()
        tf.sum_duplicates()
        tf.sort_indices()

        # Document frequency = non-zeros per column.
        df = np.diff(tf.indptr)
        idf = _okapi_idf(df, n_docs, epsilon)

        total_len = int(doc_len.sum())
        # rank-bm25 divides by zero on an empty corpus; an empty index is more useful.
        avgdl = total_len / n_docs if n_docs else 0.0
        data = tf.data
        if n_terms:
            col_of_nz = np.repeat(np.arange(n_terms), df)
            dl = doc_len[tf.indices]
            # Same operation order as rank-bm25's get_scores, so weights match to the ulp.
            norm = tf.data + k1 * (1 - b + b * dl / avgdl)
            data = idf[col_of_nz] * (tf.data * (k1 + 1) / norm)
        matrix = sp.csc_matrix((data, tf.indices, tf.indptr), shape=(n_docs, n_terms))
        return cls(vocab, matrix, idf, doc_len, k1, b, epsilon)

    # ----------------------------------------------------------------- search
    def _query_weights(self, query_tokens: Sequence[str]) -> list[tuple[str, int, int]]:
        """(term, term id, query count) for the known terms, in first-seen order."""
        counts = Counter(query_tokens)
        return [(t, self.term_ids[t], c) for t, c in counts.items() if t in self.term_ids]

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """Score of every document, as ``BM25Okapi.get_scores`` would return it."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        indptr, indices, data = self._indptr, self._indices, self._data
        for _, j, count in self._query_weights(query_tokens):
            lo, hi = indptr[j], indptr[j + 1]
            # Row indices within one column are unique, so fancy += is safe.
            if count == 1:
                out[indices[lo:hi]] += data[lo:hi]
            else:
                out[indices[lo:hi]] += count * data[lo:hi]
        return out

    def search(self, query_tokens: Sequence[str], k: int) -> list[Hit]:
        """Top-k docs with score > 0, by score desc then doc index asc."""
        if k <= 0 or self.n_docs == 0:
            return []
        weights = self._query_weights(query_tokens)
        if not weights:
            return []
        score = self.scores(query_tokens)
        cand = np.flatnonzero(score > 0)
        if len(cand) > k:
            cand_scores = score[cand]
            # k-th largest score; keep every doc tied with it so the index
            # tie-break below is not at argpartition's mercy.
            kth = np.partition(cand_scores, len(cand) - k)[len(cand) - k]
            cand = cand[cand_scores >= kth]
        order = np.lexsort((cand, -score[cand]))[:k]
        top = cand[order]

        indptr, indices, data = self._indptr, self._indices, self._data
        contrib: list[dict[str, float]] = [{} for _ in range(len(top))]
        for term, j, count in weights:
            lo, hi = indptr[j], indptr[j + 1]
            if hi == lo:
                continue
            col = indices[lo:hi]  # sorted (sort_indices at build / checked at load)
            pos = np.minimum(np.searchsorted(col, top), hi - lo - 1)
            for i in np.flatnonzero(col[pos] == top):
                contrib[i][term] = float(count * data[lo + pos[i]])
        return [Hit(doc=int(d), score=float(score[d]), contributions=contrib[i]) for i, d in enumerate(top)]

    def has_term(self, doc: int, term_id: int) -> bool:
        """Whether document ``doc`` contains the term (a binary search in the term's column)."""
        lo, hi = self._indptr[term_id], self._indptr[term_id + 1]
        col = self._indices[lo:hi]
        at = int(np.searchsorted(col, doc))
        return at < len(col) and int(col[at]) == doc

    # ------------------------------------------------------------- save/load
    def save(self, folder: Path) -> None:
        """Write ``bm25_arrays.npz`` + ``params.json`` into ``folder``.

        Each file is written under a temporary name and moved into place with
        os.replace. The JSON (written last) records the SHA-256 of the npz, so
        a reader never silently mixes an old JSON with a new npz (or reads a
        truncated one).
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.savez(
            buf,
            indptr=self._indptr,
            indices=self._indices,
            data=self._data,
            idf=self.idf,
            doc_len=self.doc_len,
        )
        payload = buf.getvalue()
        meta = {
            "format_version": FORMAT_VERSION,
            "kind": "BM25Okapi",
            "params": {"k1": self.k1, "b": self.b, "epsilon": self.epsilon},
            "n_docs": self.n_docs,
            "n_terms": len(self.vocab),
            "arrays_file": ARRAYS_FILE,
            "arrays_sha256": hashlib.sha256(payload).hexdigest(),
            "versions": {
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "scipy": scipy.__version__,
            },
            "vocab": self.vocab,
        }
        atomic.write_bytes(folder / ARRAYS_FILE, payload)
        atomic.write_bytes(folder / META_FILE, json.dumps(meta, ensure_ascii=False).encode("utf-8"))

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        folder = Path(folder)
        meta_path, arrays_path = folder / META_FILE, folder / ARRAYS_FILE
        try:
            meta = json.loads(meta_path.read_bytes().decode("utf-8"))
        except FileNotFoundError as e:
            raise ValueError(f"BM25 index file missing: {meta_path}") from e
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"BM25 index file is corrupt or truncated: {meta_path}: {e}") from e
        if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"BM25 index file has an unknown format: {meta_path}")
        try:
            payload = arrays_path.read_bytes()
        except FileNotFoundError as e:
            raise ValueError(f"BM25 index file missing: {arrays_path}") from e
        if hashlib.sha256(payload).hexdigest() != meta.get("arrays_sha256"):
            raise ValueError(f"BM25 index file is corrupt, truncated or from another build: {arrays_path}")
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("indptr", "indices", "data", "idf", "doc_len")}
            vocab = meta["vocab"]
            params = meta["params"]
            n_docs, n_terms = int(meta["n_docs"]), int(meta["n_terms"])
        except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as e:
            raise ValueError(f"BM25 index file is corrupt: {arrays_path}: {e}") from e
        ok = (
            isinstance(vocab, list)
            and len(vocab) == n_terms
            and arrays["indptr"].shape == (n_terms + 1,)
            and arrays["idf"].shape == (n_terms,)
            and arrays["doc_len"].shape == (n_docs,)
            and arrays["indices"].shape == arrays["data"].shape
            and int(arrays["indptr"][-1]) == len(arrays["data"])
        )
        if not ok:
            raise ValueError(f"BM25 index files disagree on their shapes: {arrays_path}")
        matrix = sp.csc_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=(n_docs, n_terms))
        if not matrix.has_sorted_indices:  # search() relies on sorted columns
            raise ValueError(f"BM25 index file has unsorted columns: {arrays_path}")
        return cls(
            vocab,
            matrix,
            arrays["idf"],
            arrays["doc_len"],
            float(params["k1"]),
            float(params["b"]),
            float(params["epsilon"]),
        )


def _okapi_idf(df: np.ndarray, n_docs: int, epsilon: float) -> np.ndarray:
    """rank-bm25's BM25Okapi._calc_idf, term by term in vocabulary order.

    Plain Python floats and math.log, summed in the same order, so the result
    (average_idf especially) is bit-identical to the reference. The vocabulary
    is at most a few 100k terms, so this loop costs well under a second.
    """
    idf = [math.log(n_docs - n + 0.5) - math.log(n + 0.5) for n in df.tolist()]
    if not idf:
        return np.zeros(0, dtype=np.float64)
    idf_sum = 0.0
    for v in idf:
        idf_sum += v
    eps = epsilon * (idf_sum / len(idf))
    arr = np.asarray(idf, dtype=np.float64)
    arr[arr < 0] = eps
    return arr
