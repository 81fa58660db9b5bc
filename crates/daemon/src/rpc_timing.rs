//! How long the daemon takes to handle each `cuzk.v1.Prover` call, from the request reaching
//! the service to its answer (`cuzk_rpc_seconds`). Against a client's round trip it tells a
//! slow handler from a request that waited for the transport or a thread.

use std::sync::Arc;
use std::time::Instant;

use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

use crate::service::Shared;

/// The Prover's methods: the only label values, so a client cannot grow the series.
const METHODS: [&str; 10] = [
    "LoadKey",
    "UnloadKey",
    "ListKeys",
    "Submit",
    "Await",
    "Prove",
    "Cancel",
    "Status",
    "Metrics",
    "Timeline",
];

/// The method a request path names, if it is one of the Prover's.
pub(crate) fn method(path: &str) -> Option<&'static str> {
    let name = path.strip_prefix("/cuzk.v1.Prover/")?;
    METHODS.iter().copied().find(|m| *m == name)
}

/// Wraps the Prover service and records each call's handling time in the daemon's metrics.
#[derive(Clone)]
pub(crate) struct RpcTiming<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> RpcTiming<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl<S: NamedService> NamedService for RpcTiming<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for RpcTiming<S>
where
    S: Service<http::Request<B>, Response = R>,
    S::Future: Send + 'static,
{
    type Response = R;
    type Error = S::Error;
    type Future = BoxFuture<R, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let name = method(req.uri().path());
        let start = Instant::now();
        let answer = self.inner.call(req);
        let shared = self.shared.clone();
        Box::pin(async move {
            let r = answer.await;
            if let Some(name) = name {
                shared.metrics.rpc(name, start.elapsed());
            }
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_provers_own_methods_are_labels() {
        assert_eq!(method("/cuzk.v1.Prover/Status"), Some("Status"));
        assert_eq!(method("/cuzk.v1.Prover/Submit"), Some("Submit"));
        assert_eq!(method("/cuzk.v1.Prover/Nope"), None);
        assert_eq!(method("/grpc.health.v1.Health/Check"), None);
        assert_eq!(method("/cuzk.v1.Prover/"), None);
    }
}
