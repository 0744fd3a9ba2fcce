// What differs between the DuckDB versions the shim builds against (1.5.x and 2.0.x), in one
// place: the build passes SKADE_DUCKDB_MAJOR/MINOR/PATCH (DuckDB has no version macro of its own).
// Shim code uses these names instead of either version's; only APIs that really differ get a
// `#if SKADE_DUCKDB_MAJOR >= 2` block at their site.
#pragma once

#if !defined(SKADE_DUCKDB_MAJOR) || !defined(SKADE_DUCKDB_MINOR) || !defined(SKADE_DUCKDB_PATCH)
#error "build with -DSKADE_DUCKDB_MAJOR=<n> -DSKADE_DUCKDB_MINOR=<n> -DSKADE_DUCKDB_PATCH=<n> (the DuckDB version)"
#endif

#include "duckdb.hpp"
#include "duckdb/catalog/catalog.hpp"
#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/function/table_function.hpp"
#include "duckdb/parser/expression/cast_expression.hpp"
#include "duckdb/parser/expression/columnref_expression.hpp"
#include "duckdb/parser/expression/constant_expression.hpp"
#include "duckdb/parser/expression/function_expression.hpp"
#include "duckdb/parser/parsed_data/alter_info.hpp"
#include "duckdb/parser/parsed_data/alter_table_info.hpp"
#include "duckdb/parser/parsed_data/create_schema_info.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/parser/qualified_name.hpp"
#include "duckdb/planner/column_binding.hpp"
#include "duckdb/planner/expression/bound_columnref_expression.hpp"
#include "duckdb/planner/expression/bound_conjunction_expression.hpp"
#include "duckdb/planner/expression/bound_reference_expression.hpp"
#include "duckdb/planner/table_filter.hpp"
#if SKADE_DUCKDB_MAJOR >= 2
#include "duckdb/common/vector/dictionary_vector.hpp"
#include "duckdb/planner/table_filter_set.hpp"
#endif

