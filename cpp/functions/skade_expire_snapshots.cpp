// skade_expire_snapshots(table, older_than := TIMESTAMPTZ, retain_last := BIGINT): drops old
// snapshots and the files only they used, as its own commit, when the query runs.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_expire_snapshots");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	int64_t older_than = 0;
	int64_t retain_last = 0;
	bool has_older_than = false;
	bool has_retain_last = false;
	for (auto &param : input.named_parameters) {
		if (param.second.IsNull()) {
			continue;
		}
		if (StringUtil::CIEquals(SkadeNameString(param.first), "older_than")) {
			older_than = Timestamp::GetEpochMicroSeconds(timestamp_t(TimestampTZValue::Get(param.second)));
			has_older_than = true;
		} else if (StringUtil::CIEquals(SkadeNameString(param.first), "retain_last")) {
			retain_last = param.second.GetValue<int64_t>();
			has_retain_last = true;
		}
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_expire_snapshots(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(),
		                                     older_than, has_older_than, retain_last, has_retain_last, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_expire_snapshots", std::move(data), return_types, names);
}

TableFunction SkadeExpireSnapshotsFunction() {
	auto function = SkadeArrowFunction("skade_expire_snapshots", {LogicalType::VARCHAR}, Bind);
	SkadeAddNamedParameter(function, "older_than", LogicalType::TIMESTAMP_TZ);
	SkadeAddNamedParameter(function, "retain_last", LogicalType::BIGINT);
	return function;
}

} // namespace duckdb
