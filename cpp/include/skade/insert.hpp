// INSERT and CREATE TABLE AS: a parallel sink that streams DataChunks (as Arrow) into the core.
#pragma once

#include "skade/common.hpp"
#include "skade/write_operator.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

class SkadeTableEntry;
class SkadeSchemaEntry;

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

	string GetName() const override {
		return "SKADE_INSERT";
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
