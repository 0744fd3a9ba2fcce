// skade_remove_orphan_files(table, older_than := TIMESTAMPTZ, dry_run := BOOLEAN): removes the
// files in the table's folders that no commit references and that are older than older_than
// (3 days by default), when the query runs; one row per file.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_remove_orphan_files");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	int64_t older_than = 0;
	bool has_older_than = false;
	bool dry_run = false;
	for (auto &param : input.named_parameters) {
		if (param.second.IsNull()) {
			continue;
		}
		if (StringUtil::CIEquals(SkadeNameString(param.first), "older_than")) {
			older_than = Timestamp::GetEpochMicroSeconds(timestamp_t(TimestampTZValue::Get(param.second)));
			has_older_than = true;
		} else if (StringUtil::CIEquals(SkadeNameString(param.first), "dry_run")) {
			dry_run = BooleanValue::Get(param.second);
		}
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_remove_orphan_files(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(),
		                                        older_than, has_older_than, dry_run, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_remove_orphan_files", std::move(data), return_types, names);
}

TableFunction SkadeRemoveOrphanFilesFunction() {
	auto function = SkadeArrowFunction("skade_remove_orphan_files", {LogicalType::VARCHAR}, Bind);
	SkadeAddNamedParameter(function, "older_than", LogicalType::TIMESTAMP_TZ);
	SkadeAddNamedParameter(function, "dry_run", LogicalType::BOOLEAN);
	return function;
}

} // namespace duckdb
