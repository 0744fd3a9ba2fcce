//! The local S3 server for the core's tests: `tools/s3_server.py` (moto behind a lock, on
//! 127.0.0.1) run by the 1.5.5 host's Python, which `make` installs (`build/venv`). Each test
//! gets its own bucket on one server per test binary; no request leaves the machine.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use skade::io::object::{self, S3Options};

pub const KEY_ID: &str = "skadetest";
pub const SECRET: &str = "skadetestsecret";

/// A running server, killed when dropped. The shared one is a static, never dropped: it exits
/// when its stdin, a pipe this process holds, closes with the test binary.
pub struct S3Server {
    pub endpoint: String,
    child: Mutex<Child>,
}

impl S3Server {
    /// Starts a server with `args` (tools/s3_server.py's options).
    pub fn start(args: &[&str]) -> S3Server {
        let root = env!("CARGO_MANIFEST_DIR");
        let python = format!("{root}/build/venv/bin/python");
        assert!(
            std::path::Path::new(&python).exists(),
            "{python} is missing: the S3 tests need the local S3 server `make` installs (run `make` first)"
        );
        let mut child = Command::new(&python)
            .arg(format!("{root}/tools/s3_server.py"))
            .args(["--access-key", KEY_ID, "--exit-with-stdin"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start tools/s3_server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line
            .strip_prefix("port ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("tools/s3_server.py did not start: {line:?}"));
        S3Server { endpoint: format!("127.0.0.1:{port}"), child: Mutex::new(child) }
    }

    /// The server shared by a test binary's tests.
    pub fn shared() -> &'static S3Server {
        static SERVER: OnceLock<S3Server> = OnceLock::new();
        SERVER.get_or_init(|| S3Server::start(&[]))
    }

    fn control(&self, method: &str, what: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        let url = format!("http://{}/_skade/{what}", self.endpoint);
        let answer = match (method, body) {
            ("POST", Some(b)) => ureq::post(&url).send_json(b),
            ("DELETE", _) => ureq::delete(&url).call(),
            _ => ureq::get(&url).call(),
        };
        answer.unwrap_or_else(|e| panic!("{method} {url}: {e}")).body_mut().read_json().unwrap()
    }

    /// A new bucket, named for the test (S3 names: lowercase, digits, dashes).
    pub fn bucket(&self, name: &str) -> String {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let clean: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
        let bucket = format!("{}-{n}", &clean[..clean.len().min(40)]).trim_matches('-').to_string();
        self.control("POST", "buckets", Some(serde_json::json!({ "name": bucket })));
        bucket
    }

    /// The options that reach this server with the right key.
    pub fn options(&self) -> S3Options {
        S3Options {
            secret_name: "test_secret".into(),
            key_id: KEY_ID.into(),
            secret: SECRET.into(),
            region: "us-east-1".into(),
            endpoint: self.endpoint.clone(),
            url_style: "path".into(),
            use_ssl: false,
            timeout: Some(Duration::from_secs(10)),
            retries: Some(3),
            ..Default::default()
        }
    }

    /// A fresh bucket registered with this server's options: `s3://<bucket>`.
    pub fn fresh(&self, name: &str) -> String {
        let url = format!("s3://{}", self.bucket(name));
        object::set_options(&url, self.options()).unwrap();
        url
    }

    /// Injects a fault (see tools/s3_server.py): `{"method", "prefix", "status", "code", "count", "delay"}`.
    pub fn fault(&self, fault: serde_json::Value) {
        self.control("POST", "faults", Some(fault));
    }

    pub fn clear_faults(&self) {
        self.control("DELETE", "faults", None);
    }

    /// The requests served to the bucket `bucket` (its listings and bulk deletes, `/bucket`, and
    /// its objects, `/bucket/...`; not those of `bucket-2`), in the order served.
    pub fn log(&self, bucket: &str) -> Vec<Request> {
        let all = self.control("GET", "requests", None);
        let (exact, under) = (format!("/{bucket}"), format!("/{bucket}/"));
        all.as_array()
            .unwrap()
            .iter()
            .map(|r| Request {
                method: r["method"].as_str().unwrap().to_string(),
                path: r["path"].as_str().unwrap().to_string(),
                bytes: r["bytes"].as_u64().unwrap(),
                status: r["status"].as_u64().unwrap() as u16,
            })
            .filter(|r| r.path == exact || r.path.starts_with(&under))
            .collect()
    }

    /// The requests served whose path starts with `prefix` (`/bucket/...`): (method, path, status).
    pub fn requests(&self, prefix: &str) -> Vec<(String, String, u16)> {
        let all = self.control("GET", "requests", None);
        all.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["path"].as_str().unwrap().starts_with(prefix))
            .map(|r| {
                (
                    r["method"].as_str().unwrap().to_string(),
                    r["path"].as_str().unwrap().to_string(),
                    r["status"].as_u64().unwrap() as u16,
                )
            })
            .collect()
    }
}

/// A request the server served: its path has no query string (`?uploads`, `?delete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The request body's length (Content-Length).
    pub bytes: u64,
    pub status: u16,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}
