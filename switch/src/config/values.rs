//! Values written as text in a configuration: MAC addresses and IPv4 prefixes.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use int_format::ethernet::MacAddress;

/// Parses "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> Option<MacAddress> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(MacAddress(out))
}

/// Parses "198.18.0.0/15" into the network address and length; host bits must be zero.
pub fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or("expected an IPv4 prefix such as 198.18.0.0/24")?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| format!("`{addr}` is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or(format!("`{len}` is not a prefix length 0-32"))?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    if u32::from(addr) & !mask != 0 {
        return Err(format!("{addr}/{len} has host bits set"));
    }
    Ok((addr, len))
}

/// A path relative to the folder of `file` (absolute paths as they are).
pub fn relative_to(file: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_owned();
    }
    file.parent().unwrap_or(Path::new(".")).join(path)
}
