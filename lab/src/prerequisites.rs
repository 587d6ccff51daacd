//! What the lab needs of the machine, checked before anything is created: the privileges to
//! build namespaces and the one outside program it runs (iproute2's `ip`).

use std::path::{Path, PathBuf};

/// CAP_NET_ADMIN and CAP_SYS_ADMIN (linux/capability.h): interfaces, and namespaces with their
/// bind mounts.
const CAPS: [(u32, &str); 2] = [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")];

/// Programs the lab runs, with the Debian package that has each.
pub const PROGRAMS: [(&str, &str); 1] = [("ip", "iproute2")];

/// A missing prerequisite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// The process lacks capabilities.
    #[error("the lab builds network namespaces and needs root (or {0}); run it with sudo. Nothing was created")]
    Privileges(String),
    /// A program is not on PATH.
    #[error("the lab needs the `{program}` program, which is not on PATH: install it (`apt-get install {package}`)")]
    Program {
        /// The program.
        program: &'static str,
        /// The package to install.
        package: &'static str,
    },
}

/// Checks privileges and programs.
pub fn check() -> Result<(), Missing> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_caps(&status);
    if !missing.is_empty() {
        return Err(Missing::Privileges(missing.join(" and ")));
    }
    for (program, package) in PROGRAMS {
        if find_program(program).is_none() {
            return Err(Missing::Program { program, package });
        }
    }
    Ok(())
}

/// The capabilities of [`CAPS`] absent from the effective set in a /proc/PID/status text.
fn missing_caps(status: &str) -> Vec<&'static str> {
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    CAPS.iter()
        .filter(|(bit, _)| eff & (1 << bit) == 0)
        .map(|&(_, name)| name)
        .collect()
}

/// Where `program` is on PATH.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_the_effective_set() {
        assert!(missing_caps("Name:\tx\nCapEff:\t000001ffffffffff\n").is_empty());
        assert_eq!(
            missing_caps("CapEff:\t0000000000001000\n"),
            ["CAP_SYS_ADMIN"],
            "only NET_ADMIN (bit 12)"
        );
        assert_eq!(missing_caps("no such line"), ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]);
    }

    #[test]
    fn programs_are_found_on_path_only() {
        assert!(find_program("sh").is_some());
        assert!(find_program("intlab-no-such-program").is_none());
    }
}
