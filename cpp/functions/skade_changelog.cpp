// skade_changelog(table, from_snapshot [, to_snapshot] [, collapse := bool]): the table's columns
// plus _change_type and _commit_snapshot_id, for every row the snapshots of the window inserted,
// deleted or updated (or, collapsed, the window's net effect).
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

static unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	if (input.inputs[0].IsNull()) {
		throw BinderException("skade_changelog: the table must not be NULL");
	}
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	// from NULL: since the table's creation; to absent or NULL: up to the current snapshot.
	// Bounds are snapshot ids, or times (TIMESTAMPTZ: the last snapshot committed by then).
	bool has_from = !input.inputs[1].IsNull();
	bool times = input.inputs[1].type().id() == LogicalTypeId::TIMESTAMP_TZ;
	auto bound = [&](const Value &v) -> int64_t {
		return times ? Timestamp::GetEpochMicroSeconds(timestamp_t(TimestampTZValue::Get(v))) : v.GetValue<int64_t>();
	};
	int64_t from = has_from ? bound(input.inputs[1]) : 0;
	bool has_to = input.inputs.size() > 2 && !input.inputs[2].IsNull();
	int64_t to = has_to ? bound(input.inputs[2]) : 0;
	bool collapse = false;
	for (auto &param : input.named_parameters) {
		if (StringUtil::CIEquals(SkadeNameString(param.first), "collapse") && !param.second.IsNull()) {
			collapse = BooleanValue::Get(param.second);
		}
	}
	auto &catalog = table.ParentCatalog().Cast<SkadeCatalog>();
	ArrowSchemaWrapper schema;
	SkadeCheck(skade_fn_changelog_schema(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(),
	                                     &schema.arrow_schema));
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(catalog.GetName());
	data->parallel = true; // changelog rows have no order (ORDER BY _commit_snapshot_id for one)
	data->projection = true;
	data->virtual_columns = 1; // _full_reload: true on the rows of a full reload (an undecodable window)
	data->open_columns = [=](ClientContext &context, const vector<column_t> &column_ids,
	                         SkadeFilterDescription &filters, ArrowArrayStream &out,
	                         SkadeStreamOpened &) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		vector<uint64_t> columns(column_ids.begin(), column_ids.end());
		SkadeCheck(skade_fn_changelog(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), from, has_from,
		                              to, has_to, times, collapse, columns.data(), columns.size(),
		                              filters.json.c_str(), filters.Constants(), filters.ConstantsSchema(), &out));
	};
	return SkadeArrowFunctionBind(context, schema, std::move(data), return_types, names);
}

TableFunctionSet SkadeChangelogFunctions() {
	TableFunctionSet set("skade_changelog");
	for (auto bound : {LogicalType::BIGINT, LogicalType::TIMESTAMP_TZ}) {
		for (auto arguments :
		     {vector<LogicalType> {LogicalType::VARCHAR, bound}, vector<LogicalType> {LogicalType::VARCHAR, bound, bound}}) {
			auto function = SkadeArrowFunction("skade_changelog", arguments, Bind);
			SkadeAddNamedParameter(function, "collapse", LogicalType::BOOLEAN);
			function.projection_pushdown = true; // columns a query does not use are not converted
			function.get_virtual_columns = SkadeArrowVirtualColumns;
			function.filter_pushdown = true; // filters prune files and snapshots, then apply exactly
			set.AddFunction(function);
		}
	}
	return set;
}

} // namespace duckdb
