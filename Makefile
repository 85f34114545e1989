# The two commands of the README: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: run test lint check-deploy migrations-check ci clean

$(STAMP_RUN): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "GPU Portal needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	@touch $@

$(STAMP_DEV): $(STAMP_RUN)
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

run: $(STAMP_RUN)
	$(PY) -m portal.launcher

# The suite runs in PYTEST_WORKERS processes (pytest-xdist), a test file at a time on one of them, so a module's
# kubesim is served once, the slowest files first (tests/conftest.py); PYTEST_ARGS come last and win:
# `make test PYTEST_ARGS="-n 0"` runs it in this process.
PYTEST_WORKERS ?= 3
test: $(STAMP_DEV)
	$(PY) -m portal.devservices $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: $(STAMP_DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

migrations-check: $(STAMP_RUN)
	$(PY) -m portal.devservices $(PY) manage.py makemigrations --check --dry-run

check-deploy: $(STAMP_RUN)
	PORTAL_MODE=production SECRET_KEY=check-deploy-$$(date +%s)-only-for-this-check-abcdefghijklmnopqrstuvwxyz \
		ALLOWED_HOSTS=portal.example.com $(PY) manage.py check --deploy --fail-level WARNING

clean:
	rm -rf $(VENV) .run .pytest_cache .ruff_cache
