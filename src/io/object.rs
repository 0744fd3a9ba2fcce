//! Objects in S3-compatible storage (`s3://bucket/key`), through the `object_store` crate: one
//! client per bucket and credentials, created-if-absent puts, ranged reads, listings and bulk
//! deletes. The rest of `io` sends every `s3://` location here; nothing above `io` names a store.
//!
//! Credentials are handed in by the host per URL prefix ([`set_options`]: the DuckDB shim reads
//! them from DuckDB's secret manager), the longest registered prefix of a location wins, as a
//! secret's SCOPE does; a location under no registered prefix uses the AWS environment variables.
//! Retries and timeouts are `object_store`'s, with the policy of `docs/design/object-storage.md`.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, PutMode, PutOptions, PutPayload, RetryConfig};

use crate::error::{Error, ErrorKind, Result};

/// The scheme of object locations.
pub const S3: &str = "s3://";

/// Whether `location` names an object rather than a local file.
pub fn is_object(location: &str) -> bool {
    location.len() > S3.len() && location[..S3.len()].eq_ignore_ascii_case(S3)
}

/// A bucket prefix as skade records it (a lake, a DATA_PATH, a COMMIT_LOG): the scheme in lower
/// case (other engines resolve only `s3://`), no trailing slash, and refused when a part of it is
/// empty, `.` or `..`, or holds `?` or `#` (which other engines' readers take for a URL's query
/// or fragment).
pub fn normalize(url: &str) -> Result<String> {
    if !is_object(url) {
        return Err(Error::invalid(format!("{url} is not an s3:// location")));
    }
    let url = format!("{S3}{}", url[S3.len()..].trim_end_matches('/'));
    let (_, key) = split(&url)?;
    let bad_part = key.split('/').any(|part| part.is_empty() || part == "." || part == "..");
    if (bad_part && !key.is_empty()) || url.contains(['?', '#']) {
        return Err(Error::invalid(format!(
            "{url}: a bucket prefix has no empty, `.` or `..` parts and no `?` or `#` (other engines read those as \
             a URL's query or fragment)"
        )));
    }
    Ok(url)
}

/// How to reach a bucket: what a DuckDB secret of type s3 holds (empty fields are unset).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// The secret's name, for messages (never its contents).
    pub secret_name: String,
    pub key_id: String,
    pub secret: String,
    pub session_token: String,
    pub region: String,
    /// `host[:port]` or a URL; DuckDB's ENDPOINT carries no scheme, USE_SSL picks it.
    pub endpoint: String,
    /// `path` or `vhost` (DuckDB's default).
    pub url_style: String,
    pub use_ssl: bool,
    pub kms_key_id: String,
    pub requester_pays: bool,
    /// Per-request timeout and retries, when not the defaults (tests, and later ATTACH options).
    pub timeout: Option<Duration>,
    pub retries: Option<usize>,
}

impl fmt::Debug for S3Options {
    /// Names what is set, never a key, secret or token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Options")
            .field("secret_name", &self.secret_name)
            .field("key_id", &if self.key_id.is_empty() { "" } else { "<redacted>" })
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("url_style", &self.url_style)
            .field("use_ssl", &self.use_ssl)
            .finish_non_exhaustive()
    }
}

impl S3Options {
    /// The endpoint as a URL (`http://` when USE_SSL is false), if one is set.
    pub fn endpoint_url(&self) -> Option<String> {
        let e = self.endpoint.trim().trim_end_matches('/');
        if e.is_empty() {
            return None;
        }
        if e.starts_with("http://") || e.starts_with("https://") {
            return Some(e.to_string());
        }
        Some(format!("{}://{e}", if self.use_ssl { "https" } else { "http" }))
    }

    /// The names [`S3Options::from_pairs`] takes: a DuckDB S3 secret's keys, and its name.
    pub const KEYS: [&'static str; 10] = [
        "secret_name",
        "key_id",
        "secret",
        "session_token",
        "region",
        "endpoint",
        "url_style",
        "use_ssl",
        "kms_key_id",
        "requester_pays",
    ];

