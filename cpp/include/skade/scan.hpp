// Table scans: one planned core scan per query, one Arrow stream per data file.
#pragma once

#include "skade/common.hpp"
#include "duckdb/function/table_function.hpp"
#include "duckdb/storage/statistics/base_statistics.hpp"

namespace duckdb {

class SkadeTableEntry;

struct SkadeScanBindData : public TableFunctionData {
	explicit SkadeScanBindData(SkadeTableEntry &table) : table(table) {
	}
	SkadeTableEntry &table;
	//! Set by an AT clause: the table pinned to an older version.
	SkadeTableHandle at;
	//! The AT clause as written ("VERSION 3"), empty for the current version: two scans of one
	//! table are the same plan only if these match (DuckDB merges identical subplans).
	string at_clause;

	//! The table at the version this scan reads.
	skade_table *Version() const;

	//! A plan reading a pinned version is bound at every run: the pinned entry it points at is
	//! the transaction's (SkadeTransaction::Pin), and AT TIMESTAMP names a new one per statement.
	bool SupportStatementCache() const override {
		return !at;
	}

	//! Per table column, DuckDB statistics from the core's (the bounds and NULL counts of the
	//! version's data files), and the most rows the scan can return: loaded when the optimizer
	//! first asks (DuckDB trusts both: a sum it bounds by them runs in 64 bits).
	mutable mutex statistics_lock;
	mutable bool statistics_loaded = false;
	mutable vector<unique_ptr<BaseStatistics>> statistics;
	mutable uint64_t max_rows = 0;
};

//! The scan function behind `FROM lake.t`.
TableFunction SkadeScanFunction();

} // namespace duckdb
