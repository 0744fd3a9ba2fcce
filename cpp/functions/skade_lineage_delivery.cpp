// skade_lineage_delivery(catalog): where each lineage sink stands (the history table, each
// OpenLineage collector). skade_lineage_flush(catalog [, timeout_ms]): the same, after the history
// table is brought up to date and every collector acknowledged every event committed so far.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names, bool flush,
                                     const string &function_name) {
	SkadeRequireArguments(input, function_name);
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	int64_t timeout_ms = input.inputs.size() > 1 ? input.inputs[1].GetValue<int64_t>() : 10000;
	if (timeout_ms < 0) {
		throw BinderException("%s: timeout_ms must be >= 0, got %d", function_name, timeout_ms);
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [flush, timeout_ms, catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_lineage_delivery(catalog.Handle(), flush, uint64_t(timeout_ms), &out));
	};
	return SkadeArrowFunctionBind(context, function_name, std::move(data), return_types, names);
}

static unique_ptr<FunctionData> DeliveryBind(ClientContext &context, TableFunctionBindInput &input,
                                             vector<LogicalType> &return_types, vector<SkadeName> &names) {
	return Bind(context, input, return_types, names, false, "skade_lineage_delivery");
}

static unique_ptr<FunctionData> FlushBind(ClientContext &context, TableFunctionBindInput &input,
                                          vector<LogicalType> &return_types, vector<SkadeName> &names) {
	return Bind(context, input, return_types, names, true, "skade_lineage_flush");
}

vector<TableFunctionSet> SkadeLineageDeliveryFunctions() {
	TableFunctionSet delivery("skade_lineage_delivery");
	delivery.AddFunction(SkadeArrowFunction("skade_lineage_delivery", {LogicalType::VARCHAR}, DeliveryBind));
	TableFunctionSet flush("skade_lineage_flush");
	flush.AddFunction(SkadeArrowFunction("skade_lineage_flush", {LogicalType::VARCHAR}, FlushBind));
	flush.AddFunction(SkadeArrowFunction("skade_lineage_flush", {LogicalType::VARCHAR, LogicalType::BIGINT}, FlushBind));
	return {delivery, flush};
}

} // namespace duckdb
