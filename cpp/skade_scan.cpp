// Table scans. The core plans the data files (pruned by manifest and file bounds using the
// pushed-down filters), cuts them into tasks of about a row group's rows, and streams each task
// as Arrow; DuckDB threads take tasks one at a time and convert batches with DuckDB's own Arrow
// reader. DuckDB's filters are then applied to the rows here, so the core's pruning only ever
// needs to be conservative. A task's number is its batch index: order-preserving sinks (a plain
// SELECT's result, INSERT ... SELECT, COPY) then read in parallel too and still keep the order.
#include "skade/scan.hpp"
#include "skade/filters.hpp"

#include "duckdb/common/serializer/deserializer.hpp"
#include "duckdb/common/serializer/serializer.hpp"

#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/catalog/catalog.hpp"

#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/execution/expression_executor.hpp"
#include "duckdb/execution/partition_info.hpp"
#if SKADE_DUCKDB_MAJOR >= 2
#include "duckdb/main/profiler/profiling_node.hpp"
#endif
#include "duckdb/function/table/arrow.hpp"
#include "duckdb/storage/statistics/numeric_stats.hpp"

namespace duckdb {

namespace {

constexpr idx_t ROW_ID_INDEX = DConstants::INVALID_INDEX - 1;

// ---- states ----------------------------------------------------------------------------------

struct SkadeScanGlobalState : public GlobalTableFunctionState {
	SkadeScanHandle scan;
	idx_t task_count = 0;
	atomic<idx_t> next_task {0};
	idx_t total_rows = 0;
	atomic<idx_t> rows_read {0};
	//! Threads that took at least one task (shown by EXPLAIN ANALYZE).
	atomic<idx_t> threads_used {0};
	//! Per scanned column: its position among the columns the core streams, INVALID_INDEX for
	//! the empty column, ROW_ID_INDEX for the row id (streamed after the columns).
	vector<idx_t> stream_index;
	bool row_ids = false;
	//! The table columns the core streams, in its order (the lineage columns last, when asked),
	//! and their types.
	vector<column_t> stream_columns;
	vector<LogicalType> stream_types;
	vector<LogicalType> scanned_types;
	vector<idx_t> projection_ids;
	unique_ptr<Expression> filter;

