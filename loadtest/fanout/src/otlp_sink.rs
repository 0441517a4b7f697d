//! `otlp-sink ADDR COUNTFILE`: an OTLP trace receiver for `loadtest/bench.sh` that keeps
//! nothing but a count. The tracing row of the benchmark exports every span of a gateway under
//! load to it (sampler 1.0), so that the cost measured is building and exporting spans, not a
//! collector's storage. The count is written to COUNTFILE twice a second, for the script to check
//! that spans did arrive. Runs until killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context, Result};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

#[tonic::async_trait]
impl TraceService for Counter {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(spans as u64, Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

pub async fn run(addr: &str, count_file: &str) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    println!("otlp-sink listening on http://{}", listener.local_addr()?);
    let counter = Counter::default();
    let (count, path) = (counter.0.clone(), count_file.to_owned());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = tokio::fs::write(&path, count.load(Relaxed).to_string()).await;
        }
    });
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(counter))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await?;
    Ok(())
}
