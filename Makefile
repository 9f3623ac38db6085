# millimcp — every target sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TOOLS  := $(CURDIR)/.tools
NODE   := $(TOOLS)/node_modules/node/bin/node
SUITE  := $(TOOLS)/node_modules/@modelcontextprotocol/conformance/dist/index.js
INSPECTOR := $(TOOLS)/node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js
EVERYTHING := $(TOOLS)/node_modules/@modelcontextprotocol/server-everything/dist/index.js
DEMO_ARGS ?=

export MILLIMCP_NODE := $(NODE)
export MILLIMCP_CONFORMANCE := $(SUITE)
export MILLIMCP_INSPECTOR := $(INSPECTOR)
export MILLIMCP_SERVER_EVERYTHING := $(EVERYTHING)

# Real servers from PyPI for the compat harness (tests/integration/compat/test_pypi_servers.py),
# in a git-ignored folder: a virtual environment for mcp 1.x with its two servers (mcp 1.x
# cannot share one with mcp 2.x), and all six servers with their runtime dependencies but
# without their framework pins in one folder that the test environment puts on its path
# (there the MCPServer and fastmcp ones run on its own mcp 2.3.0 and fastmcp 4.2.3, and all of
# them on millimcp).
COMPAT := $(TOOLS)/compat
export MILLIMCP_COMPAT_MCP1_PYTHON := $(COMPAT)/mcp1/bin/python
export MILLIMCP_COMPAT_SITE := $(COMPAT)/site
COMPAT_MCP1 := mcp==1.30.0 mcp-server-calculator==0.2.1
COMPAT_SITE_PACKAGES := mcp-server-calculator==0.2.1 mcp-math==0.1.1 \
	mcp-server-time==2026.10.19 tzlocal==5.4.5 tzdata==2026.6 \
	markitdown-mcp==0.0.1a8 markitdown==0.1.9 beautifulsoup4==4.15.0 soupsieve==4.1.3 \
	defusedxml==0.7.1 markdownify==1.2.3 six==1.17.0 magika==1.0.3 onnxruntime==1.32.0 \
	coloredlogs==15.0.1 humanfriendly==10.0 python-dotenv==1.2.4 flatbuffers==25.12.19 \
	mcp-server-calculator-yf==0.1.1 requests==2.34.2 urllib3==2.8.0 charset-normalizer==3.5.3 \
	mcp-simple-timeserver==3.3.2 ntplib==0.4.0 hijridate==2.6.0 japanera==2.1.3 kanjize==1.6.1 \
	pyluach==2.3.0 persiantools==6.2.0 pycountry==26.2.16 timezonefinder==9.0.0 \
	timezonefinder-data==3.2026.3.post1 h3==4.5.0

# apt-get as root, else through sudo (system-tools).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo-setup tools system-tools compat-servers test check lint typecheck conformance bench demo clean test-fronts perf fuzz

setup: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# Node 22 (the npm package node@22; the machine's Node 20 cannot run the suite), the
# conformance suite, the Inspector and the reference server-everything (an interop peer of the
# client), in a git-ignored folder.
tools: $(TOOLS)/.installed

$(TOOLS)/.installed:
	mkdir -p $(TOOLS)
	test -f $(TOOLS)/package.json || echo '{"name": "millimcp-tools", "private": true}' > $(TOOLS)/package.json
	cd $(TOOLS) && npm install --no-audit --no-fund --loglevel=error \
		node@22 @modelcontextprotocol/conformance@0.2.0-alpha.12 @modelcontextprotocol/inspector@2.12.0 \
		@modelcontextprotocol/server-everything@2026.8.31
	test -x $(NODE) || (cd $(TOOLS)/node_modules/node && node installArchSpecificPackage)
	$(NODE) --version
	test -f $(SUITE) && test -f $(INSPECTOR) && test -f $(EVERYTHING)
	touch $@

compat-servers: $(COMPAT)/.installed

