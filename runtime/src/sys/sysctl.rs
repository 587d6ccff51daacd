//! Network sysctls of the calling thread's namespace, written through /proc/sys (the kernel
//! resolves `net.*` against the writing thread's namespace), so no `sysctl` program is needed.

use std::io;
use std::path::PathBuf;

/// Writes `value` to sysctl `key` (dotted, as `net.ipv6.conf.all.disable_ipv6`) and reads it
/// back.
pub fn write(key: &str, value: &str) -> io::Result<()> {
    let path = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")))?;
    let back = std::fs::read_to_string(&path).map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}: {e}")))?;
    if back.trim() != value {
        return Err(io::Error::other(format!(
            "sysctl {key}: wrote {value}, reads back {}",
            back.trim()
        )));
    }
    Ok(())
}
