//! The gRPC service `p4.v1.P4Runtime` of one device.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard, PoisonError};

use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::arbitration::Outbox;
use super::arbitration::{Arbitration, election};
use super::device::Device;
use super::error::{UpdateError, write_status};
use crate::proto::p4::v1 as p4rt;
use p4rt::p4_runtime_server::P4Runtime;

/// The version of the P4Runtime specification served.
pub const API_VERSION: &str = "1.5.0";

/// Updates in a Write above which it is applied off the serving thread: a write costs about a
/// microsecond an update (O(log n) in the table's size), and handing one to another thread tens.
const OFF_THREAD_UPDATES: usize = 64;

/// One device's P4Runtime service.
pub struct Service {
    device: Arc<Device>,
    connections: AtomicU64,
}

impl Service {
    /// For `device`.
    pub fn new(device: Arc<Device>) -> Service {
        Service {
            device,
            connections: AtomicU64::new(0),
        }
    }

    fn check_device(&self, id: u64) -> Result<(), Status> {
        if id == self.device.device_id {
            Ok(())
        } else {
            Err(Status::not_found(format!(
                "device id {id}: this server is switch {}, device id {}",
                self.device.name, self.device.device_id
            )))
        }
    }

    fn arbitration(&self) -> MutexGuard<'_, Arbitration> {
        self.device.arbitration.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Responses = Pin<Box<dyn Stream<Item = Result<p4rt::StreamMessageResponse, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(&self, request: Request<p4rt::WriteRequest>) -> Result<Response<p4rt::WriteResponse>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        self.arbitration()
            .check_primary(&r.role, election(r.election_id.as_ref()))?;
        use p4rt::write_request::Atomicity;
        let all_or_none = matches!(
            Atomicity::try_from(r.atomicity),
            Ok(Atomicity::RollbackOnError | Atomicity::DataplaneAtomic)
        );
        let results = if r.updates.len() > OFF_THREAD_UPDATES {
            // One runtime thread serves every switch's streams: a large Write runs beside it,
            // so that another switch's PacketIns and digests go on meanwhile.
            let device = Arc::clone(&self.device);
            tokio::task::spawn_blocking(move || device.write(&r.updates, all_or_none))
                .await
                .map_err(|e| Status::internal(format!("the write failed: {e}")))?
        } else {
            self.device.write(&r.updates, all_or_none)
        };
        write_status(&results)?;
        Ok(Response::new(p4rt::WriteResponse {}))
    }

    type ReadStream = Pin<Box<dyn Stream<Item = Result<p4rt::ReadResponse, Status>> + Send>>;

    async fn read(&self, request: Request<p4rt::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        let entities = self.device.read(&r.entities).map_err(|e| e.status())?;
        let one = p4rt::ReadResponse { entities };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(one)))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4rt::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4rt::SetForwardingPipelineConfigResponse>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        self.arbitration()
            .check_primary(&r.role, election(r.election_id.as_ref()))?;
        self.device.set_pipeline(r.action, r.config).map_err(|e| e.status())?;
        Ok(Response::new(p4rt::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4rt::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4rt::GetForwardingPipelineConfigResponse>, Status> {
        let r = request.into_inner();
        self.check_device(r.device_id)?;
        Ok(Response::new(p4rt::GetForwardingPipelineConfigResponse {
            config: Some(self.device.pipeline(r.response_type)),
        }))
    }

    type StreamChannelStream = Responses;

    async fn stream_channel(
        &self,
        request: Request<Streaming<p4rt::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut incoming = request.into_inner();
        let (outbox, rx) = tokio::sync::mpsc::unbounded_channel();
        let connection = self.connections.fetch_add(1, Ordering::Relaxed);
        let device = Arc::clone(&self.device);
        tokio::spawn(async move {
            let mut arbitrated = false;
            while let Some(msg) = incoming.next().await {
                let Ok(msg) = msg else { break };
                use p4rt::stream_message_request::Update;
                match msg.update {
                    Some(Update::Arbitration(a)) => {
                        let refused = if a.device_id != device.device_id {
                            Some(Status::not_found(format!(
                                "device id {}: this server is switch {}, device id {}",
                                a.device_id, device.name, device.device_id
                            )))
                        } else {
                            let role = a.role.as_ref().map_or("", |r| r.name.as_str());
                            let id = election(a.election_id.as_ref()).unwrap_or(0);
                            device
                                .arbitration
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .arbitrate(connection, role, id, outbox.clone())
                                .err()
                        };
                        match refused {
                            Some(status) => {
                                // The stream ends with the error, as the specification asks.
                                let _gone = outbox.send(Err(status));
                                break;
                            }
                            None => arbitrated = true,
                        }
                    }
                    Some(_) if !arbitrated => {
                        let _gone = outbox.send(Err(Status::failed_precondition(
                            "the first message on a stream is an arbitration",
                        )));
                        break;
                    }
                    Some(Update::DigestAck(ack)) => {
                        let primary = device
                            .arbitration
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .is_primary(connection);
                        // A backup's ack is not the primary's: it releases nothing.
                        if primary {
                            device.digest_ack(&ack);
                        }
                    }
                    Some(Update::Packet(out)) => {
                        let primary = device
                            .arbitration
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .is_primary(connection);
                        let sent = if primary {
                            device.packet_out(&out)
                        } else {
                            Err(UpdateError {
                                code: tonic::Code::PermissionDenied,
                                message: "only the primary controller sends packets".into(),
                            })
                        };
                        if let Err(e) = sent {
                            let error = p4rt::StreamError {
                                canonical_code: e.code as i32,
                                message: e.message,
                                details: Some(p4rt::stream_error::Details::PacketOut(p4rt::PacketOutError {
                                    packet_out: Some(out),
                                })),
                                ..Default::default()
                            };
                            if !send_error(&outbox, error) {
                                break;
                            }
                        }
                    }
                    Some(Update::Other(_)) => {
                        let error = p4rt::StreamError {
                            canonical_code: tonic::Code::Unimplemented as i32,
                            message: "no extension message is served".into(),
                            ..Default::default()
                        };
                        if !send_error(&outbox, error) {
                            break;
                        }
                    }
                    None => {}
                }
            }
            device
                .arbitration
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .leave(connection);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        _request: Request<p4rt::CapabilitiesRequest>,
    ) -> Result<Response<p4rt::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4rt::CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
            ..Default::default()
        }))
    }
}

/// Sends `error` on a stream; false once the client is gone.
fn send_error(outbox: &Outbox, error: p4rt::StreamError) -> bool {
    let msg = p4rt::StreamMessageResponse {
        update: Some(p4rt::stream_message_response::Update::Error(error)),
    };
    outbox.send(Ok(msg)).is_ok()
}
