# The two commands of the README: `make run` and `make test`. Both create .venv when absent.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
CORES  ?= 2
STAMP  := $(VENV)/.installed

.PHONY: install run test dryrun lint bench clean train-example viewer

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/config.yaml
	$(BIN)/snakemake --configfile config/config.yaml --report results/report.html

dryrun: $(STAMP)
	$(BIN)/snakemake -n --configfile config/config.yaml

lint: $(STAMP)
	$(BIN)/snakemake --lint --configfile config/config.yaml

# the training workflow on the bundled example (config/train_ci.yaml): results/train/ci_tiny/MODEL_CARD.md
train-example: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/train_ci.yaml

test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/viterbi.py

# Refresh the report's 3D viewer (3Dmol.js, shipped in workflow_lib/report/assets) from its npm package:
# `make viewer VIEWER_VERSION=2.5.5` needs npm; the package's integrity is checked against the registry's.
VIEWER_VERSION ?= 2.5.5
viewer: $(STAMP)
	$(BIN)/python -m workflow_lib.report.vendor --version $(VIEWER_VERSION)

clean:
	rm -rf results logs .snakemake
