// skade_snapshots(table): snapshot_id, parent_id, sequence_number, committed_at, operation,
// commit_seq, summary.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_snapshots");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [uuid, catalog_name](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_snapshots(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_snapshots", std::move(data), return_types, names);
}

TableFunction SkadeSnapshotsFunction() {
	return SkadeArrowFunction("skade_snapshots", {LogicalType::VARCHAR}, Bind);
}

} // namespace duckdb
