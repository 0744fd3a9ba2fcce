//! Crash points for the crash-safety tests: when `SKADE_FAILPOINT` names a point, the process
//! aborts there (as a power cut would stop it). Unset, a point costs one cached comparison. And
//! a wrong clock for the clock-skew tests: `SKADE_CLOCK_OFFSET_MS` moves this process's commit
//! times (a host whose clock is off).

use std::sync::OnceLock;

static ACTIVE: OnceLock<Option<String>> = OnceLock::new();

pub fn hit(name: &str) {
    let active = ACTIVE.get_or_init(|| std::env::var("SKADE_FAILPOINT").ok().filter(|s| !s.is_empty()));
    if active.as_deref() == Some(name) {
        eprintln!("skade: failpoint {name} reached, aborting");
        std::process::abort();
    }
}

/// This process's clock offset for commit times, in microseconds (0 unless a test sets one).
pub fn clock_offset_us() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("SKADE_CLOCK_OFFSET_MS").ok().and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0) * 1000
    })
}
