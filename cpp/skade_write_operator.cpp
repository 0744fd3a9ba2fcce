// What INSERT, DELETE and UPDATE return once their sink finished: one row, the count.
#include "skade/write_operator.hpp"

namespace duckdb {

namespace {

class CountSourceState : public GlobalSourceState {};

} // namespace

unique_ptr<GlobalSourceState> SkadeWriteOperator::GetGlobalSourceState(ClientContext &context) const {
	return make_uniq<CountSourceState>();
}

SourceResultType SkadeWriteOperator::GetDataInternal(ExecutionContext &context, DataChunk &chunk,
                                                     OperatorSourceInput &input) const {
	SkadeSetChunkSize(chunk, 1);
	chunk.data[0].SetValue(0, Value::BIGINT(NumericCast<int64_t>(RowsWritten(*sink_state))));
	return SourceResultType::FINISHED;
}

} // namespace duckdb
