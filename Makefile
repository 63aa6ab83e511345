# Two set-up commands: `make e2e-3step` and `make test`; both install on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build of torch used only where no torch is importable (a ROCm or CUDA torch is never replaced).
TORCH_SPEC ?= torch==2.13.0
SCENARIO ?= scenarios/e2e_3step.yaml
PROFILE ?= 3step
OUT ?= reports
ARGS ?=

.PHONY: install test lint format e2e-3step bench-metrics clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if $(PY) -c "import torch" 2>/dev/null; then \
	  echo "torch already present: $$($(PY) -c 'import torch; print(torch.__version__)') (kept)"; \
	else \
	  $(PY) -m pip install -q "$(TORCH_SPEC)"; \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check harness tests
	$(VENV)/bin/ruff format --check harness tests

format: install
	$(VENV)/bin/ruff format harness tests
	$(VENV)/bin/ruff check --fix harness tests

e2e-3step: install
	$(VENV)/bin/harness run $(SCENARIO) --profile $(PROFILE) --out $(OUT) $(ARGS)

bench-metrics: install
	$(VENV)/bin/harness bench metrics $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
