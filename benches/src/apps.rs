//! Real applications between two hosts' namespaces, as the benchmarks load a path the way users
//! do: iperf3 (UDP and TCP) and ping, from h1 to h2.

use std::net::Ipv4Addr;
use std::time::Duration;

use intlab_lab::netns::Namespace;

/// Two hosts: the sender's namespace, the receiver's, and the receiver's address.
#[derive(Debug, Clone, Copy)]
pub struct Hosts<'a> {
    /// Where iperf3's client and ping run.
    pub h1: &'a Namespace,
    /// Where iperf3's server runs.
    pub h2: &'a Namespace,
    /// h2's address.
    pub dst: Ipv4Addr,
}

/// Runs `iperf3 ARGS` in h1 against a one-off server in h2 and returns its JSON report.
pub fn iperf3(h: Hosts<'_>, args: &[&str]) -> serde_json::Value {
    let server = std::process::Command::new("ip")
        .args(["netns", "exec", h.h2.name(), "iperf3", "-s", "-1", "-B"])
        .arg(h.dst.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 server starts");
    std::thread::sleep(Duration::from_millis(300));
    let out =
        h.h1.exec("iperf3", &[&["-c", &h.dst.to_string(), "-J"], args].concat())
            .expect("iperf3 client runs");
    let mut server = server;
    let _status = server.wait().expect("iperf3 server ends");
    serde_json::from_slice(&out.stdout).expect("iperf3 -J prints JSON")
}

/// iperf3 UDP at unlimited rate with `len`-byte payloads: (datagrams/s, loss share, Gb/s) as the
/// receiver counted them.
pub fn iperf3_udp(h: Hosts<'_>, len: usize, secs: u64) -> (f64, f64, f64) {
    let j = iperf3(h, &["-u", "-b", "0", "-l", &len.to_string(), "-t", &secs.to_string()]);
    let sum = &j["end"]["sum"];
    let packets = sum["packets"].as_f64().unwrap_or(0.0);
    let lost = sum["lost_packets"].as_f64().unwrap_or(0.0);
    let seconds = sum["seconds"].as_f64().unwrap_or(secs as f64).max(1e-9);
    let received = (packets - lost).max(0.0);
    let gbps = received * len as f64 * 8.0 / seconds / 1e9;
    (received / seconds, lost / packets.max(1.0), gbps)
}

/// iperf3 TCP: Gb/s the receiver got.
pub fn iperf3_tcp(h: Hosts<'_>, secs: u64) -> f64 {
    let j = iperf3(h, &["-t", &secs.to_string()]);
    j["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9
}

/// Mean ping round trip (ms) of 200 pings 10 ms apart.
pub fn ping_ms(h: Hosts<'_>) -> f64 {
    let out =
        h.h1.exec("ping", &["-q", "-c", "200", "-i", "0.01", &h.dst.to_string()])
            .expect("ping runs");
    // "rtt min/avg/max/mdev = 0.031/0.045/0.120/0.010 ms"
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.split_once(" = ")?.1.split('/').nth(1)?.parse().ok())
        .unwrap_or(f64::NAN)
}