    /// Options from a host's key/value pairs (keys in any case; an empty value is unset; the last
    /// of a repeated key wins): what the DuckDB shim read from a secret or the `s3_*` settings.
    /// None when they name no secret and hold no credentials (only settings, which httpfs fills
    /// with its defaults): then the AWS environment applies, whole.
    /// An unknown key is an error naming it; no message ever holds a value of a credential.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Option<S3Options>> {
        let mut o = S3Options { use_ssl: true, ..Default::default() };
        let mut unknown = vec![];
        for (key, value) in pairs {
            let flag = |what: &str| -> Result<bool> {
                match value.trim().to_ascii_lowercase().as_str() {
                    "" | "false" | "f" | "0" | "no" | "off" => Ok(false),
                    "true" | "t" | "1" | "yes" | "on" => Ok(true),
                    _ => Err(Error::invalid(format!("{what} '{value}' is not a boolean (true or false)"))),
                }
            };
            match key.to_ascii_lowercase().as_str() {
                "secret_name" => o.secret_name = value.to_string(),
                "key_id" => o.key_id = value.to_string(),
                "secret" => o.secret = value.to_string(),
                "session_token" => o.session_token = value.to_string(),
                "region" => o.region = value.to_string(),
                "endpoint" => o.endpoint = value.to_string(),
                "url_style" => {
                    let style = value.trim().to_ascii_lowercase();
                    if !matches!(style.as_str(), "" | "path" | "vhost") {
                        return Err(Error::invalid(format!("URL_STYLE '{value}' is neither 'path' nor 'vhost'")));
                    }
                    o.url_style = style;
                }
                "use_ssl" => o.use_ssl = value.trim().is_empty() || flag("USE_SSL")?,
                "kms_key_id" => o.kms_key_id = value.to_string(),
                "requester_pays" => o.requester_pays = flag("REQUESTER_PAYS")?,
                _ => unknown.push(key.to_string()),
            }
        }
        if !unknown.is_empty() {
            return Err(Error::invalid(format!(
                "unknown storage option{} {} (known: {})",
                if unknown.len() == 1 { "" } else { "s" },
                unknown.join(", "),
                S3Options::KEYS.join(", ")
            )));
        }
        // (httpfs's settings have defaults, such as `s3_region` 'us-east-1' and `s3_endpoint`
        // 's3.amazonaws.com', and take keys from the AWS environment variables: the default
        // endpoint would send requests to AWS over an AWS_ENDPOINT_URL)
        if o.secret_name.is_empty() && o.endpoint.eq_ignore_ascii_case("s3.amazonaws.com") {
            o.endpoint.clear();
        }
        let credentials = [&o.secret_name, &o.key_id, &o.secret, &o.session_token];
        if credentials.iter().all(|v| v.is_empty()) {
            return Ok(None);
        }
        Ok(Some(o))
    }

    /// Where requests go, for messages: the endpoint, or AWS's.
    pub fn describe(&self) -> String {
        let secret = if self.secret_name.is_empty() { String::new() } else { format!(", secret {}", self.secret_name) };
        match self.endpoint_url() {
            Some(e) => format!("endpoint {e}{secret}"),
            None => format!("AWS S3{secret}"),
        }
    }
}

/// Timeouts and retries (see the design note's retry table): the options' when set, else
/// `SKADE_S3_TIMEOUT_MS` and `SKADE_S3_RETRIES` (read when a client is made), else the defaults.
#[derive(Debug, Clone)]
struct Policy {
    request_timeout: Duration,
    connect_timeout: Duration,
    retries: usize,
    retry_for: Duration,
}

impl Policy {
    fn of(options: Option<&S3Options>) -> Policy {
        let ms = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        let request_timeout = options
            .and_then(|o| o.timeout)
            .unwrap_or_else(|| Duration::from_millis(ms("SKADE_S3_TIMEOUT_MS").unwrap_or(60_000)));
        let retries = options.and_then(|o| o.retries).or_else(|| ms("SKADE_S3_RETRIES").map(|n| n as usize));
        Policy {
            request_timeout,
            connect_timeout: request_timeout.min(Duration::from_secs(5)),
            retries: retries.unwrap_or(6),
            retry_for: request_timeout.max(Duration::from_secs(30)) * 2,
        }
    }
}

