# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.hpt-installed
# A machine without CUDA gets the CPU build of torch that lies on this disk, never a CUDA build.
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo yes)
CPU_TORCH ?= torch==2.13.0
DEMO_SPEC ?= sweeps/demo.yaml
DEMO_STORE ?= runs

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@if [ -z "$(HAS_CUDA)" ]; then \
	  echo "setup: no CUDA here -> installing the CPU build $(CPU_TORCH)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check "$(CPU_TORCH)"; fi
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/hpt run $(DEMO_SPEC) --store $(DEMO_STORE)
	$(VENV)/bin/hpt analyze $(DEMO_STORE)/demo
	$(VENV)/bin/hpt report $(DEMO_STORE)/demo

test: setup
	$(VENV)/bin/pytest -q

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache
