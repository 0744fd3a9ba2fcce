// Named consumers: skade_create_consumer, skade_reset_consumer, skade_drop_consumer,
// skade_acknowledge (staged in the calling transaction: they commit with it, a ROLLBACK undoes
// them) and the listing skade_consumers. The core does all of it; this file reads arguments.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

namespace {

//! Where a consumer starts: start := 'now' | 'beginning', at_snapshot := id or at_commit := seq.
struct StartArguments {
	bool has_word = false;
	string word;
	bool has_snapshot = false;
	int64_t snapshot = 0;
	bool has_commit = false;
	int64_t commit = 0;

	explicit StartArguments(TableFunctionBindInput &input) {
		auto w = SkadeNamedParameter(input, "start");
		auto s = SkadeNamedParameter(input, "at_snapshot");
		auto c = SkadeNamedParameter(input, "at_commit");
		has_word = !w.IsNull();
		word = has_word ? StringValue::Get(w) : "";
		has_snapshot = !s.IsNull();
		snapshot = has_snapshot ? s.GetValue<int64_t>() : 0;
		has_commit = !c.IsNull();
		commit = has_commit ? c.GetValue<int64_t>() : 0;
	}
};

void AddStartParameters(TableFunction &function) {
	SkadeAddNamedParameter(function, "start", LogicalType::VARCHAR);
	SkadeAddNamedParameter(function, "at_snapshot", LogicalType::BIGINT);
	SkadeAddNamedParameter(function, "at_commit", LogicalType::BIGINT);
}

//! The function's data: the stream opens in the executing transaction of catalog `catalog_name`.
unique_ptr<SkadeArrowFunctionData> WritingFunction(TableFunctionBindInput &input, const string &function_name,
                                                   string &catalog_name, ClientContext &context) {
	SkadeRequireArguments(input, function_name);
	catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	return make_uniq<SkadeArrowFunctionData>();
}

unique_ptr<FunctionData> BindCreate(ClientContext &context, TableFunctionBindInput &input,
                                    vector<LogicalType> &return_types, vector<SkadeName> &names) {
	string catalog_name;
	auto data = WritingFunction(input, "skade_create_consumer", catalog_name, context);
	auto name = StringValue::Get(input.inputs[1]);
	vector<string> tables;
	if (input.inputs[2].type().id() == LogicalTypeId::LIST) {
		for (auto &t : ListValue::GetChildren(input.inputs[2])) {
			if (t.IsNull()) {
				throw BinderException("skade_create_consumer: a table name must not be NULL");
			}
			tables.push_back(StringValue::Get(t));
		}
	} else {
		tables.push_back(StringValue::Get(input.inputs[2]));
	}
	StartArguments start(input);
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeModifiesCatalog(context, catalog);
		vector<const char *> table_ptrs;
		for (auto &t : tables) {
			table_ptrs.push_back(t.c_str());
		}
		SkadeCheck(skade_fn_start_consumer(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(), false,
		                                   table_ptrs.data(), table_ptrs.size(),
		                                   start.has_word ? start.word.c_str() : nullptr, start.snapshot,
		                                   start.has_snapshot, start.commit, start.has_commit, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_consumers", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindReset(ClientContext &context, TableFunctionBindInput &input,
                                   vector<LogicalType> &return_types, vector<SkadeName> &names) {
	string catalog_name;
	auto data = WritingFunction(input, "skade_reset_consumer", catalog_name, context);
	auto name = StringValue::Get(input.inputs[1]);
	StartArguments start(input);
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeModifiesCatalog(context, catalog);
		SkadeCheck(skade_fn_start_consumer(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(), true,
		                                   nullptr, 0, start.has_word ? start.word.c_str() : nullptr,
		                                   start.snapshot, start.has_snapshot, start.commit, start.has_commit,
		                                   &out));
	};
	return SkadeArrowFunctionBind(context, "skade_consumers", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindDrop(ClientContext &context, TableFunctionBindInput &input,
                                  vector<LogicalType> &return_types, vector<SkadeName> &names) {
	string catalog_name;
	auto data = WritingFunction(input, "skade_drop_consumer", catalog_name, context);
	auto name = StringValue::Get(input.inputs[1]);
	auto if_exists_value = SkadeNamedParameter(input, "if_exists");
	bool if_exists = !if_exists_value.IsNull() && BooleanValue::Get(if_exists_value);
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeModifiesCatalog(context, catalog);
		SkadeCheck(skade_fn_drop_consumer(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(), if_exists,
		                                  &out));
	};
	return SkadeArrowFunctionBind(context, "skade_drop_consumer", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindAcknowledge(ClientContext &context, TableFunctionBindInput &input,
                                         vector<LogicalType> &return_types, vector<SkadeName> &names) {
	string catalog_name;
	auto data = WritingFunction(input, "skade_acknowledge", catalog_name, context);
	auto name = StringValue::Get(input.inputs[1]);
	auto seq = input.inputs[2].GetValue<int64_t>();
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeModifiesCatalog(context, catalog);
		SkadeCheck(skade_fn_acknowledge(SkadeTransaction::Get(context, catalog).Handle(), name.c_str(), seq, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_consumers", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindList(ClientContext &context, TableFunctionBindInput &input,
                                  vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_consumers");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_consumers(SkadeTransaction::Get(context, catalog).Handle(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_consumers", std::move(data), return_types, names);
}

} // namespace

vector<TableFunctionSet> SkadeConsumerFunctions() {
	TableFunctionSet create("skade_create_consumer");
	for (auto tables : vector<LogicalType> {LogicalType::VARCHAR, LogicalType::LIST(LogicalType::VARCHAR)}) {
		auto function = SkadeArrowFunction("skade_create_consumer",
		                                   {LogicalType::VARCHAR, LogicalType::VARCHAR, tables}, BindCreate);
		AddStartParameters(function);
		create.AddFunction(function);
	}
	TableFunctionSet reset("skade_reset_consumer");
	auto reset_function =
	    SkadeArrowFunction("skade_reset_consumer", {LogicalType::VARCHAR, LogicalType::VARCHAR}, BindReset);
	AddStartParameters(reset_function);
	reset.AddFunction(reset_function);
	TableFunctionSet drop("skade_drop_consumer");
	auto drop_function =
	    SkadeArrowFunction("skade_drop_consumer", {LogicalType::VARCHAR, LogicalType::VARCHAR}, BindDrop);
	SkadeAddNamedParameter(drop_function, "if_exists", LogicalType::BOOLEAN);
	drop.AddFunction(drop_function);
	TableFunctionSet acknowledge("skade_acknowledge");
	acknowledge.AddFunction(SkadeArrowFunction(
	    "skade_acknowledge", {LogicalType::VARCHAR, LogicalType::VARCHAR, LogicalType::BIGINT}, BindAcknowledge));
	TableFunctionSet list("skade_consumers");
	list.AddFunction(SkadeArrowFunction("skade_consumers", {LogicalType::VARCHAR}, BindList));
	return {create, reset, drop, acknowledge, list};
}

} // namespace duckdb