/// One bucket's client.
#[derive(Clone)]
pub struct Store {
    pub bucket: String,
    pub options: Option<S3Options>,
    client: Arc<dyn ObjectStore>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Store(s3://{}, {:?})", self.bucket, self.options)
    }
}

struct Registry {
    /// URL prefix -> options, set by the host.
    options: Vec<(String, S3Options)>,
    /// (bucket, the prefix whose options it uses) -> client.
    clients: HashMap<(String, Option<String>), Store>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(|| Registry { options: vec![], clients: HashMap::new() }))
}

/// Registers how to reach locations under `prefix` (an `s3://bucket[/path]` URL). Options that
/// changed (a refreshed token) replace the client; unchanged ones keep it and its connections.
pub fn set_options(prefix: &str, options: S3Options) -> Result<()> {
    let (bucket, key) = split(prefix)?;
    let prefix = format!("{S3}{bucket}/{key}");
    registry(|r| {
        if let Some(slot) = r.options.iter_mut().find(|(p, _)| *p == prefix) {
            if slot.1 == options {
                return;
            }
            slot.1 = options;
        } else {
            r.options.push((prefix.clone(), options));
        }
        r.clients.retain(|(_, p), _| p.as_deref() != Some(prefix.as_str()));
    });
    Ok(())
}

/// Forgets how to reach locations under `prefix`: they use the AWS environment again (or a
/// shorter registered prefix). Nothing registered there is not an error.
pub fn clear_options(prefix: &str) -> Result<()> {
    let (bucket, key) = split(prefix)?;
    let prefix = format!("{S3}{bucket}/{key}");
    registry(|r| {
        r.options.retain(|(p, _)| *p != prefix);
        r.clients.retain(|(_, p), _| p.as_deref() != Some(prefix.as_str()));
    });
    Ok(())
}

/// The registered options whose prefix is the longest one `location` lies under, with that prefix.
fn scope(r: &Registry, location: &str) -> Option<(String, S3Options)> {
    r.options
        .iter()
        .filter(|(p, _)| under(location, p))
        .max_by_key(|(p, _)| p.len())
        .map(|(p, o)| (p.clone(), o.clone()))
}

/// Where requests for `location` go, for messages: the endpoint and the secret's name, or the
/// AWS environment. Never a credential.
pub fn describe(location: &str) -> String {
    match registry(|r| scope(r, location)) {
        Some((_, o)) => o.describe(),
        None => "the AWS environment".to_string(),
    }
}

/// `text` with every registered key id, secret and session token replaced: a server's answer
/// may echo what a request carried, and messages must never hold a credential.
fn redact(text: String) -> String {
    registry(|r| {
        let mut text = text;
        for (_, o) in &r.options {
            for credential in [&o.key_id, &o.secret, &o.session_token] {
                // (very short values would blank ordinary words; real credentials are long)
                if credential.len() >= 6 && text.contains(credential.as_str()) {
                    text = text.replace(credential.as_str(), "<redacted>");
                }
            }
        }
        text
    })
}

/// The bucket and key of an `s3://` location.
pub fn split(location: &str) -> Result<(&str, &str)> {
    if !is_object(location) {
        return Err(Error::invalid(format!("{location} is not an s3:// location")));
    }
    let rest = &location[S3.len()..];
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!("{location} names no bucket (s3://bucket/key)")));
    }
    Ok((bucket, key))
}

/// The client for `location` and the object's key in it.
pub fn store_for(location: &str) -> Result<(Store, ObjectPath)> {
    let (bucket, key) = split(location)?;
    let path =
        ObjectPath::parse(key).map_err(|e| Error::invalid(format!("{location} is not a valid object key: {e}")))?;
    let bucket = bucket.to_string();
    let found = registry(|r| {
        let scope = scope(r, location);
        let id = (bucket.clone(), scope.as_ref().map(|(p, _)| p.clone()));
        r.clients.get(&id).cloned().map(Ok::<Store, Error>).unwrap_or_else(|| {
            let store = connect(&bucket, scope.map(|(_, o)| o))?;
            r.clients.insert(id, store.clone());
            Ok(store)
        })
    })?;
    Ok((found, path))
}

/// Whether `location` is `prefix` or lies under it (`s3://b/x` is not under `s3://b/xy`).
fn under(location: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    location == prefix || location.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

fn connect(bucket: &str, options: Option<S3Options>) -> Result<Store> {
    // reqwest's rustls needs a process-wide crypto provider; a host that installed one keeps it.
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let _ = provider.install_default();
    let policy = Policy::of(options.as_ref());
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let env_allows_http = env("AWS_ALLOW_HTTP").eq_ignore_ascii_case("true")
        || env("AWS_ENDPOINT_URL").starts_with("http://")
        || env("AWS_ENDPOINT").starts_with("http://");
    let allow_http = match options.as_ref().map(|o| (o, o.endpoint_url())) {
        Some((_, Some(endpoint))) => endpoint.starts_with("http://"),
        // settings without an endpoint over the environment's (see below)
        Some((o, None)) => o.secret_name.is_empty() && env_allows_http,
        None => env_allows_http,
    };
    // (before the endpoint: ClientOptions replace the builder's, allow_http included)
    let client_options = ClientOptions::new()
        .with_timeout(policy.request_timeout)
        .with_connect_timeout(policy.connect_timeout)
        .with_allow_http(allow_http);
    let mut b = match &options {
        None => {
            // (a malformed endpoint would fail deep in the HTTP client, as if a bug)
            for name in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"] {
                match std::env::var(name) {
                    Ok(e) if !valid_endpoint(&e) => {
                        return Err(Error::invalid(format!(
                            "the environment variable {name} '{e}' is not an endpoint URL (http://host:port or \
                             https://host)"
                        )));
                    }
                    _ => {}
                }
            }
            AmazonS3Builder::from_env().with_client_options(client_options.clone())
        }
        Some(o) => {
            // A secret is the whole configuration; `s3_*` settings (httpfs fills some from the
            // AWS environment itself) lie over the environment, its endpoint included.
            let base = if o.secret_name.is_empty() { AmazonS3Builder::from_env() } else { AmazonS3Builder::new() };
            let mut b = base.with_client_options(client_options.clone());
            if !o.key_id.is_empty() {
                b = b.with_access_key_id(&o.key_id).with_secret_access_key(&o.secret);
            }
            if !o.session_token.is_empty() {
                b = b.with_token(&o.session_token);
            }
            if !o.region.is_empty() {
                b = b.with_region(&o.region);
            } else if !o.secret_name.is_empty() {
                b = b.with_region("us-east-1");
            }
            if let Some(e) = o.endpoint_url() {
                if !valid_endpoint(&e) {
                    return Err(Error::invalid(format!(
                        "the S3 endpoint '{}' ({}) is not a host[:port] or URL",
                        o.endpoint,
                        o.describe()
                    )));
                }
                b = b.with_endpoint(e);
            }
            // (the URL style belongs to the endpoint: settings without one leave the
            // environment's endpoint its style, whatever httpfs's default says)
            if o.endpoint_url().is_some() || !o.secret_name.is_empty() {
                b = b.with_virtual_hosted_style_request(!o.url_style.eq_ignore_ascii_case("path"));
            }
            if !o.kms_key_id.is_empty() {
                b = b.with_sse_kms_encryption(&o.kms_key_id);
            }
            b.with_request_payer(o.requester_pays)
        }
    };
    b = b.with_bucket_name(bucket).with_retry(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: policy.retries,
        retry_timeout: policy.retry_for,
    });
    let client = b.build().map_err(|e| {
        let to = options.as_ref().map(S3Options::describe).unwrap_or_else(|| "the AWS environment".into());
        let text = clean(&e.to_string());
        // (no redact(): this runs inside the registry's lock; the builder's errors name settings)
        let text = match &options {
            Some(o) => [&o.key_id, &o.secret, &o.session_token]
                .into_iter()
                .filter(|c| c.len() >= 6)
                .fold(text, |t, c| t.replace(c.as_str(), "<redacted>")),
            None => text,
        };
        Error::invalid(format!("cannot reach bucket {bucket} through {to}: {text}"))
    })?;
    Ok(Store { bucket: bucket.to_string(), options, client: Arc::new(client) })
}

