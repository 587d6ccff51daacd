//! Primary and backup controllers of a device (P4Runtime's arbitration): per role, the open
//! stream with the highest election id is the primary; only it may write or set the pipeline.
//! Every change is announced on every stream of the role.

use tokio::sync::mpsc::UnboundedSender;
use tonic::{Code, Status};

use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4rt;

/// What a stream is sent.
pub type Outbox = UnboundedSender<Result<p4rt::StreamMessageResponse, Status>>;

struct Stream {
    connection: u64,
    role: String,
    election: u128,
    outbox: Outbox,
}

/// The open streams of one device.
pub struct Arbitration {
    device_id: u64,
    streams: Vec<Stream>,
}

impl Arbitration {
    /// No stream yet.
    pub fn new(device_id: u64) -> Arbitration {
        Arbitration {
            device_id,
            streams: Vec::new(),
        }
    }

    /// Stream `connection` asks for `election` in `role`. Refused if another stream of the
    /// role has that election id.
    pub fn arbitrate(&mut self, connection: u64, role: &str, election: u128, outbox: Outbox) -> Result<(), Status> {
        if self
            .streams
            .iter()
            .any(|s| s.connection != connection && s.role == role && s.election == election)
        {
            return Err(Status::invalid_argument(format!(
                "election id {election} is held by another controller of role `{role}`"
            )));
        }
        self.streams.retain(|s| s.connection != connection);
        self.streams.push(Stream {
            connection,
            role: role.to_owned(),
            election,
            outbox,
        });
        self.announce(role);
        Ok(())
    }

    /// Stream `connection` closed.
    pub fn leave(&mut self, connection: u64) {
        let Some(i) = self.streams.iter().position(|s| s.connection == connection) else {
            return;
        };
        let role = self.streams.remove(i).role;
        self.announce(&role);
    }

    /// The primary's election id in `role`.
    pub fn primary(&self, role: &str) -> Option<u128> {
        self.streams.iter().filter(|s| s.role == role).map(|s| s.election).max()
    }

    /// Whether stream `connection` is its role's primary.
    pub fn is_primary(&self, connection: u64) -> bool {
        self.streams
            .iter()
            .find(|s| s.connection == connection)
            .is_some_and(|s| self.primary(&s.role) == Some(s.election))
    }

    /// The primary's stream in the default role, to send packets and digests to.
    pub fn primary_outbox(&self) -> Option<&Outbox> {
        let top = self.primary("")?;
        self.streams
            .iter()
            .find(|s| s.role.is_empty() && s.election == top)
            .map(|s| &s.outbox)
    }

    /// Refused unless `election` is the primary's of `role`.
    pub fn check_primary(&self, role: &str, election: Option<u128>) -> Result<(), Status> {
        match (self.primary(role), election) {
            (Some(p), Some(e)) if p == e => Ok(()),
            (None, _) => Err(Status::permission_denied(format!(
                "no controller of role `{role}` has arbitrated on a stream: open StreamChannel and send an arbitration first"
            ))),
            (Some(p), e) => Err(Status::permission_denied(format!(
                "election id {} is not the primary's ({p})",
                e.map_or("none".to_owned(), |e| e.to_string())
            ))),
        }
    }

    fn announce(&mut self, role: &str) {
        let Some(top) = self.primary(role) else { return };
        let device_id = self.device_id;
        self.streams.retain(|s| {
            if s.role != role {
                return true;
            }
            let (code, message) = if s.election == top {
                (Code::Ok, "primary")
            } else {
                (Code::AlreadyExists, "a backup: another controller is primary")
            };
            let update = p4rt::MasterArbitrationUpdate {
                device_id,
                role: (!role.is_empty()).then(|| p4rt::Role {
                    name: role.to_owned(),
                    ..Default::default()
                }),
                election_id: Some(p4rt::Uint128 {
                    high: (top >> 64) as u64,
                    low: top as u64,
                }),
                status: Some(rpc::Status {
                    code: code as i32,
                    message: message.into(),
                    details: Vec::new(),
                }),
            };
            let msg = p4rt::StreamMessageResponse {
                update: Some(p4rt::stream_message_response::Update::Arbitration(update)),
            };
            // A stream whose client went away is dropped.
            s.outbox.send(Ok(msg)).is_ok()
        });
    }
}

/// A `Uint128` as a number.
pub fn election(id: Option<&p4rt::Uint128>) -> Option<u128> {
    id.map(|u| (u128::from(u.high) << 64) | u128::from(u.low))
}
