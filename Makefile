# skade: `make` builds the extension and runs a demo query; `make test` runs every test.
#
# The extension is built for every DuckDB in DUCKDB_VERSIONS (`make DUCKDB_VERSIONS=2.0.1` builds
# one): build/release/v<version>/skade.duckdb_extension, and a local extension repository
# build/repository/ for `INSTALL skade FROM`. Each version's DuckDB library is compiled from
# source once into $(SKADE_CACHE)/duckdb/<version> (docs/design/build.md has the times), and
# cargo's target directory lives there too, so rebuilds (and CI runs after the first) are
# incremental.
SKADE_CACHE ?= $(HOME)/.cache/skade
CARGO_TARGET_DIR ?= $(SKADE_CACHE)/target
export SKADE_CACHE CARGO_TARGET_DIR
SUPPORTED_VERSIONS := 1.5.5 2.0.1
DUCKDB_VERSIONS ?= $(SUPPORTED_VERSIONS)
# (the tests read it: a version not built is skipped, a version built must be current)
export DUCKDB_VERSIONS
ifneq ($(filter-out $(SUPPORTED_VERSIONS),$(DUCKDB_VERSIONS)),)
$(error DUCKDB_VERSIONS: skade builds for DuckDB $(SUPPORTED_VERSIONS), not $(filter-out $(SUPPORTED_VERSIONS),$(DUCKDB_VERSIONS)))
endif

CORE := $(CARGO_TARGET_DIR)/release/libskade.a
# Test hosts and peers come from PyPI, one virtualenv per DuckDB version: build/venv (DuckDB
# 1.5.5, its CLI and the peer extensions; it also runs the build scripts) and build/venv-2.0.1.
# CMake and Ninja live in $(SKADE_CACHE)/build-tools (tools/build_duckdb.py).
VENV := build/venv
PYTHON := $(VENV)/bin/python
# DuckDB 1.5.5's CLI: the binary duckdb-cli ships in the venv's site-packages, linked here (the
# package's `bin/duckdb` is a Python wrapper around it, which a Ctrl-C ends with the session).
DUCKDB := build/duckdb
HOST_1.5.5 := $(VENV)
HOST_2.0.1 := build/venv-2.0.1
HOSTS := $(foreach v,$(DUCKDB_VERSIONS),$(HOST_$(v))/.installed)

.PHONY: all extension demo test test-layers test-rust test-sql test-python bench clean \
	$(foreach v,$(DUCKDB_VERSIONS),demo-$(v) test-sql-$(v) test-python-$(v))

all: demo

extension: $(VENV)/.installed $(DUCKDB)
	cargo build --release --lib
	@for v in $(DUCKDB_VERSIONS); do $(PYTHON) tools/build_extension.py $$v $(CORE) || exit 1; done

$(VENV)/.installed: tools/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

$(DUCKDB): $(VENV)/.installed
	ln -sfn "$$($(PYTHON) -c 'import duckdb_cli, os; print(os.path.relpath(os.path.join(os.path.dirname(duckdb_cli.__file__), "duckdb"), "build"))')" $@

$(HOST_2.0.1)/.installed: tools/requirements-2.0.1.txt
	python3 -m venv $(HOST_2.0.1)
	$(HOST_2.0.1)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-2.0.1.txt
	touch $@

# Per DuckDB version: the demo, the SQL tests and the Python tests in that version's host.
# DuckDB 1.5.5 runs the demo in its CLI; 2.0.1 has no CLI on PyPI, so Python runs the same file.
define PER_VERSION
demo-$(1): extension $(HOST_$(1))/.installed
	@echo "== the demo on DuckDB $(1)"
	rm -rf build/demo/v$(1) && mkdir -p build/demo/v$(1)
	cd build/demo/v$(1) && $(if $(filter 1.5.5,$(1)),$(CURDIR)/$(DUCKDB) -unsigned -bail < $(CURDIR)/tools/demo.sql,$(CURDIR)/$(HOST_$(1))/bin/python $(CURDIR)/tools/demo.py $(CURDIR)/tools/demo.sql)

test-sql-$(1): extension $(HOST_$(1))/.installed
	@echo "== sqllogictest on DuckDB $(1)"
	$(HOST_$(1))/bin/python tools/sqllogictest.py sql_tests
	@echo "== sqllogictest on DuckDB $(1), every catalog through a commit log"
	$(HOST_$(1))/bin/python tools/sqllogictest.py --config sql_tests/configs/commit_log.json sql_tests
	@echo "== sqllogictest on DuckDB $(1), every catalog's warehouse in a bucket of the local S3 server"
	$(HOST_$(1))/bin/python tools/sqllogictest.py --config sql_tests/configs/bucket_data.json sql_tests
	@echo "== sqllogictest on DuckDB $(1), every catalog a lake in a bucket of the local S3 server"
	$(HOST_$(1))/bin/python tools/sqllogictest.py --config sql_tests/configs/bucket.json sql_tests

test-python-$(1): extension $(HOST_$(1))/.installed
	@echo "== pytest on DuckDB $(1)"
	$(HOST_$(1))/bin/python -m pytest -q tests
endef
$(foreach v,$(DUCKDB_VERSIONS),$(eval $(call PER_VERSION,$(v))))

demo: $(addprefix demo-,$(DUCKDB_VERSIONS))

test: extension $(HOSTS) test-layers test-rust test-sql test-python

# A module may use only the modules below it, and no two files may use each other.
test-layers:
	python3 tools/check_layers.py

test-rust:
	cargo test --release

test-sql: $(addprefix test-sql-,$(DUCKDB_VERSIONS))

test-python: $(addprefix test-python-,$(DUCKDB_VERSIONS))

bench: extension $(VENV)/.installed
	$(PYTHON) bench/bench.py
	$(PYTHON) bench/commits.py
	$(PYTHON) bench/small_commits.py
	$(PYTHON) bench/lookup.py
	$(PYTHON) bench/scans.py
	$(PYTHON) bench/consume.py
	$(PYTHON) bench/lineage.py
	$(PYTHON) bench/processes.py
	$(PYTHON) bench/v3.py
	$(PYTHON) bench/buckets.py
	$(PYTHON) bench/rest.py
	cargo run --release --example core_commits
	cargo run --release --example core_lookup

clean:
	rm -rf build
