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
# The real LightX2V for its tests and scenarios: the pinned source (sha256 checked), extracted
# into an ignored folder. On a CPU machine LightX2V needs torchvision, whose PyPI wheels pair only
# with the same release of torch: that pair replaces the CPU torch above. torchaudio's last
# release pins torch 2.11, so it goes in without that pin (H3 imports it; its Python transforms
# run on the newer torch). On a GPU or ROCm machine, keep its own torch: LIGHTX2V_TORCH_SPEC=.
LIGHTX2V_TARBALL ?= ../shared/vendor/lightx2v-f8aee98.tar.gz
LIGHTX2V_SHA256 ?= d25d159752add6aa3c20f8c0e67215745034cc9a989be9b324fe3b917b0037b7
LIGHTX2V_DIR ?= .lightx2v
LIGHTX2V_TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
LIGHTX2V_TORCHAUDIO_SPEC ?= torchaudio==2.11.1
# Tests that need LightX2V run when it is here (make lightx2v), and must not skip then.
ifneq ($(wildcard $(LIGHTX2V_DIR)/LightX2V/lightx2v/infer.py),)
export LIGHTX2V_ROOT ?= $(abspath $(LIGHTX2V_DIR)/LightX2V)
endif

.PHONY: install lightx2v test lint format e2e-3step bench-metrics clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if $(PY) -c "import torch" 2>/dev/null; then \
	  echo "torch already present: $$($(PY) -c 'import torch; print(torch.__version__)') (kept)"; \
	else \
	  $(PY) -m pip install -q $(TORCH_SPEC); \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

$(VENV)/.lightx2v-installed: $(VENV)/.installed $(LIGHTX2V_TARBALL)
	echo "$(LIGHTX2V_SHA256)  $(LIGHTX2V_TARBALL)" | sha256sum -c --quiet
	rm -rf $(LIGHTX2V_DIR) && mkdir -p $(LIGHTX2V_DIR)
	tar -xzf $(LIGHTX2V_TARBALL) -C $(LIGHTX2V_DIR)
	@if [ -n "$(LIGHTX2V_TORCH_SPEC)" ]; then $(PY) -m pip install -q $(LIGHTX2V_TORCH_SPEC); fi
	@if [ -n "$(LIGHTX2V_TORCHAUDIO_SPEC)" ]; then $(PY) -m pip install -q --no-deps $(LIGHTX2V_TORCHAUDIO_SPEC); fi
	$(PY) -m pip install -q -e ".[dev,lightx2v]"
	touch $@

lightx2v: $(VENV)/.lightx2v-installed
	@echo "LIGHTX2V_ROOT=$(abspath $(LIGHTX2V_DIR)/LightX2V)"

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
	rm -rf $(VENV) build *.egg-info $(LIGHTX2V_DIR)
