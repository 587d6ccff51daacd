//! What a site server and a coordinator read from each other (framed messages) and the sites
//! file a coordinator reads.

use intlab_lab::distributed::SiteAddresses;
use intlab_lab::sites::protocol::{self, BuildOrder, Frame, FromSite, Message, ProtocolError, ToSite};
use proptest::prelude::*;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::mutation::*;
use crate::{Report, Tally, finish, runner};

/// Every kind of message each way, framed as the lab sends them.
fn framed_seeds() -> Vec<Vec<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let order = BuildOrder {
        scenario: "name: x\nnodes: {}\n".into(),
        file: "/tmp/x.yaml".into(),
        dilation: 10.0,
        site: "east".into(),
        addresses: [("east".to_owned(), "10.0.0.1".parse().expect("address"))].into(),
        capture: true,
        tunnel_key: [3; 16],
    };
    let path = intlab_transport::flow::FlowPath {
        base_rtt_ns: 1,
        fabric_rtt_ns: 2,
        hops: 3,
    };
    let to = [
        ToSite::Hello { version: 1 },
        ToSite::Clock { sent_ns: 5 },
        ToSite::Align { shift_ns: -7 },
        ToSite::Build(order),
        ToSite::Probe { flows: vec![0, 1, 2] },
        ToSite::Start {
            t0_ns: 9,
            sends: vec![(0, 10, path)],
        },
        ToSite::Send {
            flow: 1,
            start_ns: 11,
            path,
        },
        ToSite::Stop,
    ];
    let from = [
        FromSite::Hello {
            version: 1,
            host: "m".into(),
            kernel: intlab_lab::sites::KernelClock {
                boot_id: "b".into(),
                monotonic_origin_ns: 4,
            },
        },
        FromSite::Clock {
            sent_ns: 1,
            received_ns: 2,
            answered_ns: 3,
            shift_ns: -5,
        },
        FromSite::Reached(vec![(0, 5, vec![1, 2])]),
        FromSite::Finished(3),
        FromSite::File {
            name: "s1-eth1.pcapng".into(),
            size: 3,
        },
        FromSite::Done,
        FromSite::Failed("no".into()),
    ];
    rt.block_on(async {
        let mut seeds = Vec::new();
        for m in &to {
            seeds.push(framed(m).await);
        }
        for m in &from {
            seeds.push(framed(m).await);
        }
        let mut chunk = Vec::new();
        protocol::write_chunk(&mut chunk, &[1, 2, 3]).await.expect("in memory");
        seeds.push(chunk);
        seeds
    })
}

async fn framed<M: Message>(m: &M) -> Vec<u8> {
    let mut out = Vec::new();
    protocol::write_message(&mut out, m).await.expect("in memory");
    out
}

/// Reads every frame of `bytes` as `M`: what was accepted is within its kind's limit.
async fn read_all<M: Message>(bytes: &[u8], tally: &Tally) -> Result<(), TestCaseError> {
    let mut r = bytes;
    let wait = Duration::from_millis(1);
    loop {
        match protocol::read_frame::<M>(&mut r, wait, wait).await {
            Ok(None) => return Ok(()),
            Ok(Some(Frame::Message(m))) => {
                tally.count("message accepted");
                prop_assert!(usize::from(m.kind()) < M::KINDS.len());
            }
            Ok(Some(Frame::Chunk(c))) => {
                tally.count("chunk accepted");
                prop_assert!(c.len() <= protocol::CHUNK);
            }
            Err(ProtocolError::TooLong { len, limit, .. }) => {
                prop_assert!(len > limit);
                tally.count("refused: too long");
                return Ok(());
            }
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                tally.count("refused");
                return Ok(());
            }
        }
    }
}

/// Runs the site protocol target: framed messages, damaged, read by both ends.
pub fn fuzz_site_protocol(cases: u32) -> Report {
    let seeds = framed_seeds();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let tally = Tally::default();
    let started = Instant::now();
    let strategy = (
        proptest::collection::vec(0..seeds.len(), 1..4),
        proptest::collection::vec(mutation(), 0..4),
    );
    let result = runner(cases).run(&strategy, |(picked, mutations)| {
        let joined: Vec<u8> = picked.iter().flat_map(|&i| seeds[i].iter().copied()).collect();
        let bytes = apply(joined, &mutations);
        rt.block_on(async {
            read_all::<ToSite>(&bytes, &tally).await?;
            read_all::<FromSite>(&bytes, &tally).await
        })
    });
    finish("site protocol", cases, started, tally, result)
}

/// Runs the sites file target: every refusal names the file.
pub fn fuzz_sites_files(cases: u32) -> Report {
    let seeds = [
        "east: 10.0.0.1:7700\nwest: 10.0.0.2:7700\n",
        "east: { control: 10.0.0.1:7700, tunnel: 192.168.10.1 }\nwest: { control: 10.0.0.2:7700 }\n",
        "a: 127.0.0.1:1\n",
    ];
    let seeds = seeds.map(str::to_owned);
    // Literal addresses only: a fuzzer must not ask the network's resolver.
    let literal = |c: &str| c.parse::<std::net::SocketAddr>().ok();
    let parse = |text: &str| match SiteAddresses::from_text(text, Path::new("sites.yaml"), &literal) {
        Ok(a) if a.sites.is_empty() => Err("accepted with no site".to_owned()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    };
    crate::texts::fuzz_texts("sites files", cases, &seeds, "sites.yaml", parse, "accepted")
}
