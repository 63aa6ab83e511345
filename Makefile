# Two set-up commands: `make e2e-3step` and `make test`; both install on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch where no torch is importable (a CUDA or ROCm torch, or any torch already there, is kept):
# the CPU pair the real LightX2V needs. PyPI's torchvision wheels pair only with the same torch
# release, so both are installed from the start, for `make e2e-3step` and `make test` alike.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
SCENARIO ?= scenarios/e2e_3step.yaml
PROFILE ?= 3step
OUT ?= reports
ARGS ?=
# The real LightX2V for its tests and scenarios: the pinned source (sha256 checked), extracted
# into an ignored folder. On a CPU machine whose torch has no torchvision that imports (a venv made
# before the pair above), LIGHTX2V_TORCH_SPEC replaces it; a GPU or ROCm torch is never replaced.
# torchaudio's last release pins torch 2.11, so it goes in without that pin (H3 imports it; its
# Python transforms run on the newer torch).
LIGHTX2V_TARBALL ?= ../shared/vendor/lightx2v-f8aee98.tar.gz
LIGHTX2V_SHA256 ?= d25d159752add6aa3c20f8c0e67215745034cc9a989be9b324fe3b917b0037b7
LIGHTX2V_DIR ?= .lightx2v
LIGHTX2V_TORCH_SPEC ?= $(TORCH_SPEC)
LIGHTX2V_TORCHAUDIO_SPEC ?= torchaudio==2.11.1
# `make test` runs the real-LightX2V tests wherever the pinned source is (CI has it beside the
# clone): it extracts it first and exports LIGHTX2V_ROOT, and a skipped LightX2V test then fails
# (tests/conftest.py). Without it (a clone with no ../shared) they skip, and make says why.
ifneq ($(wildcard $(LIGHTX2V_TARBALL)),)
TEST_LIGHTX2V := $(VENV)/.lightx2v-installed
export LIGHTX2V_ROOT ?= $(abspath $(LIGHTX2V_DIR)/LightX2V)
else ifneq ($(wildcard $(LIGHTX2V_DIR)/LightX2V/lightx2v/infer.py),)
export LIGHTX2V_ROOT ?= $(abspath $(LIGHTX2V_DIR)/LightX2V)
endif
LIGHTX2V_ABSENT := $(LIGHTX2V_TARBALL) not found (the pinned LightX2V source)
# thu-ml SageAttention beside each other for the sage_attn2 backend and LightX2V arms (option /
# field sageattention2 | sageattention1): SageAttention2 d1a57a5 from its pinned source (sha256
# checked; Triton path only: PyPI has only 1.0.6) and 1.0.6 (a requirement or a wheel's path),
# each in a folder of SAGEATTENTION_DIR. Refused, with exit 2, where torch sees no CUDA or ROCm GPU.
SAGEATTENTION_TARBALL ?= ../shared/vendor/sageattention-d1a57a5.tar.gz
SAGEATTENTION_SHA256 ?= ed5e6c676ae75086c4ddf539dec83d2671a0c84ad33e013d1fba67753321dd51
SAGEATTENTION1_SPEC ?= sageattention==1.0.6
export SAGEATTENTION_DIR ?= $(abspath .sageattention)

.PHONY: install lightx2v sageattention test lint format e2e-3step bench-metrics clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if $(PY) -c "import torch" 2>/dev/null; then \
	  echo "torch already present: $$($(PY) -c 'import torch; print(torch.__version__)') (kept)"; \
	else \
	  echo "$(PY) -m pip install -q $(TORCH_SPEC)"; $(PY) -m pip install -q $(TORCH_SPEC); \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# torch: kept when torchvision imports beside it; else, on a machine with no GPU, the CPU pair;
