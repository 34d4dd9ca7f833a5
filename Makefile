# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501
# Every step prints its wall time (and .ci/run sums them up), so a slow step shows in every log.
TIMED := .ci/timed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# `make demo BUDGET=20` (or test): train capped models (20 steps each) and run with those.
ifdef BUDGET
export GDPOC_TRAIN_BUDGET := $(BUDGET)
endif
# A portable llama.cpp build: this VM's CPU advertises AMX/AVX-512 FP16 that a native
# build uses and the hypervisor refuses (SIGILL). AVX2+FMA runs on every x86-64 here.
export CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF

.PHONY: demo test install models kb index train lint bench freeze clean-cache browser

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing pinned requirements (llama-cpp-python compiles once, ~7 min on 2 cores; pip caches it)"
	$(TIMED) install bash -c '$(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -r requirements.txt'
	@touch $(STAMP)

install: $(STAMP)

models: install
	$(TIMED) models $(PY) -m pipeline models prepare

kb: install
	$(TIMED) kb $(PY) -m pipeline kb ensure

# BM25 and the embedding vectors of every record (~10 min with MiniLM on 2 cores the first time;
# cached by model files and KB content, resumable). Tests never compute them: `make test` does, first.
# After `models`: the records are encoded on MiniLM's ONNX export, which `models prepare` writes; a plain
# `make index` or `make train` on a fresh machine used to encode them with torch (1.4x slower, bench.kb_encode).
index: kb models
	$(TIMED) index $(PY) -m pipeline kb index

# The models learned from the docs (code query encoder, learned ranker, accept model): once, cached by KB
# and recipe, resumable, with progress bars (~15 min on 2 cores the first time; `make train BUDGET=20` caps it).
train: index
	$(TIMED) train $(PY) -m pipeline models train

# The dashboard, plus a warmer (nice 19, started once the dashboard answers) that runs the built-in
# examples once, so a click on an example shows the finished flow from cache. It pauses while a user's
# run is going and stops with the dashboard; its log is build/warm.log.
demo: models index train
	@mkdir -p build; \
	$(PY) -m pipeline warm --after http://localhost:$(PORT)/_stcore/health > build/warm.log 2>&1 & warm=$$!; \
	trap 'kill $$warm 2>/dev/null' EXIT; \
	$(VENV)/bin/streamlit run app.py --server.address localhost --server.port $(PORT) \
		--server.headless true --browser.gatherUsageStats false

# Debian's chromium drives the end-to-end test (no browser download; Playwright uses it as is).
browser:
	@$(TIMED) browser bash -c 'command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi; }'

# Every cache a test needs is built above, with progress bars, before pytest starts. The fast suite
# runs first; the model and browser tests (real GGUFs, real chromium) follow.
test: models index train browser
	$(TIMED) "pytest fast" $(PY) -m pytest -q -m "not model and not browser"
	$(TIMED) "pytest models" $(PY) -m pytest -q -m "model or browser"

lint: install
	$(TIMED) lint $(VENV)/bin/ruff check .

bench: models index train browser
	$(PY) -m bench

freeze:
	$(PY) -m pip freeze | sed 's/^torch==2.13.0+cpu/torch==2.13.0/' > requirements.lock.tmp && \
		(sed -n '/^#/p' requirements.txt; cat requirements.lock.tmp) > requirements.new && \
		mv requirements.new requirements.txt && rm requirements.lock.tmp

clean-cache:
	rm -rf build ~/.cache/godot-retrieval-poc/bm25 ~/.cache/godot-retrieval-poc/vectors
