"""The sidebar: which KB to search, and the run settings as widgets.

Bounds and defaults come from ``Settings.model_fields``, so a widget can never
offer a value the settings refuse; the labels are the only thing said here.
"""

from __future__ import annotations

from typing import Any

import annotated_types
import streamlit as st
from pydantic import ValidationError

from pipeline.errors import describe
from pipeline.models import provision
from pipeline.settings import POLICIES, SECONDS_PER_JUDGEMENT, SECONDS_PER_RERANK_DOC, TRAINED, Settings
from pipeline.ui.engines import BUILTIN, SS_KB_CHOICE, UPLOADED, UserKB, load_user_kb, user_kb

LONG_LABELS = {"per_function": "search each function, merge the hits", "whole": "search as one query"}
FUSION_LABELS = {"rrf": "RRF (reciprocal rank fusion)", "minmax": "min-max + α", "zscore": "z-score + α"}
# Short enough for the sidebar's select boxes (a longer one is cut after ~28 characters); the help says more
RERANKER_LABELS = {"learned": "learned (LightGBM)", "bge": "cross-encoder", "qwen": "Qwen 0.5B yes/no (slow)",
                   "qwen-pmi": "Qwen 0.5B PMI (slow)", "none": "none (union order)"}
RERANKER_HELP = ("**learned**: LightGBM lambdarank over the trace's features, trained from the docs (milliseconds). "
                 "**cross-encoder**: the one trained here, or a bge-reranker folder, via FlagEmbedding. "
                 f"**Qwen 0.5B**: yes/no logits or query likelihood (PMI), ~{SECONDS_PER_RERANK_DOC['qwen']:g} s per "
                 "candidate. **none**: F keeps the union order.")
VALIDATOR_LABELS = {"qwen-1.5b": "Qwen2.5-Coder 1.5B", "qwen-0.5b": "Qwen2.5-Coder 0.5B (faster)"}
VALIDATOR_HELP = (f"Verdicts cost ~{SECONDS_PER_JUDGEMENT['qwen-1.5b']:g} s (1.5B) or "
                  f"~{SECONDS_PER_JUDGEMENT['qwen-0.5b']:g} s (0.5B) per candidate under the Qwen-yes policies; the "
                  "calibrated policy asks Qwen only for the accepted records' evidence lists.")
KEEP: dict[str, Any] = {"persist_state": "session"}  # widget values survive page switches


def bounds(name: str) -> tuple[Any, Any]:
    """The (ge, le) bounds of a Settings field."""
    meta = Settings.model_fields[name].metadata
    lo = next((m.ge for m in meta if isinstance(m, annotated_types.Ge)), None)
    hi = next((m.le for m in meta if isinstance(m, annotated_types.Le)), None)
    return lo, hi


def number(label: str, name: str, *, where: Any = None, default: Any = None, **kw: Any) -> Any:
    """A number input for the Settings field ``name``: its bounds, its default, key ``s_<name>``."""
    lo, hi = bounds(name)
    value = Settings.model_fields[name].default if default is None else default
    return (where or st).number_input(label, lo, hi, value, key=f"s_{name}", **KEEP, **kw)


def _select(label: str, name: str, labels: dict[str, str], **kw: Any) -> Any:
    return st.selectbox(label, list(labels), format_func=labels.__getitem__, key=f"s_{name}", **KEEP, **kw)


def _legs() -> dict[str, Any]:
    with st.expander("Retrieval legs (top-k)"):
        c1, c2 = st.columns(2)
        return {"d_bm25_k": number("D · BM25", "d_bm25_k", where=c1),
                "d_dense_k": number("D · embedding", "d_dense_k", where=c2),
                "f_bm25_k": number("F · BM25", "f_bm25_k", where=c1),
                "f_dense_k": number("F · embedding", "f_dense_k", where=c2),
                "final_k": number("Final list length", "final_k"),
                "long_chunks": _select("Long chunks", "long_chunks", LONG_LABELS),
                "long_lines": number("… longer than (lines)", "long_lines")}


def _fusion() -> dict[str, Any]:
    with st.expander("D · hybrid fusion"):
        fusion = _select("Method", "fusion", FUSION_LABELS)
        lo, hi = bounds("alpha")
        alpha = st.slider("α — weight of BM25", lo, hi, Settings.model_fields["alpha"].default, 0.05, key="s_alpha",
                          help="RRF weighs the legs 2α and 2(1 − α) (α = 0.5 is plain RRF); min-max and "
                               "z-score mix the normalised scores α : (1 − α).", **KEEP)
        rrf_k = number("RRF k", "rrf_k", disabled=fusion != "rrf")
    return {"fusion": fusion, "alpha": alpha, "rrf_k": rrf_k}


def _reranker() -> dict[str, Any]:
    with st.expander("F · reranker"):
        reranker = _select("Backend", "reranker", RERANKER_LABELS, help=RERANKER_HELP)
        model = st.text_input("Model path (optional)", "", key="s_reranker_model", placeholder="default model",
                              help="The learned ranker's or a cross-encoder's folder, or a GGUF for Qwen; empty: "
                                   "the one trained here.", **KEEP)
        top_n = number("Rerank the top N of the union", "rerank_top_n", disabled=reranker == "learned",
                       help="For the model rerankers (cross-encoder, Qwen), which cost per candidate. The learned "
                            "ranker scores the whole union: it reads features the trace already has.")
    return {"reranker": reranker, "reranker_model": model.strip() or None, "rerank_top_n": top_n}


