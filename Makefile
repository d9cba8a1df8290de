# Two commands do all set-up on a fresh machine:
#   make demo   compile examples/kernelbench/31_elu.pto and check it numerically in pypto SIM
#   make test   the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow lint clean

$(STAMP): pyproject.toml constraints.txt
	@command -v cmake >/dev/null || { echo "pypto builds its calculator with cmake: install cmake and a C++ compiler"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,cluster]'
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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build
