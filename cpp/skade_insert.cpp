// INSERT / CREATE TABLE AS: each sink thread owns a core writer that streams its DataChunks (as
// Arrow) into Parquet data files; Combine hands the files to the statement, Finalize ends it (the
// core checks the primary key) and the transaction commits them as one snapshot. A statement that
// keeps its query's order tells the core the batch index of each thread's rows (SkadeInsertOrder).
#include "skade/insert.hpp"

#include "skade/schema_entry.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/execution/physical_plan_generator.hpp"
#include "duckdb/storage/buffer_manager.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"

namespace duckdb {

namespace {

class InsertGlobalState : public SkadeWriteGlobalState {
public:
	optional_ptr<SkadeTableEntry> table;
	optional_ptr<SkadeTransaction> transaction;
	ArrowSchemaWrapper schema;
	ClientProperties props;
	atomic<idx_t> rows {0};
	//! SkadeInsertOrder::BATCHES: the statement's ordered write, shared by the threads' writers.
	SkadeOrderedWriteHandle ordered;
	idx_t memory_limit = 0;
};

class InsertLocalState : public LocalSinkState {
public:
	SkadeWriterHandle writer;
	//! The batch the core was told the writer's rows belong to (BATCHES).
	optional_idx batch;
};

//! Tells the core the batch this thread's next rows belong to (and which batches have ended).
void StartBatch(InsertLocalState &local) {
	auto &partition = local.partition_info;
	auto batch = partition.batch_index.GetIndex();
	if (local.batch.IsValid() && local.batch.GetIndex() == batch) {
		return;
	}
	auto min_batch = partition.min_batch_index.IsValid() ? partition.min_batch_index.GetIndex() : 0;
	SkadeCheck(skade_writer_start_batch(local.writer.get(), batch, min_batch));
	local.batch = batch;
}

} // namespace

SkadeInsertOrder SkadeInsert::OrderFor(ClientContext &context, PhysicalOperator &plan, bool keeps_arrival_order,
                                       bool returning) {
	if (returning) {
		// (as DuckDB's own INSERT ... RETURNING: one thread, the rows returned in the query's order)
		return SkadeInsertOrder::ONE_THREAD;
	}
	if (!keeps_arrival_order || !PhysicalPlanGenerator::PreserveInsertionOrder(context, plan)) {
		return SkadeInsertOrder::ANY;
	}
	return PhysicalPlanGenerator::UseBatchIndex(context, plan) ? SkadeInsertOrder::BATCHES
	                                                           : SkadeInsertOrder::ONE_THREAD;
}

SkadeInsert::SkadeInsert(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table,
                         idx_t estimated_cardinality)
    : SkadeWriteOperator(plan, std::move(types), estimated_cardinality), table(&table) {
}

SkadeInsert::SkadeInsert(PhysicalPlan &plan, vector<LogicalType> types, SkadeSchemaEntry &schema,
                         unique_ptr<BoundCreateTableInfo> info, idx_t estimated_cardinality)
    : SkadeWriteOperator(plan, std::move(types), estimated_cardinality), schema(&schema), info(std::move(info)) {
}

unique_ptr<GlobalSinkState> SkadeInsert::GetGlobalSinkState(ClientContext &context) const {
	auto state = make_uniq<InsertGlobalState>();
	state->table = table;
	if (!table) {
		// CREATE TABLE AS creates the table when it runs, not when it is planned.
		auto &catalog = schema->ParentCatalog();
		auto created = schema->CreateTable(catalog.GetCatalogTransaction(context), *info);
		state->table = created ? &created->Cast<SkadeTableEntry>() : nullptr;
	}
	if (state->table) {
		state->transaction = &SkadeTransaction::Get(context, state->table->ParentCatalog());
		// Describe the chunks as they arrive (the core conforms them to the table's types).
		vector<string> names;
		for (auto &col : state->table->GetColumns().Physical()) {
			names.push_back(SkadeNameString(col.Name()));
		}
		auto &types = input_types;
		if (types.size() != names.size()) {
			throw InvalidInputException("skade insert: %d columns for a table of %d", types.size(), names.size());
		}
		state->props = SkadeArrowProperties(context);
		ArrowConverter::ToArrowSchema(&state->schema.arrow_schema, types, names, state->props);
		state->memory_limit = BufferManager::GetBufferManager(context).GetMaxMemory();
		if (order == SkadeInsertOrder::BATCHES) {
			SkadeCheck(skade_ordered_write_open(state->transaction->Handle(), state->table->Uuid().c_str(),
			                                    state->memory_limit, state->ordered.out()));
		}
	}
	InitializeReturning(context, *state);
	return std::move(state);
}

unique_ptr<LocalSinkState> SkadeInsert::GetLocalSinkState(ExecutionContext &context) const {
	return make_uniq<InsertLocalState>();
}

SinkResultType SkadeInsert::Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const {
	auto &global = input.global_state.Cast<InsertGlobalState>();
	auto &local = input.local_state.Cast<InsertLocalState>();
	if (!global.table) {
		return SinkResultType::FINISHED; // CREATE TABLE IF NOT EXISTS ... AS on an existing table
	}
	if (!local.writer) {
		if (global.ordered) {
			SkadeCheck(skade_ordered_write_writer(global.ordered.get(), local.writer.out()));
		} else {
			SkadeCheck(skade_writer_open(global.transaction->Handle(), global.table->Uuid().c_str(),
			                            global.memory_limit, false, local.writer.out()));
		}
	}
	if (global.ordered) {
		StartBatch(local);
	}
	if (returning) {
		global.Return(chunk);
	}
	ArrowArray array;
	unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
	ArrowConverter::ToArrowArray(chunk, &array, global.props, no_extensions);
	auto status = skade_writer_write(local.writer.get(), &array, &global.schema.arrow_schema);
	if (array.release) {
		array.release(&array);
	}
	SkadeCheck(status);
	return SinkResultType::NEED_MORE_INPUT;
}

SinkNextBatchType SkadeInsert::NextBatch(ExecutionContext &context, OperatorSinkNextBatchInput &input) const {
	// The thread's previous batch has ended: the core takes it before DuckDB's minimum batch index
	// moves past it (a thread that wrote nothing yet has nothing to hand over).
	auto &local = input.local_state.Cast<InsertLocalState>();
	if (input.global_state.Cast<InsertGlobalState>().ordered && local.writer) {
		StartBatch(local);
	}
	return SinkNextBatchType::READY;
}

SinkCombineResultType SkadeInsert::Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const {
	auto &global = input.global_state.Cast<InsertGlobalState>();
	auto &local = input.local_state.Cast<InsertLocalState>();
	if (local.writer) {
		uint64_t rows = 0;
		SkadeCheck(skade_writer_finish(local.writer.get(), &rows));
		local.writer.reset();
		global.rows += rows;
	}
	return SinkCombineResultType::FINISHED;
}

SinkFinalizeType SkadeInsert::Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
                                       OperatorSinkFinalizeInput &input) const {
	auto &global = input.global_state.Cast<InsertGlobalState>();
	if (global.ordered) {
		SkadeCheck(skade_ordered_write_finish(global.ordered.get()));
	}
	if (global.table && ends_statement) {
		SkadeCheck(skade_txn_end_statement(global.transaction->Handle(), global.table->Uuid().c_str()));
	}
	return SinkFinalizeType::READY;
}

idx_t SkadeInsert::RowsWritten(GlobalSinkState &state) const {
	return state.Cast<InsertGlobalState>().rows.load();
}

} // namespace duckdb
