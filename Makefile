# The two commands (see README):  make demo   and   make test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint setup clean

$(BIN)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/vglobal demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

test: setup
	scripts/ensure-postgres.sh
	scripts/ensure-kubectl.sh
	scripts/ensure-chromium.sh
	$(MAKE) lint
	$(BIN)/pytest -n 2 --dist worksteal --maxfail 10 -m "not serial"
	$(BIN)/pytest --maxfail 10 -m serial

clean:
	rm -rf $(VENV) vglobal-data .pytest_cache .ruff_cache
