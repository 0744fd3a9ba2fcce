// INSERT / CREATE TABLE AS: each sink thread owns a core writer that streams its DataChunks (as
// Arrow) into Parquet data files; Combine hands the files to the statement, Finalize ends it (the
// core checks the primary key) and the transaction commits them as one snapshot.
#include "skade/insert.hpp"

#include "skade/schema_entry.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/storage/buffer_manager.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"

namespace duckdb {

namespace {

class InsertGlobalState : public GlobalSinkState {
public:
	optional_ptr<SkadeTableEntry> table;
	optional_ptr<SkadeTransaction> transaction;
	ArrowSchemaWrapper schema;
	ClientProperties props;
	atomic<idx_t> rows {0};
};

class InsertLocalState : public LocalSinkState {
public:
	SkadeWriterHandle writer;
};

} // namespace

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
	}
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
		SkadeCheck(skade_writer_open(global.transaction->Handle(), global.table->Uuid().c_str(),
		                            BufferManager::GetBufferManager(context.client).GetMaxMemory(), local.writer.out()));
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
	if (global.table && ends_statement) {
		SkadeCheck(skade_txn_end_statement(global.transaction->Handle(), global.table->Uuid().c_str()));
	}
	return SinkFinalizeType::READY;
}

idx_t SkadeInsert::RowsWritten(GlobalSinkState &state) const {
	return state.Cast<InsertGlobalState>().rows.load();
}

} // namespace duckdb
