# resetgate: `make run` starts the whole stack locally, `make test` runs every check.
# Both set up what they need first (a virtualenv and a redis-server).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: setup run test lint typecheck deadcode chart-lint chart-readme chromium unit test-cluster test-slow bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)
	@tools/ensure-redis.sh $(VENV)

run: setup
	$(BIN)/resetgate up

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

# Names nothing uses (configured in pyproject.toml [tool.vulture]; tools/vulture_whitelist.py).
deadcode: setup
	$(BIN)/vulture

# The console's browser tests drive Debian's chromium through its chromedriver.
chromium:
	tools/install-chromium.sh

unit: setup chromium
	$(BIN)/python -m pytest

chart-lint: setup
	HELM=$$(tools/install-helm.sh) && \
	  $$HELM lint --strict charts/resetgate -f charts/resetgate/values-dev.yaml && \
	  $$HELM lint --strict charts/resetgate -f charts/resetgate/values-prod-like.yaml

# charts/resetgate/README.md's tables are what tools/chart-readme.sh generates from values.yaml.
chart-readme:
	tools/chart-readme.sh --check

# The end-to-end suite and the sender suite again, on a 3-master Redis Cluster.
test-cluster: setup
	RESETGATE_TEST_REDIS=cluster $(BIN)/python -m pytest tests/e2e tests/sender

test: lint typecheck deadcode chart-lint chart-readme unit test-cluster

test-slow: setup
	$(BIN)/python -m pytest -m slow

bench: setup
	$(BIN)/python benchmarks/storm.py --all
	$(BIN)/python benchmarks/promoter.py
	$(BIN)/python benchmarks/observation.py
	$(BIN)/python benchmarks/admission.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
