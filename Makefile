# Two entry points: `make demo` (the main job) and `make test` (the whole suite, what CI runs).
# Each builds .venv and installs the project on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# Every preset x 5 seeds on the embedded digits, two runs at a time: the tables and the paired comparison
# with standard (2 seeds gave intervals wider than accuracy's range), each run's attention maps in
# TensorBoard (cheap at 17 tokens), and what each arm learned (--inspect, seconds).
demo: $(STAMP)
	$(BIN)/lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 5 --test \
		--parallel 2 --output runs/demo --inspect --run.attention_maps=true

# The suite runs on every core with pytest-xdist (WORKERS=1 make test: one worker; plain `pytest` runs
# it without xdist). --dist loadfile keeps each test file on one worker, so a module's shared runs
# (test_reliability's killed and resumed runs) start once. (xdist's --dist loadgroup would group
# single tests, but pytest 9.2 silently breaks it: pytest-xdist issue 1386.)
# `make test-fast`, the inner loop (under a minute): every test but those marked slow (each starts a
# process or takes more than about 0.2 s of CPU); `make test` runs them all.
WORKERS ?= auto
PYTEST  := $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile

# ruff first: its lint rules (pyproject.toml) and its layout (`ruff format`, which `make format` applies);
# a lint error or an unformatted file fails the suite before any test runs.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_layers.py

clean:
	rm -rf $(VENV) runs
