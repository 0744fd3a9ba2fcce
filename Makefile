# skade: `make` builds the extension and runs a demo query; `make test` runs every test.
#
# Cargo's target directory lives outside the clone so that rebuilds (and CI runs after the
# first) are incremental: compiling DuckDB from source takes ~15 minutes on 2 cores.
CARGO_TARGET_DIR ?= $(HOME)/.cache/skade/target
export CARGO_TARGET_DIR

EXTENSION := build/release/skade.duckdb_extension
VENV := build/venv
PYTHON := $(VENV)/bin/python
DUCKDB := $(VENV)/bin/duckdb
# Test hosts and peers come from PyPI, installed into a project-local virtualenv.
VENV_STAMP := $(VENV)/.installed

.PHONY: all extension demo test test-layers test-rust test-sql test-python bench clean

all: demo

extension:
	cargo build --release
	python3 extension/append_metadata.py --strip $(CARGO_TARGET_DIR)/release/libskade.so $(EXTENSION)

$(VENV_STAMP): tools/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

demo: extension $(VENV_STAMP)
	rm -rf build/demo && mkdir -p build/demo
	$(DUCKDB) -unsigned < tools/demo.sql

test: extension $(VENV_STAMP) test-layers test-rust test-sql test-python

# A module may use only the modules below it, and no two files may use each other.
test-layers:
	python3 tools/check_layers.py

test-rust:
	cargo test --release --no-default-features

test-sql: extension $(VENV_STAMP)
	$(PYTHON) tools/sqllogictest.py sql_tests

test-python: extension $(VENV_STAMP)
	$(PYTHON) -m pytest -q tests

bench: extension $(VENV_STAMP)
	$(PYTHON) bench/bench.py
	$(PYTHON) bench/commits.py
	$(PYTHON) bench/small_commits.py
	$(PYTHON) bench/lookup.py
	cargo run --release --no-default-features --example core_commits
	cargo run --release --no-default-features --example core_lookup

clean:
	rm -rf build
