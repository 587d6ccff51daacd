//! A P4Runtime client (tonic's, from the same .proto files) against intlab's server on a
//! switch's datapath: capabilities, arbitration (a backup's write refused), the pipeline,
//! table entries of every kind of update with reads, default actions, registers, multicast
//! groups, digests, PacketIn and PacketOut through a CPU port, idle timeouts, and bad input
//! answered with P4Runtime's errors and nothing changed.

use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

use intlab_p4::Datapath;
use intlab_p4runtime::p4info::p4info;
use intlab_p4runtime::proto::google::rpc;
use intlab_p4runtime::proto::p4::v1 as p4rt;
use intlab_p4runtime::server::{self, CpuPort, Endpoint};
use p4rt::p4_runtime_client::P4RuntimeClient;
use prost::Message;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

const PROGRAM: &str = include_str!("programs/forward.p4");
const CPU_PROGRAM: &str = include_str!("programs/cpu.p4");
const LPM: u32 = 37375156;
const FORWARD: u32 = 28792405;
const DROP: u32 = 25652968;

fn lab() -> (server::Server, Arc<Datapath>) {
    lab_of(PROGRAM, None)
}

/// A server for `program` as switch s1, device 7, with a CPU port whose switch end is `cpu`.
fn lab_of(program: &str, cpu: Option<UnixDatagram>) -> (server::Server, Arc<Datapath>) {
    let loaded = intlab_p4::load_text("program.p4", program).expect("loads");
    let datapath = Arc::new(Datapath::new(loaded.ir, "s1"));
    let srv = server::start(vec![Endpoint {
        tls: None,
        name: "s1".into(),
        address: "127.0.0.1:0".parse().expect("address"),
        device_id: 7,
        datapath: Arc::clone(&datapath),
        any_port_if_taken: false,
        cpu: cpu.map(|socket| CpuPort {
            socket: Arc::new(socket),
            max_frame: 1600,
        }),
    }])
    .expect("server starts");
    (srv, datapath)
}

async fn client(addr: SocketAddr) -> P4RuntimeClient<Channel> {
    P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
}

fn uint128(v: u64) -> Option<p4rt::Uint128> {
    Some(p4rt::Uint128 { high: 0, low: v })
}

/// Opens a stream and arbitrates with `election`; returns the stream's sender (kept open)
/// and the first answer.
async fn arbitrate(
    c: &mut P4RuntimeClient<Channel>,
    election: u64,
) -> (
    tokio::sync::mpsc::UnboundedSender<p4rt::StreamMessageRequest>,
    tonic::Streaming<p4rt::StreamMessageResponse>,
    p4rt::MasterArbitrationUpdate,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(p4rt::StreamMessageRequest {
        update: Some(p4rt::stream_message_request::Update::Arbitration(
            p4rt::MasterArbitrationUpdate {
                device_id: 7,
                election_id: uint128(election),
                ..Default::default()
            },
        )),
    })
    .expect("queued");
    let mut answers = c
        .stream_channel(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let first = next_arbitration(&mut answers).await;
    (tx, answers, first)
}

async fn next_arbitration(s: &mut tonic::Streaming<p4rt::StreamMessageResponse>) -> p4rt::MasterArbitrationUpdate {
    let msg = tokio::time::timeout(std::time::Duration::from_secs(5), s.next())
        .await
        .expect("an answer within 5 s")
        .expect("stream open")
        .expect("no error");
    match msg.update {
        Some(p4rt::stream_message_response::Update::Arbitration(a)) => a,
        other => panic!("not an arbitration update: {other:?}"),
    }
}

/// Action `action` with `params` (ids from 1), as a table entry runs it.
fn table_action(action: u32, params: Vec<Vec<u8>>) -> Option<p4rt::TableAction> {
    Some(p4rt::TableAction {
        r#type: Some(p4rt::table_action::Type::Action(p4rt::Action {
            action_id: action,
            params: params
                .into_iter()
                .enumerate()
                .map(|(i, value)| p4rt::action::Param {
                    param_id: i as u32 + 1,
                    value: value.into(),
                })
                .collect(),
        })),
    })
}

fn lpm_entry(addr: [u8; 4], len: i32, action: u32, params: Vec<Vec<u8>>) -> p4rt::Entity {
    p4rt::Entity {
        entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
            table_id: LPM,
            r#match: vec![p4rt::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4rt::field_match::FieldMatchType::Lpm(p4rt::field_match::Lpm {
                    value: addr.to_vec().into(),
                    prefix_len: len,
                })),
            }],
            action: table_action(action, params),
            ..Default::default()
        })),
    }
}

fn write(election: u64, kind: p4rt::update::Type, entities: Vec<p4rt::Entity>) -> p4rt::WriteRequest {
    p4rt::WriteRequest {
        device_id: 7,
        election_id: uint128(election),
        updates: entities
            .into_iter()
            .map(|e| p4rt::Update {
                r#type: kind as i32,
                entity: Some(e),
            })
            .collect(),
        ..Default::default()
    }
}

/// The per-update errors of a failed Write.
fn update_errors(status: &tonic::Status) -> Vec<(i32, String)> {
    let details = rpc::Status::decode(status.details()).expect("google.rpc.Status in the details");
    details
        .details
        .iter()
        .map(|any| {
            assert_eq!(any.type_url, "type.googleapis.com/p4.v1.Error");
            let e = p4rt::Error::decode(any.value.as_slice()).expect("p4.v1.Error");
            (e.canonical_code, e.message)
        })
        .collect()
}

async fn read_table(c: &mut P4RuntimeClient<Channel>, table_id: u32) -> Vec<p4rt::TableEntry> {
    let req = p4rt::ReadRequest {
        device_id: 7,
        entities: vec![p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
                table_id,
                ..Default::default()
            })),
        }],
        ..Default::default()
    };
    let mut s = c.read(req).await.expect("read").into_inner();
    let mut out = Vec::new();
    while let Some(r) = s.next().await {
        for e in r.expect("read answer").entities {
            if let Some(p4rt::entity::Entity::TableEntry(t)) = e.entity {
                out.push(t);
            }
        }
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn capabilities_pipeline_and_arbitration() {
    let (srv, _dp) = lab();
    let addr = srv.endpoints[0].1;
    let mut a = client(addr).await;
    let caps = a
        .capabilities(p4rt::CapabilitiesRequest { device_id: 7 })
        .await
        .expect("capabilities");
    assert_eq!(caps.into_inner().p4runtime_api_version, server::API_VERSION);

    // Nobody has arbitrated: a write is refused.
    let e = lpm_entry([10, 0, 1, 0], 24, DROP, vec![]);
    let refused = a
        .write(write(1, p4rt::update::Type::Insert, vec![e.clone()]))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    let (_a_tx, mut a_stream, first) = arbitrate(&mut a, 1).await;
    assert_eq!(
        first.status.as_ref().map(|s| s.code),
        Some(Code::Ok as i32),
        "A is primary: {first:?}"
    );
    let mut b = client(addr).await;
    let (_b_tx, _b_stream, b_first) = arbitrate(&mut b, 2).await;
    assert_eq!(
        b_first.status.as_ref().map(|s| s.code),
        Some(Code::Ok as i32),
        "B is primary"
    );
    let demoted = next_arbitration(&mut a_stream).await;
    assert_eq!(
        demoted.status.as_ref().map(|s| s.code),
        Some(Code::AlreadyExists as i32)
    );
    assert_eq!(demoted.election_id, uint128(2), "A is told the primary's election id");

    // A backup may not write; the primary may.
    let backup = a
        .write(write(1, p4rt::update::Type::Insert, vec![e.clone()]))
        .await
        .expect_err("backup");
    assert_eq!(backup.code(), Code::PermissionDenied);
    assert!(
        read_table(&mut b, LPM).await.is_empty(),
        "nothing written by the backup"
    );
    b.write(write(2, p4rt::update::Type::Insert, vec![e]))
        .await
        .expect("primary writes");
    assert_eq!(read_table(&mut a, LPM).await.len(), 1, "anyone may read");

    // The pipeline: our P4Info is taken (the switch keeps its program), committing resets
    // the tables; a P4Info of another program is refused.
    let info = p4info(_dp.program()).expect("ids").info;
    let set =
        |info: intlab_p4runtime::proto::p4::config::v1::P4Info, action| p4rt::SetForwardingPipelineConfigRequest {
            device_id: 7,
            election_id: uint128(2),
            action: action as i32,
            config: Some(p4rt::ForwardingPipelineConfig {
                p4info: Some(info),
                p4_device_config: b"{\"a BMv2 JSON\": true}".to_vec().into(),
                cookie: Some(p4rt::forwarding_pipeline_config::Cookie { cookie: 42 }),
            }),
            ..Default::default()
        };
    use p4rt::set_forwarding_pipeline_config_request::Action;
    b.set_forwarding_pipeline_config(set(info.clone(), Action::VerifyAndCommit))
        .await
        .expect("pipeline set");
    assert!(read_table(&mut b, LPM).await.is_empty(), "committing reset the tables");
    let got = b
        .get_forwarding_pipeline_config(p4rt::GetForwardingPipelineConfigRequest {
            device_id: 7,
            response_type: 0,
        })
        .await
        .expect("get")
        .into_inner()
        .config
        .expect("config");
    assert_eq!(got.cookie.map(|c| c.cookie), Some(42));
    assert_eq!(got.p4info.as_ref(), Some(&info));
    let mut other = info.clone();
    other.tables.pop();
    let wrong = b
        .set_forwarding_pipeline_config(set(other, Action::VerifyAndCommit))
        .await
        .expect_err("another program");
    assert_eq!(wrong.code(), Code::Unimplemented, "{wrong:?}");
    let wrong_device = b
        .get_forwarding_pipeline_config(p4rt::GetForwardingPipelineConfigRequest {
            device_id: 8,
            response_type: 0,
        })
        .await
        .expect_err("no device 8");
    assert_eq!(wrong_device.code(), Code::NotFound);
    drop(srv);
}

#[tokio::test(flavor = "current_thread")]
async fn entries_defaults_registers_and_groups_with_errors_per_update() {
    let (srv, dp) = lab();
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _first) = arbitrate(&mut c, 5).await;
    use p4rt::update::Type;
    let mac = vec![8, 0, 0, 0, 1, 0x11];
    let fwd = lpm_entry([10, 0, 1, 0], 24, FORWARD, vec![mac.clone(), vec![1]]);
    c.write(write(5, Type::Insert, vec![fwd.clone()]))
        .await
        .expect("insert");
    let read = read_table(&mut c, 0).await;
    assert_eq!(read.len(), 1, "a wildcard read of every table");
    let p4rt::entity::Entity::TableEntry(sent) = fwd.entity.clone().expect("entity") else {
        unreachable!()
    };
    assert_eq!(read[0].r#match, sent.r#match);
    assert_eq!(
        read[0].action, sent.action,
        "params come back canonical: {:?}",
        read[0].action
    );
    assert_eq!(dp.control().tables[0].len(), 1, "the datapath has it");

    // Modify, then delete.
    let modified = lpm_entry([10, 0, 1, 0], 24, DROP, vec![]);
    c.write(write(5, Type::Modify, vec![modified])).await.expect("modify");
    let read = read_table(&mut c, LPM).await;
    let Some(p4rt::table_action::Type::Action(a)) = read[0].action.as_ref().and_then(|a| a.r#type.clone()) else {
        panic!("an action")
    };
    assert_eq!(a.action_id, DROP);

    // A batch with bad updates: each gets its own error, the good one applies.
    let unknown_table = p4rt::Entity {
        entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
            table_id: 0x0200_0001,
            ..Default::default()
        })),
    };
    let too_wide = lpm_entry([10, 0, 2, 0], 24, FORWARD, vec![vec![1, 0, 0, 0, 0, 0, 0], vec![1]]);
    let bad_prefix = lpm_entry([10, 0, 3, 1], 24, DROP, vec![]);
    let good = lpm_entry([10, 0, 4, 0], 24, DROP, vec![]);
    let err = c
        .write(write(5, Type::Insert, vec![unknown_table, too_wide, bad_prefix, good]))
        .await
        .expect_err("some updates fail");
    assert_eq!(err.code(), Code::Unknown);
    let per_update = update_errors(&err);
    let codes: Vec<i32> = per_update.iter().map(|e| e.0).collect();
    assert_eq!(
        codes,
        [
            Code::NotFound as i32,
            Code::InvalidArgument as i32,
            Code::InvalidArgument as i32,
            0
        ],
        "{per_update:?}"
    );
    assert!(per_update[1].1.contains("does not fit in 48 bits"), "{per_update:?}");
    assert_eq!(read_table(&mut c, LPM).await.len(), 2, "only the good one was added");
    // The same batch all-or-none: nothing changes.
    let mut req = write(
        5,
        Type::Insert,
        vec![
            lpm_entry([10, 0, 5, 0], 24, DROP, vec![]),
            lpm_entry([10, 0, 4, 0], 24, DROP, vec![]),
        ],
    );
    req.atomicity = p4rt::write_request::Atomicity::RollbackOnError as i32;
    let err = c.write(req).await.expect_err("the second exists");
    assert_eq!(
        update_errors(&err).iter().map(|e| e.0).collect::<Vec<_>>(),
        [Code::Aborted as i32, Code::AlreadyExists as i32]
    );
    assert_eq!(read_table(&mut c, LPM).await.len(), 2, "rolled back");
    c.write(write(5, Type::Delete, vec![lpm_entry([10, 0, 4, 0], 24, DROP, vec![])]))
        .await
        .expect("delete");
    assert_eq!(read_table(&mut c, LPM).await.len(), 1);

    // The default action: modified, read back, refused for a @defaultonly mismatch.
    let default = |action: u32, params: Vec<Vec<u8>>| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
            table_id: LPM,
            is_default_action: true,
            action: table_action(action, params),
            ..Default::default()
        })),
    };
    c.write(write(
        5,
        Type::Modify,
        vec![default(FORWARD, vec![mac.clone(), vec![2]])],
    ))
    .await
    .expect("default set");
    assert_eq!(dp.control().tables[0].default.1, vec![0x0800_0000_0111, 2]);
    // A MODIFY without an action resets the program's default (P4Runtime 9.1.4), then set again.
    let mut reset = default(FORWARD, vec![]);
    if let Some(p4rt::entity::Entity::TableEntry(t)) = reset.entity.as_mut() {
        t.action = None;
    }
    c.write(write(5, Type::Modify, vec![reset]))
        .await
        .expect("default reset");
    assert_eq!(
        dp.control().tables[0].default,
        dp.program().tables[0].default_action,
        "the program's drop()"
    );
    c.write(write(
        5,
        Type::Modify,
        vec![default(FORWARD, vec![mac.clone(), vec![2]])],
    ))
    .await
    .expect("default set again");

    // A register cell written and read back; an index past the end refused.
    let info = p4info(dp.program()).expect("ids").info;
    let reg_id = info.registers[0].preamble.as_ref().expect("preamble").id;
    let reg = |index: i64, value: Option<Vec<u8>>| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::RegisterEntry(p4rt::RegisterEntry {
            register_id: reg_id,
            index: Some(p4rt::Index { index }),
            data: value.map(|v| p4rt::P4Data {
                data: Some(p4rt::p4_data::Data::Bitstring(v.into())),
            }),
        })),
    };
    c.write(write(5, Type::Modify, vec![reg(3, Some(vec![0xbe, 0xef]))]))
        .await
        .expect("register");
    let r = c
        .read(p4rt::ReadRequest {
            device_id: 7,
            entities: vec![reg(3, None)],
            ..Default::default()
        })
        .await
        .expect("read")
        .into_inner()
        .next()
        .await
        .expect("one answer")
        .expect("ok");
    let Some(p4rt::entity::Entity::RegisterEntry(got)) = &r.entities[0].entity else {
        panic!("a register")
    };
    assert_eq!(
        got.data.as_ref().and_then(|d| d.data.clone()),
        Some(p4rt::p4_data::Data::Bitstring(vec![0xbe, 0xef].into()))
    );
    // A rolled-back batch leaves the register as it was.
    let mut req = write(
        5,
        Type::Modify,
        vec![reg(3, Some(vec![1])), lpm_entry([10, 9, 9, 0], 24, DROP, vec![])],
    );
    req.atomicity = p4rt::write_request::Atomicity::RollbackOnError as i32;
    let err = c.write(req).await.expect_err("no such entry to modify");
    assert_eq!(
        update_errors(&err).iter().map(|e| e.0).collect::<Vec<_>>(),
        [Code::Aborted as i32, Code::NotFound as i32]
    );
    let seen = dp
        .program()
        .registers
        .iter()
        .position(|r| r.name == "MyIngress.seen")
        .expect("seen");
    assert_eq!(dp.register_read(seen, 3), Some(0xbeef), "the register was not written");
    let past = c
        .write(write(5, Type::Modify, vec![reg(16, Some(vec![1]))]))
        .await
        .expect_err("16 cells");
    assert_eq!(update_errors(&past)[0].0, Code::OutOfRange as i32);

    // A multicast group, inserted and read back; a second insert refused.
    let group = p4rt::Entity {
        entity: Some(p4rt::entity::Entity::PacketReplicationEngineEntry(
            p4rt::PacketReplicationEngineEntry {
                r#type: Some(p4rt::packet_replication_engine_entry::Type::MulticastGroupEntry(
                    p4rt::MulticastGroupEntry {
                        multicast_group_id: 1,
                        replicas: [1u8, 2, 3]
                            .iter()
                            .map(|&p| p4rt::Replica {
                                instance: 1,
                                port_kind: Some(p4rt::replica::PortKind::Port(vec![p].into())),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                )),
            },
        )),
    };
    c.write(write(5, Type::Insert, vec![group.clone()]))
        .await
        .expect("group");
    assert_eq!(dp.control().groups.get(&1).map(Vec::len), Some(3));
    let again = c.write(write(5, Type::Insert, vec![group])).await.expect_err("exists");
    assert_eq!(update_errors(&again)[0].0, Code::AlreadyExists as i32);
    drop(srv);
}

/// forward.p4's digest configured with `ack_timeout_ns`, one message a list; its id.
async fn configure_digest(c: &mut P4RuntimeClient<Channel>, dp: &Datapath, ack_timeout_ns: i64) -> u32 {
    let info = p4info(dp.program()).expect("ids").info;
    let digest_id = info.digests[0].preamble.as_ref().expect("preamble").id;
    let entry = p4rt::Entity {
        entity: Some(p4rt::entity::Entity::DigestEntry(p4rt::DigestEntry {
            digest_id,
            config: Some(p4rt::digest_entry::Config {
                max_timeout_ns: 0,
                max_list_size: 1,
                ack_timeout_ns,
            }),
        })),
    };
    use p4rt::update::Type;
    c.write(write(3, Type::Insert, vec![entry.clone()]))
        .await
        .expect("configured");
    let again = c
        .write(write(3, Type::Insert, vec![entry]))
        .await
        .expect_err("configured already");
    assert_eq!(update_errors(&again)[0].0, Code::AlreadyExists as i32);
    digest_id
}

/// Sends a frame through forward.p4 on each of `ports`: each digests its source MAC and port.
fn digest_frames(dp: &Datapath, ports: &[u16]) {
    let mut frame = vec![0u8; 60];
    frame[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut sim = intlab_p4::sim::SimSwitch::new(dp);
    for &p in ports {
        sim.send(p, &frame);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn digests_reach_the_primary_once_configured() {
    let (srv, dp) = lab();
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, mut stream, _first) = arbitrate(&mut c, 3).await;
    let digest_id = configure_digest(&mut c, &dp, 1_000_000).await;
    assert_eq!(digest_id >> 24, 0x17);
    digest_frames(&dp, &[3, 4]);
    let mut got = Vec::new();
    while got.len() < 2 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
            .await
            .expect("a digest list within 5 s")
            .expect("stream open")
            .expect("no error");
        let Some(p4rt::stream_message_response::Update::Digest(list)) = msg.update else {
            continue;
        };
        assert_eq!(list.digest_id, digest_id);
        assert_eq!(list.data.len(), 1, "max_list_size 1");
        got.push(list.data[0].clone());
    }
    let member = |data: &p4rt::P4Data| -> Vec<Vec<u8>> {
        let Some(p4rt::p4_data::Data::Struct(s)) = &data.data else {
            panic!("a struct: {data:?}")
        };
        s.members
            .iter()
            .map(|m| match &m.data {
                Some(p4rt::p4_data::Data::Bitstring(b)) => b.to_vec(),
                other => panic!("a bitstring: {other:?}"),
            })
            .collect()
    };
    assert_eq!(member(&got[0]), [vec![2, 0, 0, 0, 0, 1], vec![3]]);
    assert_eq!(member(&got[1]), [vec![2, 0, 0, 0, 0, 1], vec![4]]);
    drop(srv);
}

/// The next message on `s` that is not an arbitration update, within 5 s.
async fn next_update(s: &mut tonic::Streaming<p4rt::StreamMessageResponse>) -> p4rt::stream_message_response::Update {
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(5), s.next())
            .await
            .expect("a message within 5 s")
            .expect("stream open")
            .expect("no error");
        match msg.update {
            Some(p4rt::stream_message_response::Update::Arbitration(_)) => continue,
            Some(u) => return u,
            None => panic!("an empty stream message"),
        }
    }
}

fn packet_out(payload: &[u8], metadata: &[(u32, &[u8])]) -> p4rt::StreamMessageRequest {
    p4rt::StreamMessageRequest {
        update: Some(p4rt::stream_message_request::Update::Packet(p4rt::PacketOut {
            payload: payload.to_vec().into(),
            metadata: metadata
                .iter()
                .map(|&(metadata_id, value)| p4rt::PacketMetadata {
                    metadata_id,
                    value: value.to_vec().into(),
                })
                .collect(),
        })),
    }
}

/// The stream error `u` is, as (code, message).
fn stream_error(u: p4rt::stream_message_response::Update) -> (i32, String) {
    match u {
        p4rt::stream_message_response::Update::Error(e) => (e.canonical_code, e.message),
        other => panic!("not a stream error: {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn packets_in_and_out_through_the_cpu_port() {
    let (switch_end, controller_end) = UnixDatagram::pair().expect("a socket pair");
    switch_end.set_nonblocking(true).expect("non-blocking");
    let (srv, _dp) = lab_of(CPU_PROGRAM, Some(controller_end));
    let mut c = client(srv.endpoints[0].1).await;
    let (primary, mut stream, _) = arbitrate(&mut c, 5).await;
    let mut c2 = client(srv.endpoints[0].1).await;
    let (backup, mut backup_stream, first) = arbitrate(&mut c2, 2).await;
    assert_eq!(
        first.status.expect("status").code,
        Code::AlreadyExists as i32,
        "a backup"
    );

    // What the program sends to the CPU port: packet_in (ingress port 3, padding), then the frame.
    switch_end.send(&[0x00]).expect("sent");
    switch_end.send(&[0x01, 0x80, 0xde, 0xad]).expect("sent");
    let p4rt::stream_message_response::Update::Packet(pin) = next_update(&mut stream).await else {
        panic!("a PacketIn")
    };
    assert_eq!(
        pin.payload[..],
        [0xde, 0xad],
        "the header is not in the payload; a frame shorter than it was dropped"
    );
    let md: Vec<_> = pin.metadata.iter().map(|m| (m.metadata_id, m.value.to_vec())).collect();
    assert_eq!(md, [(1, vec![3]), (2, vec![0])]);

    // A PacketOut for port 0x105: its packet_out header goes in front of the payload.
    primary
        .send(packet_out(&[1, 2, 3], &[(1, &[0x01, 0x05])]))
        .expect("queued");
    let mut frame = [0u8; 64];
    let mut got = None;
    for _ in 0..500 {
        match switch_end.recv(&mut frame) {
            Ok(n) => {
                got = Some(frame[..n].to_vec());
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(e) => panic!("the switch end: {e}"),
        }
    }
    assert_eq!(got.expect("the PacketOut's frame within 5 s"), [0x82, 0x80, 1, 2, 3]);

    // A backup's PacketOut, a metadata the header has not, a value too wide: errors, no frame.
    backup.send(packet_out(&[9], &[(1, &[1])])).expect("queued");
    let (code, message) = stream_error(next_update(&mut backup_stream).await);
    assert_eq!(code, Code::PermissionDenied as i32, "{message}");
    primary.send(packet_out(&[9], &[(9, &[1])])).expect("queued");
    let (code, message) = stream_error(next_update(&mut stream).await);
    assert_eq!(code, Code::InvalidArgument as i32, "{message}");
    primary.send(packet_out(&[9], &[(1, &[0x02, 0x00])])).expect("queued");
    let (code, message) = stream_error(next_update(&mut stream).await);
    assert_eq!(code, Code::InvalidArgument as i32, "{message}");
    let err = switch_end
        .recv(&mut frame)
        .expect_err("no frame from refused PacketOuts");
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    drop(srv);
}

#[tokio::test(flavor = "current_thread")]
async fn packet_out_without_a_cpu_port_says_how_to_get_one() {
    let (srv, _dp) = lab_of(CPU_PROGRAM, None);
    let mut c = client(srv.endpoints[0].1).await;
    let (primary, mut stream, _) = arbitrate(&mut c, 5).await;
    primary.send(packet_out(&[1], &[])).expect("queued");
    let (code, message) = stream_error(next_update(&mut stream).await);
    assert_eq!(code, Code::FailedPrecondition as i32);
    assert!(message.contains("cpu_port"), "{message}");
    drop(srv);
}

/// The `flows` entry of cpu.p4 for destination MAC `mac`, aging after `timeout_ns`.
fn flow_entry(
    info: &intlab_p4runtime::proto::p4::config::v1::P4Info,
    table: &str,
    mac: u8,
    timeout_ns: i64,
) -> p4rt::Entity {
    let t = info
        .tables
        .iter()
        .find(|t| t.preamble.as_ref().is_some_and(|p| p.name == table))
        .expect("the table");
    let action = |name: &str| {
        info.actions
            .iter()
            .find_map(|a| a.preamble.as_ref().filter(|p| p.name == name).map(|p| p.id))
            .expect("the action")
    };
    let (action, params) = if table == "MyIngress.flows" {
        (action("MyIngress.to_port"), vec![vec![2]])
    } else {
        (action("NoAction"), Vec::new())
    };
    p4rt::Entity {
        entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
            table_id: t.preamble.as_ref().expect("preamble").id,
            r#match: vec![p4rt::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact {
                    value: vec![mac].into(),
                })),
            }],
            action: table_action(action, params),
            idle_timeout_ns: timeout_ns,
            ..Default::default()
        })),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_entry_is_reported_every_timeout_it_stays_idle_and_a_hit_restarts_it() {
    use intlab_runtime::clock::Clock;
    use p4rt::update::Type;
    let (srv, dp) = lab_of(CPU_PROGRAM, None);
    let info = p4info(dp.program()).expect("ids").info;
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, mut stream, _) = arbitrate(&mut c, 5).await;
    const TIMEOUT: i64 = 300_000_000;

    // A table without support_timeout, and a negative timeout: refused, nothing inserted.
    let refused = c
        .write(write(
            5,
            Type::Insert,
            vec![flow_entry(&info, "MyIngress.seen", 1, TIMEOUT)],
        ))
        .await
        .expect_err("no idle timeouts there");
    assert_eq!(update_errors(&refused)[0].0, Code::InvalidArgument as i32);
    let refused = c
        .write(write(
            5,
            Type::Insert,
            vec![flow_entry(&info, "MyIngress.flows", 1, -1)],
        ))
        .await
        .expect_err("negative");
    assert_eq!(update_errors(&refused)[0].0, Code::InvalidArgument as i32);

    let inserted = Clock::get().now_ns();
    c.write(write(
        5,
        Type::Insert,
        vec![flow_entry(&info, "MyIngress.flows", 1, TIMEOUT)],
    ))
    .await
    .expect("inserted");
    let flows = info
        .tables
        .iter()
        .find(|t| t.preamble.as_ref().is_some_and(|p| p.name == "MyIngress.flows"));
    let flows = flows.and_then(|t| t.preamble.as_ref()).expect("flows").id;
    let read = p4rt::ReadRequest {
        device_id: 7,
        entities: vec![p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
                table_id: flows,
                time_since_last_hit: Some(p4rt::table_entry::IdleTimeout { elapsed_ns: 0 }),
                ..Default::default()
            })),
        }],
        ..Default::default()
    };
    let mut answers = c.read(read).await.expect("read").into_inner();
    let entities = answers.next().await.expect("an answer").expect("read").entities;
    let Some(p4rt::entity::Entity::TableEntry(e)) = &entities[0].entity else {
        panic!("a table entry")
    };
    assert_eq!(e.idle_timeout_ns, TIMEOUT);
    let since = e.time_since_last_hit.expect("time since the last hit").elapsed_ns;
    assert!((0..TIMEOUT).contains(&since), "{since} ns since the insert");

    let notification = |u: p4rt::stream_message_response::Update| match u {
        p4rt::stream_message_response::Update::IdleTimeoutNotification(n) => n,
        other => panic!("not an idle timeout notification: {other:?}"),
    };
    let first = notification(next_update(&mut stream).await);
    let waited = Clock::get().now_ns() - inserted;
    assert_eq!(first.table_entry.len(), 1);
    let idle = &first.table_entry[0];
    assert_eq!((idle.table_id, idle.idle_timeout_ns), (flows, TIMEOUT));
    assert_eq!(idle.r#match[0].field_match_type, flow_entry_match(1));
    assert!(
        waited >= TIMEOUT as u64,
        "reported {waited} ns after the insert, before its timeout"
    );

    // Still idle: reported again one timeout after the report (which restarts its timer).
    let second = notification(next_update(&mut stream).await);
    let gap = second.timestamp - first.timestamp;
    assert!(gap >= TIMEOUT, "reported again {gap} ns after the first report");
    assert_eq!(second.table_entry[0].r#match, idle.r#match);

    // A frame that hits it restarts its time.
    let mut sim = intlab_p4::sim::SimSwitch::new(&dp);
    let mut frame = vec![0u8; 60];
    frame[5] = 1;
    let epoch = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .expect("after 1970")
    };
    tokio::time::sleep(std::time::Duration::from_nanos(TIMEOUT as u64 / 2)).await;
    let hit = epoch();
    sim.set_time(Clock::get().now_ns());
    sim.send(1, &frame);
    let third = notification(next_update(&mut stream).await);
    let after_hit = third.timestamp - hit;
    assert!(
        after_hit >= TIMEOUT,
        "reported {after_hit} ns after a hit ({} ns after the report before)",
        third.timestamp - second.timestamp
    );
    // Another entry idle beside it: one notification has both; once the first is deleted,
    // the next has the other alone.
    c.write(write(
        5,
        Type::Insert,
        vec![flow_entry(&info, "MyIngress.flows", 2, TIMEOUT)],
    ))
    .await
    .expect("inserted");
    let both = loop {
        let n = notification(next_update(&mut stream).await);
        if n.table_entry.len() == 2 {
            break n;
        }
    };
    let mut first_entry = both.table_entry[0].clone();
    first_entry.idle_timeout_ns = 0;
    let deleted = first_entry.r#match.clone();
    c.write(write(
        5,
        Type::Delete,
        vec![p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(first_entry)),
        }],
    ))
    .await
    .expect("deleted");
    let rest = notification(next_update(&mut stream).await);
    assert_eq!(rest.table_entry.len(), 1, "{rest:?}");
    assert_ne!(rest.table_entry[0].r#match, deleted);

    drop(srv);
}

fn flow_entry_match(mac: u8) -> Option<p4rt::field_match::FieldMatchType> {
    Some(p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact {
        value: vec![mac].into(),
    }))
}

fn clone_session(id: u32, replicas: &[(u16, u32)]) -> p4rt::Entity {
    p4rt::Entity {
        entity: Some(p4rt::entity::Entity::PacketReplicationEngineEntry(
            p4rt::PacketReplicationEngineEntry {
                r#type: Some(p4rt::packet_replication_engine_entry::Type::CloneSessionEntry(
                    p4rt::CloneSessionEntry {
                        session_id: id,
                        replicas: replicas
                            .iter()
                            .map(|&(port, instance)| p4rt::Replica {
                                instance,
                                port_kind: Some(p4rt::replica::PortKind::Port(port.to_be_bytes().to_vec().into())),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                )),
            },
        )),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn clone_sessions_are_written_read_and_used_by_the_program() {
    use p4rt::update::Type;
    let (srv, dp) = lab();
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _) = arbitrate(&mut c, 5).await;
    c.write(write(5, Type::Insert, vec![clone_session(57, &[(510, 1)])]))
        .await
        .expect("inserted");
    let session = dp.control().sessions.get(&57).copied().expect("the program sees it");
    assert_eq!(session.port, Some(510));
    for (entity, code) in [
        (clone_session(57, &[(3, 0)]), Code::AlreadyExists),
        (clone_session(58, &[(3, 0), (4, 0)]), Code::Unimplemented),
        (clone_session(59, &[]), Code::InvalidArgument),
        (clone_session(0, &[(3, 0)]), Code::InvalidArgument),
    ] {
        let e = c
            .write(write(5, Type::Insert, vec![entity]))
            .await
            .expect_err("refused");
        assert_eq!(update_errors(&e)[0].0, code as i32, "{e:?}");
    }
    let read = |id: u32| p4rt::ReadRequest {
        device_id: 7,
        entities: vec![clone_session(id, &[])],
        ..Default::default()
    };
    let mut answers = c.read(read(0)).await.expect("read").into_inner();
    let entities = answers.next().await.expect("an answer").expect("read").entities;
    assert_eq!(
        entities,
        vec![clone_session(57, &[(510, 1)])],
        "510 read back in its two bytes"
    );
    c.write(write(5, Type::Delete, vec![clone_session(57, &[])]))
        .await
        .expect("deleted");
    assert!(dp.control().sessions.is_empty());
    let mut answers = c.read(read(57)).await.expect("read").into_inner();
    assert!(
        answers
            .next()
            .await
            .expect("an answer")
            .expect("read")
            .entities
            .is_empty()
    );
    drop(srv);
}

/// The id of the object named `name` among `preambles`.
fn id_of<'a>(
    preambles: impl IntoIterator<Item = Option<&'a intlab_p4runtime::proto::p4::config::v1::Preamble>>,
    name: &str,
) -> u32 {
    preambles
        .into_iter()
        .flatten()
        .find(|p| p.name == name)
        .map(|p| p.id)
        .unwrap_or_else(|| panic!("no `{name}` in the P4Info"))
}

async fn read_one(c: &mut P4RuntimeClient<Channel>, entity: p4rt::entity::Entity) -> Vec<p4rt::Entity> {
    let req = p4rt::ReadRequest {
        device_id: 7,
        entities: vec![p4rt::Entity { entity: Some(entity) }],
        ..Default::default()
    };
    let mut answers = c.read(req).await.expect("read").into_inner();
    let mut out = Vec::new();
    while let Some(r) = answers.next().await {
        out.extend(r.expect("read answer").entities);
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn value_sets_are_written_whole_and_read_back() {
    use p4rt::field_match::FieldMatchType;
    use p4rt::update::Type;
    let (srv, dp) = lab();
    let info = p4info(dp.program()).expect("ids").info;
    let pvs = id_of(info.value_sets.iter().map(|v| v.preamble.as_ref()), "MyParser.pvs");
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _) = arbitrate(&mut c, 5).await;
    // pvs_t: an ether type matched ternary, a protocol exact.
    let member = |ether: u16, mask: u16, proto: Option<u8>| p4rt::ValueSetMember {
        r#match: std::iter::once(p4rt::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Ternary(p4rt::field_match::Ternary {
                value: ether.to_be_bytes().to_vec().into(),
                mask: mask.to_be_bytes().to_vec().into(),
            })),
        })
        .chain(proto.map(|p| p4rt::FieldMatch {
            field_id: 2,
            field_match_type: Some(FieldMatchType::Exact(p4rt::field_match::Exact {
                value: vec![p].into(),
            })),
        }))
        .collect(),
    };
    let entry = |members| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::ValueSetEntry(p4rt::ValueSetEntry {
            value_set_id: pvs,
            members,
        })),
    };
    let written = vec![member(0x0800, 0xffff, Some(0)), member(0x8600, 0xff00, Some(0))];
    c.write(write(5, Type::Modify, vec![entry(written.clone())]))
        .await
        .expect("written");
    assert_eq!(dp.control().value_sets[0].len(), 2, "the parser sees both members");
    let back = read_one(
        &mut c,
        p4rt::entity::Entity::ValueSetEntry(p4rt::ValueSetEntry {
            value_set_id: pvs,
            members: Vec::new(),
        }),
    )
    .await;
    let Some(p4rt::entity::Entity::ValueSetEntry(v)) = &back[0].entity else {
        panic!("a value set: {back:?}")
    };
    // Read back canonical: 0x0800 and 0 lose their leading zero bytes.
    let canonical = |m: &p4rt::ValueSetMember| -> Vec<Option<FieldMatchType>> {
        m.r#match.iter().map(|f| f.field_match_type.clone()).collect()
    };
    assert_eq!(v.members.len(), 2);
    assert_eq!(
        canonical(&v.members[0]),
        [
            Some(FieldMatchType::Ternary(p4rt::field_match::Ternary {
                value: vec![0x08, 0x00].into(),
                mask: vec![0xff, 0xff].into(),
            })),
            Some(FieldMatchType::Exact(p4rt::field_match::Exact {
                value: vec![0].into()
            })),
        ]
    );
    for (entity, kind, code) in [
        (
            entry(vec![member(0x0800, 0xffff, None)]),
            Type::Modify,
            Code::InvalidArgument,
        ),
        (entry(written.clone()), Type::Insert, Code::InvalidArgument),
        (
            entry((0..5).map(|i| member(i, 0xffff, Some(1))).collect()),
            Type::Modify,
            Code::ResourceExhausted,
        ),
    ] {
        let e = c.write(write(5, kind, vec![entity])).await.expect_err("refused");
        assert_eq!(update_errors(&e)[0].0, code as i32, "{e:?}");
    }
    assert_eq!(dp.control().value_sets[0].len(), 2, "refused writes change nothing");
    drop(srv);
}

#[tokio::test(flavor = "current_thread")]
async fn meters_and_direct_meters_take_their_rates_and_read_them_back() {
    use p4rt::update::Type;
    let (srv, dp) = lab_of(CPU_PROGRAM, None);
    let info = p4info(dp.program()).expect("ids").info;
    let meter = id_of(info.meters.iter().map(|m| m.preamble.as_ref()), "MyIngress.rate_limit");
    let direct = id_of(
        info.direct_meters.iter().map(|m| m.preamble.as_ref()),
        "MyIngress.per_port",
    );
    let seen = id_of(info.tables.iter().map(|t| t.preamble.as_ref()), "MyIngress.seen");
    let seen_it = id_of(info.actions.iter().map(|a| a.preamble.as_ref()), "MyIngress.seen_it");
    let attached = info
        .direct_meters
        .iter()
        .find(|m| m.preamble.as_ref().is_some_and(|p| p.id == direct))
        .map(|m| m.direct_table_id);
    assert_eq!(attached, Some(seen), "the direct meter is the `seen` table's");
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _) = arbitrate(&mut c, 5).await;
    let config = |cir, pir| p4rt::MeterConfig {
        cir,
        cburst: 10,
        pir,
        pburst: 20,
        ..Default::default()
    };
    let cell = |index: i64, cfg: Option<p4rt::MeterConfig>| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::MeterEntry(p4rt::MeterEntry {
            meter_id: meter,
            index: Some(p4rt::Index { index }),
            config: cfg,
            ..Default::default()
        })),
    };
    c.write(write(5, Type::Modify, vec![cell(2, Some(config(1000, 2000)))]))
        .await
        .expect("set");
    let m = dp
        .program()
        .meters
        .iter()
        .position(|m| m.name == "MyIngress.rate_limit")
        .expect("meter");
    let rates = dp.meter_cell(m, 2).expect("cell").rates();
    assert_eq!(
        rates,
        [(0.001, 10), (0.002, 20)],
        "BMv2's units: per microsecond, committed first"
    );
    let all = read_one(
        &mut c,
        p4rt::entity::Entity::MeterEntry(p4rt::MeterEntry {
            meter_id: meter,
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(all.len(), 4, "one entity a cell");
    assert_eq!(all[2], cell(2, Some(config(1000, 2000))));
    assert_eq!(all[1], cell(1, None), "a cell never set has no config");
    for (entity, kind, code) in [
        (cell(2, Some(config(2000, 1000))), Type::Modify, Code::InvalidArgument),
        (cell(2, Some(config(1000, 2000))), Type::Insert, Code::InvalidArgument),
        (cell(9, Some(config(1000, 2000))), Type::Modify, Code::OutOfRange),
    ] {
        let e = c.write(write(5, kind, vec![entity])).await.expect_err("refused");
        assert_eq!(update_errors(&e)[0].0, code as i32, "{e:?}");
    }
    assert_eq!(dp.meter_cell(m, 2).expect("cell").rates(), rates, "unchanged");

    // A direct meter: the rates of one table entry.
    let key = vec![p4rt::FieldMatch {
        field_id: 1,
        field_match_type: Some(p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact {
            value: vec![1].into(),
        })),
    }];
    let seen_entry = |action: Option<p4rt::TableAction>| p4rt::TableEntry {
        table_id: seen,
        r#match: key.clone(),
        action,
        ..Default::default()
    };
    let direct_entry = |cfg| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::DirectMeterEntry(p4rt::DirectMeterEntry {
            table_entry: Some(seen_entry(None)),
            config: cfg,
            ..Default::default()
        })),
    };
    let e = c
        .write(write(5, Type::Modify, vec![direct_entry(Some(config(5000, 6000)))]))
        .await
        .expect_err("no such entry yet");
    assert_eq!(update_errors(&e)[0].0, Code::NotFound as i32);
    c.write(write(
        5,
        Type::Insert,
        vec![p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(seen_entry(table_action(
                seen_it,
                Vec::new(),
            )))),
        }],
    ))
    .await
    .expect("inserted");
    c.write(write(5, Type::Modify, vec![direct_entry(Some(config(5000, 6000)))]))
        .await
        .expect("set");
    let t = dp
        .program()
        .tables
        .iter()
        .position(|t| t.name == "MyIngress.seen")
        .expect("table");
    let stored_rates = dp.control().tables[t]
        .entries()
        .next()
        .expect("an entry")
        .state
        .meter
        .rates();
    assert_eq!(stored_rates, [(0.005, 10), (0.006, 20)]);
    let back = read_one(
        &mut c,
        p4rt::entity::Entity::DirectMeterEntry(p4rt::DirectMeterEntry {
            table_entry: Some(p4rt::TableEntry {
                table_id: seen,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(back, vec![direct_entry(Some(config(5000, 6000)))]);
    drop(srv);
}

#[tokio::test(flavor = "current_thread")]
async fn selector_members_groups_and_entries_that_run_them() {
    use p4rt::entity::Entity;
    use p4rt::update::Type;
    let (srv, dp) = lab_of(CPU_PROGRAM, None);
    let info = p4info(dp.program()).expect("ids").info;
    let profile = id_of(
        info.action_profiles.iter().map(|p| p.preamble.as_ref()),
        "MyIngress.ecmp_selector",
    );
    let ecmp = id_of(info.tables.iter().map(|t| t.preamble.as_ref()), "MyIngress.ecmp");
    let to_port = id_of(info.actions.iter().map(|a| a.preamble.as_ref()), "MyIngress.to_port");
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _) = arbitrate(&mut c, 5).await;
    let member = |id: u32, port: u8| p4rt::Entity {
        entity: Some(Entity::ActionProfileMember(p4rt::ActionProfileMember {
            action_profile_id: profile,
            member_id: id,
            action: Some(p4rt::Action {
                action_id: to_port,
                params: vec![p4rt::action::Param {
                    param_id: 1,
                    value: vec![port].into(),
                }],
            }),
        })),
    };
    let group = |id: u32, members: &[(u32, i32)]| p4rt::Entity {
        entity: Some(Entity::ActionProfileGroup(p4rt::ActionProfileGroup {
            action_profile_id: profile,
            group_id: id,
            members: members
                .iter()
                .map(|&(member_id, weight)| p4rt::action_profile_group::Member {
                    member_id,
                    weight,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
    };
    let entry = |mac: u8, runs: p4rt::table_action::Type| p4rt::Entity {
        entity: Some(Entity::TableEntry(p4rt::TableEntry {
            table_id: ecmp,
            r#match: vec![p4rt::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact {
                    value: vec![mac].into(),
                })),
            }],
            action: Some(p4rt::TableAction { r#type: Some(runs) }),
            ..Default::default()
        })),
    };
    use p4rt::table_action::Type as Runs;
    c.write(write(5, Type::Insert, vec![member(1, 2), member(2, 3)]))
        .await
        .expect("members");
    c.write(write(5, Type::Insert, vec![group(10, &[(1, 1), (2, 2)])]))
        .await
        .expect("group");
    c.write(write(
        5,
        Type::Insert,
        vec![
            entry(1, Runs::ActionProfileMemberId(1)),
            entry(2, Runs::ActionProfileGroupId(10)),
        ],
    ))
    .await
    .expect("entries");

    // Frames run what their entry names: member 1 sends to port 2; the group spreads by source.
    let mut sim = intlab_p4::sim::SimSwitch::new(&dp);
    let frame = |dst: u8, src: u8| {
        let mut f = vec![0u8; 60];
        f[5] = dst;
        f[11] = src;
        f[12..14].copy_from_slice(&[0x99, 0x99]);
        f
    };
    let out: Vec<u16> = sim.send(1, &frame(1, 7)).iter().map(|(p, _)| *p).collect();
    assert_eq!(out, [2]);
    let ports: std::collections::BTreeSet<u16> = (0..64)
        .flat_map(|src| sim.send(1, &frame(2, src)).into_iter().map(|(p, _)| p))
        .collect();
    assert_eq!(ports, [2, 3].into(), "the group's two members both take sources");

    let groups = read_one(&mut c, Entity::ActionProfileGroup(p4rt::ActionProfileGroup::default())).await;
    assert_eq!(groups, vec![group(10, &[(1, 1), (2, 2)])], "weights read back");
    let members = read_one(
        &mut c,
        Entity::ActionProfileMember(p4rt::ActionProfileMember::default()),
    )
    .await;
    assert_eq!(members, vec![member(1, 2), member(2, 3)]);
    let entries = read_table(&mut c, ecmp).await;
    let runs: Vec<_> = entries
        .iter()
        .map(|e| e.action.clone().and_then(|a| a.r#type))
        .collect();
    assert_eq!(
        runs,
        [
            Some(Runs::ActionProfileMemberId(1)),
            Some(Runs::ActionProfileGroupId(10))
        ]
    );

    let direct = entry(
        3,
        Runs::Action(p4rt::Action {
            action_id: to_port,
            params: vec![p4rt::action::Param {
                param_id: 1,
                value: vec![2].into(),
            }],
        }),
    );
    for (kind, entity, code) in [
        (Type::Insert, entry(3, Runs::ActionProfileMemberId(9)), Code::NotFound),
        (Type::Insert, direct, Code::InvalidArgument),
        (Type::Insert, member(1, 4), Code::AlreadyExists),
        (Type::Insert, group(11, &[(9, 1)]), Code::NotFound),
        (Type::Delete, member(2, 3), Code::FailedPrecondition),
        (Type::Delete, group(10, &[]), Code::FailedPrecondition),
    ] {
        let e = c.write(write(5, kind, vec![entity])).await.expect_err("refused");
        assert_eq!(update_errors(&e)[0].0, code as i32, "{e:?}");
    }
    assert_eq!(read_table(&mut c, ecmp).await.len(), 2, "refused writes change nothing");
    drop(srv);
}

#[tokio::test(flavor = "current_thread")]
async fn a_digest_list_waits_for_the_ack_of_the_one_before() {
    let (srv, dp) = lab();
    let mut c = client(srv.endpoints[0].1).await;
    let (tx, mut stream, _first) = arbitrate(&mut c, 3).await;
    let digest_id = configure_digest(&mut c, &dp, 60_000_000_000).await;
    digest_frames(&dp, &[3, 4]);
    let list = |u: p4rt::stream_message_response::Update| match u {
        p4rt::stream_message_response::Update::Digest(l) => l,
        other => panic!("not a digest list: {other:?}"),
    };
    let first = list(next_update(&mut stream).await);
    assert_eq!(first.data.len(), 1);
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(300), stream.next()).await;
    assert!(
        quiet.is_err(),
        "a second list before the first was acknowledged: {quiet:?}"
    );
    tx.send(p4rt::StreamMessageRequest {
        update: Some(p4rt::stream_message_request::Update::DigestAck(p4rt::DigestListAck {
            digest_id,
            list_id: first.list_id,
        })),
    })
    .expect("queued");
    let second = list(next_update(&mut stream).await);
    assert!(second.list_id > first.list_id);
    assert_ne!(
        second.data, first.data,
        "the other frame's digest (ingress port 4, not 3)"
    );
    drop(srv);
}

/// `p4.p4runtime.tls` with a client authority: a controller showing a certificate of that
/// authority is served over TLS; one without a certificate, and one speaking plain gRPC, are
/// refused.
#[tokio::test(flavor = "current_thread")]
async fn tls_with_client_certificates_serves_only_clients_the_authority_signed() {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = dir.path().join("keys");
    intlab_keys::init(&keys).expect("keys");
    let file = |f: &str| keys.join(f);
    let tls =
        server::ServerTls::read(&file("site.pem"), &file("site.key"), Some(&file("authority.pem"))).expect("read");
    let loaded = intlab_p4::load_text("program.p4", PROGRAM).expect("loads");
    let srv = server::start(vec![Endpoint {
        name: "s1".into(),
        address: "127.0.0.1:0".parse().expect("address"),
        device_id: 7,
        datapath: Arc::new(Datapath::new(loaded.ir, "s1")),
        any_port_if_taken: false,
        cpu: None,
        tls: Some(tls),
    }])
    .expect("server starts");
    let addr = srv.endpoints[0].1;
    let pem = |f: &str| std::fs::read(file(f)).expect("pem");
    let authority = Certificate::from_pem(pem("authority.pem"));
    let base = ClientTlsConfig::new()
        .domain_name(intlab_keys::SITE_NAME)
        .ca_certificate(authority);
    let channel = |config: ClientTlsConfig| async move {
        Channel::from_shared(format!("https://{addr}"))
            .expect("uri")
            .tls_config(config)
            .expect("tls")
            .connect()
            .await
    };
    let ask = |c: Channel| async move {
        P4RuntimeClient::new(c)
            .capabilities(p4rt::CapabilitiesRequest { device_id: 7 })
            .await
    };
    let with_cert = base
        .clone()
        .identity(Identity::from_pem(pem("coordinator.pem"), pem("coordinator.key")));
    let c = channel(with_cert).await.expect("connects with a certificate");
    let answer = ask(c).await.expect("a client of the authority is served");
    assert!(!answer.into_inner().p4runtime_api_version.is_empty());
    match channel(base).await {
        Err(_) => {}
        Ok(c) => assert!(ask(c).await.is_err(), "a client without a certificate is refused"),
    }
    let plain = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await;
    if let Ok(c) = plain {
        assert!(ask(c).await.is_err(), "plain gRPC is refused");
    }
}

/// The direct counter of the entry `entry` names, read back through its table entry (as ONOS
/// reads them): (packets, bytes).
async fn direct_counts(c: &mut P4RuntimeClient<Channel>, entry: &p4rt::Entity) -> (i64, i64) {
    let Some(p4rt::entity::Entity::TableEntry(mut te)) = entry.entity.clone() else {
        unreachable!()
    };
    te.action = None;
    te.counter_data = Some(p4rt::CounterData::default());
    let got = read_one(c, p4rt::entity::Entity::TableEntry(te)).await;
    let [
        p4rt::Entity {
            entity: Some(p4rt::entity::Entity::TableEntry(t)),
        },
    ] = got.as_slice()
    else {
        panic!("one table entry: {got:?}")
    };
    let d = t.counter_data.as_ref().expect("its counter data");
    (d.packet_count, d.byte_count)
}

/// A direct counter is set and reset over P4Runtime (fabric-tna's tests reset theirs so), and
/// a negative count is refused with nothing changed.
#[tokio::test(flavor = "current_thread")]
async fn direct_counters_are_set_reset_and_refused_negative() {
    use p4rt::update::Type;
    let (srv, dp) = lab();
    let info = p4info(dp.program()).expect("ids").info;
    let mut c = client(srv.endpoints[0].1).await;
    let (_tx, _stream, _first) = arbitrate(&mut c, 5).await;
    // `MyIngress.valid` counts its hits; `ipv4_lpm` has no counter.
    let valid = id_of(info.tables.iter().map(|t| t.preamble.as_ref()), "MyIngress.valid");
    let fwd = p4rt::Entity {
        entity: Some(p4rt::entity::Entity::TableEntry(p4rt::TableEntry {
            table_id: valid,
            r#match: vec![p4rt::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4rt::field_match::FieldMatchType::Exact(p4rt::field_match::Exact {
                    value: vec![1].into(),
                })),
            }],
            action: table_action(FORWARD, vec![vec![8, 0, 0, 0, 1, 0x11], vec![1]]),
            ..Default::default()
        })),
    };
    c.write(write(5, Type::Insert, vec![fwd.clone()]))
        .await
        .expect("insert");
    let Some(p4rt::entity::Entity::TableEntry(mut key)) = fwd.entity.clone() else {
        unreachable!()
    };
    key.action = None;
    let set = |packets: i64, bytes: i64| p4rt::Entity {
        entity: Some(p4rt::entity::Entity::DirectCounterEntry(p4rt::DirectCounterEntry {
            table_entry: Some(key.clone()),
            data: Some(p4rt::CounterData {
                packet_count: packets,
                byte_count: bytes,
            }),
        })),
    };
    c.write(write(5, Type::Modify, vec![set(7, 700)])).await.expect("set");
    assert_eq!(direct_counts(&mut c, &fwd).await, (7, 700));
    let refused = c
        .write(write(5, Type::Modify, vec![set(-1, 0)]))
        .await
        .expect_err("a negative count");
    let errors = update_errors(&refused);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, Code::InvalidArgument as i32, "{errors:?}");
    assert_eq!(direct_counts(&mut c, &fwd).await, (7, 700), "nothing changed");
    c.write(write(5, Type::Modify, vec![set(0, 0)])).await.expect("reset");
    assert_eq!(direct_counts(&mut c, &fwd).await, (0, 0));
    let inserted = c
        .write(write(5, Type::Insert, vec![set(1, 1)]))
        .await
        .expect_err("counters are only modified");
    assert_eq!(update_errors(&inserted)[0].0, Code::InvalidArgument as i32);
    let lpm = lpm_entry([10, 0, 2, 0], 24, FORWARD, vec![vec![8, 0, 0, 0, 1, 0x11], vec![1]]);
    c.write(write(5, Type::Insert, vec![lpm.clone()]))
        .await
        .expect("insert");
    let Some(p4rt::entity::Entity::TableEntry(mut lpm_key)) = lpm.entity else {
        unreachable!()
    };
    lpm_key.action = None;
    let uncounted = p4rt::Entity {
        entity: Some(p4rt::entity::Entity::DirectCounterEntry(p4rt::DirectCounterEntry {
            table_entry: Some(lpm_key),
            data: None,
        })),
    };
    let refused = c
        .write(write(5, Type::Modify, vec![uncounted]))
        .await
        .expect_err("a table without a counter");
    let errors = update_errors(&refused);
    assert!(errors[0].1.contains("has no direct counter"), "{errors:?}");
}
