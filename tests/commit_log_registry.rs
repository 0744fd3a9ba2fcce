//! The process-wide commit log registration, in a binary of its own: a registration is global,
//! and every other test's open would inherit it.

use std::sync::Arc;

use skade::commit_log::folder::FolderLogProvider;
use skade::commit_log::{provider_for, register_commit_log, CommitLogProvider};

#[derive(Debug)]
struct Named(&'static str);

impl CommitLogProvider for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn committer(&self, _: &str) -> skade::error::Result<Box<dyn skade::commit_log::Committer>> {
        panic!("an open carrying its own provider consulted the registered one")
    }
    fn reader(&self, _: &str) -> skade::error::Result<Arc<dyn skade::commit_log::LogReader>> {
        panic!("an open carrying its own provider consulted the registered one")
    }
}

#[test]
fn one_registration_a_second_refused_and_an_own_provider_wins() {
    assert!(provider_for(None).is_none(), "nothing registered: no provider");
    register_commit_log(Arc::new(Named("registered"))).unwrap();
    let second = register_commit_log(Arc::new(FolderLogProvider)).unwrap_err();
    assert!(
        second.message.contains("(registered) is registered") && second.message.contains("skade folder log"),
        "{}",
        second.message
    );
    assert_eq!(provider_for(None).unwrap().name(), "registered");
    let own: Arc<dyn CommitLogProvider> = Arc::new(FolderLogProvider);
    assert_eq!(provider_for(Some(&own)).unwrap().name(), "skade folder log");
}
