// skade_add_files(table, files): adopts Parquet files a user already has into a skade table where
// they lie, in the calling transaction (they commit with it, as one append; a ROLLBACK undoes
// it). `files` is a path, a glob or a list of them, expanded here with DuckDB's file system, so
// its conventions hold (`~`, glob syntax, and the object stores it reaches); the core checks and
// stages the files it is given.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/file_system.hpp"

namespace duckdb {

namespace {

//! Adds the files `pattern` names to `paths`: the path itself when it is no glob (the core
//! reports a missing file, naming it), else every match; a glob that matches nothing is refused.
void Expand(ClientContext &context, const string &pattern, vector<string> &paths) {
	auto &fs = FileSystem::GetFileSystem(context);
	auto expanded = fs.ExpandPath(pattern); // `~`, as DuckDB's readers do
	if (!FileSystem::HasGlob(expanded)) {
		paths.push_back(expanded);
		return;
	}
	auto matches = fs.Glob(expanded);
	if (matches.empty()) {
		throw InvalidInputException("skade_add_files: no file matches \"%s\"", pattern);
	}
	for (auto &file : matches) {
		paths.push_back(file.path);
	}
}

unique_ptr<FunctionData> Bind(ClientContext &context, TableFunctionBindInput &input, vector<LogicalType> &return_types,
                              vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_add_files");
	auto &table = SkadeTableByName(context, StringValue::Get(input.inputs[0]));
	auto uuid = table.Uuid();
	vector<string> patterns;
	if (input.inputs[1].type().id() == LogicalTypeId::LIST) {
		for (auto &p : ListValue::GetChildren(input.inputs[1])) {
			if (p.IsNull()) {
				throw BinderException("skade_add_files: a file name must not be NULL");
			}
			patterns.push_back(StringValue::Get(p));
		}
	} else {
		patterns.push_back(StringValue::Get(input.inputs[1]));
	}
	for (auto &pattern : patterns) {
		// (the core takes C strings: a NUL would name a shorter path)
		if (pattern.find('\0') != string::npos) {
			throw BinderException("skade_add_files: a file name contains a NUL character");
		}
	}
	auto data = make_uniq<SkadeArrowFunctionData>();
	auto catalog_name = SkadeNameString(table.ParentCatalog().GetName());
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeModifiesCatalog(context, catalog);
		// Expanded when the statement runs: a prepared statement adopts what matches then.
		vector<string> paths;
		for (auto &pattern : patterns) {
			Expand(context, pattern, paths);
		}
		vector<const char *> path_ptrs;
		for (auto &path : paths) {
			path_ptrs.push_back(path.c_str());
		}
		SkadeCheck(skade_fn_add_files(SkadeTransaction::Get(context, catalog).Handle(), uuid.c_str(), path_ptrs.data(),
		                              path_ptrs.size(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_add_files", std::move(data), return_types, names);
}

} // namespace

TableFunctionSet SkadeAddFilesFunctions() {
	TableFunctionSet set("skade_add_files");
	for (auto files : vector<LogicalType> {LogicalType::VARCHAR, LogicalType::LIST(LogicalType::VARCHAR)}) {
		set.AddFunction(SkadeArrowFunction("skade_add_files", {LogicalType::VARCHAR, files}, Bind));
	}
	return set;
}

} // namespace duckdb
