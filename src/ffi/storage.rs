//! How the core reaches buckets: the storage options the shim reads from DuckDB's secret manager
//! (or httpfs's `s3_*` settings) for each `s3://` URL an ATTACH uses, at ATTACH and again at each
//! transaction's start. Never mixed with ATTACH's own options.

use std::ffi::c_char;

use super::{arg, arg_list, guard, SkadeStatus};
use crate::io::object::{self, S3Options};

/// Registers how to reach locations under `url` (an `s3://bucket[/path]` prefix; the longest
/// registered prefix of a location wins). `keys`/`values` are `S3Options::KEYS` (a DuckDB S3
/// secret's keys and `secret_name`, the secret's name), in any case, unset ones left out. Pairs
/// naming no secret and setting nothing that reaches a bucket forget `url`'s options: the AWS
/// environment applies there. Unchanged options keep the bucket's client; changed ones (a
/// refreshed token) replace it. An unknown key is an error naming it.
#[no_mangle]
pub unsafe extern "C" fn skade_storage_options(
    url: *const c_char,
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> *mut SkadeStatus {
    guard(|| {
        let url = arg(url, "storage URL")?;
        let keys = arg_list(keys, n, "storage option name")?;
        let values = arg_list(values, n, "storage option value")?;
        match S3Options::from_pairs(keys.iter().map(String::as_str).zip(values.iter().map(String::as_str)))? {
            Some(options) => object::set_options(url, options),
            None => object::clear_options(url),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};

    use super::*;
    use crate::ffi::{skade_status_free, skade_status_message};

    fn options(pairs: &[(&str, &str)]) -> crate::error::Result<Option<S3Options>> {
        S3Options::from_pairs(pairs.iter().copied())
    }

    /// Calls the C entry as the shim does; the error message, if any.
    fn call(url: &str, pairs: &[(&str, &str)]) -> Option<String> {
        let url = CString::new(url).unwrap();
        let keys: Vec<CString> = pairs.iter().map(|(k, _)| CString::new(*k).unwrap()).collect();
        let values: Vec<CString> = pairs.iter().map(|(_, v)| CString::new(*v).unwrap()).collect();
        let kp: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let vp: Vec<*const c_char> = values.iter().map(|v| v.as_ptr()).collect();
        unsafe {
            let st = skade_storage_options(url.as_ptr(), kp.as_ptr(), vp.as_ptr(), pairs.len());
            if st.is_null() {
                return None;
            }
            let msg = CStr::from_ptr(skade_status_message(st)).to_str().unwrap().to_string();
            skade_status_free(st);
            Some(msg)
        }
    }

    #[test]
    fn every_key_of_a_secret_maps_to_its_option() {
        let o = options(&[
            ("secret_name", "lake_secret"),
            ("KEY_ID", "AKIAEXAMPLE"),
            ("secret", "wJalrXUtnFEMI"),
            ("session_token", "FwoGZXIvYXdzE"),
            ("region", "eu-west-1"),
            ("endpoint", "127.0.0.1:9000"),
            ("url_style", "PATH"),
            ("use_ssl", "false"),
            ("kms_key_id", "arn:aws:kms:eu-west-1:1:key/k"),
            ("requester_pays", "true"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(o.secret_name, "lake_secret");
        assert_eq!(o.key_id, "AKIAEXAMPLE");
        assert_eq!(o.secret, "wJalrXUtnFEMI");
        assert_eq!(o.session_token, "FwoGZXIvYXdzE");
        assert_eq!(o.region, "eu-west-1");
        assert_eq!(o.endpoint, "127.0.0.1:9000");
        assert_eq!(o.url_style, "path");
        assert!(!o.use_ssl);
        assert_eq!(o.kms_key_id, "arn:aws:kms:eu-west-1:1:key/k");
        assert!(o.requester_pays);
        assert_eq!(o.endpoint_url().as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!((o.timeout, o.retries), (None, None));
    }

    #[test]
    fn duckdb_defaults_apply_to_what_is_left_out() {
        let o = options(&[("key_id", "AKIAEXAMPLE"), ("secret", "wJalrXUtnFEMI"), ("endpoint", "minio:9000")])
            .unwrap()
            .unwrap();
        assert!(o.use_ssl, "DuckDB's USE_SSL defaults to true");
        assert!(!o.requester_pays);
        assert_eq!(o.endpoint_url().as_deref(), Some("https://minio:9000"));
        assert_eq!(o.url_style, "");
        for (value, expected) in [("TRUE", true), ("1", true), ("off", false), ("F", false)] {
            let o = options(&[("key_id", "k"), ("region", "r"), ("use_ssl", value)]).unwrap().unwrap();
            assert_eq!(o.use_ssl, expected, "{value}");
        }
    }

    #[test]
    fn no_secret_and_no_credentials_means_the_aws_environment() {
        assert_eq!(options(&[]).unwrap(), None);
        // httpfs's settings read back their defaults when nothing is set
        assert_eq!(options(&[("url_style", "vhost"), ("use_ssl", "true"), ("requester_pays", "false")]).unwrap(), None);
        assert_eq!(options(&[("key_id", ""), ("secret", ""), ("region", "")]).unwrap(), None);
        // a secret, even one without keys (a public bucket), or any setting that reaches one
        assert!(options(&[("secret_name", "public")]).unwrap().is_some());
        // settings alone (httpfs's defaults among them) leave the AWS environment in charge
        assert_eq!(options(&[("region", "eu-west-1"), ("endpoint", "s3.amazonaws.com")]).unwrap(), None);
        assert!(options(&[("key_id", "AKIA0000"), ("secret", "s")]).unwrap().is_some());
        assert_eq!(options(&[("endpoint", "localhost:9000")]).unwrap(), None);
        assert_eq!(options(&[("requester_pays", "true")]).unwrap(), None);
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let e = options(&[("key_id", "AKIAEXAMPLE"), ("acl", "private"), ("Profile", "x")]).unwrap_err();
        assert!(e.message.contains("unknown storage options acl, Profile"), "{}", e.message);
        assert!(e.message.contains("key_id, secret, session_token"), "{}", e.message);
        let e = options(&[("use_ssl", "maybe")]).unwrap_err();
        assert!(e.message.contains("USE_SSL 'maybe'"), "{}", e.message);
        let e = options(&[("url_style", "virtual")]).unwrap_err();
        assert!(e.message.contains("URL_STYLE 'virtual'"), "{}", e.message);
    }

    #[test]
    fn no_message_or_debug_output_holds_a_credential() {
        let secret = "wJalrXUtnFEMI-secret-text";
        let token = "FwoGZXIvYXdzE-token-text";
        let key = "AKIA-key-id-text";
        let pairs = [("secret_name", "named"), ("key_id", key), ("secret", secret), ("session_token", token)];
        let o = options(&pairs).unwrap().unwrap();
        let shown = format!("{o:?} {}", o.describe());
        for credential in [secret, token, key] {
            assert!(!shown.contains(credential), "{shown}");
        }
        assert!(shown.contains("named"), "the secret's name is shown: {shown}");
        let mut bad = pairs.to_vec();
        bad.push(("bogus", "x"));
        let e = options(&bad).unwrap_err().message;
        for credential in [secret, token, key] {
            assert!(!e.contains(credential), "{e}");
        }
        // through the C entry too
        let e = call("s3://b", &bad).unwrap();
        assert!(e.contains("bogus") && !e.contains(secret) && !e.contains(key), "{e}");
    }

    #[test]
    fn the_c_entry_registers_replaces_and_forgets_a_prefix() {
        let url = "s3://ffi-storage-test-bucket/wh";
        let location = "s3://ffi-storage-test-bucket/wh/t/data/f.parquet";
        assert_eq!(
            call(url, &[("secret_name", "one"), ("key_id", "k1"), ("endpoint", "127.0.0.1:1"), ("use_ssl", "false")]),
            None
        );
        assert!(object::describe(location).contains("secret one"), "{}", object::describe(location));
        assert!(object::describe(location).contains("http://127.0.0.1:1"));
        let (first, _) = object::store_for(location).unwrap();
        // the same options again: the same client (its connections kept)
        assert_eq!(
            call(url, &[("secret_name", "one"), ("key_id", "k1"), ("endpoint", "127.0.0.1:1"), ("use_ssl", "false")]),
            None
        );
        let (again, _) = object::store_for(location).unwrap();
        assert!(std::sync::Arc::ptr_eq(first.client(), again.client()));
        // replaced (CREATE OR REPLACE SECRET): a new client with the new options
        assert_eq!(
            call(url, &[("secret_name", "two"), ("key_id", "k2"), ("endpoint", "127.0.0.1:2"), ("use_ssl", "false")]),
            None
        );
        let (replaced, _) = object::store_for(location).unwrap();
        assert!(!std::sync::Arc::ptr_eq(first.client(), replaced.client()));
        assert!(object::describe(location).contains("secret two"));
        // a location beside the prefix is not under it
        assert_eq!(object::describe("s3://ffi-storage-test-bucket/whx/f"), "the AWS environment");
        // dropped (no secret, no settings): the AWS environment again
        assert_eq!(call(url, &[("url_style", "vhost"), ("use_ssl", "true")]), None);
        assert_eq!(object::describe(location), "the AWS environment");
        // not a bucket URL
        let e = call("/local/folder", &[("secret_name", "x")]).unwrap();
        assert!(e.contains("not an s3:// location"), "{e}");
    }
}
