// skade_upgrade_table(table, version): raises the table's Iceberg format version in place (2 ->
// 3), as its own commit, when the query runs. One row says what it did.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_upgrade_table");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	auto version = input.inputs[1].GetValue<int64_t>();
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(
		    skade_fn_upgrade_table(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), version, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_upgrade_table", std::move(data), return_types, names);
}

TableFunction SkadeUpgradeTableFunction() {
	return SkadeArrowFunction("skade_upgrade_table", {LogicalType::VARCHAR, LogicalType::BIGINT}, Bind);
}

} // namespace duckdb
