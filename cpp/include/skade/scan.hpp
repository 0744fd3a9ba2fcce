// Table scans: one planned core scan per query, one Arrow stream per data file.
#pragma once

#include "skade/common.hpp"
#include "duckdb/function/table_function.hpp"

namespace duckdb {

class SkadeTableEntry;

struct SkadeScanBindData : public TableFunctionData {
	explicit SkadeScanBindData(SkadeTableEntry &table) : table(table) {
	}
	SkadeTableEntry &table;
};

//! The scan function behind `FROM lake.t`.
TableFunction SkadeScanFunction();

} // namespace duckdb
