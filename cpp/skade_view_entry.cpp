// Views of a skade catalog. The core keeps each view as Iceberg view metadata (its SELECT in the
// `duckdb` dialect, its aliases and comments); the shim rebuilds DuckDB's view entry from it and
// lets DuckDB bind the query when a statement reads the view, in the view's own schema.
#include "skade/view_entry.hpp"

#include "duckdb/catalog/catalog_entry/schema_catalog_entry.hpp"
#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/parser/expression/lambda_expression.hpp"
#include "duckdb/parser/expression/subquery_expression.hpp"
#include "duckdb/parser/parsed_expression_iterator.hpp"
#include "duckdb/parser/parser.hpp"
#include "duckdb/parser/query_node.hpp"
#include "duckdb/parser/statement/select_statement.hpp"

namespace duckdb {

unique_ptr<ViewCatalogEntry> SkadeLoadView(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn,
                                           const string &name) {
	skade_strings *list = nullptr;
	SkadeCheck(skade_txn_view(txn, schema.name.c_str(), name.c_str(), &list));
	if (!list) {
		return nullptr;
	}
	// [name, sql, has comment, comment, alias count, aliases..., (column, comment) pairs...]
	auto parts = SkadeTakeStrings(list);
	if (parts.size() < 5) {
		throw InternalException("skade: a view's definition came back incomplete");
	}
	auto &sql = parts[1];
	idx_t n_aliases = std::stoull(parts[4]);
	if (parts.size() < 5 + n_aliases || (parts.size() - 5 - n_aliases) % 2 != 0) {
		throw InternalException("skade: a view's definition came back incomplete");
	}
	CreateViewInfo info(schema, SkadeToName(parts[0]));
	info.sql = sql;
#if SKADE_DUCKDB_MAJOR >= 2
	Parser parser(context);
	info.query = CreateViewInfo::ParseSelect(parser, sql);
#else
	info.query = CreateViewInfo::ParseSelect(sql);
#endif
	vector<string> aliases(parts.begin() + 5, parts.begin() + 5 + n_aliases);
	info.aliases = SkadeToNames(aliases);
	if (parts[2] == "1") {
		info.comment = Value(parts[3]);
	}
	for (idx_t i = 5 + n_aliases; i + 1 < parts.size(); i += 2) {
		info.column_comments_map[SkadeToName(parts[i])] = Value(parts[i + 1]);
	}
	return make_uniq<ViewCatalogEntry>(schema.ParentCatalog(), schema, info);
}

#if SKADE_DUCKDB_MAJOR < 2
// DuckDB 1.x prints a lambda as it was written, `x -> x + 1`, which DuckDB 2.0 refuses as
// deprecated: a view's SQL is written with the `lambda x: x + 1` both versions parse, so a lake's
// views read the same in either.
static void LambdaKeywordsIn(QueryNode &node);

static void LambdaKeywords(ParsedExpression &expr) {
	if (expr.GetExpressionClass() == ExpressionClass::LAMBDA) {
		expr.Cast<LambdaExpression>().syntax_type = LambdaSyntaxType::LAMBDA_KEYWORD;
	}
	if (expr.GetExpressionClass() == ExpressionClass::SUBQUERY) {
		LambdaKeywordsIn(*expr.Cast<SubqueryExpression>().subquery->node);
	}
	ParsedExpressionIterator::EnumerateChildren(expr, [](ParsedExpression &child) { LambdaKeywords(child); });
}

static void LambdaKeywordsIn(QueryNode &node) {
	ParsedExpressionIterator::EnumerateQueryNodeChildren(
	    node, [](unique_ptr<ParsedExpression> &child) { LambdaKeywords(*child); });
}
#endif

void SkadeCreateView(ClientContext &context, skade_txn *txn, const string &schema, CreateViewInfo &info) {
	if (info.temporary) {
		throw NotImplementedException("skade catalogs do not hold temporary views");
	}
#if SKADE_DUCKDB_MAJOR >= 2
	if (info.security_type != ViewSecurityType::REGULAR_VIEW) {
		throw NotImplementedException("skade catalogs keep only regular views (not SECURE views)");
	}
	string view_name = SkadeNameString(info.GetViewName());
#else
	string view_name = info.view_name;
#endif
	if (!info.query) {
		throw InternalException("skade: CREATE VIEW without a query");
	}
	// (2.0 skips binding CREATE VIEW IF NOT EXISTS of a view that exists: the core ignores it)
	if (info.types.empty() && info.on_conflict != OnCreateConflict::IGNORE_ON_CONFLICT) {
		throw NotImplementedException("skade keeps a view with the columns it binds to: create it bound");
	}
#if SKADE_DUCKDB_MAJOR < 2
	auto query = info.query->Copy();
	LambdaKeywordsIn(*query->Cast<SelectStatement>().node);
	auto sql = query->ToString();
#else
	auto sql = info.query->ToString();
#endif
	vector<string> aliases = SkadeNameStrings(info.aliases);
	// the columns as the view shows them: its aliases rename the query's first columns
	vector<string> names = SkadeNameStrings(info.names);
	for (idx_t i = 0; i < aliases.size() && i < names.size(); i++) {
		names[i] = aliases[i];
	}
	vector<LogicalType> types = info.types;
	vector<string> type_names;
	for (auto &type : types) {
		type_names.push_back(type.ToString());
	}
	// A view stores no rows: a column whose type the Arrow export refuses is declared as text to
	// other engines (its DuckDB type kept), rather than refusing a view DuckDB can run.
	auto props = SkadeArrowProperties(context);
	for (idx_t i = 0; i < types.size(); i++) {
		ArrowSchemaWrapper one;
		try {
			ArrowConverter::ToArrowSchema(&one.arrow_schema, {types[i]}, {names[i]}, props);
		} catch (std::exception &) {
			types[i] = LogicalType::VARCHAR;
		}
	}
	ArrowSchemaWrapper arrow;
	ArrowConverter::ToArrowSchema(&arrow.arrow_schema, types, names, props);
	vector<const char *> alias_ptrs, type_ptrs;
	for (auto &a : aliases) {
		alias_ptrs.push_back(a.c_str());
	}
	for (auto &t : type_names) {
		type_ptrs.push_back(t.c_str());
	}
	string comment = info.comment.IsNull() ? string() : info.comment.ToString();
	int32_t on_conflict = 0;
	if (info.on_conflict == OnCreateConflict::IGNORE_ON_CONFLICT) {
		on_conflict = 1;
	} else if (info.on_conflict == OnCreateConflict::REPLACE_ON_CONFLICT) {
		on_conflict = 2;
	}
	bool created = false;
	SkadeCheck(skade_txn_create_view(txn, schema.c_str(), view_name.c_str(), sql.c_str(), alias_ptrs.data(),
	                                 alias_ptrs.size(), info.comment.IsNull() ? nullptr : comment.c_str(),
	                                 &arrow.arrow_schema, type_ptrs.data(), type_ptrs.size(), on_conflict, &created));
}

} // namespace duckdb
