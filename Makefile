# Every target sets up what it needs first (system packages, .venv), so each works on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in constraints.txt so pip never resolves a CUDA build; /opt/wheels holds a local CPU wheel where present
PIP_INSTALL := $(BIN)/python -m pip install -q -c constraints.txt $(if $(wildcard /opt/wheels),--find-links /opt/wheels)

LABEXT := luminal_lab/labextension
# an editable install leaves out the wheel's data files, so setup links the built extension where JupyterLab looks
LABEXT_LINK := $(VENV)/share/jupyter/labextensions/luminal-lab

.PHONY: setup system extension wheel lab tour notebooks test test-all lint bench clean

setup: system $(VENV)/.installed extension

system:
	bash scripts/install-system-deps.sh

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e ".[dev,lab]"
# the notebooks' "python3" kernel is this environment's interpreter (for nbclient, nbval and lab)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3
	touch $@

## The JupyterLab extension, built from extension/ into luminal_lab/labextension and linked into .venv.
extension: $(LABEXT)/package.json $(VENV)/.installed
	mkdir -p $(dir $(LABEXT_LINK))
	ln -sfn $(CURDIR)/$(LABEXT) $(LABEXT_LINK)

# `npm install` follows the lock file; `npm ci` refuses it (npm leaves other platforms' optional rspack
# bindings out of the lock and then reports them missing)
extension/node_modules/.package-lock.json: extension/package.json extension/package-lock.json
	cd extension && npm install --no-audit --no-fund

$(LABEXT)/package.json: extension/node_modules/.package-lock.json extension/tsconfig.json $(wildcard extension/src/*.ts extension/style/*.css)
	cd extension && npm run build

## A wheel in dist/ with the extension prebuilt inside: `pip install dist/luminal_lab-*.whl` is all a user does.
wheel: setup
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w dist .

## The workbench: JupyterLab on notebooks/.
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

## The tour, headless: executes every notebook (one per core at a time) and writes HTML to build/tour/.
tour: setup
	mkdir -p build/tour
	printf '%s\n' notebooks/*.ipynb | xargs -P "$$(nproc)" -n 1 $(BIN)/jupyter nbconvert --to html --execute \
		--output-dir build/tour
	@echo "tour written to build/tour/"

## Re-executes every notebook in place (outputs stored, widget state stripped); prints each one's time.
notebooks: setup
	$(BIN)/python scripts/execute_notebooks.py

## The whole test suite: the extension's unit tests, pytest (browser tests in JupyterLab included), the notebooks
## against their stored outputs (nbval), the GPU check's dry run (scripts/gpu-check: what it carries to a GPU machine is
## complete), then the linter. pytest runs one worker per core (at most 4: each may hold an egglog e-graph), a test
## module per worker at a time, and lists the slowest tests last; nbval runs a notebook per worker, each kernel given
## 180 s to start (nbval's 60 s once ran out on a loaded machine, with every cell of that notebook unrun).
test: setup
	cd extension && npm test
	$(BIN)/python -m pytest -q -rs -n auto --maxprocesses 4 --dist loadfile --durations=30
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --nbval notebooks/ --nbval-current-env \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg --nbval-kernel-startup-timeout 180
	$(BIN)/python scripts/gpu-check
	$(BIN)/ruff check luminal_lab tests benchmarks scripts scripts/gpu-check

## The whole test suite with every exhaustive sweep whole (OpInfo ops with and without gradients, fuzzed graphs), of which
## `make test` runs a fixed third (tests/helpers/sweeps.py): what an issue's resolution needs to pass.
test-all: export LUMINAL_LAB_SWEEPS = all
test-all: test

lint: setup
	$(BIN)/ruff check luminal_lab tests benchmarks scripts scripts/gpu-check

## Benchmarks: JSON figures under benchmarks/results/ (benchmarks/gpu.py measures only where a GPU is present).
bench: setup
	$(BIN)/python benchmarks/reference_runtime.py
	$(BIN)/python benchmarks/egraph.py
	$(BIN)/python benchmarks/compiled_runtime.py
	$(BIN)/python benchmarks/fuzz.py
	$(BIN)/python benchmarks/fusion.py
	$(BIN)/python benchmarks/row_fusion.py
	$(BIN)/python benchmarks/compile.py
	$(BIN)/python benchmarks/torch_compile.py
	$(BIN)/python benchmarks/call.py
	$(BIN)/python benchmarks/generate.py
	$(BIN)/python benchmarks/train.py
	$(BIN)/python benchmarks/scaling.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/timing.py
	$(BIN)/python benchmarks/gpu.py

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache $(LABEXT) extension/lib extension/node_modules