# a GPU torch needs the torchvision built for it, which only its user can pick.
$(VENV)/.lightx2v-installed: $(VENV)/.installed $(LIGHTX2V_TARBALL)
	echo "$(LIGHTX2V_SHA256)  $(LIGHTX2V_TARBALL)" | sha256sum -c --quiet
	rm -rf $(LIGHTX2V_DIR) && mkdir -p $(LIGHTX2V_DIR)
	tar -xzf $(LIGHTX2V_TARBALL) -C $(LIGHTX2V_DIR)
	@# Byte-compiled once: every rank and probe imports about 1,000 of its modules, and where
	@# PYTHONDONTWRITEBYTECODE is set each process would compile them again (about 1.5 s each).
	$(PY) -m compileall -q $(LIGHTX2V_DIR)/LightX2V > /dev/null
	@if $(PY) -c "import torch, torchvision" 2>/dev/null; then \
	  echo "torch $$($(PY) -c 'import torch, torchvision as v; print(torch.__version__, "with torchvision", v.__version__)') (kept)"; \
	elif $(PY) -c "import sys, torch; sys.exit(torch.version.hip is not None or torch.cuda.is_available())"; then \
	  echo "$(PY) -m pip install -q $(LIGHTX2V_TORCH_SPEC)"; $(PY) -m pip install -q $(LIGHTX2V_TORCH_SPEC); \
	else \
	  echo "lightx2v: torchvision does not import beside this GPU torch ($$($(PY) -c 'import torch; print(torch.__version__)')): install the torchvision built for it (LightX2V imports it)" >&2; \
	  exit 2; \
	fi
	@if ! $(PY) -c "import torchaudio" 2>/dev/null && [ -n "$(LIGHTX2V_TORCHAUDIO_SPEC)" ]; then \
	  echo "$(PY) -m pip install -q --no-deps $(LIGHTX2V_TORCHAUDIO_SPEC)"; \
	  $(PY) -m pip install -q --no-deps $(LIGHTX2V_TORCHAUDIO_SPEC); \
	fi
	$(PY) -m pip install -q -e ".[dev,lightx2v]"
	touch $@

ifneq ($(wildcard $(LIGHTX2V_TARBALL)),)
lightx2v: $(VENV)/.lightx2v-installed
	@echo "LIGHTX2V_ROOT=$(abspath $(LIGHTX2V_DIR)/LightX2V)"
else
lightx2v:
	@echo "lightx2v: $(LIGHTX2V_ABSENT); point LIGHTX2V_TARBALL at it" >&2; exit 2
endif

# PY=python3 (an interpreter with the harness's requirements) skips the venv.
sageattention: $(if $(filter $(VENV)/bin/python,$(PY)),install,)
	$(PY) -m harness.sage_packages --tarball $(SAGEATTENTION_TARBALL) \
	  --sha256 $(SAGEATTENTION_SHA256) --sa1 $(SAGEATTENTION1_SPEC) --dest $(SAGEATTENTION_DIR)

# Two pytest-xdist workers (the 2-core CI machine): each test module is one unit of work, the
# long shared campaigns start first (tests/conftest.py). TEST_WORKERS=0 runs in one process.
# pytest-benchmark, where the system has it, is not used here and only warns under xdist.
# harness byte-compiled first: hundreds of test subprocesses import it, and where
# PYTHONDONTWRITEBYTECODE is set (as on the machine this was measured on) none writes its .pyc.
# CPU_TIME=1: also the CPU seconds of each test, its processes included, and the costliest listed
# at the end (tests/cpu_time.py): on a CPU-bound machine, where the suite's time really goes.
TEST_WORKERS ?= 2
CPU_TIME ?=
test: export TEST_CPU_TIME = $(if $(CPU_TIME),$(abspath $(VENV))/test-cpu-time.jsonl)
test: install $(TEST_LIGHTX2V)
	@if [ -z "$$LIGHTX2V_ROOT" ]; then echo "LightX2V: $(LIGHTX2V_ABSENT): the real-LightX2V tests skip"; fi
	@start=$$(date +%s); \
	$(PY) -m compileall -q harness > /dev/null; \
	echo "$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)"; \
	$(PY) -m pytest -q -p no:benchmark -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s wall, $(TEST_WORKERS) worker(s), exit $$rc"; exit $$rc

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
	rm -rf $(VENV) build *.egg-info $(LIGHTX2V_DIR) $(SAGEATTENTION_DIR)
