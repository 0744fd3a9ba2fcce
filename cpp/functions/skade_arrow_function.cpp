// Shared machinery of skade's table functions: the core produces the rows as an Arrow stream,
// DuckDB's Arrow reader converts them. Also resolves catalog and table names given as strings.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"

#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/execution/expression_executor.hpp"
#include "duckdb/function/table/arrow.hpp"
#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/database_manager.hpp"
#include "duckdb/parallel/task_scheduler.hpp"
#include "duckdb/parser/qualified_name.hpp"
#include "duckdb/transaction/meta_transaction.hpp"

namespace duckdb {

namespace {

struct ArrowFunctionGlobal : public GlobalTableFunctionState {
	unique_ptr<ArrowArrayStreamWrapper> stream;
	//! The stream's column of each output column (functions with projection pushdown get only
	//! the columns the query uses converted); COLUMN_IDENTIFIER_ROW_ID for none (count(*)).
	vector<column_t> column_ids;
	//! The pushed-down filters, applied to each converted chunk (null: none).
	unique_ptr<Expression> filter;
	//! Threads take whole batches from the stream under this lock and convert them on their own.
	mutex lock;
	//! The next batch's index (under `lock`): DuckDB keeps the rows' order by it across threads.
	idx_t next_batch = 0;
	idx_t max_threads = 1;
	//! How many batches the stream has, when known (SkadeStreamOpened).
	optional_idx batches;
	//! Whether the stream's end was taken (under `lock`): it is not asked again.
	bool ended = false;

