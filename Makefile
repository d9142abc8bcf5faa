# make run   - fresh clone -> .venv -> a real study on spaces/quickstart.yaml (offline, CPU, minutes)
# make check - the edit-test loop: lint, format and type checks, then the tests that need no server and no long training
# make test  - fresh clone -> .venv -> lint, format and type checks, the docs site (strict), then every test (what .ci/run calls)
# make docs  - the docs site into site/ (mkdocs build --strict: a broken link or a missing page fails)
# make hooks - pre-commit's hooks (.pre-commit-config.yaml) into .git/hooks
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: venv run lint check docs test hooks bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,docs]'
	$(BIN)/pip install -q --no-deps 'mf-prior-bench==1.10.0'  # pins numpy<2, runs on 2 (its other needs are in [dev])
	touch $@

run: venv
	$(BIN)/hpsearch run spaces/quickstart.yaml

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

FAST := not (slow or postgres or ray or browser)
check: lint
	$(BIN)/python -m pytest -q -m "$(FAST)"

docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict  # not --quiet: it hides the warnings that --strict counts

test: lint docs
	$(BIN)/python -m pytest -q

hooks: venv
	$(BIN)/pre-commit install --hook-type pre-commit --hook-type commit-msg

bench: venv
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/pip install -q --no-deps 'dehb==0.1.2' loguru distributed  # DEHB pins numpy<2; runs on 2
	$(BIN)/pip install -q 'hpbandster==0.7.4' || echo "hpbandster not installed (netifaces needs a C compiler): ray_bohb is skipped"  # TuneBOHB's model
	$(BIN)/python -m bench.run_all

clean:
	rm -rf runs report site