/// Whether `endpoint` is a URL a client can send requests to.
fn valid_endpoint(endpoint: &str) -> bool {
    url::Url::parse(endpoint).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

/// Runs `f` to completion from sync code, inside or outside the runtime's workers.
pub fn wait<F: Future>(f: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| handle.block_on(f))
        }
        _ => crate::runtime::block_on(f),
    }
}

impl Store {
    pub fn client(&self) -> &Arc<dyn ObjectStore> {
        &self.client
    }

    /// Where this store sends requests, for messages.
    pub fn describe(&self) -> String {
        self.options.as_ref().map(S3Options::describe).unwrap_or_else(|| "AWS S3 (environment credentials)".into())
    }
}

/// An error of `object_store` as skade's, naming the object and, for a refusal, the way out.
pub fn error(what: &str, location: &str, e: object_store::Error) -> Error {
    let text = clean(&with_causes(&e));
    let code = s3_code(&text);
    // (a listing's 404 is no NotFound to object_store: the code tells)
    if code.as_deref() == Some("NoSuchBucket") {
        let bucket = split(location).map(|(b, _)| b).unwrap_or(location);
        let via = describe(location);
        return Error::io(redact(format!(
            "cannot {what} {location}: bucket {bucket} does not exist at {via} (NoSuchBucket)"
        )));
    }
    let mut e = match e {
        object_store::Error::NotFound { .. } => {
            Error::new(ErrorKind::Io, format!("cannot {what} {location}: it does not exist"))
        }
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            let code = code.unwrap_or_else(|| "AccessDenied".into());
            let hint = if code == "RequestTimeTooSkewed" {
                "this machine's clock is too far from the server's (S3 allows 15 minutes)"
            } else {
                "check the S3 secret's KEY_ID, SECRET, REGION and SCOPE, or the AWS environment"
            };
            let via = describe(location);
            Error::permission(format!("cannot {what} {location}: access denied ({code}) through {via}: {hint}"))
        }
        _ => Error::io(format!("cannot {what} {location}: {text}")),
    };
    e.message = redact(e.message);
    e
}

/// The error's text and each cause's that it does not show already: object_store says "error
/// sending request", its causes say why (refused, timed out).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    crate::error::without_os_codes(&text)
}

/// Whether a 404 is the bucket's (S3 says so in a GET's body; a HEAD's has none).
fn no_such_bucket(e: &object_store::Error) -> bool {
    e.to_string().contains("<Code>NoSuchBucket</Code>")
}

/// The S3 error code in an answer's body (`<Code>SlowDown</Code>`), if any.
fn s3_code(text: &str) -> Option<String> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text[start..].find("</Code>")?;
    Some(text[start..start + len].to_string())
}

/// One line, without the request id noise of XML bodies beyond the code and message.
fn clean(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let message = (|| {
        let start = one_line.find("<Message>")? + "<Message>".len();
        let len = one_line[start..].find("</Message>")?;
        Some(one_line[start..start + len].to_string())
    })();
    let code = s3_code(&one_line);
    match (code, message) {
        (Some(c), Some(m)) => {
            let head = one_line.split('<').next().unwrap_or("").trim_end_matches([' ', ',', ':']);
            format!("{head}: <Code>{c}</Code> {m}")
        }
        _ => one_line,
    }
}

/// Puts `bytes` at `location` unless an object is there: whether this call created it. A store
/// that answers a repeated put with 409 reports it as taken, like 412: callers that must tell
/// "ours, retried" from "someone else's" read the object back.
pub async fn put_new(location: &str, bytes: Bytes) -> Result<bool> {
    put_new_now(location, bytes).await
}

/// [`put_new`] of a file skade names anew (metadata): inside `deferred::deferring`, started and
/// awaited at the scope's end, where finding the name taken is an error.
pub async fn create(location: &str, bytes: Bytes) -> Result<()> {
    let taken = |location: &str| Error::io(format!("cannot create {location}: an object of that name exists already"));
    if super::deferred::active() {
        store_for(location)?; // (a bad location fails now)
        let owned = location.to_string();
        super::deferred::defer(location, async move {
            match put_new_now(&owned, bytes).await? {
                true => Ok(()),
                false => Err(taken(&owned)),
            }
        });
        return Ok(());
    }
    match put_new_now(location, bytes).await? {
        true => Ok(()),
        false => Err(taken(location)),
    }
}

