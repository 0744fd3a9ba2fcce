// DELETE and UPDATE: sinks that hand the row ids of a scan (and, for UPDATE, the new rows) to
// the core, which writes delete files (merge-on-read) and new data files for the statement. With
// RETURNING they keep the rows they return: UPDATE the new ones, DELETE the old ones.
#pragma once

#include "skade/common.hpp"
#include "skade/write_operator.hpp"
#include "duckdb/execution/physical_plan_generator.hpp"
#include "duckdb/optimizer/optimizer_extension.hpp"
#include "duckdb/planner/operator/logical_merge_into.hpp"

namespace duckdb {

class SkadeTableEntry;

//! Appends the BIGINT row ids in `ids` (count rows) to `out`.
void SkadeCollectRowIds(Vector &ids, idx_t count, vector<int64_t> &out);

//! An UPDATE's SET list as the new value of every column, in table order (BindUpdateConstraints
//! made every column part of it, since an update deletes the old row and inserts the new one).
vector<unique_ptr<Expression>> SkadeUpdateInTableOrder(const vector<PhysicalIndex> &columns,
                                                       const vector<unique_ptr<Expression>> &expressions);

//! MERGE INTO (and INSERT ... ON CONFLICT / INSERT OR REPLACE, which DuckDB binds as MERGE INTO):
//! DuckDB's merge operator routes each source row to skade's insert, update or delete sink.
PhysicalOperator &SkadePlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner, LogicalMergeInto &op,
                                     PhysicalOperator &plan);

//! DELETE ... RETURNING (and a MERGE's DELETE on DuckDB 1.5) returns the old rows: an optimizer
//! rule has the statement's scan read every column of the table and pass them to the sink, after
//! the row id, in table order: as a DELETE's expressions after its row id, as a MERGE's input
//! columns after its row id (cpp/skade_returning.cpp). Without the optimizer they are missing.
OptimizerExtension SkadeReturningRule();

class SkadeDelete : public SkadeWriteOperator {
public:
	SkadeDelete(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table, idx_t row_id_index,
	            idx_t estimated_cardinality);

	SkadeTableEntry &table;
	idx_t row_id_index;
	//! RETURNING: the positions of the deleted rows' columns in the sink's chunks, in table order.
	vector<idx_t> returned_columns;
	//! RETURNING on DuckDB 2.0: its output has the table's virtual columns after the others; each
	//! one's input column (the row id's), or INVALID_INDEX (NULL).
	vector<idx_t> returned_virtual;
	//! Whether this sink ends the statement's writes (the last writing action of a MERGE).
	bool ends_statement = false;

	string GetName() const override {
		return "SKADE_DELETE";
	}
	unique_ptr<GlobalSinkState> GetGlobalSinkState(ClientContext &context) const override;
	unique_ptr<LocalSinkState> GetLocalSinkState(ExecutionContext &context) const override;
	SinkResultType Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const override;
	SinkCombineResultType Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const override;
	SinkFinalizeType Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
	                          OperatorSinkFinalizeInput &input) const override;

protected:
	idx_t RowsWritten(GlobalSinkState &state) const override;
};

class SkadeUpdate : public SkadeWriteOperator {
public:
	//! `expressions`: the new value of every column, in table order, over the child's chunk, whose
	//! column `row_id_index` is the row id.
	SkadeUpdate(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table,
	            vector<unique_ptr<Expression>> expressions, idx_t row_id_index, idx_t estimated_cardinality);

	SkadeTableEntry &table;
	vector<unique_ptr<Expression>> expressions;
	idx_t row_id_index;
	//! Whether this sink ends the statement's writes: it checks the new rows' primary keys once
	//! the old rows are deleted (false for all but the last writing action of a MERGE).
	bool ends_statement = true;

	string GetName() const override {
		return "SKADE_UPDATE";
	}
	unique_ptr<GlobalSinkState> GetGlobalSinkState(ClientContext &context) const override;
	unique_ptr<LocalSinkState> GetLocalSinkState(ExecutionContext &context) const override;
	SinkResultType Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const override;
	SinkCombineResultType Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const override;
	SinkFinalizeType Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
	                          OperatorSinkFinalizeInput &input) const override;

protected:
	idx_t RowsWritten(GlobalSinkState &state) const override;
};

} // namespace duckdb
