//! Crash points for the crash-safety tests: when `SKADE_FAILPOINT` names a point, the process
//! aborts there (as a power cut would stop it). Unset, a point costs one cached comparison.

use std::sync::OnceLock;

static ACTIVE: OnceLock<Option<String>> = OnceLock::new();

pub fn hit(name: &str) {
    let active = ACTIVE.get_or_init(|| std::env::var("SKADE_FAILPOINT").ok().filter(|s| !s.is_empty()));
    if active.as_deref() == Some(name) {
        eprintln!("skade: failpoint {name} reached, aborting");
        std::process::abort();
    }
}
