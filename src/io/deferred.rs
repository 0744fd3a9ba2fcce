//! A commit's metadata objects sent at once (issue 44: commits in a bucket). A commit writes a
//! manifest, a manifest list and a metadata.json, each naming the one before: sent one after
//! another they cost three round trips to the store before the log position can be offered, and
//! a round trip to S3 is tens of milliseconds. Their bytes are all known before any is sent, so
//! inside [`deferring`] the creation of a file skade names (`object::create`: `io::write_new`, the
//! iceberg crate's whole-file writes) or an upload's completion made on this thread is started
//! and not awaited (never a log position's PUT, whose answer decides a race); `deferring` waits for every one before it returns. Nothing after it
//! (the commit's log offer, which makes them reachable) runs before all of them are there, and a
//! failure of any fails the whole, as a failure of the first would have. A read of an object still
//! in flight (from any thread) waits for it.
//!
//! Written here because the iceberg crate writes through `Storage` one file at a time: this is the
//! storage saying "accepted" early and the commit path waiting at one point instead of three.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use futures::future::{BoxFuture, FutureExt, Shared};

use crate::error::{Error, Result};

type Pending = Shared<BoxFuture<'static, Result<()>>>;

thread_local! {
    /// The PUTs started inside this thread's `deferring`, when it is inside one.
    static SCOPE: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
}

/// Every PUT in flight in this process, by location: reads wait for them.
static IN_FLIGHT: Mutex<Option<HashMap<String, Pending>>> = Mutex::new(None);
/// How many are in flight (a read looks at the map only when some are).
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Runs `f`, sending the object PUTs it makes on this thread at once, and returns once every one
/// landed (or the first error: `f`'s, else a PUT's). Not nested: an inner call runs `f` plainly.
pub fn deferring<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let outer = SCOPE.with(|s| {
        let mut s = s.borrow_mut();
        let outer = s.is_some();
        if !outer {
            *s = Some(vec![]);
        }
        outer
    });
    if outer {
        return f();
    }
    // (the scope ends even if `f` panics: a later statement on this thread must not defer)
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            SCOPE.with(|s| s.borrow_mut().take());
        }
    }
    let end = End;
    let out = f();
    let pending = SCOPE.with(|s| s.borrow_mut().take()).unwrap_or_default();
    drop(end);
    // every PUT is waited for, even after `f` failed: none may land after the caller cleans up
    // (a commit to local disk defers nothing: no trip through the runtime)
    let landed = match pending.is_empty() {
        true => vec![],
        false => crate::runtime::block_on(futures::future::join_all(pending)),
    };
    let out = out?;
    landed.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(out)
}

/// Whether this thread is inside [`deferring`].
pub fn active() -> bool {
    SCOPE.with(|s| s.borrow().is_some())
}

/// Starts `put` (the PUT of `location`) on the runtime and records it in this thread's scope.
pub fn defer(location: &str, put: impl Future<Output = Result<()>> + Send + 'static) {
    let handle = crate::runtime::runtime().spawn(put);
    let key = location.to_string();
    let pending: Pending = async move {
        let out = handle.await.unwrap_or_else(|e| Err(Error::internal(format!("an upload task failed: {e}"))));
        let mut map = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        if map.as_mut().and_then(|m| m.remove(&key)).is_some() {
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
        out
    }
    .boxed()
    .shared();
    {
        let mut map = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        if map.get_or_insert_with(HashMap::new).insert(location.to_string(), pending.clone()).is_none() {
            COUNT.fetch_add(1, Ordering::AcqRel);
        }
    }
    SCOPE.with(|s| match s.borrow_mut().as_mut() {
        Some(scope) => scope.push(pending),
        // (not inside a scope: the caller checked; nobody would wait for it, so it is detached
        // and reads of it still wait)
        None => drop(pending),
    });
}

/// Waits for a PUT of `location` still in flight, if any: its outcome (a failed one is the
/// read's error, never a missing object).
pub async fn settled(location: &str) -> Result<()> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let pending = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|m| m.get(location).cloned());
    match pending {
        Some(p) => p.await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn puts_in_a_scope_overlap_and_all_land_before_it_returns() {
        let landed = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        deferring(|| {
            for i in 0..3 {
                let landed = landed.clone();
                defer(&format!("s3://deferred-test/{i}"), async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    landed.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
            }
            assert_eq!(landed.load(Ordering::SeqCst), 0, "a PUT was awaited inside the scope");
            Ok(())
        })
        .unwrap();
        assert_eq!(landed.load(Ordering::SeqCst), 3);
        assert!(start.elapsed() < Duration::from_millis(550), "the PUTs ran one after another");
        assert!(!active());
    }

    #[test]
    fn a_failed_put_fails_the_scope_and_a_read_of_it() {
        let e = deferring(|| {
            defer("s3://deferred-test/bad", async { Err(Error::io("cannot write s3://deferred-test/bad: 403")) });
            defer("s3://deferred-test/good", async { Ok(()) });
            Ok(())
        })
        .unwrap_err();
        assert!(e.message.contains("403"), "{e}");
        // (a PUT in flight is waited for by a read of its object)
        let out = deferring(|| {
            defer("s3://deferred-test/slow", async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(Error::io("slow failed"))
            });
            crate::runtime::block_on(settled("s3://deferred-test/slow"))
        });
        assert!(out.unwrap_err().message.contains("slow failed"));
    }
}
