//! Crash points for the crash-safety tests: when `SKADE_FAILPOINT` names a point, the process
//! aborts there (as a power cut would stop it). Unset, a point costs one cached comparison.
//! Failure points for the failure tests: `SKADE_FAILPOINT=<point>:every=<n>` makes every n-th
//! pass through the point fail as an I/O error would (a full disk). And
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

/// The message of an I/O failure injected at `name` (see the module's note), else nothing.
pub fn fail(name: &str) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static EVERY: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static PASSES: AtomicU64 = AtomicU64::new(0);
    let every = EVERY.get_or_init(|| {
        let value = std::env::var("SKADE_FAILPOINT").ok()?;
        let (point, n) = value.split_once(":every=")?;
        Some((point.to_string(), n.trim().parse().ok().filter(|n| *n > 0)?))
    });
    match every {
        Some((point, n)) if point == name && (PASSES.fetch_add(1, Ordering::Relaxed) + 1) % n == 0 => {
            Err(format!("failure injected at {name} (SKADE_FAILPOINT)"))
        }
        _ => Ok(()),
    }
}

/// This process's clock offset for commit times, in microseconds (0 unless a test sets one).
pub fn clock_offset_us() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("SKADE_CLOCK_OFFSET_MS").ok().and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0) * 1000
    })
}
