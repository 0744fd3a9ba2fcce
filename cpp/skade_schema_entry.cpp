// Schemas of a skade catalog: lookups of tables, views and macros, their CREATE, DROP and ALTER go to
// the core.
#include "skade/schema_entry.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"
#include "skade/view_entry.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/common/exception/binder_exception.hpp"
#include "duckdb/common/exception/conversion_exception.hpp"
#include "duckdb/main/config.hpp"
#include "duckdb/parser/constraints/not_null_constraint.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"
#include "duckdb/parser/column_definition.hpp"
#include "duckdb/parser/expression/cast_expression.hpp"
#include "duckdb/parser/expression/constant_expression.hpp"
#include "duckdb/parser/expression/function_expression.hpp"
#include "duckdb/planner/binder.hpp"
#include "duckdb/planner/expression_binder/constant_binder.hpp"
#include "duckdb/execution/expression_executor.hpp"
#include "duckdb/parser/parsed_data/alter_table_info.hpp"
#include "duckdb/parser/parsed_data/comment_on_column_info.hpp"
#include "duckdb/parser/parsed_data/create_macro_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

SkadeSchemaEntry::SkadeSchemaEntry(Catalog &catalog, CreateSchemaInfo &info) : SchemaCatalogEntry(catalog, info) {
}

SkadeTransaction &SkadeSchemaEntry::Txn(ClientContext &context) {
	return SkadeTransaction::Get(context, catalog);
}

SkadeSchemaEntry::~SkadeSchemaEntry() {
}

SkadeTableEntry &SkadeSchemaEntry::AddTable(ClientContext &context, SkadeTableHandle table) {
	auto entry = SkadeTableEntry::Create(context, *this, std::move(table));
	lock_guard<mutex> guard(lock);
	// Two threads may resolve the same table at once: the first entry wins and stays valid,
	// because bound plans may already point at it.
	auto table_name = SkadeNameString(entry->name);
	auto inserted = tables.emplace(table_name, std::move(entry));
	return *inserted.first->second;
}

optional_ptr<SkadeTableEntry> SkadeSchemaEntry::GetTable(ClientContext &context, const string &name) {
	{
		lock_guard<mutex> guard(lock);
		auto it = tables.find(name);
		if (it != tables.end()) {
			return it->second.get();
		}
	}
	SkadeTableHandle table;
	SkadeCheck(skade_txn_table(Txn(context).Handle(), this->name.c_str(), name.c_str(), table.out()));
	if (!table) {
		return nullptr;
	}
	return &AddTable(context, std::move(table));
}

optional_ptr<CatalogEntry> SkadeSchemaEntry::GetMacro(ClientContext &context, CatalogType type, const string &name) {
	return macros.Lookup(context, *this, Txn(context).Handle(), type, name);
}

optional_ptr<ViewCatalogEntry> SkadeSchemaEntry::GetView(ClientContext &context, const string &name) {
	{
		lock_guard<mutex> guard(lock);
		auto it = views.find(name);
		if (it != views.end()) {
			return it->second.get();
		}
	}
	auto view = SkadeLoadView(context, *this, Txn(context).Handle(), name);
	if (!view) {
		return nullptr;
	}
	lock_guard<mutex> guard(lock);
	// (the first of two threads resolving it wins: bound plans may already point at it)
	auto view_name = SkadeNameString(view->name);
	return views.emplace(view_name, std::move(view)).first->second.get();
}

optional_ptr<CatalogEntry> SkadeSchemaEntry::LookupEntry(CatalogTransaction transaction,
                                                         const EntryLookupInfo &lookup_info) {
	auto type = lookup_info.GetCatalogType();
	if (SkadeIsMacroType(type)) {
		// (a lookup without a client, which no statement makes, cannot parse a macro: none found)
		if (!transaction.HasContext()) {
			return nullptr;
		}
		return GetMacro(transaction.GetContext(), type, lookup_info.GetEntryName());
	}
	// Tables and views share one namespace, as in DuckDB's own schemas: a lookup of either kind
	// finds an entry of the other (DuckDB then names the mismatch).
	if (type != CatalogType::TABLE_ENTRY && type != CatalogType::VIEW_ENTRY) {
		return nullptr;
	}
	auto &context = transaction.GetContext();
	auto table = GetTable(context, lookup_info.GetEntryName());
	auto at = lookup_info.GetAtClause();
	if (!table) {
		auto view = GetView(context, lookup_info.GetEntryName());
		if (view && at) {
			throw BinderException("view \"%s\" has no versions of its own: put the AT clause on the tables its "
			                      "query reads",
			                      SkadeNameString(view->name));
		}
		return view.get();
	}
	if (!at) {
		return table.get();
	}
	// AT (VERSION / TIMESTAMP): the table as that snapshot has it, its columns included (a snapshot
	// reads with the schema it was written with, whatever ALTERs came after)
	string unit;
	int64_t value;
	SkadeResolveAt(context, *at, unit, value);
	// (kept by the transaction, not the entry set: AT TIMESTAMP names a new key at every statement;
	// a plan that reads one is bound at every run: SkadeScanBindData::SupportStatementCache. By the
	// table's id, not its name: the transaction may rename or drop and create tables meanwhile.)
	auto &txn = Txn(context);
	auto key = table->Uuid() + "@" + StringUtil::Lower(unit) + " " + to_string(value);
	auto pinned = txn.Pinned(key);
	if (pinned) {
		return pinned.get();
	}
	SkadeTableHandle handle;
	SkadeCheck(skade_table_at(table->Handle(), unit.c_str(), value, handle.out()));
	return &txn.Pin(key, SkadeTableEntry::Create(context, *this, std::move(handle)));
}

