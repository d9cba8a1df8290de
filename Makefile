# Two commands do all set-up on a fresh machine:
#   make demo   compile examples/kernelbench/31_elu.pto and check it numerically in pypto SIM
#   make test   the test suite (what CI runs)
#   make docs   the documentation site into site/ (warnings are errors)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow lint docs clean

$(STAMP): pyproject.toml constraints.txt
	@command -v cmake >/dev/null || { echo "pypto builds its calculator with cmake: install cmake and a C++ compiler"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,cluster,docs]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p build
	$(BIN)/ptodsl compile examples/kernelbench/31_elu.pto -o build/elu.py
	@echo "wrote build/elu.py"
	$(BIN)/ptodsl check examples/kernelbench/31_elu.pto

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --durations=25

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m slow

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build site
