//! The server's accept loop: each connection served by hyper with a header-read timeout, at most
//! [`MAX_CONNECTIONS`] at once (a client that connects and sends nothing cannot hold sockets of
//! the DuckDB process without bound), and a stop that lets requests in flight be answered.
//! (axum's `serve` offers neither bound.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Semaphore};
use tower_service::Service;

/// Connections served at once; more wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 256;
/// A request's headers must arrive within this.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(listener: TcpListener, app: Router, mut stop: oneshot::Receiver<()>, finished: oneshot::Sender<()>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (draining, drain) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let slot = tokio::select! {
            _ = &mut stop => break,
            slot = slots.clone().acquire_owned() => match slot { Ok(s) => s, Err(_) => break },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // (out of descriptors a moment, a connection reset before accept: go on)
                Err(_) => { tokio::time::sleep(Duration::from_millis(20)).await; continue }
            },
        };
        // (an answer is written as soon as it is whole: no wait on Nagle's algorithm for the
        // client's ACK of the previous segment)
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
            let mut app = app.clone();
            async move { app.call(request).await }
        });
        let mut drain = drain.clone();
        connections.spawn(async move {
            let _slot = slot;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = drain.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = draining.send(true);
    while connections.join_next().await.is_some() {}
    let _ = finished.send(());
}
