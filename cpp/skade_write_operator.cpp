// What INSERT, DELETE and UPDATE return once their sink finished: one row, the count, or with
// RETURNING the rows they wrote. The source runs only after every sink finalized (the statement
// ended and its keys were checked), so a failed statement returns no row, as DuckDB's own tables.
#include "skade/write_operator.hpp"

namespace duckdb {

namespace {

class WriteSourceState : public GlobalSourceState {
public:
	ColumnDataScanState scan;
};

} // namespace

void SkadeWriteGlobalState::Return(DataChunk &rows) {
	if (rows.size() == 0) {
		return;
	}
	if (rows.GetTypes() != returned->Types()) {
		throw InternalException("skade: the rows RETURNING returns do not have the table's column types");
	}
	lock_guard<mutex> guard(returned_lock);
	returned->Append(rows);
}

void SkadeWriteOperator::InitializeReturning(ClientContext &context, SkadeWriteGlobalState &state) const {
	if (returning) {
		state.returned = make_uniq<ColumnDataCollection>(context, types);
	}
}

unique_ptr<GlobalSourceState> SkadeWriteOperator::GetGlobalSourceState(ClientContext &context) const {
	auto state = make_uniq<WriteSourceState>();
	if (returning) {
		// (a MERGE hands each action's sink state to the action before reading its rows)
		sink_state->Cast<SkadeWriteGlobalState>().returned->InitializeScan(state->scan);
	}
	return std::move(state);
}

SourceResultType SkadeWriteOperator::GetDataInternal(ExecutionContext &context, DataChunk &chunk,
                                                     OperatorSourceInput &input) const {
	if (returning) {
		auto &returned = *sink_state->Cast<SkadeWriteGlobalState>().returned;
		returned.Scan(input.global_state.Cast<WriteSourceState>().scan, chunk);
		return chunk.size() == 0 ? SourceResultType::FINISHED : SourceResultType::HAVE_MORE_OUTPUT;
	}
	SkadeSetChunkSize(chunk, 1);
	chunk.data[0].SetValue(0, Value::BIGINT(NumericCast<int64_t>(RowsWritten(*sink_state))));
	return SourceResultType::FINISHED;
}

} // namespace duckdb
