// Schemas of a skade catalog: table lookups, CREATE TABLE and DROP TABLE go to the core.
#include "skade/schema_entry.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/parser/constraints/not_null_constraint.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

SkadeSchemaEntry::SkadeSchemaEntry(Catalog &catalog, CreateSchemaInfo &info, SkadeTransaction &transaction)
    : SchemaCatalogEntry(catalog, info), transaction(transaction) {
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
	SkadeCheck(skade_txn_table(transaction.Handle(), this->name.c_str(), name.c_str(), table.out()));
	if (!table) {
		return nullptr;
	}
	return &AddTable(context, std::move(table));
}

optional_ptr<CatalogEntry> SkadeSchemaEntry::LookupEntry(CatalogTransaction transaction,
                                                         const EntryLookupInfo &lookup_info) {
	if (lookup_info.GetCatalogType() != CatalogType::TABLE_ENTRY) {
		return nullptr;
	}
	return GetTable(transaction.GetContext(), lookup_info.GetEntryName()).get();
}

void SkadeSchemaEntry::Scan(ClientContext &context, CatalogType type,
                            const std::function<void(CatalogEntry &)> &callback) {
	if (type != CatalogType::TABLE_ENTRY) {
		return;
	}
	skade_strings *names = nullptr;
	SkadeCheck(skade_txn_tables(transaction.Handle(), name.c_str(), &names));
	for (auto &table_name : SkadeTakeStrings(names)) {
		auto table = GetTable(context, table_name);
		if (table) {
			callback(*table);
		}
	}
}

void SkadeSchemaEntry::Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) {
	if (type != CatalogType::TABLE_ENTRY) {
		return;
	}
	// Without a context only the tables already resolved in this transaction can be listed.
	lock_guard<mutex> guard(lock);
	for (auto &entry : tables) {
		callback(*entry.second);
	}
}

namespace {

string ColumnName(const ColumnList &columns, LogicalIndex index) {
	return SkadeNameString(columns.GetColumn(index).Name());
}

} // namespace

optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateTable(CatalogTransaction transaction, BoundCreateTableInfo &info) {
	auto &context = transaction.GetContext();
	auto &base = info.Base();
	if (base.temporary) {
		throw NotImplementedException("skade catalogs do not hold temporary tables");
	}
	if (!base.partition_keys.empty()) {
		throw NotImplementedException("PARTITION BY is not supported on skade tables yet");
	}
	if (!base.sort_keys.empty()) {
		throw NotImplementedException("SORTED BY is not supported on skade tables yet");
	}
	if (!base.options.empty()) {
		throw InvalidInputException("unknown table option \"%s\" for a skade table", base.options.begin()->first);
	}
	vector<string> names;
	vector<LogicalType> types;
	vector<string> type_names;
	for (auto &col : base.columns.Logical()) {
		if (col.Generated()) {
			throw NotImplementedException("generated column \"%s\": skade tables store every column",
			                              SkadeNameString(col.Name()));
		}
		if (col.HasDefaultValue()) {
			throw NotImplementedException("column \"%s\" has a DEFAULT value, which skade tables do not keep",
			                              SkadeNameString(col.Name()));
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
	                                  key_ptrs.data(), key_ptrs.size(), on_conflict, table.out()));
	txn.InvalidateEntries();
	if (!table) {
		return nullptr;
	}
	auto schema = txn.GetSchema(context, SkadeNameString(name));
	if (!schema) {
		throw CatalogException("Schema with name %s does not exist!", SkadeNameString(name));
	}
	return &schema->AddTable(context, std::move(table));
}

void SkadeSchemaEntry::DropEntry(ClientContext &context, DropInfo &info) {
	if (info.type != CatalogType::TABLE_ENTRY) {
		throw NotImplementedException("skade catalogs hold only tables: cannot drop %s \"%s\"",
		                              CatalogTypeToString(info.type), SkadeEntryName(info));
	}
	if (info.cascade) {
		// Nothing depends on a skade table; CASCADE changes nothing.
	}
	auto if_exists = info.if_not_found == OnEntryNotFound::RETURN_NULL;
	SkadeCheck(skade_txn_drop_table(transaction.Handle(), name.c_str(), SkadeEntryName(info).c_str(), if_exists));
	transaction.InvalidateEntries();
}

void SkadeSchemaEntry::Alter(CatalogTransaction transaction, AlterInfo &info) {
	if (info.type == AlterType::SET_COMMENT || info.type == AlterType::SET_COLUMN_COMMENT) {
		throw NotImplementedException("COMMENT ON is not supported on skade catalogs (\"%s\"): Iceberg tables "
		                              "keep no comments",
		                              SkadeEntryName(info));
	}
	throw NotImplementedException("ALTER is not supported on skade catalogs yet");
}

#define SKADE_UNSUPPORTED(what)                                                                                        \
	throw NotImplementedException("skade catalogs hold only tables: " what " is not supported")

optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateIndex(CatalogTransaction, CreateIndexInfo &, TableCatalogEntry &) {
	SKADE_UNSUPPORTED("CREATE INDEX");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateFunction(CatalogTransaction, CreateFunctionInfo &) {
	SKADE_UNSUPPORTED("CREATE FUNCTION/MACRO");
}
optional_ptr<CatalogEntry> SkadeSchemaEntry::CreateView(CatalogTransaction, CreateViewInfo &) {
	SKADE_UNSUPPORTED("CREATE VIEW");
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
