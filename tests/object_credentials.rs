//! Credentials for buckets (issue 44, increment 3): the options the DuckDB shim passes
//! (`S3Options::from_pairs`, what `skade_storage_options` takes) reach the requests; the longest
//! registered prefix wins; replaced options take effect at once; a refused key gives an error
//! naming the object, S3's code and the secret, never a credential.

mod common;

use bytes::Bytes;
use common::s3::{S3Server, KEY_ID, SECRET};
use skade::io::object::{self, S3Options};
use skade::ErrorKind;

const WRONG_KEY: &str = "wrong-key-id-credential";

fn options(server: &S3Server, name: &str, key: &str) -> S3Options {
    let pairs = [
        ("secret_name", name),
        ("key_id", key),
        ("secret", SECRET),
        ("region", "us-east-1"),
        ("endpoint", server.endpoint.as_str()),
        ("url_style", "path"),
        ("use_ssl", "false"),
    ];
    S3Options::from_pairs(pairs).unwrap().expect("a secret's options")
}

fn put(location: &str) -> skade::error::Result<()> {
    object::wait(object::put(location, Bytes::from_static(b"x")))
}

#[test]
fn a_secrets_options_reach_the_bucket_and_the_longest_prefix_wins() {
    let server = S3Server::shared();
    let bucket = server.bucket("credentials-scope");
    let wide = format!("s3://{bucket}");
    let deep = format!("s3://{bucket}/wh");
    object::set_options(&wide, options(server, "bucket_wide", WRONG_KEY)).unwrap();
    object::set_options(&deep, options(server, "deep", KEY_ID)).unwrap();
    put(&format!("{deep}/t/data/a.parquet")).unwrap();
    assert_eq!(object::wait(object::get(&format!("{deep}/t/data/a.parquet"))).unwrap().as_deref(), Some(&b"x"[..]));
    let e = put(&format!("{wide}/elsewhere/b")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Permission, "{}", e.message);
    assert!(e.message.contains("secret bucket_wide"), "{}", e.message);
    // path style over plain HTTP to the endpoint: the server saw /bucket/key
    let served = server.requests(&format!("/{bucket}/wh/t/data/a.parquet"));
    assert!(served.iter().any(|(m, _, s)| m == "PUT" && *s == 200), "{served:?}");
}

#[test]
fn a_refused_key_names_the_object_code_and_secret_but_no_credential() {
    let server = S3Server::shared();
    let bucket = server.bucket("credentials-refused");
    let url = format!("s3://{bucket}/wh");
    object::set_options(&url, options(server, "lake_secret", KEY_ID)).unwrap();
    put(&format!("{url}/first")).unwrap();
    // the secret replaced (CREATE OR REPLACE SECRET): the next request carries the new key
    object::set_options(&url, options(server, "lake_secret", WRONG_KEY)).unwrap();
    let e = put(&format!("{url}/second")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Permission);
    for expected in [format!("{url}/second"), "InvalidAccessKeyId".into(), "secret lake_secret".into()] {
        assert!(e.message.contains(&expected), "{expected} not in {}", e.message);
    }
    for credential in [WRONG_KEY, SECRET, KEY_ID] {
        assert!(!e.message.contains(credential), "{credential} in {}", e.message);
    }
    let e = object::wait(object::get(&format!("{url}/first"))).unwrap_err();
    assert!(e.message.contains("InvalidAccessKeyId") && !e.message.contains(WRONG_KEY), "{}", e.message);
    // and back: the right key again
    object::set_options(&url, options(server, "lake_secret", KEY_ID)).unwrap();
    put(&format!("{url}/third")).unwrap();
}