async fn put_new_now(location: &str, bytes: Bytes) -> Result<bool> {
    let (store, path) = store_for(location)?;
    let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
    match store.client.put_opts(&path, PutPayload::from_bytes(bytes), opts).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(error("write", location, e)),
    }
}

/// Puts `bytes` at `location`, replacing any object there (data files: their names are new).
pub async fn put(location: &str, bytes: Bytes) -> Result<()> {
    let (store, path) = store_for(location)?;
    store.client.put(&path, PutPayload::from_bytes(bytes)).await.map(|_| ()).map_err(|e| error("write", location, e))
}

/// The whole object, or None when there is none.
pub async fn get(location: &str) -> Result<Option<Bytes>> {
    super::deferred::settled(location).await?;
    let (store, path) = store_for(location)?;
    let got = match store.client.get(&path).await {
        Ok(got) => got,
        Err(e @ object_store::Error::NotFound { .. }) if !no_such_bucket(&e) => return Ok(None),
        Err(e) => return Err(error("read", location, e)),
    };
    got.bytes().await.map(Some).map_err(|e| error("read", location, e))
}

/// `range` of the object's bytes, all of them: a range past the object's end is an error (S3
/// answers one that starts inside with the bytes there are).
pub async fn get_range(location: &str, range: Range<u64>) -> Result<Bytes> {
    super::deferred::settled(location).await?;
    let (store, path) = store_for(location)?;
    let len = range.end.saturating_sub(range.start);
    if len == 0 {
        // (no request: S3 has no empty range, object_store refuses one)
        return Ok(Bytes::new());
    }
    let got = store
        .client
        .get_range(&path, range.clone())
        .await
        .map_err(|e| error(&format!("read {len} bytes at offset {} of", range.start), location, e))?;
    whole(location, &range, got)
}

/// Several ranges of one object, fetched concurrently (adjacent ones merged by the store).
pub async fn get_ranges(location: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
    super::deferred::settled(location).await?;
    let (store, path) = store_for(location)?;
    let got = store.client.get_ranges(&path, ranges).await.map_err(|e| error("read ranges of", location, e))?;
    ranges.iter().zip(got).map(|(range, bytes)| whole(location, range, bytes)).collect()
}

/// `bytes`, if they are all of `range`: a short answer means the object ends inside it.
fn whole(location: &str, range: &Range<u64>, bytes: Bytes) -> Result<Bytes> {
    let len = range.end.saturating_sub(range.start);
    if bytes.len() as u64 == len {
        return Ok(bytes);
    }
    let end = range.start + bytes.len() as u64;
    Err(Error::io(format!("cannot read {len} bytes at offset {} of {location}: it ends at {end}", range.start)))
}

/// An object's size and last write, or None when there is none.
pub async fn head(location: &str) -> Result<Option<(u64, SystemTime)>> {
    super::deferred::settled(location).await?;
    let (store, path) = store_for(location)?;
    match store.client.head(&path).await {
        Ok(meta) => Ok(Some((meta.size, meta.last_modified.into()))),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(error("stat", location, e)),
    }
}

