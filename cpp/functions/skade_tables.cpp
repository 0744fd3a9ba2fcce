// skade_tables(catalog): schema_name, table_name, kind, current_snapshot_id, metadata_location,
// partitioned_by, sorted_by (the columns the core describes).
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_tables");
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	data->open = [catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_tables(SkadeTransaction::Get(context, catalog).Handle(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_tables", std::move(data), return_types, names);
}

TableFunction SkadeTablesFunction() {
	return SkadeArrowFunction("skade_tables", {LogicalType::VARCHAR}, Bind);
}

} // namespace duckdb
