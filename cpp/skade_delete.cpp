// DELETE: collects the row ids the scan produced and hands them to the core once, at the end of
// the statement, so a statement writes one delete file. RETURNING returns the old rows, whose
// columns the scan read too (SkadeReturningRule), each row once however often the statement
// reached it (DELETE ... USING with several matches), as DuckDB does.
#include "skade/modify.hpp"

#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

namespace {

class DeleteGlobalState : public SkadeWriteGlobalState {
public:
	mutex lock;
	vector<int64_t> row_ids;
	uint64_t deleted = 0;
	//! RETURNING: the rows returned so far.
	unordered_set<int64_t> returned_ids;
};

class DeleteLocalState : public LocalSinkState {
public:
	vector<int64_t> row_ids;
};

} // namespace

void SkadeCollectRowIds(Vector &ids, idx_t count, vector<int64_t> &out) {
	UnifiedVectorFormat format;
	ids.ToUnifiedFormat(count, format);
	auto data = UnifiedVectorFormat::GetData<int64_t>(format);
	for (idx_t i = 0; i < count; i++) {
		out.push_back(data[format.sel->get_index(i)]);
	}
}

SkadeDelete::SkadeDelete(PhysicalPlan &plan, vector<LogicalType> types, SkadeTableEntry &table, idx_t row_id_index,
                         idx_t estimated_cardinality)
    : SkadeWriteOperator(plan, std::move(types), estimated_cardinality), table(table), row_id_index(row_id_index) {
}

unique_ptr<GlobalSinkState> SkadeDelete::GetGlobalSinkState(ClientContext &context) const {
	auto state = make_uniq<DeleteGlobalState>();
	InitializeReturning(context, *state);
	return std::move(state);
}

unique_ptr<LocalSinkState> SkadeDelete::GetLocalSinkState(ExecutionContext &context) const {
	return make_uniq<DeleteLocalState>();
}

SinkResultType SkadeDelete::Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const {
	auto &local = input.local_state.Cast<DeleteLocalState>();
	auto first = local.row_ids.size();
	SkadeCollectRowIds(chunk.data[row_id_index], chunk.size(), local.row_ids);
	if (returning) {
		auto &global = input.global_state.Cast<DeleteGlobalState>();
		SelectionVector keep(chunk.size());
		idx_t kept = 0;
		{
			lock_guard<mutex> guard(global.lock);
			for (idx_t i = 0; i < chunk.size(); i++) {
				if (global.returned_ids.insert(local.row_ids[first + i]).second) {
					keep.set_index(kept++, i);
				}
			}
		}
		DataChunk old_rows;
		old_rows.InitializeEmpty(types);
#if SKADE_DUCKDB_MAJOR >= 2
		for (idx_t c = 0; c < types.size(); c++) {
			auto source = c < returned_columns.size() ? returned_columns[c] : returned_virtual[c - returned_columns.size()];
			if (source == DConstants::INVALID_INDEX) {
				SkadeReferenceConstant(old_rows.data[c], Value(types[c]), chunk.size());
			} else {
				old_rows.data[c].Reference(chunk.data[source]);
			}
		}
		old_rows.SetCardinalityUnsafe(chunk.size());
#else
		old_rows.ReferenceColumns(chunk, returned_columns);
#endif
		if (kept < chunk.size()) {
			old_rows.Slice(keep, kept);
		}
		global.Return(old_rows);
	}
	return SinkResultType::NEED_MORE_INPUT;
}

SinkCombineResultType SkadeDelete::Combine(ExecutionContext &context, OperatorSinkCombineInput &input) const {
	auto &global = input.global_state.Cast<DeleteGlobalState>();
	auto &local = input.local_state.Cast<DeleteLocalState>();
	lock_guard<mutex> guard(global.lock);
	global.row_ids.insert(global.row_ids.end(), local.row_ids.begin(), local.row_ids.end());
	return SinkCombineResultType::FINISHED;
}

SinkFinalizeType SkadeDelete::Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
                                       OperatorSinkFinalizeInput &input) const {
	auto &global = input.global_state.Cast<DeleteGlobalState>();
	auto &txn = SkadeTransaction::Get(context, table.ParentCatalog());
	SkadeCheck(skade_txn_delete_rows(txn.Handle(), table.Uuid().c_str(), global.row_ids.data(),
	                                 global.row_ids.size(), &global.deleted));
	if (ends_statement) {
		SkadeCheck(skade_txn_end_statement(txn.Handle(), table.Uuid().c_str()));
	}
	return SinkFinalizeType::READY;
}

idx_t SkadeDelete::RowsWritten(GlobalSinkState &state) const {
	return state.Cast<DeleteGlobalState>().deleted;
}

} // namespace duckdb
