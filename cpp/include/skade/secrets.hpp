// DuckDB's S3 secrets for the buckets a skade catalog uses, handed to the core.
#pragma once

#include "skade/common.hpp"

namespace duckdb {

//! The s3:// URLs an ATTACH uses: its path, and its DATA_PATH and COMMIT_LOG options when they
//! are in a bucket (in that order, each once).
vector<string> SkadeBucketUrls(const string &path, const unordered_map<string, Value> &options);

//! For each URL, what httpfs would use for it: the secret the secret manager picks (types s3, r2,
//! gcs, aws; the longest matching SCOPE), each key falling back to httpfs's s3_* setting (absent
//! when httpfs is not loaded), passed to the core with the secret's name (skade_storage_options).
//! With no secret and no setting the core uses the AWS environment.
void SkadePassSecrets(ClientContext &context, const vector<string> &urls);

} // namespace duckdb
