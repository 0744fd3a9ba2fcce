// The shape every skade write operator shares (INSERT, DELETE, UPDATE): a parallel sink that
// hands rows to the core, then a source: one row, the number of rows written, or with RETURNING
// the rows themselves (the table's columns; DuckDB's projection above computes the expressions).
#pragma once

#include "skade/common.hpp"
#include "duckdb/common/types/column/column_data_collection.hpp"
#include "duckdb/execution/physical_operator.hpp"

namespace duckdb {

//! What every write operator's sink state holds besides its own.
class SkadeWriteGlobalState : public GlobalSinkState {
public:
	//! RETURNING: the rows the statement wrote (INSERT, UPDATE: the new rows; DELETE: the old),
	//! returned once it ended, its keys checked (a failed statement returns nothing).
	unique_ptr<ColumnDataCollection> returned;

	//! Keeps `rows` (the table's columns) for RETURNING; safe from several threads.
	void Return(DataChunk &rows);

private:
	mutex returned_lock;
};

class SkadeWriteOperator : public PhysicalOperator {
public:
	SkadeWriteOperator(PhysicalPlan &plan, vector<LogicalType> types, idx_t estimated_cardinality)
	    : PhysicalOperator(plan, PhysicalOperatorType::EXTENSION, std::move(types), estimated_cardinality) {
	}

	//! RETURNING: the operator's types are the table's columns, and its source returns the rows
	//! written; otherwise one BIGINT, the count.
	bool returning = false;

	bool IsSink() const override {
		return true;
	}
	bool ParallelSink() const override {
		return true;
	}
	bool IsSource() const override {
		return true;
	}
	unique_ptr<GlobalSourceState> GetGlobalSourceState(ClientContext &context) const override;
	SourceResultType GetDataInternal(ExecutionContext &context, DataChunk &chunk,
	                                 OperatorSourceInput &input) const override;

protected:
	//! The rows the statement wrote, from the finished sink state.
	virtual idx_t RowsWritten(GlobalSinkState &state) const = 0;
	//! Prepares a new sink state to keep the returned rows (when there is RETURNING).
	void InitializeReturning(ClientContext &context, SkadeWriteGlobalState &state) const;
};

} // namespace duckdb
