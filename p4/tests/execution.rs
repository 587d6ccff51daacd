//! Programs run on real frames, in memory: what each construct and extern does to the bytes and
//! to the frame's fate, checked on the bytes that come out.

use std::path::Path;

use intlab_p4::{Arrival, Datapath, Decision, Departure, PacketState};

fn program(name: &str) -> intlab_p4::Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(name);
    intlab_p4::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn datapath(name: &str, runtime: &str) -> Datapath {
    let dp = Datapath::new(program(name).ir, "s1");
    intlab_p4::runtime_json::apply_text(&dp, "runtime.json", runtime).unwrap_or_else(|e| panic!("{e}"));
    dp
}

fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet + IPv4 frame (protocol `proto`, ECN `ecn`) with a valid header checksum and
/// `payload` after the IPv4 header.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, ecn: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let total = (20 + payload.len()) as u16;
    let mut ip = vec![0x45, ecn, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(payload);
    f
}

/// Runs ingress and (when forwarded to one port) egress; returns the decision and the frame.
fn forward(dp: &Datapath, st: &mut PacketState, frame: &[u8], port: u16, departure: Departure) -> (Decision, Vec<u8>) {
    let mut buf = vec![0u8; 2048];
    buf[..frame.len()].copy_from_slice(frame);
    let mut len = frame.len();
    let r = dp.ingress(st, &mut buf, &mut len, Arrival { port, now_ns: 1_000 });
    if let Decision::Unicast(p) = r.decision {
        let d = Departure { port: p, ..departure };
        if !dp.egress(st, &mut buf, &mut len, d) {
            return (Decision::Drop, Vec::new());
        }
    }
    buf.truncate(len);
    (r.decision, buf)
}

const FORWARD_RUNTIME: &str = r#"{
  "table_entries": [
    { "table": "ForwardIngress.routes", "match": { "hdr.ipv4.dst": ["10.0.2.0", 24] },
      "action_name": "ForwardIngress.forward",
      "action_params": { "next_mac": "08:00:00:00:02:22", "port": 2 } },
    { "table": "ForwardIngress.routes", "match": { "hdr.ipv4.dst": ["10.0.2.9", 32] },
      "action_name": "ForwardIngress.forward",
      "action_params": { "next_mac": "08:00:00:00:09:99", "port": 9 } }
  ]
}"#;

#[test]
fn lpm_forwarding_rewrites_macs_decrements_ttl_and_recomputes_the_checksum() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let frame = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let (d, out) = forward(&dp, &mut st, &frame, 1, Departure::default());
    assert_eq!(d, Decision::Unicast(2));
    assert_eq!(out.len(), frame.len(), "no header added or removed");
    assert_eq!(&out[0..6], &[8, 0, 0, 0, 2, 0x22], "destination MAC from the entry");
    assert_eq!(&out[6..12], &frame[0..6], "source MAC is the old destination");
    assert_eq!(out[22], 63, "TTL down by one");
    assert_eq!(
        checksum(&out[14..34]),
        0,
        "header checksum recomputed by update_checksum"
    );
    assert_eq!(&out[34..], &frame[34..], "payload untouched");
    // The longer prefix wins.
    let frame = ipv4([10, 0, 1, 1], [10, 0, 2, 9], 17, 0, &[0; 8]);
    assert_eq!(
        forward(&dp, &mut st, &frame, 1, Departure::default()).0,
        Decision::Unicast(9)
    );
    // A miss runs the default action: drop.
    let frame = ipv4([10, 0, 1, 1], [10, 0, 3, 3], 17, 0, &[0; 8]);
    assert_eq!(forward(&dp, &mut st, &frame, 1, Departure::default()).0, Decision::Drop);
}

#[test]
fn const_entries_switch_on_the_action_run_and_ternary_range_keys() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    // TCP from 10/8 to a destination whose first byte is in 10..20: the ACL drops it and the
    // apply block returns before the route table.
    let tcp = ipv4([10, 9, 9, 9], [10, 0, 2, 2], 6, 0, &[0; 20]);
    assert_eq!(forward(&dp, &mut st, &tcp, 1, Departure::default()).0, Decision::Drop);
    // The same from 11/8 misses the ACL (default NoAction) and is routed.
    let tcp = ipv4([11, 9, 9, 9], [10, 0, 2, 2], 6, 0, &[0; 20]);
    assert_eq!(
        forward(&dp, &mut st, &tcp, 1, Departure::default()).0,
        Decision::Unicast(2)
    );
}

#[test]
fn egress_marks_ecn_from_the_queue_depth_in_packets() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let ect = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 1, &[0; 8]);
    let shallow = Departure {
        enq_packets: 3,
        ..Departure::default()
    };
    let deep = Departure {
        enq_packets: 10,
        ..Departure::default()
    };
    let (_, out) = forward(&dp, &mut st, &ect, 1, shallow);
    assert_eq!(out[15] & 3, 1, "below the threshold: unmarked");
    let (_, out) = forward(&dp, &mut st, &ect, 1, deep);
    assert_eq!(out[15] & 3, 3, "at the threshold: CE");
    assert_eq!(checksum(&out[14..34]), 0, "checksum follows the mark");
    let not_ect = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[0; 8]);
    let (_, out) = forward(&dp, &mut st, &not_ect, 1, deep);
    assert_eq!(out[15] & 3, 0, "not ECN-capable: never marked");
}

#[test]
fn a_source_route_stack_is_parsed_popped_and_the_rest_emitted() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let inner = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[0; 8]);
    let mut frame = inner[..12].to_vec();
    frame.extend_from_slice(&[0x12, 0x34]);
    // Two hops: port 5 (bos 0), then port 7 (bos 1).
    frame.extend_from_slice(&[0x00, 0x05, 0x80, 0x07]);
    frame.extend_from_slice(&inner[14..]);
    let (d, out) = forward(&dp, &mut st, &frame, 1, Departure::default());
    assert_eq!(d, Decision::Unicast(5), "the first hop's port");
    assert_eq!(out.len(), frame.len() - 2, "one hop popped");
    assert_eq!(&out[14..16], &[0x80, 0x07], "the remaining hop leads");
    assert_eq!(&out[16..], &frame[18..], "the IPv4 packet follows");
}

#[test]
fn a_frame_too_short_for_its_headers_reaches_ingress_with_the_parser_error() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let frame = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[]);
    // Cut inside the IPv4 header: the parser rejects; ipv4 stays invalid and ingress does
    // nothing with it, so egress_spec stays 0 (BMv2 sends it to port 0).
    let (d, _) = forward(&dp, &mut st, &frame[..20], 1, Departure::default());
    assert_eq!(d, Decision::Unicast(0));
}

#[test]
fn registers_and_counters_count_what_passed() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let frame = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[0; 8]);
    for _ in 0..3 {
        forward(&dp, &mut st, &frame, 4, Departure::default());
    }
    let seen = dp.register_id("seen").expect("register");
    assert_eq!(dp.register_read(seen, 0), Some(3));
    let c = dp.counter_id("port_packets").expect("counter");
    assert_eq!(dp.counter_read(c, 4), Some((3, 3 * frame.len() as u64)));
    assert_eq!(dp.counter_read(c, 1), Some((0, 0)));
}

#[test]
fn runtime_files_with_wrong_names_values_or_kinds_are_refused_with_their_json_path() {
    let p = program("forward.p4");
    let cases = [
        (
            r#"{"table_entries":[{"table":"Nope","action_name":"NoAction"}]}"#,
            "table_entries[0].table",
            "no table `Nope`",
        ),
        (
            r#"{"table_entries":[{"table":"ForwardIngress.routes","match":{"hdr.ipv4.dst":["10.0.0.0",24]},"action_name":"ForwardIngress.fly"}]}"#,
            "table_entries[0].action_name",
            "has no action `ForwardIngress.fly`",
        ),
        (
            r#"{"table_entries":[{"table":"ForwardIngress.routes","match":{"hdr.ipv4.dst":"10.0.0.0"},"action_name":"NoAction"}]}"#,
            "table_entries[0].match.hdr.ipv4.dst",
            "[value, prefix length] expected",
        ),
        (
            r#"{"table_entries":[{"table":"ForwardIngress.routes","match":{"hdr.ipv4.dst":["10.0.0.0",24]},"action_name":"ForwardIngress.forward","action_params":{"next_mac":"08:00:00:00:02:22","port":600}}]}"#,
            "table_entries[0].action_params.port",
            "does not fit in 9 bits",
        ),
        (
            r#"{"table_entries":[{"table":"ForwardIngress.routes","match":{"hdr.ipv4.src":["10.0.0.0",24]},"action_name":"NoAction"}]}"#,
            "table_entries[0].match.hdr.ipv4.src",
            "has no key",
        ),
        (
            r#"{"table_entries":[{"table":"ForwardIngress.acl","match":{},"action_name":"NoAction"}]}"#,
            "table_entries[0].table",
            "const entries",
        ),
    ];
    for (json, path, message) in cases {
        let dp = Datapath::new(p.ir.clone(), "s1");
        let e = intlab_p4::runtime_json::apply_text(&dp, "s1-runtime.json", json).expect_err(json);
        assert_eq!(e.file, "s1-runtime.json");
        assert_eq!(e.path, path, "{e}");
        assert!(e.message.contains(message), "{e}");
    }
}

/// simple_switch_CLI's command file for acl.p4: as BMv2 reads it, the lowest priority number
/// wins, handles count from 0 per table, nodes from 0.
const ACL_COMMANDS: &str = "\
# allow 10/8 to port 3, but not 10.0.0.5
table_add acl to_port 10.0.0.0&&&0xff000000 0->0xffffffff => 3 20
table_add AclIngress.acl deny 10.0.0.5&&&255.255.255.255 0->0xffffffff => 10
table_add acl to_group 11.0.0.0&&&0xff000000 0.0.0.0->255.255.255.255 => 7 5
mc_mgrp_create 7
mc_node_create 1 2 3
mc_node_associate 7 0
mirroring_add 5 4
table_set_default acl to_port 9
";

#[test]
fn a_simple_switch_cli_command_file_fills_tables_groups_and_sessions() {
    let dp = Datapath::new(program("acl.p4").ir, "s1");
    let printed =
        intlab_p4::cli_commands::apply_text(&dp, "s1-commands.txt", ACL_COMMANDS).unwrap_or_else(|e| panic!("{e}"));
    // What simple_switch_CLI prints: entries with their handles, the group, the node, the default.
    assert_eq!(printed.len(), 7, "{printed:?}");
    assert!(
        printed[1].ends_with("Entry has been added with handle 1"),
        "{printed:?}"
    );
    assert!(
        printed[0].starts_with("Adding entry to range match table AclIngress.acl\nmatch key:           TERNARY-0a:00:00:00 &&& ff:00:00:00\tRANGE-00:00:00:00 -> ff:ff:ff:ff"),
        "{printed:?}"
    );
    assert_eq!(
        printed[4],
        "Creating node with rid 1 and with port map 1100\nnode was created with handle 0"
    );
    let mut st = dp.packet_state();
    let decide = |dp: &Datapath, st: &mut PacketState, src: [u8; 4]| {
        forward(
            dp,
            st,
            &ipv4(src, [10, 9, 9, 9], 17, 0, &[0; 8]),
            1,
            Departure::default(),
        )
        .0
    };
    assert_eq!(decide(&dp, &mut st, [10, 0, 0, 1]), Decision::Unicast(3));
    assert_eq!(
        decide(&dp, &mut st, [10, 0, 0, 5]),
        Decision::Drop,
        "priority 10 beats 20"
    );
    assert_eq!(decide(&dp, &mut st, [11, 1, 1, 1]), Decision::Multicast(7));
    assert_eq!(dp.control().groups.get(&7), Some(&vec![(2, 1), (3, 1)]));
    assert_eq!(dp.control().sessions.get(&5).and_then(|s| s.port), Some(4));
    assert_eq!(
        decide(&dp, &mut st, [12, 0, 0, 1]),
        Decision::Unicast(9),
        "the new default"
    );

    // Deleting by handle, as a control plane at run time would.
    let mut session = intlab_p4::cli_commands::CliSession::for_datapath(&dp);
    session.run(&dp, "table_delete acl 1").expect("deleted");
    assert_eq!(decide(&dp, &mut st, [10, 0, 0, 5]), Decision::Unicast(3));
    let again = session.run(&dp, "table_delete acl 1").expect_err("gone");
    assert!(again.contains("INVALID_HANDLE"), "{again}");
    // A new entry takes the handle freed, as on BMv2.
    let out = session
        .run(&dp, "table_add acl deny 10.0.0.6&&&255.255.255.255 0->0xffffffff => 10")
        .expect("added")
        .unwrap_or_default();
    assert!(out.ends_with("handle 1"), "{out}");
}

#[test]
fn registers_and_counters_are_written_and_read_by_commands() {
    let dp = datapath("forward.p4", FORWARD_RUNTIME);
    let mut st = dp.packet_state();
    let printed = intlab_p4::cli_commands::apply_text(&dp, "c.txt", "register_write seen 0 41\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(printed.is_empty());
    let frame = ipv4([10, 0, 1, 1], [10, 0, 2, 2], 17, 0, &[0; 8]);
    forward(&dp, &mut st, &frame, 4, Departure::default());
    let mut session = intlab_p4::cli_commands::CliSession::for_datapath(&dp);
    assert_eq!(session.run(&dp, "register_read seen 0"), Ok(Some("seen[0]= 42".into())));
    assert_eq!(
        session.run(&dp, "counter_read port_packets 4"),
        Ok(Some(format!("port_packets[4]= ({} bytes, 1 packets)", frame.len())))
    );
    let e = session.run(&dp, "register_read seen 1").expect_err("one cell");
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn command_files_with_wrong_names_forms_or_counts_are_refused_with_their_line() {
    let p = program("acl.p4");
    let cases = [
        ("table_add nope deny 1&&&1 0->1 => 1", "no table `nope`"),
        (
            "table_add acl fly 1&&&1 0->1 => 1",
            "table `AclIngress.acl` has no action `fly`",
        ),
        ("table_add acl deny 10.0.0.0/8 0->1 => 1", "VALUE&&&MASK expected"),
        (
            "table_add acl deny 1&&&1 0->1 =>",
            "Table is ternary, but could not extract a valid priority from args",
        ),
        ("table_add acl to_port 1&&&1 0->1 => 600 1", "does not fit in 9 bits"),
        ("table_add acl deny 1&&&1 => 1", "needs 2 key fields"),
        ("table_add acl deny 1&&&1 5->1 => 1", "low end is above the high end"),
        ("mc_node_associate 7 0", "INVALID_L1_HANDLE"),
        ("table_dance acl", "unknown command `table_dance`"),
    ];
    for (line, message) in cases {
        let dp = Datapath::new(p.ir.clone(), "s1");
        let text = format!("# line 1 is a comment\n{line}\n");
        let e = intlab_p4::cli_commands::apply_text(&dp, "s1-commands.txt", &text).expect_err(line);
        assert_eq!((e.file.as_str(), e.line), ("s1-commands.txt", 2), "{e}");
        assert!(e.message.contains(message), "{line}: {e}");
    }
}

#[test]
fn control_plane_edits_apply_whole_while_frames_run_on_other_threads() {
    let dp = std::sync::Arc::new(datapath("forward.p4", FORWARD_RUNTIME));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // 10.0.3.3 has no route: dropped, until the control plane adds one to port 5.
    let frame = ipv4([10, 0, 1, 1], [10, 0, 3, 3], 17, 0, &[0; 8]);
    let runner = {
        let (dp, stop, frame) = (dp.clone(), stop.clone(), frame.clone());
        std::thread::spawn(move || {
            let mut st = dp.packet_state();
            let mut seen = std::collections::BTreeMap::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (d, out) = forward(&dp, &mut st, &frame, 1, Departure::default());
                if d == Decision::Unicast(5) {
                    // Both arguments of the entry, never one without the other.
                    assert_eq!(&out[0..6], &[8, 0, 0, 0, 5, 0x55]);
                }
                *seen.entry(format!("{d:?}")).or_insert(0u64) += 1;
            }
            seen
        })
    };
    let mut session = intlab_p4::cli_commands::CliSession::for_datapath(&dp);
    let mut st = dp.packet_state();
    for _ in 0..200 {
        let added = session
            .run(
                &dp,
                "table_add ForwardIngress.routes forward 10.0.3.0/24 => 08:00:00:00:05:55 5",
            )
            .expect("add");
        assert_eq!(
            forward(&dp, &mut st, &frame, 1, Departure::default()).0,
            Decision::Unicast(5)
        );
        let handle = added
            .and_then(|s| s.rsplit(' ').next().map(str::to_owned))
            .expect("a handle");
        session
            .run(&dp, &format!("table_delete routes {handle}"))
            .expect("delete");
        assert_eq!(forward(&dp, &mut st, &frame, 1, Departure::default()).0, Decision::Drop);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = runner.join().expect("the packet thread saw only whole entries");
    assert!(seen.keys().all(|d| d == "Drop" || d == "Unicast(5)"), "{seen:?}");
    // A command file that fails at its third line changes nothing, not even its first two.
    let file = "table_add routes forward 10.0.3.0/24 => 08:00:00:00:05:55 5\n\
                table_set_default routes forward 08:00:00:00:06:66 6\n\
                table_add routes fly 10.0.4.0/24 =>\n";
    let e = intlab_p4::cli_commands::apply_text(&dp, "s1-commands.txt", file).expect_err("line 3");
    assert_eq!(e.line, 3, "{e}");
    assert_eq!(forward(&dp, &mut st, &frame, 1, Departure::default()).0, Decision::Drop);
    let elsewhere = ipv4([10, 0, 1, 1], [10, 0, 7, 7], 17, 0, &[0; 8]);
    assert_eq!(
        forward(&dp, &mut st, &elsewhere, 1, Departure::default()).0,
        Decision::Drop
    );
}

#[test]
fn operators_and_casts_give_their_values_at_their_widths_and_signedness() {
    let dp = datapath("arith.p4", "{}");
    let mut st = dp.packet_state();
    // a = 0xf6 (-10 as int<8>), b = 3.
    let mut frame = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5, 0xf6, 0x03];
    frame.extend_from_slice(&[0x5a; 8]);
    let (decision, out) = forward(&dp, &mut st, &frame, 0, Departure::default());
    assert_eq!(decision, Decision::Unicast(1));
    assert_eq!(&out[..16], &frame[..16], "ethernet and operands as they came");
    let r = &out[16..29];
    assert_eq!(&r[0..2], &[0x00, 0xf6], "bit<8> widened to bit<16>: zeros above");
    assert_eq!(&r[2..4], &[0xff, 0xf6], "int<8> widened to int<16>: the sign extends");
    assert_eq!(r[4], 7, "10 - b: a constant on the left stays on the left");
    assert_eq!(r[5], 6, "2 * b");
    assert_eq!(r[6], 0, "3 |-| 5 saturates at 0");
    assert_eq!(r[7], 0xff, "0xf6 |+| 20 saturates at 0xff");
    assert_eq!(r[8], 0xfb, "-10 >> 1 as int<8> is -5");
    assert_eq!(r[9], 1, "-10 < 3 as int<8>");
    assert_eq!(r[10], 0, "246 > 3 as bit<8>");
    assert_eq!(r[11], 0xf3, "a[7:4] ++ b[3:0]");
    assert_eq!(r[12], 0x6f, "(bit<4>) a = 6; 6 |+| 9 saturates at 0xf");
    assert_eq!(&out[29..], &frame[16..], "the payload follows the new header");
}

/// A UDP header to `port` (no checksum) and 8 bytes.
fn udp_to(port: u16) -> Vec<u8> {
    let mut u = vec![0x04, 0xd2];
    u.extend_from_slice(&port.to_be_bytes());
    u.extend_from_slice(&[0, 16, 0, 0]);
    u.extend_from_slice(&[0x5a; 8]);
    u
}

#[test]
fn an_ingress_clone_is_the_frame_as_it_arrived_keeping_only_its_field_list() {
    let dp = datapath(
        "mirror.p4",
        r#"{ "clone_session_entries": [
              { "clone_session_id": 5, "replicas": [ { "egress_port": 3, "instance": 1 } ] } ] }"#,
    );
    for (port, kept) in [(7001u16, 0u8), (7002, 0xaa)] {
        let frame = ipv4([198, 18, 0, 1], [198, 18, 0, 2], 17, 0, &udp_to(port));
        let (mut st, mut buf, mut len) = (dp.packet_state(), vec![0u8; 2048], frame.len());
        buf[..len].copy_from_slice(&frame);
        let r = dp.ingress(&mut st, &mut buf, &mut len, Arrival { port: 1, now_ns: 1_000 });
        assert_eq!((r.decision, r.clone_to), (Decision::Unicast(2), Some(3)), "port {port}");
        let (mut cst, mut cbuf, mut clen) = (dp.packet_state(), vec![0u8; 2048], 0);
        assert!(dp.ingress_clone(&st, &mut cst, &mut cbuf, &mut clen));
        assert_eq!(&cbuf[..clen], &frame[..], "the clone starts as the frame arrived");
        let at = |p: u16| Departure {
            port: p,
            ..Departure::default()
        };
        assert!(dp.egress(&mut st, &mut buf, &mut len, at(2)));
        assert!(dp.egress(&mut cst, &mut cbuf, &mut clen, at(3)));
        let (original, clone) = (&buf[..len], &cbuf[..clen]);
        // TOS = instance_type, identification = kept ++ not_kept, TTL at 22.
        assert_eq!(
            (original[15], original[22]),
            (0, 7),
            "the original: normal, ingress's TTL"
        );
        assert_eq!(&original[18..20], &[0xaa, 0xbb], "the original keeps all its metadata");
        assert_eq!(
            (clone[15], clone[22]),
            (1, 64),
            "the clone: instance_type 1, the TTL it came with"
        );
        assert_eq!(
            &clone[18..20],
            &[kept, 0],
            "port {port}: only the field list's metadata is kept"
        );
        for f in [original, clone] {
            assert_eq!(checksum(&f[14..34]), 0, "a good IPv4 checksum");
        }
    }
    // Without a clone, no copy is asked for.
    let frame = ipv4([198, 18, 0, 1], [198, 18, 0, 2], 17, 0, &udp_to(9));
    let (mut st, mut buf, mut len) = (dp.packet_state(), vec![0u8; 2048], frame.len());
    buf[..len].copy_from_slice(&frame);
    let r = dp.ingress(&mut st, &mut buf, &mut len, Arrival { port: 1, now_ns: 1_000 });
    assert_eq!((r.decision, r.clone_to), (Decision::Unicast(2), None));
}

/// peek.p4's runtime: the key written as a list of one, as the tutorials' basic_tunnel does.
const PEEK_RUNTIME: &str = r#"{
  "table_entries": [
    { "table": "PeekIngress.ops", "match": { "hdr.peek.op": [43] },
      "action_name": "PeekIngress.answer", "action_params": { "add": 1000 } }
  ]
}"#;

#[test]
fn lookahead_fields_of_a_header_choose_the_state_before_it_is_extracted() {
    let dp = datapath("peek.p4", PEEK_RUNTIME);
    let mut st = dp.packet_state();
    let frame = |magic: u8, version: u8, op: u8| {
        let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x12, 0x34];
        f.extend_from_slice(&[magic, version << 4 | 0x5, op, 0, 0, 0, 7]);
        f.extend_from_slice(b"tail");
        f
    };
    let (d, out) = forward(&dp, &mut st, &frame(0x50, 1, 43), 4, Departure::default());
    assert_eq!(d, Decision::Unicast(4), "answered on the port it came in on");
    assert_eq!(&out[0..6], &[0x02, 0, 0, 0, 0, 0xaa], "MACs swapped");
    assert_eq!(&out[6..12], &[0x02, 0, 0, 0, 0, 0xbb]);
    assert_eq!(&out[14..17], &[0x50, 0x15, 43], "magic, version and flags as they came");
    assert_eq!(
        u32::from_be_bytes([out[17], out[18], out[19], out[20]]),
        1007,
        "the entry's 1000 added"
    );
    assert_eq!(&out[21..], b"tail");
    // A wrong magic or version leaves the header unparsed: ingress drops it (with the
    // argument-less mark_to_drop the tutorials' older programs call).
    assert_eq!(
        forward(&dp, &mut st, &frame(0x51, 1, 43), 4, Departure::default()).0,
        Decision::Drop
    );
    assert_eq!(
        forward(&dp, &mut st, &frame(0x50, 2, 43), 4, Departure::default()).0,
        Decision::Drop
    );
    // Parsed, but an op without an entry: the default drops it.
    assert_eq!(
        forward(&dp, &mut st, &frame(0x50, 1, 45), 4, Departure::default()).0,
        Decision::Drop
    );
    // Too short to look ahead: no header, dropped, nothing read past the frame.
    let short = &frame(0x50, 1, 43)[..16];
    assert_eq!(forward(&dp, &mut st, short, 4, Departure::default()).0, Decision::Drop);
}

#[test]
fn a_lookahead_past_the_end_of_the_frame_is_packet_too_short_even_for_a_field_that_fits() {
    let dp = datapath("peek_short.p4", "{}");
    let mut st = dp.packet_state();
    let framed = |ether_type: [u8; 2], after: &[u8]| {
        let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa];
        f.extend_from_slice(&ether_type);
        f.extend_from_slice(after);
        f
    };
    let frame = |after: &[u8]| framed([0x12, 0x34], after);
    let mut port = |f: &[u8]| match forward(&dp, &mut st, f, 7, Departure::default()).0 {
        Decision::Unicast(p) => p,
        d => panic!("decided {d:?}"),
    };
    assert_eq!(
        port(&frame(&[1, 0, 0, 0, 0, 0, 0, 0])),
        1,
        "the whole header there: accepted"
    );
    assert_eq!(
        port(&frame(&[2, 0, 0, 0, 0, 0, 0, 0])),
        2,
        "another kind: no case matches (NoMatch)"
    );
    // `kind` is there, the 7 bytes after it are not: the lookahead itself fails.
    assert_eq!(port(&frame(&[1, 0])), 3, "PacketTooShort");
    assert_eq!(port(&frame(&[])), 3, "nothing after Ethernet: PacketTooShort");
    // Peeked into a variable: the failed lookahead ends the state; `meta.after = 1` is not run.
    assert_eq!(port(&framed([0x56, 0x78], &[1, 0, 0, 0, 0, 0, 0, 0])), 1, "accepted");
    assert_eq!(
        port(&framed([0x56, 0x78], &[1])),
        3,
        "PacketTooShort, the statement after the lookahead not run"
    );
}

#[test]
fn digests_reach_the_control_plane_with_their_fields_in_order_of_sending() {
    let dp = datapath("learn.p4", "{}");
    let mut cli = intlab_p4::cli_commands::CliSession::for_datapath(&dp);
    cli.run(&dp, "table_add known NoAction 0x020000000002 =>")
        .expect("entry added");
    let mut st = dp.packet_state();
    let frame = |src: u8| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, src]);
        f.extend_from_slice(&[0x88, 0xb5]);
        f
    };
    for (src, port) in [(1, 3), (2, 4), (5, 7)] {
        let (decision, _) = forward(&dp, &mut st, &frame(src), port, Departure::default());
        assert_eq!(decision, Decision::Unicast(1));
    }
    let (messages, dropped) = dp.take_digests();
    assert_eq!(dropped, 0);
    let d = &dp.program().digests;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].fields.iter().map(|f| f.1).collect::<Vec<_>>(), [48, 9]);
    // The known address (2) sent nothing; the others, in order, with their ports.
    let sent: Vec<Vec<u128>> = messages.iter().map(|m| m.values.clone()).collect();
    assert_eq!(sent, [vec![0x0200_0000_0001, 3], vec![0x0200_0000_0005, 7]]);
    // The command line reads them too, and a digest read is gone.
    forward(&dp, &mut st, &frame(6), 2, Departure::default());
    let read = cli.run(&dp, "digest_read").expect("digest_read");
    assert_eq!(read.as_deref(), Some("learn_t: src=0x20000000006, port=0x2"));
    assert_eq!(cli.run(&dp, "digest_read").expect("digest_read"), None);
}

#[test]
fn queue_rates_and_depths_are_kept_per_port_and_priority_the_most_specific_first() {
    let dp = datapath("learn.p4", "{}");
    let mut cli = intlab_p4::cli_commands::CliSession::for_datapath(&dp);
    for line in ["set_queue_depth 64", "set_queue_rate 1000 2", "set_queue_rate 500 2 3"] {
        assert_eq!(cli.run(&dp, line), Ok(None), "{line}");
    }
    let q = dp.control().queues.clone();
    assert_eq!(
        (q.rate(2, 3), q.rate(2, 0), q.rate(1, 3)),
        (Some(500), Some(1000), None)
    );
    assert_eq!((q.depth(1, 0), q.depth(2, 7)), (Some(64), Some(64)));
    assert!(cli.run(&dp, "set_queue_rate 10 2 9").is_err(), "priorities are 0 to 7");
    assert!(cli.run(&dp, "set_queue_rate fast").is_err());
}
