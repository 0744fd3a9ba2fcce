// DuckDB's pushed-down table filters, in two forms: a description for the core's pruning (JSON
// whose constants travel as a one-row Arrow struct), and one expression that applies them all
// exactly to the rows the core returns (pruning is only ever conservative).
#pragma once

#include "skade/common.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/planner/expression.hpp"
#include "duckdb/planner/table_filter.hpp"

namespace duckdb {

struct SkadeFilterDescription {
	//! "" when no filter has a pruning form.
	string json;
	ArrowArrayWrapper constants;
	ArrowSchemaWrapper constants_schema;
	bool has_constants = false;

	ArrowArray *Constants() {
		return has_constants ? &constants.arrow_array : nullptr;
	}
	ArrowSchema *ConstantsSchema() {
		return has_constants ? &constants_schema.arrow_schema : nullptr;
	}
};

//! Describes `filters` (keyed by position in `column_ids`) over the columns `column_ids` name;
//! filters on virtual columns are left to the exact evaluation.
void SkadeDescribeFilters(ClientContext &context, const TableFilterSet &filters, const vector<column_t> &column_ids,
                          SkadeFilterDescription &out);

//! One expression evaluating every filter over a chunk whose column i has type `types[i]` (the
//! scanned columns, in column_ids order); null when there are no filters.
unique_ptr<Expression> SkadeFilterExpression(const TableFilterSet &filters, const vector<LogicalType> &types);

} // namespace duckdb
