// DuckDB's S3 secrets (and httpfs's s3_* settings) for the buckets of a skade catalog, read as
// httpfs reads them and handed to the core as plain key/values: what they mean, the core decides.
#include "skade/secrets.hpp"

#include <algorithm>

#include "duckdb/common/file_opener.hpp"
#include "duckdb/main/client_context_file_opener.hpp"
#include "duckdb/main/secret/secret.hpp"

namespace duckdb {

namespace {

//! The secret types httpfs reads for an s3:// path, in its order.
const char *SECRET_TYPES[] = {"s3", "r2", "gcs", "aws"};

//! The secret's keys the core takes, each with the httpfs setting that stands in for it.
struct SkadeSecretKey {
	const char *key;
	const char *setting;
};
const SkadeSecretKey SECRET_KEYS[] = {
    {"key_id", "s3_access_key_id"}, {"secret", "s3_secret_access_key"}, {"session_token", "s3_session_token"},
    {"region", "s3_region"},        {"endpoint", "s3_endpoint"},         {"url_style", "s3_url_style"},
    {"use_ssl", "s3_use_ssl"},      {"kms_key_id", "s3_kms_key_id"},     {"requester_pays", "s3_requester_pays"}};

//! httpfs's reader (through a FileOpener: the reader made from a ClientContext looks no secret up
//! in 1.5.5 and 2.0.1), which also tells the name of the secret it found.
class SkadeSecretReader : public KeyValueSecretReader {
public:
	SkadeSecretReader(FileOpener &opener, FileOpenerInfo &info)
	    : KeyValueSecretReader(opener, &info, SECRET_TYPES, sizeof(SECRET_TYPES) / sizeof(SECRET_TYPES[0])) {
	}
	string SecretName() const {
		return secret ? string(SkadeNameString(secret->GetName())) : string();
	}
};

bool IsBucketUrl(const string &location) {
	return StringUtil::StartsWith(StringUtil::Lower(location.substr(0, 5)), "s3://");
}

} // namespace

vector<string> SkadeBucketUrls(const string &path, const unordered_map<string, Value> &options) {
	vector<string> urls;
	auto add = [&](const string &location) {
		if (IsBucketUrl(location) && std::find(urls.begin(), urls.end(), location) == urls.end()) {
			urls.push_back(location);
		}
	};
	add(path);
	for (auto name : {"data_path", "commit_log"}) {
		for (auto &entry : options) {
			if (StringUtil::CIEquals(entry.first, name) && !entry.second.IsNull()) {
				add(entry.second.ToString());
			}
		}
	}
	return urls;
}

void SkadePassSecrets(ClientContext &context, const vector<string> &urls) {
	if (urls.empty()) {
		return;
	}
	ClientContextFileOpener opener(context);
	for (auto &url : urls) {
#if SKADE_DUCKDB_MAJOR >= 2
		FileOpenerInfo info(url);
#else
		FileOpenerInfo info;
		info.file_path = url;
#endif
		SkadeSecretReader reader(opener, info);
		vector<string> keys;
		vector<string> values;
		auto name = reader.SecretName();
		if (!name.empty()) {
			keys.push_back("secret_name");
			values.push_back(name);
		}
		for (auto &k : SECRET_KEYS) {
			Value value;
			// (a setting that does not exist, httpfs not loaded, is simply not found)
			if (reader.TryGetSecretKeyOrSetting(k.key, k.setting, value) && !value.IsNull()) {
				keys.push_back(k.key);
				values.push_back(value.ToString());
			}
		}
		vector<const char *> key_ptrs;
		vector<const char *> value_ptrs;
		for (idx_t i = 0; i < keys.size(); i++) {
			key_ptrs.push_back(keys[i].c_str());
			value_ptrs.push_back(values[i].c_str());
		}
		SkadeCheck(skade_storage_options(url.c_str(), key_ptrs.data(), value_ptrs.data(), keys.size()));
	}
}

} // namespace duckdb
