//! The process-wide commit log registration, in a binary of its own: a registration is global,
//! and every other test's open would inherit it. One registration succeeds and a second is
//! refused; an open with no provider of its own uses the registered one; an open carrying its
//! own never consults it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use skade::commit_log::folder::FolderLogProvider;
use skade::commit_log::{provider_for, register_commit_log, CommitLogProvider, Committer, LogReader};

/// The folder log under another name, counting how often it is consulted.
#[derive(Debug)]
struct Counted(&'static str, AtomicUsize);

impl CommitLogProvider for Counted {
    fn name(&self) -> &str {
        self.0
    }
    fn committer(&self, location: &str) -> skade::error::Result<Box<dyn Committer>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        FolderLogProvider.committer(location)
    }
    fn reader(&self, location: &str) -> skade::error::Result<Arc<dyn LogReader>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        FolderLogProvider.reader(location)
    }
}

#[test]
fn one_registration_a_second_refused_and_an_own_provider_wins() {
    assert!(provider_for(None).is_none(), "nothing registered: no provider");
    let registered = Arc::new(Counted("registered", AtomicUsize::new(0)));
    register_commit_log(registered.clone()).unwrap();
    let second = register_commit_log(Arc::new(FolderLogProvider)).unwrap_err();
    assert!(
        second.message.contains("(registered) is registered") && second.message.contains("skade folder log"),
        "{}",
        second.message
    );
    assert_eq!(provider_for(None).unwrap().name(), "registered");

    let dir = TestDir::new();
    let log = |name: &str| Some(dir.path().join(name).to_str().unwrap().to_string());
    // an open carrying its own provider never consults the registered one
    let own = Arc::new(Counted("own", AtomicUsize::new(0)));
    let options = AttachOptions {
        commit_log: Some(own.clone() as Arc<dyn CommitLogProvider>),
        commit_log_location: log("own.log"),
        ..AttachOptions::default()
    };
    let catalog = Catalog::open(&dir.path().join("own.skade"), options).unwrap();
    drop(catalog);
    assert!(own.1.load(Ordering::SeqCst) > 0);
    assert_eq!(registered.1.load(Ordering::SeqCst), 0, "the registered provider was consulted");
    // an open with no provider of its own goes through the registered one
    let options = AttachOptions { commit_log_location: log("reg.log"), ..AttachOptions::default() };
    let catalog = Catalog::open(&dir.path().join("reg.skade"), options).unwrap();
    let status = catalog.commit_log_status().unwrap().unwrap();
    assert_eq!(status.provider, "registered");
    drop(catalog);
    assert!(registered.1.load(Ordering::SeqCst) > 0);
    // with a process-wide provider, a catalog that is not log-resident and given no location is
    // refused (one process does not mix the two), never opened as if no provider were there
    let e = Catalog::open(&dir.path().join("plain.skade"), AttachOptions::default()).err().unwrap();
    assert!(e.message.contains("no COMMIT_LOG location"), "{}", e.message);
}
