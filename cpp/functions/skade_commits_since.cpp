// skade_commits_since(catalog, since_seq): the durable commit feed, every commit after since_seq.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_commits_since");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	auto since = input.inputs[1].GetValue<int64_t>();
	if (since < 0) {
		throw BinderException("skade_commits_since: since_seq must be >= 0, got %d", since);
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [since, catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_commits_since(catalog.Handle(), uint64_t(since), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_commits_since", std::move(data), return_types, names);
}

TableFunction SkadeCommitsSinceFunction() {
	return SkadeArrowFunction("skade_commits_since", {LogicalType::VARCHAR, LogicalType::BIGINT}, Bind);
}

} // namespace duckdb