	idx_t MaxThreads() const override {
		return max_threads;
	}
};

struct ArrowFunctionLocal : public LocalTableFunctionState {
	ArrowFunctionLocal(ClientContext &context, const ArrowFunctionGlobal &global)
	    : arrow(make_uniq<ArrowArrayWrapper>(), context) {
		arrow.column_ids = global.column_ids;
		if (global.filter) {
			executor = make_uniq<ExpressionExecutor>(context, *global.filter);
			selection.Initialize(STANDARD_VECTOR_SIZE);
		}
	}
	ArrowScanLocalState arrow;
	unique_ptr<ExpressionExecutor> executor;
	SelectionVector selection;
	//! The index of the batch this thread converts.
	idx_t batch_index = 0;
};

//! The stream must have the columns the statement was bound with.
void CheckColumns(const SkadeArrowFunctionData &data, ArrowArrayStream &stream) {
	ArrowSchemaWrapper schema;
	if (stream.get_schema(&stream, &schema.arrow_schema) != 0) {
		auto error = stream.get_last_error(&stream);
		throw IOException("skade: cannot read the columns of a result: %s", error ? error : "unknown error");
	}
	auto &s = schema.arrow_schema;
	bool same = idx_t(s.n_children) == data.bound_columns.size();
	for (idx_t i = 0; same && i < data.bound_columns.size(); i++) {
		same = data.bound_columns[i].first == s.children[i]->name && data.bound_columns[i].second == s.children[i]->format;
	}
	if (!same) {
		throw InvalidInputException("the columns of the table changed since this statement was prepared: prepare it again");
	}
}

//! The type of a column id the function was asked for (a column, a virtual column, or none).
LogicalType ColumnType(const SkadeArrowFunctionData &data, column_t col) {
	if (col < data.types.size()) {
		return data.types[col];
	}
	if (col >= VIRTUAL_COLUMN_START && col - VIRTUAL_COLUMN_START < data.virtual_columns) {
		return data.virtual_types[col - VIRTUAL_COLUMN_START];
	}
	return LogicalType::BOOLEAN; // the empty column (count(*))
}

unique_ptr<GlobalTableFunctionState> InitGlobal(ClientContext &context, TableFunctionInitInput &input) {
	auto &data = input.bind_data->Cast<SkadeArrowFunctionData>();
	auto result = make_uniq<ArrowFunctionGlobal>();
	result->stream = make_uniq<ArrowArrayStreamWrapper>();
	SkadeResetStream(*result->stream);
	if (data.open_columns) {
		SkadeFilterDescription filters;
		if (input.filters) {
			SkadeDescribeFilters(context, *input.filters, input.column_ids, filters);
			vector<LogicalType> types;
			for (auto col : input.column_ids) {
				types.push_back(ColumnType(data, col));
			}
			result->filter = SkadeFilterExpression(*input.filters, types);
		}
		SkadeStreamOpened opened;
		data.open_columns(context, input.column_ids, filters, result->stream->arrow_array_stream, opened);
		result->batches = opened.batches;
	} else {
		data.open(context, result->stream->arrow_array_stream);
	}
	if (!data.columns_checked_by_core) {
		CheckColumns(data, result->stream->arrow_array_stream);
	}
	if (data.projection) {
		for (auto col : input.column_ids) {
			if (col < data.types.size()) {
				result->column_ids.push_back(col);
			} else if (col >= VIRTUAL_COLUMN_START && col - VIRTUAL_COLUMN_START < data.virtual_columns) {
				result->column_ids.push_back(data.types.size() + (col - VIRTUAL_COLUMN_START));
			} else {
				result->column_ids.push_back(COLUMN_IDENTIFIER_ROW_ID);
			}
		}
	}
	if (data.parallel) {
		result->max_threads = TaskScheduler::GetScheduler(context).NumberOfThreads();
		if (result->batches.IsValid()) {
			// A thread with no batch to convert only costs its start (a one-row read's latency).
			result->max_threads = MaxValue<idx_t>(1, MinValue(result->max_threads, result->batches.GetIndex()));
		}
	}
	return std::move(result);
}

unique_ptr<LocalTableFunctionState> InitLocal(ExecutionContext &context, TableFunctionInitInput &input,
                                              GlobalTableFunctionState *global) {
	return make_uniq<ArrowFunctionLocal>(context.client, global->Cast<ArrowFunctionGlobal>());
}

void Scan(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &data = input.bind_data->Cast<SkadeArrowFunctionData>();
	auto &global = input.global_state->Cast<ArrowFunctionGlobal>();
	auto &local = input.local_state->Cast<ArrowFunctionLocal>();
	// Until a chunk keeps some row (an empty output ends the scan).
	while (true) {
		auto &chunk = local.arrow.chunk;
		while (!chunk || !chunk->arrow_array.release ||
		       local.arrow.chunk_offset >= idx_t(chunk->arrow_array.length)) {
			shared_ptr<ArrowArrayWrapper> next;
			{
				lock_guard<mutex> guard(global.lock);
				if (!global.ended) {
					next = SkadeNextChunk(*global.stream);
					global.ended = !next->arrow_array.release;
				}
				local.batch_index = global.next_batch++;
			}
			if (!next || !next->arrow_array.release) {
				output.Reset();
				SkadeSetChunkSize(output, 0); // the end (a chunk filtered out entirely may precede it)
				return;
			}
			local.arrow.Reset();
			local.arrow.chunk = std::move(next);
		}
		auto count = MinValue<idx_t>(STANDARD_VECTOR_SIZE, idx_t(chunk->arrow_array.length) - local.arrow.chunk_offset);
		output.Reset();
		SkadeSetChunkSize(output, count);
		// With projection pushdown the stream still has every column; only the output's are converted.
		ArrowTableFunction::ArrowToDuckDB(local.arrow, data.arrow_table.GetColumns(), output, !data.projection);
		for (idx_t i = 0; i < global.column_ids.size(); i++) {
			if (global.column_ids[i] == COLUMN_IDENTIFIER_ROW_ID) {
				SkadeReferenceConstant(output.data[i], Value(output.data[i].GetType()), count); // no column wanted (count(*))
			}
		}
		local.arrow.chunk_offset += count;
		if (!local.executor) {
			return;
		}
		auto kept = local.executor->SelectExpression(output, local.selection);
		if (kept == count) {
			return;
		}
		if (kept > 0) {
			output.Slice(local.selection, kept);
			return;
		}
	}
}

//! The batch a thread's rows come from: with it, DuckDB puts rows converted on several threads
//! back in the stream's order (a consumer's rows are in commit order).
OperatorPartitionData PartitionData(ClientContext &context, TableFunctionGetPartitionInput &input) {
	return OperatorPartitionData(input.local_state->Cast<ArrowFunctionLocal>().batch_index);
}

} // namespace

unique_ptr<FunctionData> SkadeArrowFunctionBind(ClientContext &context, const string &function_name,
                                                unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names) {
	ArrowSchemaWrapper schema;
	SkadeCheck(skade_function_schema(function_name.c_str(), &schema.arrow_schema));
	return SkadeArrowFunctionBind(context, schema, std::move(data), return_types, names);
}

namespace {

//! Completes a bind whose `data` has its Arrow columns (arrow_table, bound_columns) set.
unique_ptr<FunctionData> FinishBind(unique_ptr<SkadeArrowFunctionData> data, vector<LogicalType> &return_types,
                                    vector<SkadeName> &names) {
	auto &all_names = data->arrow_table.GetNames();
	return_types = data->arrow_table.GetTypes();
	if (data->virtual_columns > all_names.size()) {
		throw InternalException("skade: a function declares more virtual columns than it has");
	}
	auto columns = all_names.size() - data->virtual_columns;
	data->virtual_names.assign(all_names.begin() + columns, all_names.end());
	data->virtual_types.assign(return_types.begin() + columns, return_types.end());
	names.clear();
	for (idx_t i = 0; i < columns; i++) {
		names.push_back(SkadeToName(all_names[i]));
	}
	return_types.resize(columns);
	data->types = return_types;
	return std::move(data);
}

} // namespace

unique_ptr<FunctionData> SkadeArrowFunctionBind(ClientContext &context, ArrowSchemaWrapper &schema,
                                                unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names) {
	ArrowTableFunction::PopulateArrowTableSchema(context, data->arrow_table, schema.arrow_schema);
	for (int64_t i = 0; i < schema.arrow_schema.n_children; i++) {
		data->bound_columns.emplace_back(schema.arrow_schema.children[i]->name, schema.arrow_schema.children[i]->format);
	}
	return FinishBind(std::move(data), return_types, names);
}

unique_ptr<FunctionData> SkadeArrowFunctionBind(const SkadeTableShape &shape, unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names) {
	data->arrow_table = shape.arrow_table;
	data->bound_columns = shape.columns;
	return FinishBind(std::move(data), return_types, names);
}

virtual_column_map_t SkadeArrowVirtualColumns(ClientContext &context, optional_ptr<FunctionData> bind_data) {
	virtual_column_map_t result;
	result.insert(make_pair(COLUMN_IDENTIFIER_EMPTY, TableColumn("", LogicalType::BOOLEAN))); // count(*)
	if (!bind_data) {
		return result;
	}
	auto &data = bind_data->Cast<SkadeArrowFunctionData>();
	for (idx_t i = 0; i < data.virtual_columns; i++) {
		result.insert(make_pair(VIRTUAL_COLUMN_START + i, TableColumn(SkadeToName(data.virtual_names[i]), data.virtual_types[i])));
	}
	return result;
}

TableFunction SkadeArrowFunction(const string &name, vector<LogicalType> arguments, table_function_bind_t bind) {
	TableFunction function(SkadeToName(name), std::move(arguments), Scan, bind, InitGlobal, InitLocal);
	function.get_partition_data = PartitionData;
	return function;
}

void SkadeRequireArguments(TableFunctionBindInput &input, const string &function_name) {
	for (idx_t i = 0; i < input.inputs.size(); i++) {
		if (input.inputs[i].IsNull()) {
			throw BinderException("%s: argument %d must not be NULL", function_name, i + 1);
		}
		// The core takes names as C strings: one with a NUL in it would name a shorter one.
		if (input.inputs[i].type().id() == LogicalTypeId::VARCHAR &&
		    StringValue::Get(input.inputs[i]).find('\0') != string::npos) {
			throw BinderException("%s: argument %d contains a NUL character", function_name, i + 1);
		}
	}
}

Value SkadeNamedParameter(TableFunctionBindInput &input, const string &name) {
	for (auto &param : input.named_parameters) {
		if (StringUtil::CIEquals(SkadeNameString(param.first), name)) {
			return param.second;
		}
	}
	return Value();
}

SkadeCatalog &SkadeCatalogByName(ClientContext &context, const string &name) {
	auto db = DatabaseManager::Get(context).GetDatabase(context, SkadeToName(name));
	if (!db) {
		throw BinderException("no attached database is named \"%s\"", name);
	}
	auto &catalog = db->GetCatalog();
	if (catalog.GetCatalogType() != "skade") {
		throw BinderException("database \"%s\" is not a skade catalog (it is of type %s)", name,
		                      catalog.GetCatalogType());
	}
	return catalog.Cast<SkadeCatalog>();
}

SkadeTableEntry &SkadeTableByName(ClientContext &context, const string &qualified_name) {
	string catalog, schema, name;
	SkadeParseQualifiedName(qualified_name, catalog, schema, name);
	// 'lake.orders' names catalog `lake` when a database of that name is attached.
	if (catalog == INVALID_CATALOG && schema != INVALID_SCHEMA &&
	    DatabaseManager::Get(context).GetDatabase(context, SkadeToName(schema))) {
		catalog = schema;
		schema = INVALID_SCHEMA;
	}
	auto &entry = SkadeGetTable(context, catalog, schema, name);
	if (entry.ParentCatalog().GetCatalogType() != "skade") {
		throw BinderException("\"%s\" is not a skade table (it belongs to catalog \"%s\" of type %s)", qualified_name,
		                      SkadeNameString(entry.ParentCatalog().GetName()), entry.ParentCatalog().GetCatalogType());
	}
	return entry.Cast<SkadeTableEntry>();
}

void SkadeModifiesCatalog(ClientContext &context, Catalog &catalog) {
	MetaTransaction::Get(context).ModifyDatabase(catalog.GetAttached(), DatabaseModificationType::UPDATE_DATA);
}

bool SkadeIsInterrupted(ClientContext &context) {
	try {
		return context.IsInterrupted();
	} catch (...) {
		return true;
	}
}

} // namespace duckdb