namespace duckdb {

#if SKADE_DUCKDB_MAJOR >= 2

//! A SQL name (catalog, schema, table, column, bound column) as DuckDB's APIs take it: 2.0 has
//! an Identifier type (case-insensitive, explicit to and from string).
using SkadeName = Identifier;

//! The name's text, as written (its case kept).
inline const string &SkadeNameString(const Identifier &name) {
	return name.GetIdentifierName();
}
inline Identifier SkadeToName(const string &text) {
	return Identifier(text);
}
inline vector<string> SkadeNameStrings(const vector<Identifier> &names) {
	return IdentifiersToStrings(names);
}
inline vector<Identifier> SkadeToNames(const vector<string> &texts) {
	return StringsToIdentifiers(texts);
}

//! The names a parse info carries (2.0 keeps them in a QualifiedName).
inline const string &SkadeSchemaName(const CreateSchemaInfo &info) {
	return info.SchemaName().GetIdentifierName();
}
inline void SkadeSetSchemaName(CreateSchemaInfo &info, const string &name) {
	info.SetSchema(Identifier(name));
}
inline const string &SkadeTableName(const CreateTableInfo &info) {
	return info.GetTableName().GetIdentifierName();
}
inline const string &SkadeEntryName(const DropInfo &info) {
	return info.GetQualifiedName().Name().GetIdentifierName();
}
inline const string &SkadeEntryName(const AlterInfo &info) {
	return info.GetQualifiedName().Name().GetIdentifierName();
}

//! 'a.b.c' as catalog, schema and name ("" where absent).
inline void SkadeParseQualifiedName(const string &text, string &catalog, string &schema, string &name) {
	auto q = QualifiedName::Parse(text);
	catalog = q.Catalog().GetIdentifierName();
	schema = q.Schema().GetIdentifierName();
	name = q.Name().GetIdentifierName();
}

//! The table `catalog.schema.name` ("" parts: the search path), or a catalog error.
inline TableCatalogEntry &SkadeGetTable(ClientContext &context, const string &catalog, const string &schema,
                                        const string &name) {
	return Catalog::GetEntry<TableCatalogEntry>(context,
	                                            QualifiedName(Identifier(catalog), Identifier(schema), Identifier(name)));
}

//! Casts `value` as the client would (its casts, its settings); false if it cannot.
inline bool SkadeTryCast(ClientContext &context, const Value &value, const LogicalType &type, Value &result,
                         string *error) {
	auto cast = value.TryCastAs(context, type, error);
	if (!cast) {
		return false;
	}
	result = std::move(*cast);
	return true;
}

//! An optional named argument of a table function (`f(x, name := v)`): 2.0 declares it as a
//! keyword-only parameter of the signature. Its default is NULL, which the binds read as absent
//! (as a NULL argument always was), so that the argument stays optional.
inline void SkadeAddNamedParameter(TableFunction &function, const string &name, const LogicalType &type) {
	function.GetSignature().AddKeywordOnly(Identifier(name), type, Value(type));
}


// ---- vectors and chunks: in 2.0 a vector knows its size, and a chunk's size is its vectors' ----

//! Sets how many rows a chunk holds, before its vectors are filled.
inline void SkadeSetChunkSize(DataChunk &chunk, idx_t count) {
	chunk.SetChildCardinality(count);
}
//! Makes `vector` the constant `value` for `count` rows.
inline void SkadeReferenceConstant(Vector &vector, const Value &value, idx_t count) {
	vector.Reference(value, count_t(count));
}
//! The writable data of a flat vector.
template <class T>
inline T *SkadeFlatDataMutable(Vector &vector) {
	return FlatVector::GetDataMutable<T>(vector);
}
//! A stream wrapper about to receive a stream from the core (2.0 keeps no row count in it).
inline void SkadeResetStream(ArrowArrayStreamWrapper &stream) {
}


//! The binding of column `column` of the operator whose table index is `table`.
template <class TABLE_INDEX>
inline ColumnBinding SkadeColumnBinding(TABLE_INDEX table, idx_t column) {
	return ColumnBinding(table, ProjectionIndex(column));
}
//! The column a bound column reference refers to.
inline const ColumnBinding &SkadeBindingOf(const BoundColumnRefExpression &ref) {
	return ref.Binding();
}


//! The table function a bound call refers to (2.0 splits it from the catalog's TableFunction).
using SkadeBoundTableFunction = BoundTableFunction;


// ---- bound expressions: 2.0 makes their members private ----

inline idx_t SkadeReferenceIndex(const BoundReferenceExpression &ref) {
	return ref.Index();
}
inline const LogicalType &SkadeReturnType(const Expression &expr) {
	return expr.GetReturnType();
}
inline vector<unique_ptr<Expression>> &SkadeChildren(BoundConjunctionExpression &conj) {
	return conj.GetChildrenMutable();
}


// ---- pushed-down filters: 2.0 keys them by ProjectionIndex behind accessors ----

inline const TableFilterSet &SkadeFilterEntries(const TableFilterSet &filters) {
	return filters;
}
template <class ENTRY>
inline idx_t SkadeFilterIndex(const ENTRY &entry) {
	return entry.GetIndex();
}
template <class ENTRY>
inline const TableFilter &SkadeFilterOf(const ENTRY &entry) {
	return entry.Filter();
}

//! The dictionary of an Arrow dictionary column, shared by the chunks made from it: DuckDB may
//! cache hashes and group by per entry. 2.0 keeps the entry (and its size) shared across chunks
//! itself; the id tells dictionaries apart.
struct SkadeDictionary {
	string id;
};
inline SkadeDictionary SkadeNewDictionary(Vector &, idx_t, const string &id) {
	return SkadeDictionary {id};
}
inline void SkadeUseDictionary(Vector &vector, const SkadeDictionary &dictionary, idx_t) {
	vector.BufferMutable().Cast<DictionaryBuffer>().SetDictionaryId(dictionary.id);
}

//! The name of the table function a LogicalGet calls.
inline const string &SkadeFunctionName(const BoundTableFunction &function) {
	return function.GetName().GetIdentifierName();
}

//! The column an ALTER COLUMN names: 2.0 takes a path (a nested field); skade sets and drops NOT
//! NULL of top-level columns only (as DuckDB's own tables), so a longer path is an error.
template <class INFO>
inline string SkadeAlteredColumn(const INFO &info) {
	if (info.column_path.size() != 1) {
		throw NotImplementedException("ALTER of a nested field is not supported on skade tables");
	}
	return info.column_path[0].GetIdentifierName();
}
//! The column or nested field ALTER COLUMN ... TYPE names, from the column down (1.5's grammar
//! takes a column only).
inline vector<string> SkadeAlteredPath(const ChangeColumnTypeInfo &info) {
	return IdentifiersToStrings(info.column_path);
}
//! The names of a column reference, qualifiers or nested fields included (`t.c`, `s.f`).
inline vector<string> SkadeColumnRefPath(const ColumnRefExpression &ref) {
	return IdentifiersToStrings(ref.ColumnNames());
}
//! The expression a CAST casts.
inline const ParsedExpression &SkadeCastChild(const CastExpression &cast) {
	return cast.Child();
}
//! Whether ADD COLUMN asked for NOT NULL or UNIQUE (2.0's ADD COLUMN constraints).
inline bool SkadeAddColumnConstrained(const AddColumnInfo &info) {
	return info.add_column_constraints.add_not_null || info.add_column_constraints.add_unique;
}
//! A parsed function call's name and arguments (2.0's arguments may be named).
inline string SkadeCallName(const FunctionExpression &call) {
	return call.FunctionName().GetIdentifierName();
}
inline vector<const ParsedExpression *> SkadeCallArguments(const FunctionExpression &call) {
	vector<const ParsedExpression *> out;
	for (auto &arg : call.GetArguments()) {
		out.push_back(&arg.GetExpression());
	}
	return out;
}

//! `value` cast to `type` (false, with `error`, when it does not cast).
inline bool SkadeTryCast(const Value &value, const LogicalType &type, Value &out, string &error) {
	auto cast = value.DefaultTryCastAs(type, &error);
	if (!cast) {
		return false;
	}
	out = *cast;
	return true;
}
//! A parsed constant expression of `value`.
inline unique_ptr<ParsedExpression> SkadeConstantExpression(const Value &value) {
	return ConstantExpression::FromValue(value);
}
#else

using SkadeName = string;

inline const string &SkadeFunctionName(const TableFunction &function) {
	return function.name;
}

inline const string &SkadeNameString(const string &name) {
	return name;
}
inline const string &SkadeToName(const string &text) {
	return text;
}
inline const vector<string> &SkadeNameStrings(const vector<string> &names) {
	return names;
}
inline const vector<string> &SkadeToNames(const vector<string> &texts) {
	return texts;
}

inline const string &SkadeSchemaName(const CreateSchemaInfo &info) {
	return info.schema;
}
inline void SkadeSetSchemaName(CreateSchemaInfo &info, const string &name) {
	info.schema = name;
}
inline const string &SkadeTableName(const CreateTableInfo &info) {
	return info.table;
}
inline const string &SkadeEntryName(const DropInfo &info) {
	return info.name;
}
inline const string &SkadeEntryName(const AlterInfo &info) {
	return info.name;
}

inline void SkadeParseQualifiedName(const string &text, string &catalog, string &schema, string &name) {
	auto q = QualifiedName::Parse(text);
	catalog = q.catalog;
	schema = q.schema;
	name = q.name;
}

inline TableCatalogEntry &SkadeGetTable(ClientContext &context, const string &catalog, const string &schema,
                                        const string &name) {
	return Catalog::GetEntry<TableCatalogEntry>(context, catalog, schema, name);
}

inline bool SkadeTryCast(ClientContext &context, const Value &value, const LogicalType &type, Value &result,
                         string *error) {
	return value.TryCastAs(context, type, result, error);
}

inline void SkadeAddNamedParameter(TableFunction &function, const string &name, const LogicalType &type) {
	function.named_parameters[name] = type;
}


inline void SkadeSetChunkSize(DataChunk &chunk, idx_t count) {
	chunk.SetCardinality(count);
}
inline void SkadeReferenceConstant(Vector &vector, const Value &value, idx_t count) {
	vector.Reference(value);
}
template <class T>
inline T *SkadeFlatDataMutable(Vector &vector) {
	return FlatVector::GetData<T>(vector);
}
inline void SkadeResetStream(ArrowArrayStreamWrapper &stream) {
	stream.number_of_rows = -1;
}


template <class TABLE_INDEX>
inline ColumnBinding SkadeColumnBinding(TABLE_INDEX table, idx_t column) {
	return ColumnBinding(table, column);
}
inline const ColumnBinding &SkadeBindingOf(const BoundColumnRefExpression &ref) {
	return ref.binding;
}


using SkadeBoundTableFunction = TableFunction;


inline idx_t SkadeReferenceIndex(const BoundReferenceExpression &ref) {
	return ref.index;
}
inline const LogicalType &SkadeReturnType(const Expression &expr) {
	return expr.return_type;
}
inline vector<unique_ptr<Expression>> &SkadeChildren(BoundConjunctionExpression &conj) {
	return conj.children;
}


inline const map<idx_t, unique_ptr<TableFilter>> &SkadeFilterEntries(const TableFilterSet &filters) {
	return filters.filters;
}
template <class ENTRY>
inline idx_t SkadeFilterIndex(const ENTRY &entry) {
	return entry.first;
}
template <class ENTRY>
inline const TableFilter &SkadeFilterOf(const ENTRY &entry) {
	return *entry.second;
}

template <class INFO>
inline string SkadeAlteredColumn(const INFO &info) {
	return info.column_name;
}
inline vector<string> SkadeAlteredPath(const ChangeColumnTypeInfo &info) {
	return {info.column_name};
}
inline vector<string> SkadeColumnRefPath(const ColumnRefExpression &ref) {
	return ref.column_names;
}
inline bool SkadeAddColumnConstrained(const AddColumnInfo &) {
	return false;
}
inline string SkadeCallName(const FunctionExpression &call) {
	return call.function_name;
}
inline vector<const ParsedExpression *> SkadeCallArguments(const FunctionExpression &call) {
	vector<const ParsedExpression *> out;
	for (auto &child : call.children) {
		out.push_back(child.get());
	}
	return out;
}
inline const ParsedExpression &SkadeCastChild(const CastExpression &cast) {
	return *cast.child;
}

//! The dictionary of an Arrow dictionary column, shared by the chunks made from it, of `size`
//! entries (its NULL slot included): DuckDB may cache hashes and group by per entry, and the id
//! tells dictionaries apart. DuckDB 1.5's Arrow conversion wraps each chunk's dictionary in a
//! new child buffer, and with it loses the hashes it caches there: a hash of a dictionary string
//! column hashed the whole dictionary again for every 2,048 rows.
struct SkadeDictionary {
	buffer_ptr<VectorChildBuffer> entries;
};
inline SkadeDictionary SkadeNewDictionary(Vector &vector, idx_t size, const string &id) {
	Vector entries(DictionaryVector::Child(vector)); // (a reference to the converted dictionary)
	auto child = make_buffer<VectorChildBuffer>(std::move(entries));
	child->size = size;
	child->id = id;
	return SkadeDictionary {std::move(child)};
}
//! Puts a chunk's dictionary vector on the shared dictionary. Its selection may point into the
//! Arrow array that the chunk's own buffer keeps alive, and that buffer is replaced: copied.
inline void SkadeUseDictionary(Vector &vector, const SkadeDictionary &dictionary, idx_t count) {
	auto &sel = DictionaryVector::SelVector(vector);
	SelectionVector owned(count);
	memcpy(owned.data(), sel.data(), count * sizeof(sel_t));
	vector.Dictionary(dictionary.entries, owned);
}

inline bool SkadeTryCast(const Value &value, const LogicalType &type, Value &out, string &error) {
	return value.DefaultTryCastAs(type, out, &error);
}
inline unique_ptr<ParsedExpression> SkadeConstantExpression(const Value &value) {
	return make_uniq<ConstantExpression>(value);
}
#endif

} // namespace duckdb