	idx_t MaxThreads() const override {
		return MaxValue<idx_t>(task_count, 1);
	}
};

struct SkadeScanLocalState : public LocalTableFunctionState {
	SkadeScanLocalState(ClientContext &context, const SkadeScanGlobalState &global)
	    : arrow(make_uniq<ArrowArrayWrapper>(), context) {
		arrow.column_ids = global.stream_columns;
		streamed.Initialize(context, global.stream_types);
		scanned.Initialize(context, global.scanned_types);
		if (global.filter) {
			executor = make_uniq<ExpressionExecutor>(context, *global.filter);
			selection.Initialize(STANDARD_VECTOR_SIZE);
		}
	}
	ArrowScanLocalState arrow;
	unique_ptr<ArrowArrayStreamWrapper> stream;
	DataChunk streamed;
	DataChunk scanned;
	unique_ptr<ExpressionExecutor> executor;
	SelectionVector selection;
	//! The task being read (its batch index), INVALID_INDEX before the first.
	idx_t task = DConstants::INVALID_INDEX;
	//! The Arrow types of the task's stream, by table column, when they differ from the table's
	//! (per task, the core reads small-dictionary strings as dictionaries, decimals as stored).
	arrow_column_map_t task_columns;
	bool task_has_own_types = false;
	//! Per streamed column: the Arrow dictionary of this batch last converted, and its DuckDB
	//! dictionary (shared by the batch's chunks).
	vector<const ArrowArray *> dictionary_of;
	vector<SkadeDictionary> dictionary;
};

//! Ids of converted Arrow dictionaries, unique in the process (DuckDB caches per id).
atomic<uint64_t> next_dictionary_id {0};

//! Puts the columns DuckDB's Arrow reader turned into dictionary vectors on one dictionary per
//! batch, with its size and an id, as DuckDB's own Parquet reader does per row group: hashes
//! (GROUP BY, joins, hash()) then hash each entry once per batch, not once per chunk.
void MarkDictionaries(SkadeScanLocalState &local) {
	auto &array = local.arrow.chunk->arrow_array;
	local.dictionary_of.resize(local.streamed.ColumnCount(), nullptr);
	local.dictionary.resize(local.streamed.ColumnCount());
	for (idx_t i = 0; i < local.streamed.ColumnCount(); i++) {
		auto dictionary = array.children[i]->dictionary;
		auto &vector = local.streamed.data[i];
		if (!dictionary || vector.GetVectorType() != VectorType::DICTIONARY_VECTOR) {
			local.dictionary_of[i] = nullptr; // a dictionary after this one gets a new id, whatever its address
			continue;
		}
		if (local.dictionary_of[i] != dictionary) {
			local.dictionary_of[i] = dictionary;
			local.dictionary[i] = SkadeNewDictionary(vector, idx_t(dictionary->length) + 1,
			                                         "skade-" + to_string(next_dictionary_id++));
		}
		SkadeUseDictionary(vector, local.dictionary[i], local.streamed.size());
	}
}

//! Takes the Arrow types of a new task's stream where they differ from the table's.
void TakeStreamTypes(ClientContext &context, const SkadeScanBindData &bind, const SkadeScanGlobalState &global,
                     SkadeScanLocalState &local) {
	local.task_has_own_types = false;
	if (global.stream_columns.empty()) {
		return; // counts and row ids only: no column to convert
	}
	ArrowSchemaWrapper schema;
	local.stream->GetSchema(schema);
	auto &table_columns = bind.table.Shape().columns;
	for (idx_t i = 0; i < global.stream_columns.size(); i++) {
		auto &child = *schema.arrow_schema.children[i];
		auto column = global.stream_columns[i];
		// (the lineage columns are no table column: their types come from the stream)
		local.task_has_own_types |= IsVirtualColumn(column) || child.dictionary != nullptr ||
		                            table_columns[column].second != child.format;
	}
	if (!local.task_has_own_types) {
		return;
	}
	ArrowTableSchema stream_table;
	ArrowTableFunction::PopulateArrowTableSchema(context, stream_table, schema.arrow_schema);
	auto &stream_columns = stream_table.GetColumns();
	local.task_columns = bind.table.GetArrowTable().GetColumns();
	for (idx_t i = 0; i < global.stream_columns.size(); i++) {
		local.task_columns[global.stream_columns[i]] = stream_columns.at(i);
	}
}

// ---- callbacks -------------------------------------------------------------------------------

unique_ptr<GlobalTableFunctionState> ScanInitGlobal(ClientContext &context, TableFunctionInitInput &input) {
	auto &bind = input.bind_data->Cast<SkadeScanBindData>();
	auto &table = bind.table;
	auto &txn = SkadeTransaction::Get(context, table.ParentCatalog());
	auto result = make_uniq<SkadeScanGlobalState>();
	auto &types = table.GetArrowTable().GetTypes();

	vector<uint64_t> columns;
	bool lineage = false;
	for (auto col : input.column_ids) {
		if (col == COLUMN_IDENTIFIER_EMPTY) {
			result->stream_index.push_back(DConstants::INVALID_INDEX);
			result->scanned_types.push_back(LogicalType::BOOLEAN);
			continue;
		}
		if (col == COLUMN_IDENTIFIER_ROW_ID) {
			result->stream_index.push_back(ROW_ID_INDEX);
			result->scanned_types.push_back(LogicalType::ROW_TYPE);
			result->row_ids = true;
			continue;
		}
		if (col == SKADE_COLUMN_ROW_ID || col == SKADE_COLUMN_LAST_UPDATED) {
			lineage = true;
			result->stream_index.push_back(col); // (its place in the stream is known below)
			result->scanned_types.push_back(LogicalType::BIGINT);
			continue;
		}
		if (IsVirtualColumn(col)) {
			throw NotImplementedException("skade tables do not expose this virtual column yet");
		}
		result->stream_index.push_back(columns.size());
		result->stream_columns.push_back(col);
		result->stream_types.push_back(types[col]);
		result->scanned_types.push_back(types[col]);
		columns.push_back(col);
	}
	if (lineage) {
		// The core streams _row_id and _last_updated_sequence_number after the columns.
		for (auto &index : result->stream_index) {
			if (index == SKADE_COLUMN_ROW_ID || index == SKADE_COLUMN_LAST_UPDATED) {
				index = columns.size() + (index == SKADE_COLUMN_LAST_UPDATED ? 1 : 0);
			}
		}
		for (auto col : {SKADE_COLUMN_ROW_ID, SKADE_COLUMN_LAST_UPDATED}) {
			result->stream_columns.push_back(col);
			result->stream_types.push_back(LogicalType::BIGINT);
		}
	}
	result->projection_ids = input.projection_ids;

	// Filters: described for the core's pruning, and one expression for exact evaluation.
	SkadeFilterDescription filters;
	if (input.filters) {
		SkadeDescribeFilters(context, *input.filters, input.column_ids, filters);
		result->filter = SkadeFilterExpression(*input.filters, result->scanned_types);
	}
	auto status = skade_scan_open(txn.Handle(), bind.Version(), columns.data(), columns.size(), lineage, result->row_ids,
	                              filters.json.c_str(), filters.Constants(), filters.ConstantsSchema(),
	                              result->scan.out());
	SkadeCheck(status);
	result->task_count = skade_scan_task_count(result->scan.get());
	result->total_rows = skade_scan_estimated_rows(result->scan.get());
	return std::move(result);
}

unique_ptr<LocalTableFunctionState> ScanInitLocal(ExecutionContext &context, TableFunctionInitInput &input,
                                                  GlobalTableFunctionState *global_state) {
	return make_uniq<SkadeScanLocalState>(context.client, global_state->Cast<SkadeScanGlobalState>());
}

//! Moves the local state to its next non-empty Arrow batch, taking a new task when one ends.
bool NextBatch(ClientContext &context, const SkadeScanBindData &bind, SkadeScanGlobalState &global,
               SkadeScanLocalState &local) {
	while (true) {
		if (local.stream) {
			auto chunk = SkadeNextChunk(*local.stream);
			if (chunk->arrow_array.release) {
				if (chunk->arrow_array.length == 0) {
					continue;
				}
				local.arrow.Reset();
				local.arrow.chunk = std::move(chunk);
				// (a new batch's dictionaries are new, even where one sits at a freed one's address)
				local.dictionary_of.clear();
				return true;
			}
			local.stream.reset();
		}
		auto task = global.next_task++;
		if (task >= global.task_count) {
			return false;
		}
		if (local.task == DConstants::INVALID_INDEX) {
			global.threads_used++;
		}
		local.task = task;
		local.stream = make_uniq<ArrowArrayStreamWrapper>();
		SkadeResetStream(*local.stream);
		SkadeCheck(skade_scan_task_stream(global.scan.get(), task, &local.stream->arrow_array_stream));
		TakeStreamTypes(context, bind, global, local);
	}
}

void ScanFunction(ClientContext &context, TableFunctionInput &data, DataChunk &output) {
	auto &bind = data.bind_data->Cast<SkadeScanBindData>();
	auto &global = data.global_state->Cast<SkadeScanGlobalState>();
	auto &local = data.local_state->Cast<SkadeScanLocalState>();
	while (true) {
		auto &chunk = local.arrow.chunk;
		if (!chunk || !chunk->arrow_array.release || local.arrow.chunk_offset >= idx_t(chunk->arrow_array.length)) {
			if (!NextBatch(context, bind, global, local)) {
				return;
			}
		}
		auto count = MinValue<idx_t>(STANDARD_VECTOR_SIZE, idx_t(local.arrow.chunk->arrow_array.length) -
		                                                       local.arrow.chunk_offset);
		auto first_row = local.arrow.chunk_offset;
		local.streamed.Reset();
		SkadeSetChunkSize(local.streamed, count);
		if (local.streamed.ColumnCount() > 0) {
			auto &types = local.task_has_own_types ? local.task_columns : bind.table.GetArrowTable().GetColumns();
			ArrowTableFunction::ArrowToDuckDB(local.arrow, types, local.streamed);
			if (local.task_has_own_types) {
				MarkDictionaries(local);
			}
		}
		local.arrow.chunk_offset += count;
		global.rows_read += count;

		local.scanned.Reset();
		for (idx_t i = 0; i < global.stream_index.size(); i++) {
			auto index = global.stream_index[i];
			if (index == DConstants::INVALID_INDEX) {
				SkadeReferenceConstant(local.scanned.data[i], Value(LogicalType::BOOLEAN), count);
			} else if (index == ROW_ID_INDEX) {
				// The core streams row ids as the last Arrow column: copy them in.
				auto &ids = *local.arrow.chunk->arrow_array.children[local.streamed.ColumnCount()];
				auto src = reinterpret_cast<const int64_t *>(ids.buffers[1]) + ids.offset + first_row;
				auto &target = local.scanned.data[i];
				target.SetVectorType(VectorType::FLAT_VECTOR);
				memcpy(SkadeFlatDataMutable<int64_t>(target), src, count * sizeof(int64_t));
			} else {
				local.scanned.data[i].Reference(local.streamed.data[index]);
			}
		}
		SkadeSetChunkSize(local.scanned, count);

		idx_t selected = count;
		if (local.executor) {
			selected = local.executor->SelectExpression(local.scanned, local.selection);
			if (selected == 0) {
				continue;
			}
		}
		if (global.projection_ids.empty()) {
			output.Reference(local.scanned);
		} else {
			output.ReferenceColumns(local.scanned, global.projection_ids);
		}
		if (selected < count) {
			output.Slice(local.selection, selected);
		}
		return;
	}
}

double ScanProgress(ClientContext &context, const FunctionData *bind_data, const GlobalTableFunctionState *state) {
	auto &global = state->Cast<SkadeScanGlobalState>();
	if (global.total_rows == 0) {
		return 100.0;
	}
	return MinValue<double>(100.0, 100.0 * double(global.rows_read.load()) / double(global.total_rows));
}

OperatorPartitionData ScanPartitionData(ClientContext &context, TableFunctionGetPartitionInput &input) {
	auto &local = input.local_state->Cast<SkadeScanLocalState>();
	return OperatorPartitionData(local.task == DConstants::INVALID_INDEX ? 0 : local.task);
}

//! What EXPLAIN ANALYZE shows of a finished scan: how many tasks, and how many threads read them.
InsertionOrderPreservingMap<string> ScanRuntimeInfo(const SkadeScanGlobalState &global) {
	InsertionOrderPreservingMap<string> result;
	result["Scan Tasks"] = to_string(global.task_count);
	result["Threads"] = to_string(global.threads_used.load());
	return result;
}

#if SKADE_DUCKDB_MAJOR >= 2
void ScanMetrics(TableFunctionGetMetricsInput &input) {
	if (input.global_state) {
		input.operator_metrics.SetExtraInfo(ScanRuntimeInfo(input.global_state->Cast<SkadeScanGlobalState>()));
	}
}
#else
InsertionOrderPreservingMap<string> ScanDynamicToString(TableFunctionDynamicToStringInput &input) {
	return ScanRuntimeInfo(input.global_state->Cast<SkadeScanGlobalState>());
}
#endif

//! Loads the statistics of every column of the table a scan reads, once (see SkadeScanBindData;
//! the caller holds statistics_lock).
void LoadStatistics(ClientContext &context, const SkadeScanBindData &bind) {
	if (bind.statistics_loaded) {
		return;
	}
	auto &table = bind.table;
	auto &txn = SkadeTransaction::Get(context, table.ParentCatalog());
	auto &types = table.GetArrowTable().GetTypes();
	bind.statistics.clear();
	auto null_free = unique_ptr<bool[]>(new bool[types.size()]());
	ArrowArrayStreamWrapper stream;
	SkadeResetStream(stream);
	SkadeCheck(skade_scan_column_stats(txn.Handle(), bind.Version(), null_free.get(), types.size(), &bind.max_rows,
	                                   &stream.arrow_array_stream));
	// Only the columns with numeric statistics have bounds to convert (the rest are NULL).
	ArrowScanLocalState arrow(make_uniq<ArrowArrayWrapper>(), context);
	arrow.chunk = SkadeNextChunk(stream);
	if (!arrow.chunk->arrow_array.release || arrow.chunk->arrow_array.length != 2 ||
	    idx_t(arrow.chunk->arrow_array.n_children) != types.size()) {
		throw InternalException("skade: column statistics are not two rows of the table's columns");
	}
	vector<LogicalType> bounded_types;
	for (idx_t i = 0; i < types.size(); i++) {
		if (BaseStatistics::GetStatsType(types[i]) == StatisticsType::NUMERIC_STATS) {
			arrow.column_ids.push_back(i);
			bounded_types.push_back(types[i]);
		}
	}
	DataChunk bounds;
	if (!bounded_types.empty()) {
		bounds.Initialize(Allocator::Get(context), bounded_types, 2);
		SkadeSetChunkSize(bounds, 2);
		ArrowTableFunction::ArrowToDuckDB(arrow, table.GetArrowTable().GetColumns(), bounds, false);
	}
	idx_t bounded = 0;
	for (idx_t i = 0; i < types.size(); i++) {
		auto stats = BaseStatistics::CreateUnknown(types[i]);
		if (null_free[i]) {
			stats.Set(StatsInfo::CANNOT_HAVE_NULL_VALUES);
		}
		if (bounded < arrow.column_ids.size() && arrow.column_ids[bounded] == i) {
			auto lower = bounds.GetValue(bounded, 0);
			auto upper = bounds.GetValue(bounded, 1);
			bounded++;
			if (!lower.IsNull() && !upper.IsNull() && lower.type() == types[i] && upper.type() == types[i]) {
				NumericStats::SetMin(stats, lower);
				NumericStats::SetMax(stats, upper);
			}
		}
		bind.statistics.push_back(stats.ToUnique());
	}
	bind.statistics_loaded = true;
}

//! What DuckDB's optimizer may assume of a column: every value within its bounds, no NULL where
//! none can be. It then sums in 64 bits, drops overflow checks, and prunes filters it can decide.
unique_ptr<BaseStatistics> ScanStatistics(ClientContext &context, const FunctionData *bind_data, column_t column) {
	auto &bind = bind_data->Cast<SkadeScanBindData>();
	if (column == COLUMN_IDENTIFIER_ROW_ID || IsVirtualColumn(column)) {
		return nullptr;
	}
	lock_guard<mutex> guard(bind.statistics_lock);
	LoadStatistics(context, bind);
	if (column >= bind.statistics.size()) {
		return nullptr;
	}
	return bind.statistics[column]->ToUnique();
}

//! The rows of the data files the scan reads (its version's, and the transaction's own): DuckDB
//! takes it as the most the scan returns, so it must count every row before deletes.
unique_ptr<NodeStatistics> ScanCardinality(ClientContext &context, const FunctionData *bind_data) {
	auto &bind = bind_data->Cast<SkadeScanBindData>();
	lock_guard<mutex> guard(bind.statistics_lock);
	LoadStatistics(context, bind);
	return make_uniq<NodeStatistics>(bind.max_rows, bind.max_rows);
}

#if SKADE_DUCKDB_MAJOR >= 2
// 2.0: the table a scan reads is asked for directly (BindInfo no longer carries it).
optional_ptr<TableCatalogEntry> ScanTableEntry(optional_ptr<const FunctionData> bind_data) {
	return &bind_data->Cast<SkadeScanBindData>().table;
}
#else
BindInfo ScanBindInfo(const optional_ptr<FunctionData> bind_data) {
	return BindInfo(bind_data->Cast<SkadeScanBindData>().table);
}
#endif

InsertionOrderPreservingMap<string> ScanToString(TableFunctionToStringInput &input) {
	InsertionOrderPreservingMap<string> result;
	auto &table = input.bind_data->Cast<SkadeScanBindData>().table;
	result["Table"] = SkadeNameString(table.ParentCatalog().GetName()) + "." + SkadeNameString(table.ParentSchema().name) +
	                  "." + SkadeNameString(table.name);
	auto &at = input.bind_data->Cast<SkadeScanBindData>().at_clause;
	if (!at.empty()) {
		result["At"] = at;
	}
	return result;
}

// DuckDB compares subplans by serializing them: a scan is identified by its table and version.
void ScanSerialize(Serializer &serializer, const optional_ptr<FunctionData> bind_data,
                   const SkadeBoundTableFunction &function) {
	auto &bind = bind_data->Cast<SkadeScanBindData>();
	serializer.WriteProperty(100, "table", bind.table.Uuid());
	serializer.WriteProperty(101, "at", bind.at_clause);
}

unique_ptr<FunctionData> ScanDeserialize(Deserializer &deserializer, SkadeBoundTableFunction &function) {
	throw NotImplementedException("skade scans cannot be deserialized");
}

} // namespace

skade_table *SkadeScanBindData::Version() const {
	return at ? at.get() : table.Handle();
}

TableFunction SkadeScanFunction() {
	TableFunction function("skade_scan", {}, ScanFunction, nullptr, ScanInitGlobal, ScanInitLocal);
	function.projection_pushdown = true;
	function.filter_pushdown = true;
	function.filter_prune = true;
	function.table_scan_progress = ScanProgress;
	function.get_partition_data = ScanPartitionData;
#if SKADE_DUCKDB_MAJOR >= 2
	function.get_metrics = ScanMetrics;
#else
	function.dynamic_to_string = ScanDynamicToString;
#endif
	function.cardinality = ScanCardinality;
	function.statistics = ScanStatistics;
#if SKADE_DUCKDB_MAJOR >= 2
	function.get_table_entry = ScanTableEntry;
#else
	function.get_bind_info = ScanBindInfo;
#endif
	function.to_string = ScanToString;
	function.serialize = ScanSerialize;
	function.deserialize = ScanDeserialize;
	// A plan's round trip (PRAGMA verify_serializer) would look skade_scan up among the system's
	// functions, where it is not: the scan is only reached through a skade table.
	function.verify_serialization = false;
	return function;
}

} // namespace duckdb
