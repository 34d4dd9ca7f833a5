"""A Qwen GGUF behind llama-cpp-python, for yes/no judgements read off the logits.

Prompts are token lists that start with a shared prefix (system text, then
SOURCE_CODE); each call keeps the longest common prefix of the previous call's
KV cache, so only the record-specific tail is evaluated. One lock serialises
access: a llama context is not safe to use from two sessions at once.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pipeline.models.base import Cancelled, Timeout, YesNo
from pipeline.models.provision import ModelError

__all__ = ["EVAL_SLICE", "Cancelled", "QwenGGUF", "Timeout", "YesNo"]

EVAL_SLICE = 64  # tokens per decode call: the granularity of timeouts and cancellation
# Sequences one context holds: the shared prompt prefix (sequence 0) and up to 7 continuations decoded side by
# side (``complete_many``). One cache buffer serves them all, so the prefix is shared, not copied.
SEQUENCES = 8
_PATCHING = threading.Lock()
KEPT_STATES = 3  # per model: the prompt starts in use (one today) and a little room for another version
# A saved prefix state: magic, token count, tokens (int32), sha256 of the state, llama's sequence state
_KV_MAGIC = b"GDPOCKV1"


class QwenGGUF:
    def __init__(self, path: Path | str, n_ctx: int = 4096, n_threads: int | None = None,
                 logits_all: bool = False) -> None:
        self.path = Path(path)
        self.logits_all = logits_all  # keep every position's logits (for ``loglik``): n_ctx × vocab floats
        if not self.path.is_file():
            raise ModelError(f"GGUF not found: {self.path}; run `python -m pipeline models prepare`")
        self.n_ctx, self.n_threads = n_ctx, n_threads
        self.name = self.path.stem
        self.lock = threading.RLock()
        self._llm = None
        self._ready = False  # loaded in full: a caller need not wait for the lock another call holds
        self._yes: list[int] = []
        self._no: list[int] = []
        self.sequences = 1  # what the loaded context holds (``SEQUENCES`` unless llama.cpp refused it)
        self._batch = None  # complete_many's own llama_batch, allocated on first use

    @property
    def llm(self):
        if self._llm is None:
            self.load()
        return self._llm

    def load(self) -> None:
        if self._ready:  # no lock: a prefix being read in the background must not hold up a stage that
            return       # only needs the model to exist (the accept model decides without it)
        with self.lock:
            if self._llm is not None:
                return
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ModelError("llama-cpp-python is not installed; fix: `make install`") from exc
            try:
                with _sequences(SEQUENCES):
                    self._llm = Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_batch=512,
                                      n_threads=self.n_threads or os.cpu_count() or 2, logits_all=self.logits_all,
                                      verbose=False)
            except Exception as exc:
                raise ModelError(f"cannot load {self.path.name}: {exc}; rebuild it with "
                                 "`python -m pipeline models prepare`") from exc
            # Free the model before interpreter teardown: llama-cpp-python's own finaliser then
            # runs after its C bindings are gone and prints a TypeError at exit.
            atexit.register(self.close)
            import llama_cpp

            self.sequences = int(llama_cpp.llama_n_seq_max(self._llm.ctx))
            tok = self._llm.tokenize
            self._yes = sorted({tok(w.encode(), add_bos=False)[0] for w in ("yes", "Yes", " yes", " Yes")})
            self._no = sorted({tok(w.encode(), add_bos=False)[0] for w in ("no", "No", " no", " No")})
            self._ready = True

    def close(self) -> None:
        with self.lock:
            self._ready = False
            if self._llm is not None:
                self._llm.close()
                self._llm = None

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.llm.detokenize(list(tokens)).decode("utf-8", errors="replace")

    def _eval_with_reuse(self, tokens: list[int], deadline: float | None,
                         cancelled: Callable[[], bool] | None) -> int:
        llm = self.llm
        if len(tokens) >= self.n_ctx:
            raise ModelError(f"prompt of {len(tokens)} tokens exceeds the context of {self.n_ctx}")
        common = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens].tolist(), tokens, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # re-evaluate at least one token to refresh logits
        llm.n_tokens = common
        for i in range(common, len(tokens), EVAL_SLICE):
            if cancelled and cancelled():
                raise Cancelled
            if deadline is not None and time.monotonic() > deadline:
                raise Timeout
            llm.eval(tokens[i : i + EVAL_SLICE])
        return common

    def warm(self, tokens: list[int], folder: Path, cancelled: Callable[[], bool] | None = None) -> str:
        """Make ``tokens``, a prompt prefix that never changes, the start of the KV cache.

        In memory already, read back from ``folder`` (a fresh process skips evaluating it), or evaluated
        and saved there. A missing, stale or corrupt file is evaluated again; it never fails a call.
        """
        with self.lock:
            llm, n = self.llm, len(tokens)
            if llm.n_tokens >= n and llm.input_ids[:n].tolist() == tokens:
                return "in memory"
            path = folder / f"{self._state_key(tokens)}.kv"
            if self._load_state(path, tokens):
                with contextlib.suppress(OSError):
                    os.utime(path)  # recently used: kept by the pruning below
                return "from disk"
            self._eval_with_reuse(tokens, None, cancelled)
            with contextlib.suppress(OSError):  # a read-only cache only costs the next process this prefix
                self._save_state(path, tokens)
                self._prune_states(folder, keep=path)
            return "evaluated"

    def _prune_states(self, folder: Path, keep: Path) -> None:
        """Drop this model's least recently used states past KEPT_STATES: an old prompt's start is never read."""
        older = sorted((p for p in folder.glob(f"{self.name}-*.kv") if p != keep),
                       key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for p in older[KEPT_STATES - 1 :]:
            p.unlink(missing_ok=True)

    def _state_key(self, tokens: list[int]) -> str:
        import llama_cpp

        st = self.path.stat()  # the name carries the pinned sha; size and mtime catch a file rebuilt in place
        h = hashlib.sha256(f"{self.path.name}|{st.st_size}|{st.st_mtime_ns}|{llama_cpp.__version__}|"
                           f"{self.n_ctx}|{self.sequences}|".encode())
        h.update(np.asarray(tokens, dtype=np.int32).tobytes())
        return f"{self.name}-{h.hexdigest()[:20]}"

    def _save_state(self, path: Path, tokens: list[int]) -> None:
        import llama_cpp

        from pipeline import atomic

        ctx = self.llm.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        used = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        state = bytes(buf)[:used]
        head = _KV_MAGIC + np.uint32(len(tokens)).tobytes() + np.asarray(tokens, dtype=np.int32).tobytes()
        atomic.write_bytes(path, head + hashlib.sha256(state).digest() + state)

    def _load_state(self, path: Path, tokens: list[int]) -> bool:
        import llama_cpp

        try:
            data = path.read_bytes()
        except OSError:
            return False
        n, start = len(tokens), len(_KV_MAGIC) + 4
        body = start + 4 * n + 32
        if (len(data) <= body or not data.startswith(_KV_MAGIC)
                or int(np.frombuffer(data, np.uint32, 1, len(_KV_MAGIC))[0]) != n
                or np.frombuffer(data, np.int32, n, start).tolist() != tokens
                or hashlib.sha256(data[body:]).digest() != data[body - 32 : body]):
            return False
        llm = self.llm
        mem = llama_cpp.llama_get_memory(llm.ctx)
        llama_cpp.llama_memory_seq_rm(mem, 0, -1, -1)
        state = data[body:]
        ok = llama_cpp.llama_state_seq_set_data(llm.ctx, (ctypes.c_uint8 * len(state)).from_buffer_copy(state),
                                                len(state), 0)
        if not ok:
            llama_cpp.llama_memory_seq_rm(mem, 0, -1, -1)
            llm.n_tokens = 0
            return False
        llm.input_ids[:n] = tokens
        llm.n_tokens = n
        llm._requires_eval = True  # as Llama.load_state: no logits are restored, so never sample before an eval
        return True

    def _logits(self) -> np.ndarray:
        import llama_cpp

        return np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.llm.ctx), shape=(self.llm.n_vocab(),))

    def yes_no(self, tokens: list[int], *, deadline: float | None = None,
               cancelled: Callable[[], bool] | None = None) -> YesNo:
        with self.lock:
            t0 = time.perf_counter()
            reused = self._eval_with_reuse(tokens, deadline, cancelled)
            logits = self._logits()
            margin = float(max(logits[i] for i in self._yes) - max(logits[i] for i in self._no))
            top = self.detokenize([int(np.argmax(logits))])
            return YesNo(margin, top, len(tokens), reused, (time.perf_counter() - t0) * 1000)

    def loglik(self, prefix: list[int], cont: list[int]) -> float:
        """log P(cont | prefix), read off one forward pass (prefix reused; needs ``logits_all``)."""
        with self.lock:
            self._eval_with_reuse(prefix + cont, None, None)
            rows = np.asarray(self.llm.scores[len(prefix) - 1 : len(prefix) - 1 + len(cont)], dtype=np.float64)
        top = rows.max(axis=1, keepdims=True)
        logz = top[:, 0] + np.log(np.exp(rows - top).sum(axis=1))
        return float((rows[np.arange(len(cont)), cont] - logz).sum())

    def complete(self, tokens: list[int], grammar: str, max_tokens: int = 24, *,
                 deadline: float | None = None, cancelled: Callable[[], bool] | None = None) -> str:
        """Greedy, grammar-constrained continuation of ``tokens`` (prefix reused), up to the list's "]}"."""
        from llama_cpp import LlamaGrammar

        if len(tokens) + max_tokens > self.n_ctx:  # llama.cpp would fill the cache and fail slot after slot
            raise ModelError(f"prompt of {len(tokens)} tokens and {max_tokens} to write exceed the context of "
                             f"{self.n_ctx}")
        with self.lock:
            if cancelled is not None and len(tokens) > 1:  # read the prompt in slices that can stop; generate
                self._eval_with_reuse(tokens[:-1], None, cancelled)  # then reuses it
            g = LlamaGrammar.from_string(grammar, verbose=False)
            out: list[int] = []
            for tok in self.llm.generate(tokens, temp=0.0, top_k=1, grammar=g, reset=True):
                if tok == self.llm.token_eos() or len(out) >= max_tokens:
                    break
                if cancelled is not None and cancelled():
                    raise Cancelled
                out.append(tok)
                if _ended(self.detokenize(out)) or (deadline is not None and time.monotonic() > deadline):
                    break
            return self.detokenize(out)

    def complete_many(self, prefix: list[int], tails: list[list[int]], grammar: str | Sequence[str],
                      max_tokens: int = 24, *, deadline: float | None = None,
                      forced: Callable[[str], str] | None = None,
                      cancelled: Callable[[], bool] | None = None) -> list[str]:
        """``complete(prefix + tail, grammar)`` for every tail (``grammar``: one, or one per tail), side by side.

        The prefix is evaluated once (sequence 0, reused as usual); each tail continues it in a sequence of
        its own, all tails in one batch, and each generation step decodes one token of every unfinished
        list at once. Generating is bound by reading the weights, so a step for 5 lists costs about twice a
        step for one (1.5B, 2 cores). Greedy under the grammar, with llama-cpp-python's own sampler chain
        and ``complete``'s stopping rules: each list is the one ``complete`` writes, except where two tokens
        tie within rounding, which either path may break either way (tests/test_qwen_batch.py).
        ``forced(text)``: what the grammar leaves as the only way on after ``text`` ("" when it leaves a
        choice); that rest is appended without decoding it. ``cancelled()`` is asked while the prefix is read
        and at every step (raises Cancelled).
        """
        if not tails:
            return []
        if len(prefix) + max_tokens >= self.n_ctx:
            raise ModelError(f"prompt of {len(prefix)} tokens exceeds the context of {self.n_ctx}")
        grammars = [grammar] * len(tails) if isinstance(grammar, str) else list(grammar)
        with self.lock:
            self.load()
            room = self.n_ctx - len(prefix) - 1
            groups: list[list[int]] = []  # indices of tails decoded together: within the sequences and the cache
            for i, t in enumerate(tails):
                need = len(t) + max_tokens
                last = groups[-1] if groups else None
                used = sum(len(tails[j]) + max_tokens for j in last) if last else 0
                if last is not None and len(last) < self.sequences - 1 and used + need <= room:
                    last.append(i)
                else:
                    groups.append([i])
            out: list[str] = [""] * len(tails)
            for g in groups:
                if len(g) == 1:  # alone (or too long to share the cache): as before
                    out[g[0]] = self.complete(prefix + tails[g[0]], grammars[g[0]], max_tokens, deadline=deadline,
                                              cancelled=cancelled)
                    continue
                texts = self._side_by_side(prefix, [tails[i] for i in g], [grammars[i] for i in g], max_tokens,
                                           deadline, forced, cancelled)
                for i, text in zip(g, texts, strict=True):
                    out[i] = text
            return out

    def _side_by_side(self, prefix: list[int], tails: list[list[int]], grammars: list[str], max_tokens: int,
                      deadline: float | None, forced: Callable[[str], str] | None = None,
                      cancelled: Callable[[], bool] | None = None) -> list[str]:
        import llama_cpp
        from llama_cpp._internals import LlamaBatch

        llm = self.llm
        if self._batch is None:
            self._batch = LlamaBatch(n_tokens=llm.n_batch, embd=0, n_seq_max=1, verbose=False)
        self._eval_with_reuse(prefix, deadline, cancelled)  # sequence 0: the prefix, as ``complete`` leaves it
        mem = llama_cpp.llama_get_memory(llm.ctx)
        lists = _Lists(self, grammars, max_tokens, deadline, forced)
        try:
            for k in range(len(tails)):
                llama_cpp.llama_memory_seq_cp(mem, 0, k + 1, -1, -1)
            rows = [(tok, len(prefix) + j, k, j == len(t) - 1) for k, t in enumerate(tails) for j, tok in enumerate(t)]
            for start in range(0, len(rows), llm.n_batch):  # every tail, n_batch tokens per decode
                part = rows[start : start + llm.n_batch]
                self._decode(part)
                for j, (_, _, k, last) in enumerate(part):
                    if last:
                        lists.take(k, j)
            pos = [len(prefix) + len(t) for t in tails]
            while live := lists.live():  # one token of every unfinished list per step
                if cancelled is not None and cancelled():
                    raise Cancelled
                self._decode([(lists.out[k][-1], pos[k], k, True) for k in live])
                for j, k in enumerate(live):
                    pos[k] += 1
                    lists.take(k, j)
        finally:
            for k in range(len(tails)):
                llama_cpp.llama_memory_seq_rm(mem, k + 1, -1, -1)
            llm._requires_eval = True  # the logits are the last batch's, not the prefix's
            lists.close()
        return [self.detokenize(o) + rest for o, rest in zip(lists.out, lists.rest, strict=True)]

    def _decode(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, list k, wants logits) rows; list k is sequence k + 1."""
        assert self._batch is not None
        batch = self._batch.batch
        for j, (tok, pos, k, want) in enumerate(rows):
            batch.token[j], batch.pos[j], batch.n_seq_id[j] = tok, pos, 1
            batch.seq_id[j][0], batch.logits[j] = k + 1, want
        batch.n_tokens = len(rows)
        self.llm._ctx.decode(self._batch)


class _Lists:
    """The lists ``complete_many`` writes: a sampler chain each (as ``Llama.generate`` builds it), and
    ``complete``'s stopping rules."""

    def __init__(self, lm: QwenGGUF, grammars: list[str], max_tokens: int, deadline: float | None,
                 forced: Callable[[str], str] | None = None) -> None:
        from llama_cpp import LlamaGrammar

        n = len(grammars)
        self.lm, self.max_tokens, self.deadline = lm, max_tokens, deadline
        self.samplers = [lm.llm._init_sampler(temp=0.0, top_k=1, grammar=LlamaGrammar.from_string(g, verbose=False))
                         for g in grammars]
        self.out: list[list[int]] = [[] for _ in range(n)]
        self.done = [False] * n
        self.rest = [""] * n  # what ``forced`` said the grammar leaves: appended, not decoded
        self.forced = forced
        self.eos = lm.llm.token_eos()

    def live(self) -> list[int]:
        return [k for k, d in enumerate(self.done) if not d]

    def take(self, k: int, idx: int) -> None:
        """Sample list k's next token from the logits at batch row ``idx``."""
        tok = self.samplers[k].sample(self.lm.llm._ctx, idx)
        if tok == self.eos or len(self.out[k]) >= self.max_tokens:
            self.done[k] = True
            return
        self.out[k].append(tok)
        text = self.lm.detokenize(self.out[k])
        ended = _ended(text)
        if not ended and self.forced is not None:
            self.rest[k] = self.forced(text)
            ended = bool(self.rest[k])
        self.done[k] = ended or (self.deadline is not None and time.monotonic() > self.deadline)

    def close(self) -> None:
        for smp in self.samplers:
            smp.close()


def _ended(text: str) -> bool:
    """A list's end: its "]}", not one inside a quoted string (``complete``'s and ``complete_many``'s stop)."""
    return text.endswith("]}") and text.count('"') % 2 == 0


@contextlib.contextmanager
def _sequences(n: int):
    """``Llama(...)`` takes no sequence count: its context starts from llama_context_default_params."""
    import llama_cpp.llama_cpp as lib

    with _PATCHING:  # two models loading at once: the patch is never patched again, nor restored too early
        base = lib.llama_context_default_params

        def params():
            p = base()
            p.n_seq_max, p.kv_unified = n, True  # one buffer: the sequences share the prefix's cells
            return p

        lib.llama_context_default_params = params
        try:
            yield
        finally:
            lib.llama_context_default_params = base
