// UPDATE as delete + insert (merge-on-read): each sink thread evaluates the new rows and streams
// them into its own data files (on an Iceberg v3 table each with the `_row_id` of the row it
// replaces); the old rows' ids are deleted once, at the end of the statement. RETURNING returns
// the new rows.
#include "skade/modify.hpp"

#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/storage/buffer_manager.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/execution/expression_executor.hpp"

namespace duckdb {

namespace {

class UpdateGlobalState : public SkadeWriteGlobalState {
public:
	mutex lock;
	vector<int64_t> row_ids;
	unordered_set<int64_t> seen;
	uint64_t updated = 0;
	ArrowSchemaWrapper schema;
	ClientProperties props;
	optional_ptr<SkadeTransaction> transaction;
};

class UpdateLocalState : public LocalSinkState {
public:
	UpdateLocalState(ClientContext &context, const vector<unique_ptr<Expression>> &expressions,
	                 const vector<LogicalType> &types)
	    : executor(context, expressions) {
		rows.Initialize(context, types);
	}
	ExpressionExecutor executor;
	DataChunk rows;
	vector<int64_t> row_ids;
	SkadeWriterHandle writer;
};

vector<LogicalType> ColumnTypes(SkadeTableEntry &table) {
	vector<LogicalType> types;
	for (auto &col : table.GetColumns().Physical()) {
		types.push_back(col.Type());
	}
	return types;
}

} // namespace

vector<unique_ptr<Expression>> SkadeUpdateInTableOrder(const vector<PhysicalIndex> &columns,
                                                       const vector<unique_ptr<Expression>> &expressions) {
	vector<unique_ptr<Expression>> result(columns.size());
	for (idx_t i = 0; i < columns.size(); i++) {
		auto column = columns[i].index;
		if (column >= result.size() || result[column]) {
			throw NotImplementedException("this UPDATE form is not supported on skade tables");
		}
		if (expressions[i]->GetExpressionType() == ExpressionType::VALUE_DEFAULT) {
			throw NotImplementedException("UPDATE ... SET col = DEFAULT is not supported on skade tables");
		}
		result[column] = expressions[i]->Copy();
	}
	return result;
}

SkadeUpdate::SkadeUpdate(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table,
                         vector<unique_ptr<Expression>> expressions, idx_t row_id_index,
                         idx_t estimated_cardinality)
    : SkadeWriteOperator(plan, std::move(types), estimated_cardinality), table(table),
      expressions(std::move(expressions)), row_id_index(row_id_index) {
}

unique_ptr<GlobalSinkState> SkadeUpdate::GetGlobalSinkState(ClientContext &context) const {
	auto state = make_uniq<UpdateGlobalState>();
	state->transaction = &SkadeTransaction::Get(context, table.ParentCatalog());
	vector<string> names;
	for (auto &col : table.GetColumns().Physical()) {
		names.push_back(SkadeNameString(col.Name()));
	}
	state->props = SkadeArrowProperties(context);
	ArrowConverter::ToArrowSchema(&state->schema.arrow_schema, ColumnTypes(table), names, state->props);
	InitializeReturning(context, *state);
	return std::move(state);
}

unique_ptr<LocalSinkState> SkadeUpdate::GetLocalSinkState(ExecutionContext &context) const {
	return make_uniq<UpdateLocalState>(context.client, expressions, ColumnTypes(table));
}

SinkResultType SkadeUpdate::Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const {
	auto &global = input.global_state.Cast<UpdateGlobalState>();
	auto &local = input.local_state.Cast<UpdateLocalState>();
	local.rows.Reset();
	local.executor.Execute(chunk, local.rows);
	// A row the statement reaches twice (UPDATE ... FROM with several matches) is updated once,
	// by its first match, as DuckDB does.
	auto first = local.row_ids.size();
	SkadeCollectRowIds(chunk.data[row_id_index], chunk.size(), local.row_ids);
	SelectionVector keep(chunk.size());
	idx_t kept = 0;
	{
		lock_guard<mutex> guard(global.lock);
		for (idx_t i = 0; i < chunk.size(); i++) {
			if (global.seen.insert(local.row_ids[first + i]).second) {
				keep.set_index(kept++, i);
			}
		}
	}
	if (kept < chunk.size()) {
		idx_t out = first;
		for (idx_t i = 0; i < kept; i++) {
			local.row_ids[out++] = local.row_ids[first + keep.get_index(i)];
		}
		local.row_ids.resize(out);
		local.rows.Slice(keep, kept);
		if (kept == 0) {
			return SinkResultType::NEED_MORE_INPUT;
		}
	}
	if (!local.writer) {
		SkadeCheck(skade_writer_open(global.transaction->Handle(), table.Uuid().c_str(),
		                            BufferManager::GetBufferManager(context.client).GetMaxMemory(), true,
		                            local.writer.out()));
	}
	if (returning) {
		global.Return(local.rows);
	}
	ArrowArray array;
	unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
	ArrowConverter::ToArrowArray(local.rows, &array, global.props, no_extensions);
	// (each new row keeps the Iceberg row id of the row it replaces, on a v3 table)
	auto status = skade_writer_write_carried(local.writer.get(), &array, &global.schema.arrow_schema,
	                                         local.row_ids.data() + first, kept);
	if (array.release) {
		array.release(&array);
	}
	SkadeCheck(status);
	return SinkResultType::NEED_MORE_INPUT;
}

SinkCombineResultType SkadeUpdate::Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const {
	auto &global = input.global_state.Cast<UpdateGlobalState>();
	auto &local = input.local_state.Cast<UpdateLocalState>();
	uint64_t rows = 0;
	if (local.writer) {
		SkadeCheck(skade_writer_finish(local.writer.get(), &rows));
		local.writer.reset();
	}
	lock_guard<mutex> guard(global.lock);
	global.row_ids.insert(global.row_ids.end(), local.row_ids.begin(), local.row_ids.end());
	global.updated += rows;
	return SinkCombineResultType::FINISHED;
}

SinkFinalizeType SkadeUpdate::Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
                                       OperatorSinkFinalizeInput &input) const {
	auto &global = input.global_state.Cast<UpdateGlobalState>();
	uint64_t deleted = 0;
	SkadeCheck(skade_txn_delete_rows(global.transaction->Handle(), table.Uuid().c_str(), global.row_ids.data(),
	                                 global.row_ids.size(), &deleted));
	if (ends_statement) {
		SkadeCheck(skade_txn_end_statement(global.transaction->Handle(), table.Uuid().c_str()));
	}
	return SinkFinalizeType::READY;
}

idx_t SkadeUpdate::RowsWritten(GlobalSinkState &state) const {
	return state.Cast<UpdateGlobalState>().updated;
}

} // namespace duckdb
