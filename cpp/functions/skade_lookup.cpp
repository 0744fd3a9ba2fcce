// skade_lookup(table, key [, as_of := snapshot_id]): the live row whose primary key is `key` (a
// value, a STRUCT naming each key column, or a LIST of either for several keys), read by the
// core's point-lookup path. skade_lookup_stats(): the lookup counters since load.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/function/cast/cast_function_set.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"

namespace duckdb {

namespace {

//! `value` as the type of key column `column`, compared as `WHERE k = value` compares: types that
//! cast implicitly one way or the other (a BIGINT for an INTEGER key, an INTEGER for a BIGINT
//! key, not a VARCHAR), so a wrong key type is an error rather than a silent miss. A value the
//! key type cannot hold (3000000000 for an INTEGER key), or only changed (1.5 for a
//! DECIMAL(18,0) key rounds to 2, a TIMESTAMP_NS for a TIMESTAMP key drops its nanoseconds),
//! cannot equal a stored key: NULL, which matches nothing, as `k = 1.5` would.
Value KeyValue(ClientContext &context, const string &table, const ColumnDefinition &column, const Value &value) {
	auto &type = column.Type();
	if (value.type() == type) {
		return value;
	}
	if (value.IsNull()) {
		return Value(type);
	}
	if (CastFunctionSet::ImplicitCastCost(context, value.type(), type) < 0 &&
	    CastFunctionSet::ImplicitCastCost(context, type, value.type()) < 0) {
		throw BinderException("skade_lookup: primary-key column \"%s\" of %s is %s; a key of type %s does not match it",
		                      SkadeNameString(column.Name()), table, type.ToString(), value.type().ToString());
	}
	// The client's casts, as `WHERE k = ...` casts: with ICU loaded, TIMESTAMP and TIMESTAMPTZ
	// convert in the session's time zone, and a TIMESTAMPTZ converts back to a DATE.
	Value key;
	Value back;
	string error;
	if (!SkadeTryCast(context, value, type, key, &error) || !SkadeTryCast(context, key, value.type(), back, &error) ||
	    back != value) {
		return Value(type);
	}
	return key;
}

//! One key's value per key column (in `key_columns` order).
vector<Value> KeyValues(ClientContext &context, const string &table, SkadeTableEntry &entry,
                        const vector<string> &key_columns, const Value &key) {
	vector<Value> values;
	if (key.type().id() == LogicalTypeId::STRUCT && key.IsNull()) {
		// a NULL key matches nothing, like a NULL scalar
		for (auto &name : key_columns) {
			values.push_back(Value(entry.GetColumn(SkadeToName(name)).Type()));
		}
		return values;
	}
	if (key.type().id() == LogicalTypeId::STRUCT) {
		auto &fields = StructType::GetChildTypes(key.type());
		auto &children = StructValue::GetChildren(key);
		for (auto &name : key_columns) {
			idx_t found = DConstants::INVALID_INDEX;
			for (idx_t i = 0; i < fields.size(); i++) {
				if (StringUtil::CIEquals(SkadeNameString(fields[i].first), name)) {
					found = i;
				}
			}
			if (found == DConstants::INVALID_INDEX) {
				throw BinderException("skade_lookup: the key STRUCT has no field \"%s\" (the primary key of %s is %s)",
				                      name, table, StringUtil::Join(key_columns, ", "));
			}
			values.push_back(KeyValue(context, table, entry.GetColumn(SkadeToName(name)), children[found]));
		}
		if (fields.size() != key_columns.size()) {
			throw BinderException("skade_lookup: the key STRUCT has %d fields; the primary key of %s is %s",
			                      fields.size(), table, StringUtil::Join(key_columns, ", "));
		}
		return values;
	}
	if (key_columns.size() != 1) {
		throw BinderException("skade_lookup: %s has a composite primary key (%s): pass the key as a STRUCT, e.g. "
		                      "{'%s': ...}",
		                      table, StringUtil::Join(key_columns, ", "), key_columns[0]);
	}
	values.push_back(KeyValue(context, table, entry.GetColumn(SkadeToName(key_columns[0])), key));
	return values;
}

unique_ptr<FunctionData> LookupBind(ClientContext &context, TableFunctionBindInput &input,
                                    vector<LogicalType> &return_types, vector<SkadeName> &names) {
	if (input.inputs[0].IsNull()) {
		throw BinderException("skade_lookup: the table must not be NULL");
	}
	auto qualified = StringValue::Get(input.inputs[0]);
	auto &table = SkadeTableByName(context, qualified);
	auto primary = table.GetPrimaryKey();
	if (!primary) {
		throw BinderException("skade_lookup: table %s has no primary key", qualified);
	}
	vector<string> key_columns = SkadeNameStrings(primary->Cast<UniqueConstraint>().GetColumnNames());
	int64_t as_of = 0;
	bool has_as_of = false;
	for (auto &param : input.named_parameters) {
		if (StringUtil::CIEquals(SkadeNameString(param.first), "as_of") && !param.second.IsNull()) {
			as_of = param.second.GetValue<int64_t>();
			has_as_of = true;
		}
	}
	// Keys: one row per key, one column per key column.
	auto &key = input.inputs[1];
	vector<Value> keys;
	if (key.type().id() == LogicalTypeId::LIST) {
		if (!key.IsNull()) {
			keys = ListValue::GetChildren(key);
		}
	} else {
		keys.push_back(key);
	}
	vector<LogicalType> key_types;
	for (auto &name : key_columns) {
		key_types.push_back(table.GetColumn(SkadeToName(name)).Type());
	}
	vector<vector<Value>> rows;
	for (auto &k : keys) {
		rows.push_back(KeyValues(context, qualified, table, key_columns, k));
	}

	auto &catalog = table.ParentCatalog().Cast<SkadeCatalog>();
	auto catalog_name = SkadeNameString(catalog.GetName());
	auto uuid = table.Uuid();
	auto schema_id = skade_table_schema_id(table.Handle());
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->columns_checked_by_core = true;
	// Point queries are run many times: keep the binding (one bind per query, not two). The
	// function reads the table by id; if it was dropped since, that is an error to prepare again.
	data->cache_binding = true;
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		DataChunk chunk;
		chunk.Initialize(Allocator::Get(context), key_types, MaxValue<idx_t>(rows.size(), 1));
		SkadeSetChunkSize(chunk, rows.size());
		for (idx_t r = 0; r < rows.size(); r++) {
			for (idx_t c = 0; c < key_types.size(); c++) {
				chunk.data[c].SetValue(r, rows[r][c]);
			}
		}
		auto props = SkadeArrowProperties(context);
		ArrowSchemaWrapper keys_schema;
		ArrowArrayWrapper keys_array;
		ArrowConverter::ToArrowSchema(&keys_schema.arrow_schema, key_types, key_columns, props);
		unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
		ArrowConverter::ToArrowArray(chunk, &keys_array.arrow_array, props, no_extensions);
		SkadeCheck(skade_fn_lookup(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), qualified.c_str(),
		                           schema_id, &keys_array.arrow_array, &keys_schema.arrow_schema, as_of, has_as_of,
		                           &out));
	};
	// The rows have the table's columns: the entry's shape (shared, converted once) describes them.
	return SkadeArrowFunctionBind(table.Shape(), std::move(data), return_types, names);
}

unique_ptr<FunctionData> StatsBind(ClientContext &context, TableFunctionBindInput &input,
                                   vector<LogicalType> &return_types, vector<SkadeName> &names) {
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [](ClientContext &context, ArrowArrayStream &out) {
		SkadeCheck(skade_fn_lookup_stats(&out));
	};
	return SkadeArrowFunctionBind(context, "skade_lookup_stats", std::move(data), return_types, names);
}

} // namespace

TableFunction SkadeLookupFunction() {
	auto function = SkadeArrowFunction("skade_lookup", {LogicalType::VARCHAR, LogicalType::ANY}, LookupBind);
	SkadeAddNamedParameter(function, "as_of", LogicalType::BIGINT);
	return function;
}

TableFunction SkadeLookupStatsFunction() {
	return SkadeArrowFunction("skade_lookup_stats", {}, StatsBind);
}

} // namespace duckdb
