//! Mounts, for the private view a program in a lab host has of `/sys` and `/dev`: a mount
//! namespace of its own, file systems mounted, moved and detached in it, and device nodes.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn checked(r: libc::c_int, what: impl FnOnce() -> String) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{}: {e}", what())))
    }
}

/// Gives the calling thread a mount namespace of its own, whose mounts no longer propagate
/// back to the one it left (as `ip netns exec` makes one): what it mounts, only it and its
/// children see.
pub fn unshare_mounts() -> io::Result<()> {
    // SAFETY: unshare changes only this thread's namespaces.
    checked(unsafe { libc::unshare(libc::CLONE_NEWNS) }, || {
        "unshare(CLONE_NEWNS)".into()
    })?;
    // SAFETY: valid NUL-terminated strings; null source and type are allowed for a change of
    // propagation.
    checked(
        unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_SLAVE | libc::MS_REC,
                std::ptr::null(),
            )
        },
        || "making / a slave mount".into(),
    )
}

/// Mounts a file system of type `fstype` from `source` on `target` with `flags` and `data`.
pub fn mount(source: &str, target: &Path, fstype: &str, flags: libc::c_ulong, data: Option<&str>) -> io::Result<()> {
    let (src, dst) = (CString::new(source)?, c_path(target)?);
    let ty = CString::new(fstype)?;
    let data = data.map(CString::new).transpose()?;
    // SAFETY: valid NUL-terminated strings, alive for the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            ty.as_ptr(),
            flags,
            data.as_ref().map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    checked(r, || format!("mounting {fstype} on {}", target.display()))
}

/// Binds `source` and every mount under it onto `target`.
pub fn bind(source: &Path, target: &Path) -> io::Result<()> {
    let (src, dst) = (c_path(source)?, c_path(target)?);
    // SAFETY: valid NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    checked(r, || format!("binding {} onto {}", source.display(), target.display()))
}

/// Moves the mount at `source`, with what is mounted under it, to `target`.
pub fn move_mount(source: &Path, target: &Path) -> io::Result<()> {
    let (src, dst) = (c_path(source)?, c_path(target)?);
    // SAFETY: valid NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        )
    };
    checked(r, || {
        format!("moving the mount {} to {}", source.display(), target.display())
    })
}

/// Detaches the mount at `target` now; the kernel frees it once nothing uses it. A target
/// that is not a mount point is an error (EINVAL).
pub fn detach(target: &Path) -> io::Result<()> {
    let dst = c_path(target)?;
    // SAFETY: a valid NUL-terminated string.
    checked(unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) }, || {
        format!("detaching {}", target.display())
    })
}

/// Makes the character device node `path` for device `major`:`minor`, readable and writable
/// by everyone.
pub fn make_char_device(path: &Path, major: u32, minor: u32) -> io::Result<()> {
    let p = c_path(path)?;
    // SAFETY: a valid NUL-terminated string.
    let r = unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(major, minor)) };
    checked(r, || format!("making the device node {}", path.display()))
}

/// The FUSE connection of the file system mounted at `dir`: the number its control folder
/// has under `/sys/fs/fuse/connections` (the minor of its anonymous device).
pub fn fuse_connection(dir: &Path) -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let dev = std::fs::metadata(dir)?.dev();
    Ok(libc::minor(dev))
}

/// Aborts FUSE connection `connection`: every request on it fails and its server's reads
/// end, however many mount namespaces still hold a copy of the mount (a program started in
/// a lab host keeps one, made when it entered a namespace of its own). The FUSE control file
/// system is mounted for it, if it is not, in a mount namespace of a short-lived thread of
/// its own, so nothing of it outlives the call.
pub fn abort_fuse_connection(connection: u32) -> io::Result<()> {
    let control = Path::new("/sys/fs/fuse/connections");
    let abort = control.join(connection.to_string()).join("abort");
    if abort.exists() {
        return std::fs::write(&abort, b"1");
    }
    std::thread::Builder::new()
        .name("fuse-abort".into())
        .spawn(move || -> io::Result<()> {
            unshare_mounts()?;
            mount("fusectl", control, "fusectl", 0, None)?;
            std::fs::write(&abort, b"1").map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", abort.display())))
        })?
        .join()
        .map_err(|_| io::Error::other("the thread aborting a FUSE connection panicked"))?
}

/// The mount points directly or indirectly under `dir` in this thread's mount namespace, as
/// /proc/thread-self/mountinfo lists them (in mount order; /proc/self is the main thread's view).
pub fn mounts_under(dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let text = std::fs::read_to_string("/proc/thread-self/mountinfo")?;
    Ok(parse_mount_points(&text)
        .into_iter()
        .filter(|m| m != dir && m.starts_with(dir))
        .collect())
}

/// The mount points of a mountinfo text (its fifth field, octal escapes undone).
fn parse_mount_points(text: &str) -> Vec<std::path::PathBuf> {
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(m))))
        .collect()
}

/// Undoes mountinfo's `\ooo` escapes (of spaces, tabs, newlines and backslashes).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1..i + 4)
                .is_some_and(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes_undone() {
        let text = "22 1 0:21 / /sys rw,relatime shared:7 - sysfs sysfs rw\n\
                    30 25 0:5 / /dev/pts rw - devpts devpts rw\n\
                    31 25 0:6 / /dev/my\\040disk rw - tmpfs tmpfs rw\n";
        let points = parse_mount_points(text);
        assert_eq!(
            points,
            ["/sys", "/dev/pts", "/dev/my disk"]
                .map(std::path::PathBuf::from)
                .to_vec()
        );
    }

    #[test]
    fn a_private_mount_is_seen_only_where_it_was_made() {
        let dir = std::env::temp_dir().join(format!("intlab-mount-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.clone();
        let inside = std::thread::spawn(move || -> io::Result<bool> {
            unshare_mounts()?;
            mount("none", &d, "tmpfs", 0, Some("mode=755"))?;
            std::fs::write(d.join("x"), b"1")?;
            let seen = mounts_under(Path::new("/")).map(|m| m.contains(&d))?;
            detach(&d)?;
            Ok(seen)
        })
        .join()
        .unwrap();
        let outside = dir.join("x").exists();
        std::fs::remove_dir(&dir).unwrap();
        assert!(inside.expect("as root, a thread mounts in its own namespace"));
        assert!(!outside, "the mount was private to the thread");
    }
}
