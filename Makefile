# Two entry points: `make demo` (the main job) and `make test` (the whole suite, what CI runs).
# Each builds .venv and installs the project on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# All seven presets x 2 seeds on the embedded digits, two runs at a time: the tables and the paired
# comparison with standard.
demo: $(STAMP)
	$(BIN)/lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 2 --test \
		--parallel 2 --output runs/demo

# The suite runs on every core with pytest-xdist (WORKERS=1 make test: one at a time; plain `pytest`
# runs it without xdist). --dist loadgroup keeps each xdist_group on one worker: the tests sharing a
# module's trained runs, and those that need both cores of a small machine (DDP's two ranks,
# `--parallel 2` sweeps), which would otherwise run beside each other.
# `make test-fast`, the inner loop (under a minute): every test but those marked slow (each starts
# processes or trains for more than about 2 s); `make test` runs them all.
WORKERS ?= auto
PYTEST  := $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup

test: $(STAMP)
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_layers.py

clean:
	rm -rf $(VENV) runs
