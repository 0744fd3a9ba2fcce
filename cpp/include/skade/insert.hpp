// INSERT and CREATE TABLE AS: a parallel sink that streams DataChunks (as Arrow) into the core.
#pragma once

#include "skade/common.hpp"
#include "skade/write_operator.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

class SkadeTableEntry;
class SkadeSchemaEntry;

//! How an INSERT's threads write, decided at planning as DuckDB decides for its own tables.
enum class SkadeInsertOrder : uint8_t {
	//! Any order: every thread writes files of its own (no order to keep, or the table's sort
	//! order, primary key or partitioning reorders the rows anyway).
	ANY,
	//! The query's order, in parallel: each thread is told the batch index of its rows, and the
	//! statement's files are staged in batch order (see write::ordered).
	BATCHES,
	//! The query's order from a source without batch indexes (or RETURNING): one thread writes.
	ONE_THREAD,
};

class SkadeInsert : public SkadeWriteOperator {
public:
	//! INSERT INTO an existing table.
	SkadeInsert(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table, idx_t estimated_cardinality);
	//! CREATE TABLE AS: the table is created when the statement runs.
	SkadeInsert(PhysicalPlan &plan, vector<LogicalType> types, SkadeSchemaEntry &schema,
	            unique_ptr<BoundCreateTableInfo> info, idx_t estimated_cardinality);

	//! Exactly one of these is set.
	SkadeTableEntry *table = nullptr;
	SkadeSchemaEntry *schema = nullptr;
	unique_ptr<BoundCreateTableInfo> info;
	//! The types of the chunks this sink receives (the table's columns, in order).
	vector<LogicalType> input_types;
	//! Whether this sink ends the statement's writes (see skade_txn_end_statement): false for all
	//! but the last writing action of a MERGE.
	bool ends_statement = true;
	SkadeInsertOrder order = SkadeInsertOrder::ANY;

	//! The order an INSERT (or CREATE TABLE AS) reading `plan` writes in, as DuckDB's own tables
	//! would keep it (`keeps_arrival_order`: the table holds rows as written).
	static SkadeInsertOrder OrderFor(ClientContext &context, PhysicalOperator &plan, bool keeps_arrival_order,
	                                 bool returning);

	string GetName() const override {
		return "SKADE_INSERT";
	}

	bool ParallelSink() const override {
		return order != SkadeInsertOrder::ONE_THREAD;
	}
	bool SinkOrderDependent() const override {
		return order != SkadeInsertOrder::ANY;
	}
	OperatorPartitionInfo RequiredPartitionInfo() const override {
		return order == SkadeInsertOrder::BATCHES ? OperatorPartitionInfo::BatchIndex()
		                                          : OperatorPartitionInfo::NoPartitionInfo();
	}

	unique_ptr<GlobalSinkState> GetGlobalSinkState(ClientContext &context) const override;
	unique_ptr<LocalSinkState> GetLocalSinkState(ExecutionContext &context) const override;
	SinkResultType Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const override;
	SinkNextBatchType NextBatch(ExecutionContext &context, OperatorSinkNextBatchInput &input) const override;
	SinkCombineResultType Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const override;
	SinkFinalizeType Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
	                          OperatorSinkFinalizeInput &input) const override;

protected:
	idx_t RowsWritten(GlobalSinkState &state) const override;
};

} // namespace duckdb
