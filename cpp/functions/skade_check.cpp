// skade_check(catalog): reads every record of the catalog file and every table's metadata file,
// one row per part with what is damaged. Nothing is written or repaired.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_check");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_check(catalog.Handle(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_check", std::move(data), return_types, names);
}

TableFunction SkadeCheckFunction() {
	return SkadeArrowFunction("skade_check", {LogicalType::VARCHAR}, Bind);
}

} // namespace duckdb
