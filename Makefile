# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Each builds .venv and installs the project on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# All seven presets x 2 seeds on the embedded digits, two runs at a time: the tables and the paired
# comparison with standard.
demo: $(STAMP)
	$(BIN)/lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 2 --test \
		--parallel 2 --output runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_layers.py

clean:
	rm -rf $(VENV) runs
