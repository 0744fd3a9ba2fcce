// The shape every skade write operator shares (INSERT, DELETE, UPDATE): a parallel sink that
// hands rows to the core, then a source of one row, the number of rows written.
#pragma once

#include "skade/common.hpp"
#include "duckdb/execution/physical_operator.hpp"

namespace duckdb {

class SkadeWriteOperator : public PhysicalOperator {
public:
	SkadeWriteOperator(PhysicalPlan &plan, vector<LogicalType> types, idx_t estimated_cardinality)
	    : PhysicalOperator(plan, PhysicalOperatorType::EXTENSION, std::move(types), estimated_cardinality) {
	}

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
};

} // namespace duckdb