def _validator(default_on: bool) -> dict[str, Any]:
    from pipeline.models.validator import DEFAULT_THRESHOLDS  # calibrated per model; read where it is kept

    with st.expander("Validator", expanded=True):
        on = st.toggle("Run the validator", default_on, key="s_run_validator", **KEEP)
        model = _select("Model", "validator_model", VALIDATOR_LABELS, disabled=not on, help=VALIDATOR_HELP)
        top_k = number("Judge the top k of each ranking", "validator_top_k", disabled=not on)
        policy = _select("Accept policy", "accept_policy", {k: p.label for k, p in POLICIES.items()},
                         disabled=not on)
        st.caption(POLICIES[policy].description)
        class_accepts = st.toggle("Accept the classes the code uses", False, key="s_class_accepts",
                                  disabled=not (on and policy == "calibrated"), **KEEP,
                                  help="Calibrated policy: accept the class-reference records of every class the "
                                       "class-use rule finds in the code, wherever they rank, on the rule's "
                                       "evidence. Off by default: the dev set grades about half of them "
                                       "irrelevant; the rule-graded sets grade them relevant.")
        default_thr = float(DEFAULT_THRESHOLDS.get(model, 1.0))
        # Only the Qwen-yes policies read Qwen's yes/no margin; the calibrated one decides on p
        says_yes = on and policy in ("qwen_and_evidence", "qwen_only")
        custom = st.checkbox(f"Custom margin threshold (default {default_thr:g})", False, key="s_custom_thr",
                             disabled=not says_yes, **KEEP,
                             help="Where Qwen's yes/no margin counts as yes: for the “Qwen yes” policies only "
                                  "(the calibrated policy decides on p and its own threshold).")
        threshold = number("Margin threshold", "margin_threshold", default=default_thr, step=0.1,
                           disabled=not (custom and says_yes))
        timeout_s = number("Timeout per candidate (s)", "timeout_s", step=5.0, disabled=not on)
    return {"run_validator": on, "validator_model": model, "validator_top_k": top_k, "accept_policy": policy,
            "class_accepts": class_accepts and on and policy == "calibrated",
            "margin_threshold": threshold if custom and says_yes else None, "timeout_s": timeout_s}


_EMBEDDER_HELP = (f"“{TRAINED}”: the code query encoder trained from the docs (MiniLM until it is trained); "
                  "a sentence-transformers folder; empty: ")


def _embedders() -> dict[str, Any]:
    with st.expander("Embedders"):
        d = st.text_input("D embedder folder", TRAINED, key="s_embedder", placeholder="all-MiniLM-L6-v2", **KEEP,
                          help=_EMBEDDER_HELP + "all-MiniLM-L6-v2 itself.")
        f = st.text_input("F embedder folder", TRAINED, key="s_f_embedder", placeholder="same as D", **KEEP,
                          help=_EMBEDDER_HELP + "the same as D.")
    return {"embedder": d.strip() or None, "f_embedder": f.strip() or None}


def settings_sidebar(*, validator_default: bool = True) -> Settings | None:
    """The run settings as sidebar widgets (values persist across pages); None if they are invalid."""
    with st.sidebar:
        kb_sidebar()
        st.subheader("Run settings")
        values = {**_legs(), **_fusion(), **_reranker(), **_validator(validator_default), **_embedders()}
        _model_notices(values)
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        st.sidebar.error(f"Invalid settings: {describe(exc, limit=10)}")
        return None


def _model_notices(values: dict[str, Any]) -> None:
    """Say up front which model is missing; the run still works and the panel repeats the warning."""
    wanted = []
    if values["run_validator"] and values["accept_policy"] != "evidence_only":
        wanted.append(values["validator_model"])
    if values["reranker"] in ("qwen", "qwen-pmi") and "qwen-0.5b" not in wanted:
        wanted.append("qwen-0.5b")
    for key in wanted:
        try:
            status = provision.status(key)
        except Exception as exc:
            st.warning(f"{key}: {exc}")
            continue
        if not status.ready:
            st.warning(f"**{status.title}** is not ready: {status.message}")


def kb_sidebar(*, upload: bool = True) -> None:
    """KB choice (built-in or uploaded) and an upload box; shared with the Knowledge base page."""
    st.subheader("Knowledge base")
    if upload:
        with st.expander("Upload a KB (JSONL)"):
            up = st.file_uploader("JSONL records", type=["jsonl"], key="kb_upload_sidebar",
                                  help="One record per line; bad lines are reported and skipped "
                                       "(details on the Knowledge base page).")
            if up is not None:
                kb_upload_summary(load_user_kb(up.getvalue(), up.name, up.file_id), compact=True)
    kb = user_kb()
    options = [BUILTIN] + ([UPLOADED] if kb is not None and kb.store is not None else [])
    if st.session_state.get(SS_KB_CHOICE) not in options:
        st.session_state[SS_KB_CHOICE] = BUILTIN
    st.radio("Search in", options, key=SS_KB_CHOICE, persist_state="session",
             format_func=lambda o: "Built-in Godot 4 docs" if o == BUILTIN else f"Uploaded: {kb.name if kb else ''}")


def kb_upload_summary(kb: UserKB, *, compact: bool = False) -> None:
    errors = [i for i in kb.issues if i.severity == "error"]
    n = len(kb.store.records) if kb.store else 0
    if kb.store is None:
        kept = user_kb()
        what = (f"{len(errors)} bad line(s)" if errors else "the file is empty")
        st.error(f"{kb.name}: no valid record; {what}." + (
            f" Still searching {kept.name} ({len(kept.store.records):,} records)."
            if kept is not None and kept is not kb and kept.store is not None else ""))
    elif errors:
        st.warning(f"{kb.name}: {n:,} records loaded, {len(errors)} bad line(s) skipped.")
    else:
        st.success(f"{kb.name}: {n:,} records loaded.")
    if compact and kb.issues:
        st.caption("\n\n".join(str(i) for i in kb.issues[:5]) + ("\n\n…" if len(kb.issues) > 5 else ""))