void SkadeSchemaEntry::Scan(ClientContext &context, CatalogType type,
                            const std::function<void(CatalogEntry &)> &callback) {
	// (duckdb_functions() scans scalar and table functions, EXPORT DATABASE macros)
	if (SkadeIsMacroType(type)) {
		macros.Scan(context, *this, Txn(context).Handle(), type, callback);
		return;
	}
	// (as DuckDB's own schemas do, a scan of tables lists views too, and one of views tables:
	// duckdb_columns() shows both, duckdb_tables() and duckdb_views() pick their kind)
	if (type != CatalogType::TABLE_ENTRY && type != CatalogType::VIEW_ENTRY) {
		return;
	}
	auto txn = Txn(context).Handle();
	skade_strings *names = nullptr;
	SkadeCheck(skade_txn_tables(txn, name.c_str(), &names));
	for (auto &table_name : SkadeTakeStrings(names)) {
		auto table = GetTable(context, table_name);
		if (table) {
			callback(*table);
		}
	}
	SkadeCheck(skade_txn_views(txn, name.c_str(), &names));
	for (auto &view_name : SkadeTakeStrings(names)) {
		auto view = GetView(context, view_name);
		if (view) {
			callback(*view);
		}
	}
}

void SkadeSchemaEntry::Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) {
	if (SkadeIsMacroType(type)) {
		macros.ScanBuilt(type, callback);
		return;
	}
	if (type != CatalogType::TABLE_ENTRY && type != CatalogType::VIEW_ENTRY) {
		return;
	}
	// Without a context only the entries already resolved in this entry set can be listed.
	lock_guard<mutex> guard(lock);
	for (auto &entry : tables) {
		callback(*entry.second);
	}
	for (auto &entry : views) {
		callback(*entry.second);
	}
}

namespace {

string ColumnName(const ColumnList &columns, LogicalIndex index) {
	return SkadeNameString(columns.GetColumn(index).Name());
}

} // namespace

static string JsonString(const string &text) {
	string out = "\"";
	for (unsigned char c : text) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += (char)c;
		} else if (c < 0x20) {
			out += StringUtil::Format("\\u%04x", (int)c);
		} else {
			out += (char)c;
		}
	}
	return out + "\"";
}

//! A partition key of PARTITIONED BY (or a sort key's expression) as the core reads it: a column, a
//! constant, or a call of a function on them. `verb` ("partition", "sort") names the clause.
static string KeyExprJson(const ParsedExpression &expr, const string &verb) {
	switch (expr.GetExpressionClass()) {
	case ExpressionClass::COLUMN_REF:
		return "{\"column\":" + JsonString(SkadeNameString(expr.Cast<ColumnRefExpression>().GetColumnName())) + "}";
	case ExpressionClass::CONSTANT:
		return "{\"constant\":" + JsonString(expr.ToString()) + "}";
	case ExpressionClass::FUNCTION: {
		auto &call = expr.Cast<FunctionExpression>();
		string args;
		for (auto arg : SkadeCallArguments(call)) {
			args += (args.empty() ? "" : ",") + KeyExprJson(*arg, verb);
		}
		return "{\"function\":{\"name\":" + JsonString(SkadeCallName(call)) + ",\"args\":[" + args + "]}}";
	}
	default:
		throw NotImplementedException("cannot %s a skade table by %s: use a column, year(c), month(c), day(c), "
		                              "hour(c), bucket(N, c) or truncate(W, c)",
		                              verb, expr.ToString());
	}
}

//! The keys of PARTITIONED BY as a JSON list.
static string PartitionKeysJson(const vector<unique_ptr<ParsedExpression>> &keys) {
	string json;
	for (auto &key : keys) {
		json += (json.empty() ? "" : ",") + KeyExprJson(*key, "partition");
	}
	return "[" + json + "]";
}

