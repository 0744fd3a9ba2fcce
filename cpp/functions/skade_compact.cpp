// skade_compact(table): rewrites the table's live rows into new files with deletes applied, as
// its own `replace` commit, when the query runs. One row says what it did.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_compact");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_compact(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_compact", std::move(data), return_types, names);
}

TableFunction SkadeCompactFunction() {
	return SkadeArrowFunction("skade_compact", {LogicalType::VARCHAR}, Bind);
}

} // namespace duckdb
