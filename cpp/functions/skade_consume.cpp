// skade_consume(catalog, consumer [, max_commits := n] [, wait := INTERVAL]): the changelog rows
// of every commit after the consumer's cursor, commits in order and each whole; the cursor moves
// past them when the transaction that read them commits (as with Snowflake's streams). skade_peek: the same rows,
// nothing moves. skade_wait(catalog, since_seq | consumer := name [, timeout := INTERVAL]): the
// next commits, once there is one.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

namespace {

//! An INTERVAL parameter in milliseconds (-1: absent); negative intervals are refused.
int64_t Milliseconds(TableFunctionBindInput &input, const string &function_name, const string &name) {
	auto value = SkadeNamedParameter(input, name);
	if (value.IsNull()) {
		return -1;
	}
	auto micros = Interval::GetMicro(IntervalValue::Get(value));
	if (micros < 0) {
		throw BinderException("%s: %s must not be negative", function_name, name);
	}
	return micros / 1000;
}

//! Whether the query was interrupted (the core polls it while it waits; must not throw).
bool Interrupted(void *context) {
	return SkadeIsInterrupted(*static_cast<ClientContext *>(context));
}

template <bool ADVANCE>
unique_ptr<FunctionData> BindRead(ClientContext &context, TableFunctionBindInput &input,
                                  vector<LogicalType> &return_types, vector<SkadeName> &names) {
	const string function_name = ADVANCE ? "skade_consume" : "skade_peek";
	SkadeRequireArguments(input, function_name);
	auto &catalog = SkadeCatalogByName(context, StringValue::Get(input.inputs[0]));
	auto catalog_name = SkadeNameString(catalog.GetName());
	auto name = StringValue::Get(input.inputs[1]);
	auto max_value = SkadeNamedParameter(input, "max_commits");
	int64_t max_commits = max_value.IsNull() ? -1 : max_value.GetValue<int64_t>();
	if (!max_value.IsNull() && max_commits < 1) {
		throw BinderException("%s: max_commits must be at least 1, got %d", function_name, max_commits);
	}
	auto wait_ms = Milliseconds(input, function_name, "wait");
	ArrowSchemaWrapper schema;
	SkadeCheck(skade_fn_consume_schema(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(),
	                                   &schema.arrow_schema));
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->virtual_columns = 1; // _full_reload, as in skade_changelog
	// Every thread converts rows (commit order kept by batch index). A consuming read stages its
	// advance when it opens: the window is consumed when the transaction commits.
	data->parallel = true;
	data->projection = true; // columns a query does not use are not converted
	data->open_columns = [=](ClientContext &context, const vector<column_t> &column_ids, SkadeFilterDescription &,
	                         ArrowArrayStream &out, SkadeStreamOpened &opened) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		if (ADVANCE) {
			SkadeModifiesCatalog(context, catalog);
		}
		vector<uint64_t> columns(column_ids.begin(), column_ids.end());
		size_t batches = 0;
		SkadeCheck(skade_fn_consume(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(), max_commits,
		                            ADVANCE, context.transaction.GetActiveQuery(), wait_ms, columns.data(),
		                            columns.size(), Interrupted, &context, &out, &batches));
		opened.batches = batches;
	};
	return SkadeArrowFunctionBind(context, schema, std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindWait(ClientContext &context, TableFunctionBindInput &input,
                                  vector<LogicalType> &return_types, vector<SkadeName> &names) {
	if (input.inputs[0].IsNull()) {
		throw BinderException("skade_wait: the catalog must not be NULL");
	}
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	int64_t since = 0;
	string consumer;
	bool has_consumer = input.inputs.size() < 2;
	if (has_consumer) {
		auto c = SkadeNamedParameter(input, "consumer");
		if (c.IsNull()) {
			throw BinderException("skade_wait needs since_seq or consumer := <name>");
		}
		consumer = StringValue::Get(c);
	} else {
		if (input.inputs[1].IsNull() || input.inputs[1].GetValue<int64_t>() < 0) {
			throw BinderException("skade_wait: since_seq must be a commit_seq (>= 0)");
		}
		since = input.inputs[1].GetValue<int64_t>();
	}
	auto timeout_ms = Milliseconds(input, "skade_wait", "timeout");
	if (timeout_ms < 0) {
		timeout_ms = 60 * 1000; // a minute, unless told
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_wait(SkadeTransaction::Get(context, catalog).Handle(), since,
		                         has_consumer ? consumer.c_str() : nullptr, timeout_ms, Interrupted, &context, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_commits_since", std::move(data), return_types, names);
}

} // namespace

vector<TableFunctionSet> SkadeConsumeFunctions() {
	vector<TableFunctionSet> result;
	for (bool advance : {true, false}) {
		auto name = advance ? "skade_consume" : "skade_peek";
		TableFunctionSet set(name);
		auto function = SkadeArrowFunction(name, {LogicalType::VARCHAR, LogicalType::VARCHAR},
		                                   advance ? BindRead<true> : BindRead<false>);
		SkadeAddNamedParameter(function, "max_commits", LogicalType::BIGINT);
		SkadeAddNamedParameter(function, "wait", LogicalType::INTERVAL);
		function.get_virtual_columns = SkadeArrowVirtualColumns;
		function.projection_pushdown = true;
		set.AddFunction(function);
		result.push_back(set);
	}
	TableFunctionSet wait("skade_wait");
	for (auto arguments : {vector<LogicalType> {LogicalType::VARCHAR, LogicalType::BIGINT},
	                       vector<LogicalType> {LogicalType::VARCHAR}}) {
		auto function = SkadeArrowFunction("skade_wait", arguments, BindWait);
		SkadeAddNamedParameter(function, "timeout", LogicalType::INTERVAL);
		if (arguments.size() == 1) {
			SkadeAddNamedParameter(function, "consumer", LogicalType::VARCHAR);
		}
		wait.AddFunction(function);
	}
	result.push_back(wait);
	return result;
}

} // namespace duckdb
