// skade_commit_log(catalog): a log-resident catalog's commit log as this process sees it:
// provider, location, checkpoint, log_start, log_end, offers_won, offers_lost, poll_ms.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_commit_log");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_commit_log(catalog.Handle(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_commit_log", std::move(data), return_types, names);
}

TableFunction SkadeCommitLogFunction() {
	return SkadeArrowFunction("skade_commit_log", {LogicalType::VARCHAR}, Bind);
}

} // namespace duckdb
