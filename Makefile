# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test soak lint bench schemas clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# the report's browser test drives Debian's Chromium (never `playwright install`)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/casino-ledger demo

test: $(STAMP)
	$(BIN)/ruff check services tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# the long soaks `make test` leaves out (each has a quick version there)
soak: $(STAMP)
	$(BIN)/python -m pytest -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check services tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench

schemas: $(STAMP)
	$(BIN)/python -m services.tools.schemas_export

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