/// An object found by a listing.
#[derive(Debug, Clone)]
pub struct Listed {
    pub location: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// Every object under the folder `prefix` (recursively), after the key `start_after` when given,
/// in key order.
pub async fn list(prefix: &str, start_after: Option<&str>) -> Result<Vec<Listed>> {
    let folder = format!("{}/", prefix.trim_end_matches('/'));
    let (store, path) = store_for(&folder)?;
    let (bucket, _) = split(&folder)?;
    let stream = match start_after {
        Some(after) => {
            let (_, offset) = store_for(after)?;
            store.client.list_with_offset(Some(&path), &offset)
        }
        None => store.client.list(Some(&path)),
    };
    let mut out: Vec<Listed> = stream
        .map_ok(|m| Listed {
            location: format!("{S3}{bucket}/{}", m.location),
            size: m.size,
            modified: m.last_modified.into(),
        })
        .try_collect()
        .await
        .map_err(|e| error("list", &folder, e))?;
    out.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(out)
}

/// The objects and sub-folders directly in the folder `prefix` (a folder is listed as its
/// location ending in `/`, with size 0 and no time).
pub async fn list_folder(prefix: &str) -> Result<Vec<Listed>> {
    let folder = format!("{}/", prefix.trim_end_matches('/'));
    let (store, path) = store_for(&folder)?;
    let (bucket, _) = split(&folder)?;
    let found = store.client.list_with_delimiter(Some(&path)).await.map_err(|e| error("list", &folder, e))?;
    let mut out: Vec<Listed> = found
        .objects
        .into_iter()
        .map(|m| Listed {
            location: format!("{S3}{bucket}/{}", m.location),
            size: m.size,
            modified: m.last_modified.into(),
        })
        .collect();
    // (object_store's prefixes have no trailing `/`: it is what tells a folder)
    out.extend(found.common_prefixes.into_iter().map(|p| Listed {
        location: format!("{S3}{bucket}/{p}/"),
        size: 0,
        modified: SystemTime::UNIX_EPOCH,
    }));
    Ok(out)
}

/// Deletes the objects (in bulk: S3's DeleteObjects takes up to 1,000 keys a request); missing
/// ones are not an error.
pub async fn delete(locations: &[String]) -> Result<()> {
    let mut by_store: HashMap<String, (Store, Vec<ObjectPath>)> = HashMap::new();
    for location in locations {
        let (store, path) = store_for(location)?;
        by_store
            .entry(format!("{:?}", (store.bucket.as_str(), &store.options)))
            .or_insert((store, vec![]))
            .1
            .push(path);
    }
    for (_, (store, paths)) in by_store {
        let bucket = store.bucket.clone();
        let stream = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
        let results: Vec<_> = store.client.delete_stream(stream).collect().await;
        for r in results {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(error("delete", &format!("{S3}{bucket}"), e)),
            }
        }
    }
    Ok(())
}

/// A multipart upload that becomes visible only when finished: one PUT up to the part size,
/// parts of 10 MiB above it, 8 in flight.
pub struct Upload {
    location: String,
    writer: Option<object_store::buffered::BufWriter>,
}

impl Upload {
    pub fn new(location: &str) -> Result<Upload> {
        let (store, path) = store_for(location)?;
        let writer = object_store::buffered::BufWriter::new(store.client.clone(), path);
        Ok(Upload { location: location.to_string(), writer: Some(writer) })
    }

    pub async fn write(&mut self, bytes: Bytes) -> Result<()> {
        let location = self.location.clone();
        let w = self.writer.as_mut().ok_or_else(|| Error::internal(format!("upload of {location} is finished")))?;
        w.put(bytes).await.map_err(|e| error("upload", &location, e))
    }

    /// Completes the upload: the object appears whole, or not at all. Inside
    /// `deferred::deferring`, the completion is started and waited for at the scope's end.
    pub async fn finish(&mut self) -> Result<()> {
        let location = self.location.clone();
        let w = self.writer.take().ok_or_else(|| Error::internal(format!("upload of {location} is finished")))?;
        if super::deferred::active() {
            let owned = location.clone();
            super::deferred::defer(&location, async move { complete(&owned, w).await });
            return Ok(());
        }
        complete(&location, w).await
    }
}

/// Completes the upload `w` of `location`.
async fn complete(location: &str, mut w: object_store::buffered::BufWriter) -> Result<()> {
    use tokio::io::AsyncWriteExt;
    // A failed completion leaves at most an incomplete multipart upload, which no listing or
    // read shows (a bucket lifecycle rule removes its parts).
    w.shutdown().await.map_err(|e| {
        // (the writer wraps the store's error in an io::Error: unwrapped, it is named as every
        // other request's, with where it went and S3's code)
        match e.into_inner().map(|inner| inner.downcast::<object_store::Error>()) {
            Some(Ok(store_error)) => error("upload", location, *store_error),
            Some(Err(other)) => Error::io(redact(format!("cannot upload {location}: {}", clean(&other.to_string())))),
            None => Error::io(format!("cannot upload {location}")),
        }
    })
}
