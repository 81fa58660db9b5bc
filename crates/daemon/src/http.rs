//! The optional HTTP port: `GET /metrics` (Prometheus), `GET /status` and
//! `GET /timeline?last_s=N` (JSON), for scrapers that speak no gRPC.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use crate::pb;
use crate::service::Shared;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/timeline", get(timeline))
        .with_state(shared)
}

async fn metrics(State(sh): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        sh.metrics_text(),
    )
}

async fn status(State(sh): State<Arc<Shared>>) -> impl IntoResponse {
    json_body(&status_json(&sh.status()))
}

#[derive(Debug, serde::Deserialize)]
struct TimelineQuery {
    #[serde(default)]
    last_s: f64,
}

async fn timeline(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<TimelineQuery>,
) -> impl IntoResponse {
    json_body(&timeline_json(&sh.timeline(q.last_s)))
}

fn json_body(v: &Value) -> impl IntoResponse + use<> {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string())
}

fn priority_name(p: i32) -> &'static str {
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::High) => "high",
        Ok(pb::Priority::Low) => "low",
        _ => "normal",
    }
}

/// The Status answer as JSON (also what `cuzk status --json` prints).
pub fn status_json(s: &pb::StatusResponse) -> Value {
    json!({
        "devices": s.devices.iter().map(|d| json!({
            "index": d.index,
            "name": d.name,
            "gpu": d.gpu,
            "vram_total": d.vram_total,
            "vram_free": d.vram_free,
            "budget_total": d.budget_total,
            "budget_limit": d.budget_limit,
            "budget_used": d.budget_used,
            "budget_peak": d.budget_peak,
            "staging_capacity": d.staging_capacity,
            "staging_used": d.staging_used,
            "pinned_used": d.pinned_used,
            "busy_seconds": d.busy_seconds,
            "keys": d.keys,
            "workers": d.workers.iter().map(|w| json!({
                "worker": w.worker, "job_id": w.job_id, "phase": w.phase,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "queue": s.queue.iter().map(|q| (priority_name(q.priority).to_owned(), json!(q.depth))).collect::<serde_json::Map<_, _>>(),
        "running": s.running,
        "host_capacity": s.host_capacity,
        "host_used": s.host_used,
        "upload_bytes": s.upload_bytes,
        "completed": s.completed,
        "failed": s.failed,
        "cancelled": s.cancelled,
        "self_check_failed": s.self_check_failed,
        "uptime_s": s.uptime_s,
        "jobs": s.jobs,
    })
}

/// The Timeline answer as JSON.
pub fn timeline_json(t: &pb::TimelineResponse) -> Value {
    json!({
        "now_s": t.now_s,
        "devices": t.devices,
        "spans": t.spans.iter().map(|s| json!({
            "job_id": s.job_id, "device": s.device, "worker": s.worker,
            "phase": s.phase, "kind": s.kind, "start_s": s.start_s, "end_s": s.end_s,
        })).collect::<Vec<_>>(),
    })
}