//! A sort key of SORTED BY as the core reads it: its expression, and its direction and NULL order
//! resolved as DuckDB resolves an ORDER BY's (the default_order and default_null_order settings
//! fill in what the statement leaves out), so the stored order is what the user would get.
static string SortKeyJson(ClientContext &context, const ParsedExpression &expr, OrderType type,
                          OrderByNullType null_order) {
	auto &config = DBConfig::GetConfig(context);
	auto direction = config.ResolveOrder(context, type);
	auto nulls = config.ResolveNullOrder(context, direction, null_order);
	string json = "{\"expr\":" + KeyExprJson(expr, "sort");
	json += ",\"descending\":";
	json += direction == OrderType::DESCENDING ? "true" : "false";
	json += ",\"nulls_first\":";
	json += nulls == OrderByNullType::NULLS_FIRST ? "true" : "false";
	return json + "}";
}

static void ExportColumnType(ClientContext &context, const string &name, const LogicalType &type,
                             ArrowSchemaWrapper &out);
static bool ExportDefault(ClientContext &context, const string &column, const ParsedExpression &expr,
                          const LogicalType &type, ArrowArrayWrapper &out);

//! CREATE TABLE's column DEFAULTs (columns `defaulted` of `base`): each the new table's write
//! default, set as ALTER COLUMN SET DEFAULT sets it (the core refuses them on a v2 table).
static void SetDefaults(ClientContext &context, SkadeTransaction &txn, const string &schema,
                        const CreateTableInfo &base, const vector<idx_t> &defaulted) {
	auto table = SkadeTableName(base);
	for (auto i : defaulted) {
		auto &col = base.columns.GetColumn(LogicalIndex(i));
		auto column = SkadeNameString(col.Name());
		ArrowSchemaWrapper column_type;
		ArrowArrayWrapper value;
		ExportColumnType(context, column, col.Type(), column_type);
		if (!ExportDefault(context, column, col.DefaultValue(), col.Type(), value)) {
			continue;
		}
		auto type_name = col.Type().ToString();
		bool changed = false;
		SkadeCheck(skade_txn_alter_table(txn.Handle(), schema.c_str(), table.c_str(), "set_default",
		                                 column.c_str(), nullptr, false, &column_type.arrow_schema,
		                                 type_name.c_str(), &value.arrow_array, &changed));
	}
	txn.InvalidateEntries();
}

optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateTable(CatalogTransaction transaction, BoundCreateTableInfo &info) {
	auto &context = transaction.GetContext();
	auto &base = info.Base();
	if (base.temporary) {
		throw NotImplementedException("skade catalogs do not hold temporary tables");
	}
	// PARTITIONED BY: the keys as written, the core maps them to Iceberg transforms
	auto partitioned_by = base.partition_keys.empty() ? string() : PartitionKeysJson(base.partition_keys);
	// SORTED BY: DuckDB's grammar takes plain expressions there (ASC or DESC only in ALTER TABLE ...
	// SET SORTED BY), so each key sorts in the default direction and NULL order
	string sorted_by;
	for (auto &key : base.sort_keys) {
		sorted_by += (sorted_by.empty() ? "" : ",") +
		             SortKeyJson(context, *key, OrderType::ORDER_DEFAULT, OrderByNullType::ORDER_DEFAULT);
	}
	if (!sorted_by.empty()) {
		sorted_by = "[" + sorted_by + "]";
	}
	if (!base.options.empty()) {
		throw InvalidInputException("unknown table option \"%s\" for a skade table", base.options.begin()->first);
	}
	vector<string> names;
	vector<LogicalType> types;
	vector<string> type_names;
	vector<idx_t> defaulted; // (the columns with a DEFAULT: the new table's write defaults, v3)
	for (auto &col : base.columns.Logical()) {
		if (col.Generated()) {
			throw NotImplementedException("generated column \"%s\": skade tables store every column",
			                              SkadeNameString(col.Name()));
		}
		if (col.HasDefaultValue()) {
			defaulted.push_back(col.Oid());
		}
		if (col.Type().id() == LogicalTypeId::VARCHAR && !StringType::GetCollation(col.Type()).empty()) {
			throw NotImplementedException("column \"%s\" has COLLATE %s, which skade tables do not keep",
			                              SkadeNameString(col.Name()),
			                              StringType::GetCollation(col.Type()));
		}
		names.push_back(SkadeNameString(col.Name()));
		types.push_back(col.Type());
		type_names.push_back(col.Type().ToString());
	}
	vector<string> not_null;
	vector<string> primary_key;
	for (auto &constraint : base.constraints) {
		switch (constraint->type) {
		case ConstraintType::NOT_NULL:
			not_null.push_back(ColumnName(base.columns, constraint->Cast<NotNullConstraint>().index));
			break;
		case ConstraintType::UNIQUE: {
			auto &unique = constraint->Cast<UniqueConstraint>();
			if (!unique.IsPrimaryKey()) {
				throw NotImplementedException("UNIQUE constraints are not supported on skade tables; use PRIMARY KEY");
			}
			if (!primary_key.empty()) {
				throw InvalidInputException("a table can have only one PRIMARY KEY");
			}
			if (unique.HasIndex()) {
				primary_key.push_back(ColumnName(base.columns, unique.GetIndex()));
			} else {
				primary_key = SkadeNameStrings(unique.GetColumnNames());
			}
			break;
		}
		case ConstraintType::CHECK:
			throw NotImplementedException("CHECK constraints are not supported on skade tables");
		case ConstraintType::FOREIGN_KEY:
			throw NotImplementedException("FOREIGN KEY constraints are not supported on skade tables");
		default:
			throw NotImplementedException("this constraint is not supported on skade tables");
		}
	}

	auto props = SkadeArrowProperties(context);
	ArrowSchemaWrapper arrow;
	try {
		ArrowConverter::ToArrowSchema(&arrow.arrow_schema, types, names, props);
	} catch (std::exception &) {
		// DuckDB's Arrow export refuses some types (VARIANT) without naming the column: name it.
		for (idx_t i = 0; i < types.size(); i++) {
			ArrowSchemaWrapper one;
			try {
				ArrowConverter::ToArrowSchema(&one.arrow_schema, {types[i]}, {names[i]}, props);
			} catch (std::exception &) {
				throw NotImplementedException(
				    "column \"%s\" has type %s, which a skade (Iceberg) table cannot store", names[i],
				    types[i].ToString());
			}
		}
		throw;
	}
	auto cstrs = [](const vector<string> &v) {
		vector<const char *> out;
		for (auto &s : v) {
			out.push_back(s.c_str());
		}
		return out;
	};
	auto type_ptrs = cstrs(type_names);
	auto not_null_ptrs = cstrs(not_null);
	auto key_ptrs = cstrs(primary_key);
	int32_t on_conflict = 0;
	if (base.on_conflict == OnCreateConflict::IGNORE_ON_CONFLICT) {
		on_conflict = 1;
	} else if (base.on_conflict == OnCreateConflict::REPLACE_ON_CONFLICT) {
		on_conflict = 2;
	}
	auto &txn = SkadeTransaction::Get(transaction, catalog);
	SkadeTableHandle table;
	SkadeCheck(skade_txn_create_table(txn.Handle(), name.c_str(), SkadeTableName(base).c_str(), &arrow.arrow_schema,
	                                  type_ptrs.data(), type_ptrs.size(), not_null_ptrs.data(), not_null_ptrs.size(),
	                                  key_ptrs.data(), key_ptrs.size(),
	                                  partitioned_by.empty() ? nullptr : partitioned_by.c_str(),
	                                  sorted_by.empty() ? nullptr : sorted_by.c_str(), on_conflict, table.out()));
	txn.InvalidateEntries();
	if (!table) {
		return nullptr;
	}
	if (!defaulted.empty()) {
		SetDefaults(context, txn, SkadeNameString(name), base, defaulted);
	}
	auto schema = txn.GetSchema(context, SkadeNameString(name));
	if (!schema) {
		throw CatalogException("Schema with name %s does not exist!", SkadeNameString(name));
	}
	return &schema->AddTable(context, std::move(table));
}

void SkadeSchemaEntry::DropEntry(ClientContext &context, DropInfo &info) {
	auto &transaction = Txn(context);
	if (info.type == CatalogType::VIEW_ENTRY) {
		auto if_exists = info.if_not_found == OnEntryNotFound::RETURN_NULL;
		SkadeCheck(
		    skade_txn_drop_view(transaction.Handle(), name.c_str(), SkadeEntryName(info).c_str(), if_exists));
		transaction.InvalidateEntries();
		return;
	}
	if (info.type == CatalogType::MACRO_ENTRY || info.type == CatalogType::TABLE_MACRO_ENTRY) {
		SkadeDropMacro(transaction.Handle(), SkadeNameString(name), info);
		transaction.InvalidateEntries();
		return;
	}
	if (info.type != CatalogType::TABLE_ENTRY) {
		throw NotImplementedException("skade catalogs hold tables, views and macros: cannot drop %s \"%s\"",
		                              CatalogTypeToString(info.type), SkadeEntryName(info));
	}
	if (info.cascade) {
		// Nothing depends on a skade table; CASCADE changes nothing.
	}
	auto if_exists = info.if_not_found == OnEntryNotFound::RETURN_NULL;
	SkadeCheck(skade_txn_drop_table(transaction.Handle(), name.c_str(), SkadeEntryName(info).c_str(), if_exists));
	transaction.InvalidateEntries();
}

//! One column's type as DuckDB exports it (the core maps it to Iceberg's, as CREATE TABLE does).
static void ExportColumnType(ClientContext &context, const string &name, const LogicalType &type,
                             ArrowSchemaWrapper &out) {
	if (type.id() == LogicalTypeId::VARCHAR && !StringType::GetCollation(type).empty()) {
		throw NotImplementedException("column \"%s\" has COLLATE %s, which skade tables do not keep", name,
		                              StringType::GetCollation(type));
	}
	try {
		auto props = SkadeArrowProperties(context);
		ArrowConverter::ToArrowSchema(&out.arrow_schema, {type}, {name}, props);
	} catch (std::exception &) {
		throw NotImplementedException("column \"%s\" has type %s, which a skade (Iceberg) table cannot store", name,
		                              type.ToString());
	}
}


//! ALTER VIEW and COMMENT ON VIEW / a view's column; false when `info` is not about a view. (A
//! comment reaches here when no table has the name: COMMENT ON TABLE may name a view.)
static bool AlterView(SkadeTransaction &txn, const string &schema, AlterInfo &info) {
	auto view = SkadeEntryName(info);
	if (info.type == AlterType::ALTER_VIEW) {
		auto &alter = info.Cast<AlterViewInfo>();
		if (alter.alter_view_type != AlterViewType::RENAME_VIEW) {
			throw NotImplementedException("this ALTER VIEW is not supported on skade views");
		}
		auto to = SkadeNameString(alter.Cast<RenameViewInfo>().new_view_name);
		SkadeCheck(skade_txn_rename_view(txn.Handle(), schema.c_str(), view.c_str(), to.c_str()));
	} else if (info.type == AlterType::SET_COMMENT) {
		auto &comment = info.Cast<SetCommentInfo>().comment_value;
		auto text = comment.IsNull() ? string() : comment.ToString();
		SkadeCheck(skade_txn_comment_view(txn.Handle(), schema.c_str(), view.c_str(), nullptr,
		                                  comment.IsNull() ? nullptr : text.c_str()));
	} else if (info.type == AlterType::SET_COLUMN_COMMENT) {
		auto &column_info = info.Cast<SetColumnCommentInfo>();
		auto column = SkadeNameString(column_info.column_name);
		auto text = column_info.comment_value.IsNull() ? string() : column_info.comment_value.ToString();
		SkadeCheck(skade_txn_comment_view(txn.Handle(), schema.c_str(), view.c_str(), column.c_str(),
		                                  column_info.comment_value.IsNull() ? nullptr : text.c_str()));
	} else {
		return false;
	}
	txn.InvalidateEntries();
	return true;
}

//! A nested field's path (column first) as the core reads it: a JSON list of names.
static string PathJson(const vector<string> &path) {
	string json;
	for (auto &name : path) {
		json += (json.empty() ? "" : ",") + JsonString(name);
	}
	return "[" + json + "]";
}

//! Refuses a generated new column or nested field (`shown`): skade tables store every column.
static void CheckAddedColumn(const ColumnDefinition &col, const string &shown) {
	if (col.Generated()) {
		throw NotImplementedException("generated column \"%s\": skade tables store every column", shown);
	}
}

//! Whether a DEFAULT is one value: a literal, a cast of one, or arithmetic or concatenation of
//! such. (Iceberg keeps a column's default as a value: now() or nextval() would be one value
//! frozen at ALTER time.)
static bool IsConstantDefault(const ParsedExpression &expr) {
	switch (expr.GetExpressionClass()) {
	case ExpressionClass::CONSTANT:
		return true;
	case ExpressionClass::CAST:
		return IsConstantDefault(SkadeCastChild(expr.Cast<CastExpression>()));
	case ExpressionClass::FUNCTION: {
		auto &call = expr.Cast<FunctionExpression>();
		static const unordered_set<string> operators {"+", "-", "*", "/", "//", "%", "||"};
		if (!operators.count(SkadeCallName(call))) {
			return false;
		}
		for (auto argument : SkadeCallArguments(call)) {
			if (!IsConstantDefault(*argument)) {
				return false;
			}
		}
		return true;
	}
	default:
		return false;
	}
}

//! Column `column`'s DEFAULT `expr` as one row of `type` in `out` (exported as `ExportColumnType`
//! exports the type); false for DEFAULT NULL (no default). The core keeps it as the Iceberg v3
//! field's default, or refuses it naming why.
static bool ExportDefault(ClientContext &context, const string &column, const ParsedExpression &expr,
                          const LogicalType &type, ArrowArrayWrapper &out) {
	if (!IsConstantDefault(expr)) {
		// (a binder error, as DuckDB's own refusals of a DEFAULT are)
		throw BinderException("column \"%s\" has DEFAULT %s: a skade (Iceberg) table keeps a default that is one "
		                      "value, a literal (or arithmetic on literals)",
		                      column, expr.ToString());
	}
	auto binder = Binder::CreateBinder(context);
	ConstantBinder constant_binder(*binder, context, "DEFAULT value");
	auto copy = expr.Copy();
	auto bound = constant_binder.Bind(copy);
	Value value = ExpressionExecutor::EvaluateScalar(context, *bound);
	Value cast;
	string error;
	if (!SkadeTryCast(value, type, cast, error)) {
		throw ConversionException("column \"%s\": its DEFAULT %s is not a %s: %s", column, expr.ToString(),
		                          type.ToString(), error);
	}
	if (cast.IsNull()) {
		return false;
	}
	DataChunk chunk;
	chunk.Initialize(Allocator::Get(context), {type}, 1);
	SkadeSetChunkSize(chunk, 1);
	chunk.data[0].SetValue(0, cast);
	auto props = SkadeArrowProperties(context);
	unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
	ArrowConverter::ToArrowArray(chunk, &out.arrow_array, props, no_extensions);
	return true;
}

//! Whether ALTER COLUMN `path` TYPE keeps the values as they are: no USING, or USING the column
//! (or field) itself cast to the type, as DuckDB writes it when USING is left out.
static bool KeepsValues(const ChangeColumnTypeInfo &change, const vector<string> &path) {
	auto &expr = change.expression;
	if (!expr) {
		return true;
	}
	if (expr->GetExpressionClass() != ExpressionClass::CAST) {
		return false;
	}
	auto &child = SkadeCastChild(expr->Cast<CastExpression>());
	if (child.GetExpressionClass() != ExpressionClass::COLUMN_REF) {
		return false;
	}
	auto names = SkadeColumnRefPath(child.Cast<ColumnRefExpression>());
	if (names.size() != path.size()) {
		return false;
	}
	for (idx_t i = 0; i < names.size(); i++) {
		if (!StringUtil::CIEquals(names[i], path[i])) {
			return false;
		}
	}
	return true;
}

//! COMMENT ON TABLE or on a table's column: the table property `comment`, the column's Iceberg doc.
static void CommentTable(SkadeTransaction &txn, const string &schema, AlterInfo &info) {
	auto column_comment = info.type == AlterType::SET_COLUMN_COMMENT;
	auto &comment = column_comment ? info.Cast<SetColumnCommentInfo>().comment_value
	                               : info.Cast<SetCommentInfo>().comment_value;
	auto column = column_comment ? SkadeNameString(info.Cast<SetColumnCommentInfo>().column_name) : string();
	auto text = comment.IsNull() ? string() : comment.ToString();
	bool changed = false;
	SkadeCheck(skade_txn_alter_table(txn.Handle(), schema.c_str(), SkadeEntryName(info).c_str(),
	                                 column_comment ? "set_column_comment" : "set_comment",
	                                 column_comment ? column.c_str() : nullptr,
	                                 comment.IsNull() ? nullptr : text.c_str(), false, nullptr, nullptr, nullptr,
	                                 &changed));
	txn.InvalidateEntries();
}

void SkadeSchemaEntry::Alter(CatalogTransaction transaction, AlterInfo &info) {
	auto &skade_txn = SkadeTransaction::Get(transaction, catalog);
	if (info.type == AlterType::SET_COMMENT && SkadeIsMacroType(info.Cast<SetCommentInfo>().entry_catalog_type)) {
		throw NotImplementedException("COMMENT ON MACRO is not supported on skade catalogs (\"%s\"): a macro keeps "
		                              "its definition only",
		                              SkadeEntryName(info));
	}
	// DuckDB lets COMMENT ON VIEW name a table and COMMENT ON TABLE a view: the entry decides
	auto comment = info.type == AlterType::SET_COMMENT || info.type == AlterType::SET_COLUMN_COMMENT;
	if (comment && GetTable(transaction.GetContext(), SkadeEntryName(info))) {
		CommentTable(skade_txn, SkadeNameString(name), info);
		return;
	}
	if (AlterView(skade_txn, SkadeNameString(name), info)) {
		return;
	}
	if (info.type != AlterType::ALTER_TABLE) {
		throw NotImplementedException("skade catalogs hold tables, views and macros: this ALTER is not supported");
	}
	auto &alter = info.Cast<AlterTableInfo>();
	auto &context = transaction.GetContext();
	string op, column, to, type_name;
	bool if_flag = false;
	ArrowSchemaWrapper column_type;
	bool typed = false;
	ArrowArrayWrapper default_value;
	bool has_default = false;
	switch (alter.alter_table_type) {
	case AlterTableType::RENAME_TABLE:
		op = "rename_table";
		to = SkadeNameString(alter.Cast<RenameTableInfo>().new_table_name);
		break;
	case AlterTableType::RENAME_COLUMN: {
		auto &rename = alter.Cast<RenameColumnInfo>();
		op = "rename_column";
		column = SkadeNameString(rename.old_name);
		to = SkadeNameString(rename.new_name);
		break;
	}
	case AlterTableType::ADD_COLUMN: {
		auto &add = alter.Cast<AddColumnInfo>();
		auto &col = add.new_column;
		op = "add_column";
		column = SkadeNameString(col.Name());
		if_flag = add.if_column_not_exists;
		CheckAddedColumn(col, column);
		if (SkadeAddColumnConstrained(add)) {
			throw NotImplementedException("ADD COLUMN \"%s\" with NOT NULL or UNIQUE: the rows a table holds would "
			                              "have it NULL; add it nullable",
			                              column);
		}
		type_name = col.Type().ToString();
		ExportColumnType(context, column, col.Type(), column_type);
		typed = true;
		if (col.HasDefaultValue()) {
			// (DuckDB 1.5 turns ADD COLUMN with a DEFAULT other than a literal into ADD COLUMN, an
			// UPDATE and SET DEFAULT in one transaction: a refusal there leaves it to roll back)
			has_default = ExportDefault(context, column, col.DefaultValue(), col.Type(), default_value);
		}
		break;
	}
	case AlterTableType::ADD_FIELD: {
		// ADD COLUMN s.f: a field into a STRUCT (the core follows the path and says what is wrong)
		auto &add = alter.Cast<AddFieldInfo>();
		auto &field = add.new_field;
		vector<string> path = SkadeNameStrings(add.column_path);
		auto name = SkadeNameString(field.Name());
		path.push_back(name);
		op = "add_field";
		column = PathJson(path);
		if_flag = add.if_field_not_exists;
		CheckAddedColumn(field, StringUtil::Join(path, "."));
		type_name = field.Type().ToString();
		ExportColumnType(context, name, field.Type(), column_type);
		typed = true;
		if (field.HasDefaultValue()) {
			has_default = ExportDefault(context, StringUtil::Join(path, "."), field.DefaultValue(), field.Type(),
			                            default_value);
		}
		break;
	}
	case AlterTableType::REMOVE_FIELD: {
		auto &remove = alter.Cast<RemoveFieldInfo>();
		op = "drop_field";
		column = PathJson(SkadeNameStrings(remove.column_path));
		if_flag = remove.if_column_exists;
		break;
	}
	case AlterTableType::RENAME_FIELD: {
		auto &rename = alter.Cast<RenameFieldInfo>();
		op = "rename_field";
		column = PathJson(SkadeNameStrings(rename.column_path));
		to = SkadeNameString(rename.new_name);
		break;
	}
	case AlterTableType::REMOVE_COLUMN: {
		auto &remove = alter.Cast<RemoveColumnInfo>();
		op = "drop_column";
		column = SkadeNameString(remove.removed_column);
		if_flag = remove.if_column_exists;
		break;
	}
	case AlterTableType::ALTER_COLUMN_TYPE: {
		// a column, or (2.0's ALTER COLUMN s.f TYPE) a field inside one
		auto &change = alter.Cast<ChangeColumnTypeInfo>();
		auto path = SkadeAlteredPath(change);
		if (path.empty()) {
			throw InternalException("ALTER COLUMN ... TYPE of no column");
		}
		op = path.size() > 1 ? "alter_field_type" : "alter_type";
		column = path.size() > 1 ? PathJson(path) : path[0];
		auto shown = StringUtil::Join(path, ".");
		// USING <expression> other than the column itself cast to the type would rewrite every row
		if (!KeepsValues(change, path)) {
			throw NotImplementedException("ALTER COLUMN \"%s\" TYPE ... USING: a skade table changes a column's type "
			                              "only to a wider one, its values as they are",
			                              shown);
		}
		type_name = change.target_type.ToString();
		ExportColumnType(context, path.back(), change.target_type, column_type);
		typed = true;
		break;
	}
	case AlterTableType::DROP_NOT_NULL:
		op = "drop_not_null";
		column = SkadeAlteredColumn(alter.Cast<DropNotNullInfo>());
		break;
	case AlterTableType::SET_NOT_NULL:
		op = "set_not_null";
		column = SkadeAlteredColumn(alter.Cast<SetNotNullInfo>());
		break;
	case AlterTableType::SET_DEFAULT: {
		// SET DEFAULT (DROP DEFAULT: no expression): the column's Iceberg v3 write default
		auto &set = alter.Cast<SetDefaultInfo>();
		op = "set_default";
		column = SkadeAlteredColumn(set);
		auto table = GetTable(context, SkadeEntryName(info));
		if (!table) {
			throw CatalogException("Table with name %s does not exist!", SkadeEntryName(info));
		}
		if (!table->ColumnExists(SkadeToName(column))) {
			throw CatalogException("Table %s does not have a column with name \"%s\"", SkadeEntryName(info), column);
		}
		auto &type = table->GetColumn(SkadeToName(column)).Type();
		type_name = type.ToString();
		ExportColumnType(context, column, type, column_type);
		typed = true;
		if (set.expression) {
			has_default = ExportDefault(context, column, *set.expression, type, default_value);
		}
		break;
	}
	case AlterTableType::ADD_CONSTRAINT: {
		// ADD PRIMARY KEY (through SkadeCatalog::BindAlterAddIndex); 2.0 also hands CHECK here
		auto &constraint = *alter.Cast<AddConstraintInfo>().constraint;
		if (constraint.type == ConstraintType::CHECK) {
			throw NotImplementedException("CHECK constraints are not supported on skade tables");
		}
		if (constraint.type != ConstraintType::UNIQUE || !constraint.Cast<UniqueConstraint>().IsPrimaryKey()) {
			throw NotImplementedException("skade tables take only ADD PRIMARY KEY as a new constraint");
		}
		op = "add_primary_key";
		to = "[";
		for (auto &key_column : constraint.Cast<UniqueConstraint>().GetColumnNames()) {
			to += (to.size() > 1 ? "," : "") + JsonString(SkadeNameString(key_column));
		}
		to += "]";
		break;
	}
	case AlterTableType::SET_PARTITIONED_BY: {
		// the keys as written (the core maps them to Iceberg transforms); none: RESET
		op = "set_partitioned_by";
		to = PartitionKeysJson(alter.Cast<SetPartitionedByInfo>().partition_keys);
		break;
	}
	case AlterTableType::SET_SORTED_BY: {
		// the keys as written, directions and NULL orders resolved (the core maps them to an Iceberg
		// sort order); none: RESET
		op = "set_sorted_by";
		string keys;
		for (auto &order : alter.Cast<SetSortedByInfo>().orders) {
			keys += (keys.empty() ? "" : ",") + SortKeyJson(context, *order.expression, order.type, order.null_order);
		}
		to = "[" + keys + "]";
		break;
	}
	default:
		throw NotImplementedException("this ALTER TABLE is not supported on skade tables");
	}
	auto &txn = SkadeTransaction::Get(transaction, catalog);
	bool changed = false;
	auto table = SkadeEntryName(info);
	SkadeCheck(skade_txn_alter_table(txn.Handle(), name.c_str(), table.c_str(), op.c_str(),
	                                 column.empty() ? nullptr : column.c_str(), to.empty() ? nullptr : to.c_str(),
	                                 if_flag, typed ? &column_type.arrow_schema : nullptr,
	                                 typed ? type_name.c_str() : nullptr,
	                                 has_default ? &default_value.arrow_array : nullptr, &changed));
	txn.InvalidateEntries();
}

#define SKADE_UNSUPPORTED(what)                                                                                        \
	throw NotImplementedException("skade catalogs hold tables, views and macros: " what " is not supported")

optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateIndex(CatalogTransaction, CreateIndexInfo &, TableCatalogEntry &) {
	SKADE_UNSUPPORTED("CREATE INDEX");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateFunction(CatalogTransaction transaction, CreateFunctionInfo &info) {
	// CREATE MACRO (and CREATE FUNCTION, its synonym); other functions come from extensions, into
	// the system catalog
	if (info.type != CatalogType::MACRO_ENTRY && info.type != CatalogType::TABLE_MACRO_ENTRY) {
		SKADE_UNSUPPORTED("CREATE FUNCTION of a function other than a macro");
	}
	auto &context = transaction.GetContext();
	auto &txn = SkadeTransaction::Get(transaction, catalog);
	auto &macro = info.Cast<CreateMacroInfo>();
	SkadeCreateMacro(context, txn.Handle(), SkadeNameString(name), macro);
	txn.InvalidateEntries();
	auto schema = txn.GetSchema(context, SkadeNameString(name));
	if (!schema) {
		throw CatalogException("Schema with name %s does not exist!", SkadeNameString(name));
	}
	return schema->GetMacro(context, info.type, SkadeMacroName(macro));
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateView(CatalogTransaction transaction, CreateViewInfo &info) {
	auto &context = transaction.GetContext();
	auto &txn = SkadeTransaction::Get(transaction, catalog);
	SkadeCreateView(context, txn.Handle(), SkadeNameString(name), info);
	txn.InvalidateEntries();
	auto schema = txn.GetSchema(context, SkadeNameString(name));
	if (!schema) {
		throw CatalogException("Schema with name %s does not exist!", SkadeNameString(name));
	}
#if SKADE_DUCKDB_MAJOR >= 2
	auto view = schema->GetView(context, SkadeNameString(info.GetViewName()));
#else
	auto view = schema->GetView(context, info.view_name);
#endif
	return view.get();
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateSequence(CatalogTransaction, CreateSequenceInfo &) {
	SKADE_UNSUPPORTED("CREATE SEQUENCE");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateTableFunction(CatalogTransaction, CreateTableFunctionInfo &) {
	SKADE_UNSUPPORTED("CREATE TABLE FUNCTION");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateCopyFunction(CatalogTransaction, CreateCopyFunctionInfo &) {
	SKADE_UNSUPPORTED("CREATE COPY FUNCTION");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreatePragmaFunction(CatalogTransaction, CreatePragmaFunctionInfo &) {
	SKADE_UNSUPPORTED("CREATE PRAGMA FUNCTION");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateCollation(CatalogTransaction, CreateCollationInfo &) {
	SKADE_UNSUPPORTED("CREATE COLLATION");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateType(CatalogTransaction, CreateTypeInfo &) {
	SKADE_UNSUPPORTED("CREATE TYPE");
}

} // namespace duckdb
