# resetgate: `make run` starts the whole stack locally, `make test` runs every check.
# Both set up what they need first (a virtualenv and a redis-server): `make run` installs the
# runtime dependencies only, `make test` adds the test and lint tools.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
SUM    := $(shell cksum pyproject.toml | cut -d' ' -f1)
RUNTIME_STAMP := $(VENV)/.installed-runtime-$(SUM)
DEV_STAMP     := $(VENV)/.installed-dev-$(SUM)
PYTEST := $(BIN)/python -m pytest
# pytest-xdist workers. Most tests wait on processes, sockets and timers rather than the CPU,
# so more workers than cores pays off (on 4 a quiet pass kept the 2 cores 63 % busy; from a
# fresh clone `make test` took 501 s on 4, 420 s on 6); each worker starts its own
# redis-server(s) on free ports. Tests marked `serial` (timing measurements) run afterwards, alone.
TEST_WORKERS ?= 6
# Python may cache compiled modules (__pycache__, ignored by git) even where the environment
# says not to: `make test` starts several hundred Python processes, and with
# PYTHONDONTWRITEBYTECODE=1 each compiled every module it imported from source again, about
# half of the suite's CPU time (the image byte-compiles at build time instead).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup setup-run tools run test collect lint typecheck deadcode chart-lint chart-readme chart-package chromium \
        unit unit-parallel unit-serial test-cluster test-slow test-repeat test-clones test-durations bench clean

# The virtualenv gets uv first: it resolves and installs the same versions as pip (checked
# with `pip freeze` on both) in about 6 s where pip takes about 50 s. Where uv cannot be
# installed, pip does the work. uv byte-compiles only when asked (pip always does): without
# it, the first processes a test run starts side by side each compiled every dependency.
INSTALL = $(if $(wildcard $(BIN)/uv),$(BIN)/uv pip install --compile-bytecode --python $(BIN)/python,$(BIN)/pip install --progress-bar off)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --progress-bar off uv || echo "==> uv unavailable: installing with pip"

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing resetgate and its runtime dependencies into $(VENV)"
	$(INSTALL) -e .
	@rm -f $(VENV)/.installed-runtime-* && touch $@

# The test and lint tools resolved together with the project's own dependencies (installed
# apart, moto's boto3 would pull a botocore newer than aiobotocore allows).
$(DEV_STAMP): $(RUNTIME_STAMP)
	@echo "==> installing the test and lint tools into $(VENV)"
	$(INSTALL) -e '.[dev]'
	@rm -f $(VENV)/.installed-dev-* && touch $@

setup-run: $(RUNTIME_STAMP)
	@tools/ensure-redis.sh $(VENV)
	@tools/ensure-postgres.sh || echo "==> no PostgreSQL: resetgate up runs without the archive"

setup: $(DEV_STAMP)
	@tools/ensure-redis.sh $(VENV)

# PostgreSQL (the archive's tests), helm and the Prometheus Operator's CRD schemas (chart
# tests), promtool/prometheus (alert tests) and chromium (console tests), installed once
# before the parallel steps instead of by several test workers at the same moment.
tools: setup
	@tools/ensure-postgres.sh
	@echo "==> helm, prometheus, chromium and the CRD schemas"
	@tools/install-helm.sh >/dev/null
	@tools/install-prometheus.sh >/dev/null
	@tools/install-chromium.sh >/dev/null
	@tools/install-crd-models.sh >/dev/null

run: setup-run
	$(BIN)/resetgate up

# Every check: the main pytest pass with its progress in front, lint, mypy, helm lint and the
# Cluster pass beside it, then the `serial` tests alone; the total time is printed last.
test: setup tools
	@MAKE="$(MAKE)" tools/test.sh

# ruff format owns the layout: a file it would change fails the lint.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# Names nothing uses (configured in pyproject.toml [tool.vulture]; tools/vulture_whitelist.py).
deadcode: setup
	$(BIN)/vulture

# The console's browser tests drive Debian's chromium through its chromedriver.
chromium:
	tools/install-chromium.sh

# Imports every test module once, so pytest's assertion-rewrite cache is written before the
# passes start (tools/test.sh); a collection error fails here, with its message.
collect: setup
	$(PYTEST) -q --collect-only -m "not slow"

unit: unit-parallel
	@$(MAKE) --no-print-directory unit-serial

unit-parallel: setup
	$(PYTEST) -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not serial"

# Exit status 5 is "no test selected": fine when nothing is marked serial.
# Only the files that name the marker (a conftest.py: its folder) are collected: the whole
# suite's collection was 4.4 CPU-s and 5 s of this pass's wall time, these files' 1.9 and 2 s.
# A marker set some other way than `mark.serial` in the file would be missed; with no file
# found, pytest collects everything as before.
SERIAL_FILES = $(shell grep -rlE --include='*.py' 'mark\.serial\b' tests | sed 's|/conftest\.py$$||' | sort)
unit-serial: setup
	$(PYTEST) -q -m "serial and not slow" $(SERIAL_FILES) || [ $$? -eq 5 ]

chart-lint: setup
	HELM=$$(tools/install-helm.sh) && \
	  $$HELM lint --strict charts/resetgate -f charts/resetgate/values-dev.yaml && \
	  $$HELM lint --strict charts/resetgate -f charts/resetgate/values-prod-like.yaml

# The chart as a versioned artifact: dist/resetgate-VERSION.tgz, its version and appVersion
# both the project's version in pyproject.toml (the image's tag and label come from it too),
# so the chart installs as `helm install resetgate dist/resetgate-VERSION.tgz -f VALUES`.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
CHART_DIST ?= dist
chart-package:
	HELM=$$(tools/install-helm.sh) && \
	  $$HELM package charts/resetgate --version $(VERSION) --app-version $(VERSION) -d $(CHART_DIST)

# charts/resetgate/README.md's tables are what tools/chart-readme.sh generates from values.yaml.
chart-readme:
	tools/chart-readme.sh --check

# The tests of tests/e2e and tests/sender marked cluster_pass again, on a 3-master Redis
# Cluster; it prints any Lua script none of them ran there (tests/support/cluster_scripts.py).
test-cluster: setup
	RESETGATE_TEST_REDIS=cluster $(PYTEST) -q -n 2 --dist loadgroup -m "cluster_pass and not slow" tests/e2e tests/sender

# tests/durations.json: each test's seconds in a parallel pass, by which the next passes start
# the longest work first (tests/support/durations.py). Run it on a quiet machine and commit it.
test-durations: setup tools
	$(PYTEST) -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not serial" --record-durations

# Chosen tests N times, optionally beside a CPU hog, to find what fails on timing:
# make test-repeat TESTS="tests/x.py::test_y" N=20 LOAD=1 [WORKERS=4]  (tools/test-repeat.sh)
test-repeat: setup
	@tools/test-repeat.sh

# What CI does, N times: make test from fresh clones of HEAD, every other run beside a CPU hog
# (tools/test-clones.sh; LOAD=0 or LOAD=1 for none or all).
test-clones:
	@tools/test-clones.sh

test-slow: setup tools
	$(PYTEST) -m slow

# Every benchmark the docs quote, and their tables in docs/performance.md and the README
# rewritten from what they printed (benchmarks/bench.py); ONLY="name ..." runs some.
bench: setup tools
	@tools/ensure-wrk.sh
	$(BIN)/python benchmarks/bench.py $(addprefix --only ,$(ONLY))

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
