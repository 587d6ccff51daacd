//! A tutorials-style topology (tests/p4/tutorial: hosts on their own /24 with a gateway and a
//! static ARP entry, two switches running forward_dscp.p4, one filled from runtime JSON and
//! one from a simple_switch_CLI file) imported with `intlab import p4-topology`, brought up
//! with `intlab up`, used with `intlab exec` and `intlab p4 cli` and taken down with
//! `intlab down`, as a user would, through the `intlab` binary.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use intlab_lab::netns;
use intlab_lab::standing_lab::StandingLab;

use support::{Labs, intlab, intlab_ok as ok};

/// The TTL a ping reply arrives with across `switches` switches that each decrement it.
fn ttl_after(switches: u8) -> String {
    format!("ttl={}", 64 - switches)
}

#[test]
fn an_imported_tutorial_topology_comes_up_pings_everywhere_and_goes_down_without_leftovers() {
    support::require_root();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/p4");
    let dir = std::env::temp_dir().join(format!("intlab-import-{}", std::process::id()));
    let scenario: PathBuf = dir.join("basic.yaml");
    let topology = fixtures.join("tutorial/topology.json");
    let program = fixtures.join("forward_dscp.p4");
    let printed = ok(&[
        "import",
        "p4-topology",
        &topology.to_string_lossy(),
        "--program",
        &program.to_string_lossy(),
        "--out",
        &scenario.to_string_lossy(),
    ]);
    assert!(printed.contains("s2-commands.txt"), "{printed}");
    let commands = std::fs::read_to_string(dir.join("s2-commands.txt")).expect("the moved command file");
    assert!(
        commands.contains(" 198.18.3.3/32 => ") && !commands.contains("10.0."),
        "{commands}"
    );
    let yaml = std::fs::read_to_string(&scenario).expect("the scenario");
    assert!(
        yaml.contains("sysctl -w net.ipv4.tcp_congestion_control=reno"),
        "an unconverted command is said: {yaml}"
    );

    let pid = std::process::id();
    let names = [format!("basic{pid}"), format!("other{pid}")];
    let _labs = Labs(names.to_vec());
    for name in &names {
        let up = ok(&["up", &scenario.to_string_lossy(), "--name", name]);
        assert!(up.contains(&format!("lab {name} is up")), "{up}");
    }
    let out = intlab(&["up", &scenario.to_string_lossy(), "--name", &names[0]]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is already up"),
        "a second lab under a taken name is refused"
    );

    // Every host reaches every host through the P4 switches, which decrement the TTL:
    // h1 and h2 share s1, h3 is one switch further.
    let address = |h: &str| {
        let n = h[1..].parse::<u8>().expect("hN");
        format!("198.18.{n}.{n}")
    };
    let hops = |a: &str, b: &str| if a == "h3" || b == "h3" { 2 } else { 1 };
    for name in &names {
        for a in ["h1", "h2", "h3"] {
            for b in ["h1", "h2", "h3"].into_iter().filter(|&b| b != a) {
                let ping = ok(&[
                    "exec",
                    "--lab",
                    name,
                    a,
                    "--",
                    "ping",
                    "-c",
                    "1",
                    "-W",
                    "3",
                    &address(b),
                ]);
                assert!(ping.contains(&ttl_after(hops(a, b))), "{a} -> {b} in {name}: {ping}");
            }
        }
    }
    // The control plane while the lab runs: without s2's route to h3 (handle 0 of its command
    // file), h1 no longer reaches h3 in that lab (the other lab's tables are its own); the
    // route put back from standard input, with a refused command after it, h1 does again.
    let ping_h3 = |lab: &str| {
        intlab(&[
            "exec",
            "--lab",
            lab,
            "h1",
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "1",
            &address("h3"),
        ])
    };
    ok(&["p4", "cli", "--lab", &names[0], "s2", "table_delete", "ipv4_lpm", "0"]);
    assert!(!ping_h3(&names[0]).status.success(), "the route is gone");
    assert!(ping_h3(&names[1]).status.success(), "the other lab keeps its route");
    let mut cli = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["p4", "cli", "--lab", &names[0], "s2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("intlab runs");
    let commands = "table_add LineIngress.ipv4_lpm LineIngress.ipv4_forward 198.18.3.3/32 => 08:00:00:00:03:33 1\n\
                    register_read nope\n";
    std::io::Write::write_all(&mut cli.stdin.take().expect("stdin"), commands.as_bytes()).expect("written");
    let out = cli.wait_with_output().expect("intlab ends");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "one command was refused: {stdout}{stderr}");
    // simple_switch_CLI's words; the handle the deleted entry freed is taken again, as BMv2's.
    assert!(
        stdout.contains("Adding entry to lpm match table LineIngress.ipv4_lpm")
            && stdout.contains("Entry has been added with handle 0"),
        "{stdout}"
    );
    assert!(stderr.contains("Error: the program has no register `nope`"), "{stderr}");
    let ping = ping_h3(&names[0]);
    assert!(ping.status.success(), "the route is back: {ping:?}");
    let out = intlab(&["p4", "cli", "--lab", &names[0], "s9", "table_delete", "ipv4_lpm", "0"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no P4 switch `s9` in this lab (P4 switches: s1, s2)"),
        "{out:?}"
    );

    // The command's own exit status, and refusals that name what exists.
    let out = intlab(&["exec", "--lab", &names[0], "h1", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let out = intlab(&["exec", "h1", "--", "true"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("several labs are up"),
        "{out:?}"
    );
    let out = intlab(&["exec", "--lab", &names[0], "h9", "--", "true"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(hosts: h1, h2, h3)"),
        "{out:?}"
    );

    // A process left running in a host (a daemon, say) goes with the lab.
    let daemons: Vec<u32> = names
        .iter()
        .map(|name| {
            let pid = ok(&[
                "exec",
                "--lab",
                name,
                "h2",
                "--",
                "sh",
                "-c",
                "sleep 600 >/dev/null 2>&1 & echo $!",
            ]);
            pid.trim().parse().expect("a pid")
        })
        .collect();

    // `down` stops a lab; a lab whose process was killed is removed by `down` too.
    let lab = StandingLab::read(&names[0]).expect("record").expect("recorded");
    ok(&["down", &names[0]]);
    let killed = StandingLab::read(&names[1]).expect("record").expect("recorded");
    // SAFETY: kill(2) on the lab process this test started.
    assert_eq!(unsafe { libc::kill(killed.pid as i32, libc::SIGKILL) }, 0);
    while killed.is_live() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        netns::lab_namespaces()
            .expect("the lab namespaces listed")
            .iter()
            .any(|n| n.starts_with(&killed.prefix)),
        "a killed lab leaves its namespaces"
    );
    ok(&["down", &names[1]]);
    for l in [&lab, &killed] {
        let left: Vec<String> = netns::lab_namespaces()
            .expect("the lab namespaces listed")
            .into_iter()
            .filter(|n| n.starts_with(&l.prefix))
            .collect();
        assert!(left.is_empty(), "{} left {left:?}", l.name);
        assert!(StandingLab::read(&l.name).expect("readable").is_none());
    }
    for pid in daemons {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} outlived its lab"
        );
    }
    std::fs::remove_dir_all(&dir).expect("temp dir removed");
}

#[test]
fn intlab_up_with_no_scenario_builds_the_lab_intlab_run_runs() {
    support::require_root();
    let name = format!("default{}", std::process::id());
    let _labs = Labs(vec![name.clone()]);
    let up = ok(&["up", "--name", &name]);
    let builtin = intlab_lab::scenario::Scenario::builtin(&Default::default()).expect("the built-in scenario");
    for h in builtin.topology.hosts() {
        let node = &builtin.topology.nodes[h];
        let address = node.address.expect("a host's address").to_string();
        assert!(
            up.lines().any(|l| l.trim() == format!("{}  {address}", node.name)),
            "{} at {address} is listed:\n{up}",
            node.name
        );
    }
    let lab = StandingLab::read(&name)
        .expect("the record reads")
        .expect("the lab is recorded");
    assert_eq!(lab.scenario, Path::new(intlab_lab::scenario::DEFAULT_SCENARIO_NAME));
    let last = builtin.topology.hosts().last().expect("hosts");
    let to = builtin.topology.nodes[last].address.expect("its address").to_string();
    let ping = ok(&["exec", "--lab", &name, "h1", "--", "ping", "-c", "1", "-W", "3", &to]);
    assert!(ping.contains("1 received"), "{ping}");
    ok(&["down", &name]);
    assert!(
        StandingLab::read(&name).expect("the record reads").is_none(),
        "the lab is gone"
    );
}
