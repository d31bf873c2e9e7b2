# One-command set-up: each target creates .venv and installs on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# torch goes in before the package, so that the package's install finds it and pulls no other build.
# Which build pip picks is pip's configuration: PyPI's Linux wheel is the CUDA one (several GB, runs on a CPU too);
# the CPU-only one comes from a find-links folder that holds it or from PyTorch's own index, e.g.
# make TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" test
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=

.PHONY: demo test test-min docs lint bench-circles clean

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,docs]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m skabc demo

test: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m pytest -q

# The test suite against the oldest releases setup.cfg admits (.ci/min-versions.txt), in its own venv.
VENV_MIN ?= .venv-min
test-min:
	python3 -m venv $(VENV_MIN)
	$(VENV_MIN)/bin/python -m pip install -q --upgrade pip
	$(VENV_MIN)/bin/python -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(VENV_MIN)/bin/python -m pip install -q -c .ci/min-versions.txt -e ".[test]"
	$(VENV_MIN)/bin/python -m pytest -q

# The documentation site (Sphinx + gallery), offline, warnings as errors.
docs: $(VENV)/.installed
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

lint: $(VENV)/.installed
	$(PY) -m ruff check .

bench-circles: $(VENV)/.installed
	$(PY) benchmarks/circles.py --eval

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache docs/_build docs/auto_examples docs/sg_execution_times.rst