# Order-only on setup (the site folder is installed by the test environment's pip, for its
# Python): a pyproject change does not rebuild it; a changed pin here needs rm -r $(COMPAT).
$(COMPAT)/.installed: | $(BIN)/.installed
	rm -rf $(COMPAT) && mkdir -p $(COMPAT)
	$(PYTHON) -m venv $(COMPAT)/mcp1
	$(COMPAT)/mcp1/bin/python -m pip install --quiet $(COMPAT_MCP1)
	$(COMPAT)/mcp1/bin/python -m pip install --quiet --no-deps mcp-math==0.1.1
	$(BIN)/python -m pip install --quiet --no-deps --target $(COMPAT)/site $(COMPAT_SITE_PACKAGES)
	touch $@

# Programs the tests start themselves: redis-server (the cache tests run private servers)
# and chromium (the lab's HTML report is rendered headless). Debian's packages, installed
# only when missing; the package's own Redis service is stopped, the tests do not use it.
system-tools:
	@set -e; missing=""; \
	for tool in redis-server chromium valgrind; do \
		command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq; \
		$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		case "$$missing" in *redis-server*) \
			(command -v systemctl >/dev/null 2>&1 && $(SUDO) systemctl stop redis-server) || true;; \
		esac; \
	fi

# Every check, as CI runs it (.ci/run): lint, format, mypy --strict over src and tests, then
# the whole suite with branch coverage of src/millimcp (fail_under in pyproject.toml).
test: setup tools system-tools compat-servers lint typecheck
	MILLIMCP_REQUIRE_TOOLS=1 $(BIN)/python -m pytest -q --cov --cov-report=term

lint: setup
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: setup
	$(BIN)/mypy

check: test

# `make test` runs every millimcp HTTP server the tests start on the default front (native);
# this runs the HTTP integration tests, the conformance suite and the interop tests (the
# Inspector, the official SDK client) again on uvicorn, so both fronts go through them
# (MILLIMCP_HTTP_FRONT: tests/conftest.py). The hostile-input tests run on both in `make test`.
INTEROP := tests/integration/interop
FRONT_TESTS := tests/integration/http tests/integration/conformance/test_suite.py \
	$(INTEROP)/test_inspector.py $(INTEROP)/test_inspector_handshake.py \
	$(INTEROP)/test_official_sdk.py $(INTEROP)/test_handshake_official.py \
	$(INTEROP)/test_tensor_official.py tests/integration/auth tests/integration/tasks/test_tasks_http.py

test-fronts: setup tools
	MILLIMCP_HTTP_FRONT=uvicorn MILLIMCP_REQUIRE_TOOLS=1 $(BIN)/python -m pytest -q $(FRONT_TESTS)

# The hot path's instruction count (callgrind, deterministic) against the committed baseline:
# fails past +5%. About 90-140 s here (millimcp_jwt: the auth gate with a cached token; client:
# Client.over_http over an in-process loopback, ~25 s more), so a
# target of its own (CI runs it after make test).
perf: setup system-tools
	$(BIN)/python benchmarks/instructions.py --targets millimcp,millimcp_native,millimcp_jwt,millimcp_native_jwt,client --calls 400 \
		--check benchmarks/baselines/instructions.json

conformance: setup tools
	MILLIMCP_REQUIRE_TOOLS=1 $(BIN)/python -m pytest -q tests/integration/conformance

bench: setup
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/server_overhead.py --runs 3 --duration 5

# The case study (SEEDS S6): the order service naive vs tuned, measured on this machine
# (examples/orders/demo.py; `make demo DEMO_ARGS="--full"` for longer runs). Its setup needs
# only the demo and lab extras; a full `make setup` already has them.
demo: demo-setup
	$(BIN)/python examples/orders/demo.py $(DEMO_ARGS)

demo-setup: $(BIN)/.demo-installed

$(BIN)/.demo-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test $(BIN)/.installed -nt pyproject.toml || $(BIN)/python -m pip install --quiet -e '.[demo,lab]'
	touch $@

# Coverage-guided fuzzing (atheris) of the request decoder, the tensor framing and the SSE
# parser, FUZZ_SECONDS each; a crash is written to tests/fuzz/crashes/ (tests/fuzz/).
FUZZ_SECONDS ?= 30
fuzz: setup
	$(BIN)/python -m pip install --quiet -e '.[fuzz]'
	for target in request_decoder tensor_framing sse_parser; do \
		$(BIN)/python -m tests.fuzz.atheris_run $$target --seconds $(FUZZ_SECONDS) || exit 1; \
	done

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache
