// Macros of a skade catalog. The core keeps each macro as the CREATE MACRO statement DuckDB prints
// for it (Iceberg has no macros); the shim parses it back into DuckDB's macro entry, which DuckDB
// binds where a query calls the macro, as it binds one of its own.
#include "skade/macro_entry.hpp"

#include "duckdb/catalog/catalog_entry/scalar_macro_catalog_entry.hpp"
#include "duckdb/catalog/catalog_entry/schema_catalog_entry.hpp"
#include "duckdb/catalog/catalog_entry/table_macro_catalog_entry.hpp"
#include "duckdb/parser/expression/columnref_expression.hpp"
#include "duckdb/parser/parser.hpp"
#include "duckdb/planner/binder.hpp"
#include "duckdb/parser/statement/create_statement.hpp"

namespace duckdb {

bool SkadeIsMacroType(CatalogType type) {
	switch (type) {
	case CatalogType::SCALAR_FUNCTION_ENTRY:
	case CatalogType::MACRO_ENTRY:
	case CatalogType::TABLE_FUNCTION_ENTRY:
	case CatalogType::TABLE_MACRO_ENTRY:
		return true;
	default:
		return false;
	}
}

static bool IsTableKind(CatalogType type) {
	return type == CatalogType::TABLE_FUNCTION_ENTRY || type == CatalogType::TABLE_MACRO_ENTRY;
}

static const char *KindName(CatalogType type) {
	return IsTableKind(type) ? "table" : "scalar";
}

string SkadeMacroName(const CreateMacroInfo &info) {
#if SKADE_DUCKDB_MAJOR >= 2
	return SkadeNameString(info.GetFunctionName());
#else
	return info.name;
#endif
}

//! Parses a stored statement into the macro it creates, named `name` (the statement's own name is
//! the one it was created under: the record's is the one that counts). Throws when it is no
//! CREATE MACRO of `type`'s kind.
static unique_ptr<CreateMacroInfo> ParseMacro(ClientContext &context, const string &sql, CatalogType type,
                                              const string &name) {
#if SKADE_DUCKDB_MAJOR >= 2
	Parser parser(context);
#else
	Parser parser;
#endif
	parser.ParseQuery(sql);
	auto wanted = IsTableKind(type) ? CatalogType::TABLE_MACRO_ENTRY : CatalogType::MACRO_ENTRY;
	if (parser.statements.size() != 1 || parser.statements[0]->type != StatementType::CREATE_STATEMENT) {
		throw ParserException("not one CREATE statement");
	}
	auto &create = parser.statements[0]->Cast<CreateStatement>();
	if (!create.info || create.info->type != wanted || create.info->Cast<CreateMacroInfo>().macros.empty()) {
		throw ParserException("not a CREATE MACRO of a %s macro", KindName(type));
	}
	auto info = unique_ptr_cast<CreateInfo, CreateMacroInfo>(std::move(create.info));
	// Typed parameters parse back as the names of their types: bound here, as CREATE MACRO's
	// binder bound them (an unbound type matches no argument)
	auto binder = Binder::CreateBinder(context);
	for (auto &function : info->macros) {
		for (auto &param_type : function->types) {
			if (param_type.id() == LogicalTypeId::UNBOUND) {
				binder->BindLogicalType(param_type);
			}
		}
	}
#if SKADE_DUCKDB_MAJOR >= 2
	info->SetFunctionName(SkadeToName(name));
#else
	info->name = name;
#endif
	return info;
}

case_insensitive_map_t<SkadeMacros::Stored> &SkadeMacros::Kind(CatalogType type) {
	return IsTableKind(type) ? table : scalar;
}

void SkadeMacros::Load(SchemaCatalogEntry &schema, skade_txn *txn) {
	if (loaded) {
		return;
	}
	skade_strings *list = nullptr;
	SkadeCheck(skade_txn_macros(txn, SkadeNameString(schema.name).c_str(), &list));
	// [kind, name, sql] per macro
	auto parts = SkadeTakeStrings(list);
	if (parts.size() % 3 != 0) {
		throw InternalException("skade: a schema's macros came back incomplete");
	}
	for (idx_t i = 0; i < parts.size(); i += 3) {
		auto &set = parts[i] == "table" ? table : scalar;
		Stored stored;
		stored.name = parts[i + 1];
		stored.sql = parts[i + 2];
		set.emplace(parts[i + 1], std::move(stored));
	}
	loaded = true;
}

CatalogEntry &SkadeMacros::Built(ClientContext &context, SchemaCatalogEntry &schema, CatalogType type,
                                 Stored &stored) {
	if (stored.entry) {
		return *stored.entry;
	}
	unique_ptr<CreateMacroInfo> info;
	try {
		info = ParseMacro(context, stored.sql, type, stored.name);
	} catch (std::exception &ex) {
		// (a statement another DuckDB version printed, which this one cannot read)
		throw CatalogException("skade: the stored definition of macro \"%s\" does not parse in this DuckDB (%s): %s",
		                       stored.name, ErrorData(ex).RawMessage(), stored.sql);
	}
	auto &catalog = schema.ParentCatalog();
	if (IsTableKind(type)) {
		stored.entry = make_uniq<TableMacroCatalogEntry>(catalog, schema, *info);
	} else {
		stored.entry = make_uniq<ScalarMacroCatalogEntry>(catalog, schema, *info);
	}
	return *stored.entry;
}

optional_ptr<CatalogEntry> SkadeMacros::Lookup(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn,
                                               CatalogType type, const string &name) {
	lock_guard<mutex> guard(lock);
	Load(schema, txn);
	auto &set = Kind(type);
	auto it = set.find(name);
	if (it == set.end()) {
		return nullptr;
	}
	return &Built(context, schema, type, it->second);
}

void SkadeMacros::Scan(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn, CatalogType type,
                       const std::function<void(CatalogEntry &)> &callback) {
	vector<reference<CatalogEntry>> entries;
	{
		lock_guard<mutex> guard(lock);
		Load(schema, txn);
		for (auto &it : Kind(type)) {
			entries.push_back(Built(context, schema, type, it.second));
		}
	}
	for (auto &entry : entries) {
		callback(entry.get());
	}
}

void SkadeMacros::ScanBuilt(CatalogType type, const std::function<void(CatalogEntry &)> &callback) {
	lock_guard<mutex> guard(lock);
	for (auto &it : Kind(type)) {
		if (it.second.entry) {
			callback(*it.second.entry);
		}
	}
}

//! The names of a macro's parameters and of those with a default, as one text (for comparing).
static string ParameterNames(const CreateMacroInfo &info) {
	string names;
	for (auto &function : info.macros) {
		names += "(";
		for (auto &parameter : function->parameters) {
			names += parameter->Cast<ColumnRefExpression>().GetColumnName() + ",";
		}
		names += ":";
		for (auto &entry : function->default_parameters) {
			names += SkadeNameString(entry.first) + ",";
		}
		names += ")";
	}
	return names;
}

//! The statement the core keeps: as DuckDB prints the macro, without what belongs to this CREATE
//! only (OR REPLACE, IF NOT EXISTS) and unqualified (the catalog's name is the ATTACH's, and the
//! schema the record's).
static string StoredSql(const CreateMacroInfo &info) {
	auto copy = info.Copy();
	auto &macro = copy->Cast<CreateMacroInfo>();
	macro.on_conflict = OnCreateConflict::ERROR_ON_CONFLICT;
	macro.temporary = false;
#if SKADE_DUCKDB_MAJOR >= 2
	macro.SetQualifiedName(QualifiedName(macro.GetFunctionName()));
#else
	macro.catalog.clear();
	macro.schema.clear();
#endif
	return macro.ToString();
}

void SkadeCreateMacro(ClientContext &context, skade_txn *txn, const string &schema, CreateMacroInfo &info) {
	if (info.temporary) {
		throw NotImplementedException("skade catalogs do not hold temporary macros");
	}
	if (info.macros.empty()) {
		throw InternalException("skade: CREATE MACRO without a definition");
	}
	int32_t on_conflict;
	switch (info.on_conflict) {
	case OnCreateConflict::ERROR_ON_CONFLICT:
		on_conflict = 0;
		break;
	case OnCreateConflict::IGNORE_ON_CONFLICT:
		on_conflict = 1;
		break;
	case OnCreateConflict::REPLACE_ON_CONFLICT:
		on_conflict = 2;
		break;
	default:
		throw NotImplementedException("skade catalogs take CREATE [OR REPLACE] MACRO [IF NOT EXISTS] only");
	}
	auto name = SkadeMacroName(info);
	auto sql = StoredSql(info);
	// What is kept must parse back into the macro: refused now, rather than kept where no query can
	// call it.
	// (DuckDB 1.5 prints a parameter's name unquoted: `"my arg"` reads back as `my` of type `arg`)
	try {
		auto parsed = ParseMacro(context, sql, info.type, name);
		if (ParameterNames(*parsed) != ParameterNames(info)) {
			throw ParserException("its parameters read back as %s", ParameterNames(*parsed));
		}
	} catch (std::exception &ex) {
		throw NotImplementedException("skade cannot keep macro \"%s\": DuckDB prints it as %s, which does not parse "
		                              "back (%s)",
		                              name, sql, ErrorData(ex).RawMessage());
	}
	bool created = false;
	SkadeCheck(skade_txn_create_macro(txn, schema.c_str(), name.c_str(), KindName(info.type), sql.c_str(),
	                                  on_conflict, &created));
}

void SkadeDropMacro(skade_txn *txn, const string &schema, DropInfo &info) {
	auto if_exists = info.if_not_found == OnEntryNotFound::RETURN_NULL;
	SkadeCheck(
	    skade_txn_drop_macro(txn, schema.c_str(), SkadeEntryName(info).c_str(), KindName(info.type), if_exists));
}

} // namespace duckdb
