// skade_lineage(catalog [, since_seq]): the lineage event of every committed transaction after
// since_seq (default 0) that changed a table: what it wrote and what it read.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_lineage");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	int64_t since = input.inputs.size() > 1 ? input.inputs[1].GetValue<int64_t>() : 0;
	if (since < 0) {
		throw BinderException("skade_lineage: since_seq must be >= 0, got %d", since);
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [since, catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_lineage(catalog.Handle(), uint64_t(since), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_lineage", std::move(data), return_types, names);
}

TableFunctionSet SkadeLineageFunctions() {
	TableFunctionSet set("skade_lineage");
	set.AddFunction(SkadeArrowFunction("skade_lineage", {LogicalType::VARCHAR}, Bind));
	set.AddFunction(SkadeArrowFunction("skade_lineage", {LogicalType::VARCHAR, LogicalType::BIGINT}, Bind));
	return set;
}

} // namespace duckdb
