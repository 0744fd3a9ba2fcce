//! The Iceberg REST catalog server of the core (docs/design/rest-catalog.md), with no DuckDB:
//! what it serves while commits land, many clients at once, its lifecycle. PyIceberg's and
//! DuckDB's iceberg extension's reads are tested in tests/python/test_rest_catalog.py.

mod common;

use common::*;
use skade::rest::{self, ServeOptions};

fn get(url: &str) -> (u16, serde_json::Value) {
    match ureq::get(url).config().http_status_as_error(false).build().call() {
        Ok(mut r) => {
            let status = r.status().as_u16();
            let body = r.body_mut().read_to_string().unwrap_or_default();
            (status, serde_json::from_str(&body).unwrap_or(serde_json::Value::Null))
        }
        Err(e) => panic!("GET {url}: {e}"),
    }
}

fn serve(catalog: &Catalog, lake: &str) -> String {
    rest::serve(catalog, lake, &ServeOptions::default()).unwrap().address
}

#[test]
fn load_shows_each_commit_as_it_lands() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let address = serve(&catalog, "rest_each_commit");
    let url = format!("{address}/v1/namespaces/main/tables/t");
    let mut seen = vec![];
    for i in 0..5 {
        commit_append(&catalog, &uuid, i * 10..i * 10 + 10);
        let (status, body) = get(&url);
        assert_eq!(status, 200);
        let location = body["metadata-location"].as_str().unwrap().to_string();
        let txn = catalog.begin();
        assert_eq!(location, txn.table_by_uuid(&uuid).unwrap().record.metadata_location, "commit {i}");
        assert_eq!(body["metadata"]["current-snapshot-id"].as_i64(), Some(current_snapshot(&catalog, &uuid)));
        assert_eq!(body["metadata"]["table-uuid"].as_str(), Some(uuid.as_str()));
        seen.push(location);
    }
    seen.dedup();
    assert_eq!(seen.len(), 5);
    assert_eq!(rest::stop(&address), 1);
}

#[test]
fn many_clients_at_once_get_every_answer() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..100);
    let address = serve(&catalog, "rest_many_clients");
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let address = address.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let path = if i % 2 == 0 { "/v1/namespaces/main/tables/t" } else { "/v1/namespaces/main/tables" };
                    let (status, _) = get(&format!("{address}{path}"));
                    assert_eq!(status, 200);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let info = rest::servers().into_iter().find(|s| s.address == address).unwrap();
    assert_eq!((info.requests, info.errors), (400, 0));
    rest::stop(&address);
}

#[test]
fn a_server_ends_when_its_catalog_closes() {
    let dir = TestDir::new();
    let (catalog, _) = catalog_with_table(&dir);
    let address = serve(&catalog, "rest_closes");
    assert_eq!(get(&format!("{address}/v1/namespaces")).0, 200);
    drop(catalog);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
    // (a server leaves the list as its stop begins; its listener closes a moment later)
    while rest::servers().iter().any(|s| s.address == address)
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    {
        assert!(std::time::Instant::now() < deadline, "the server outlived its catalog");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_namespace_or_table_renamed_or_dropped_is_gone_at_once() {
    let dir = TestDir::new();
    let (catalog, _) = catalog_with_table(&dir);
    let address = serve(&catalog, "rest_dropped");
    let txn = catalog.begin();
    txn.create_schema("sales", false).unwrap();
    txn.commit().unwrap();
    assert_eq!(get(&format!("{address}/v1/namespaces/SALES")).1["namespace"][0], "sales");
    let txn = catalog.begin();
    txn.drop_table("main", "t", false).unwrap();
    txn.drop_schema("sales", false, false).unwrap();
    txn.commit().unwrap();
    let (status, body) = get(&format!("{address}/v1/namespaces/main/tables/t"));
    assert_eq!((status, body["error"]["type"].as_str()), (404, Some("NoSuchTableException")));
    let (status, body) = get(&format!("{address}/v1/namespaces/sales"));
    assert_eq!((status, body["error"]["type"].as_str()), (404, Some("NoSuchNamespaceException")));
    rest::stop(&address);
}

fn post(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let answer = ureq::post(url).config().http_status_as_error(false).build().send_json(body);
    let mut r = answer.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
}

#[test]
fn a_commit_checks_its_requirements_against_the_pointer_and_lands_as_a_skade_commit() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..10);
    let address = serve(&catalog, "rest_commit");
    let url = format!("{address}/v1/namespaces/main/tables/t");
    let snapshot = current_snapshot(&catalog, &uuid);
    let set = |value: &str, snapshot: i64| {
        serde_json::json!({
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot},
                             {"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {"owner": value}}]
        })
    };
    let (status, body) = post(&url, set("etl", snapshot));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"]["properties"]["owner"], "etl");
    let location = body["metadata-location"].as_str().unwrap().to_string();
    assert_eq!(catalog.begin().table_by_uuid(&uuid).unwrap().record.metadata_location, location);
    let last = catalog.commits_since(0, usize::MAX).unwrap().into_iter().last().unwrap();
    assert_eq!((last.operation.as_str(), last.actor.as_str()), ("update", "rest:127.0.0.1"));
    // a base that moved: DuckDB's commit in between makes the same request a conflict
    commit_append(&catalog, &uuid, 10..20);
    let (status, body) = post(&url, set("other", snapshot));
    assert_eq!((status, body["error"]["type"].as_str()), (409, Some("CommitFailedException")), "{body}");
    assert_eq!(body["error"]["code"], 409);
    let txn = catalog.begin();
    let now = txn.table_by_uuid(&uuid).unwrap();
    assert_eq!(now.metadata.properties().get("owner").map(String::as_str), Some("etl"));
    rest::stop(&address);
}

#[test]
fn namespace_properties_survive_a_reopen_and_conflict_when_changed_twice() {
    use std::collections::BTreeMap;
    let dir = TestDir::new();
    let (catalog, _) = catalog_with_table(&dir);
    let txn = catalog.begin();
    txn.create_schema("ops", false).unwrap();
    txn.alter_schema_properties("ops", BTreeMap::from([("owner".into(), "etl".into())]), vec![]).unwrap();
    txn.commit().unwrap();
    // two transactions read the same properties; the second to commit loses
    let (a, b) = (catalog.begin(), catalog.begin());
    a.alter_schema_properties("ops", BTreeMap::from([("tier".into(), "1".into())]), vec![]).unwrap();
    b.alter_schema_properties("ops", BTreeMap::new(), vec!["owner".into()]).unwrap();
    a.commit().unwrap();
    let lost = b.commit().unwrap_err();
    assert!(lost.message.contains("changed its properties"), "{}", lost.message);
    drop(catalog);
    let reopened = open(&dir.path().join("lake.skade"));
    let txn = reopened.begin();
    let props = txn.schema("ops").unwrap().unwrap().properties.clone();
    assert_eq!(props, BTreeMap::from([("owner".into(), "etl".into()), ("tier".into(), "1".into())]));
}
