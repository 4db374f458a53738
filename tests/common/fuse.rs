//! A file system whose reads never return, for tests of what a stalled read costs the
//! daemon: the kernel's real FUSE driver (`/dev/fuse`, mounted with mount(2)) served by a
//! minimal FUSE server on a thread of the test, standing for a FUSE or network mount whose
//! server stopped answering. It holds one regular file, [`StalledMount::FILE`] (4 KiB):
//! looking it up, its attributes, opening it and `statfs` are answered; a `READ` is never
//! answered while the mount lives. Dropping the mount detaches it and closes the server's
//! end, which aborts the connection: every read still waiting fails at once (`ENOTCONN`).
//!
//! Needs root (mount(2) of a `fuse` file system), as the test suite runs here. Wire format:
//! `include/uapi/linux/fuse.h` (protocol 7.31 is answered to INIT).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::libc;

const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const OPEN: u32 = 14;
const READ: u32 = 15;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const INTERRUPT: u32 = 36;
const BATCH_FORGET: u32 = 42;

const ROOT: u64 = 1;
const FILE_NODE: u64 = 2;
const FILE_SIZE: u64 = 4096;
/// `FOPEN_DIRECT_IO`: every read goes to the server (no page cache in between).
const FOPEN_DIRECT_IO: u32 = 1;

/// A mounted file system whose reads stall (see the module doc).
pub struct StalledMount {
    /// The mount point.
    pub dir: PathBuf,
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicUsize>,
    server: Option<JoinHandle<()>>,
}

impl StalledMount {
    /// The file in it whose reads never return.
    pub const FILE: &'static str = "stalled.txt";

    /// Mount one at `dir` (created).
    ///
    /// Panics when the mount cannot be made (not root, no `/dev/fuse`): the test needs it.
    pub fn mount(dir: &Path) -> StalledMount {
        std::fs::create_dir_all(dir).unwrap();
        let fd: OwnedFd = nix::fcntl::open(
            "/dev/fuse",
            nix::fcntl::OFlag::O_RDWR
                | nix::fcntl::OFlag::O_NONBLOCK
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .expect("open /dev/fuse (this test needs the FUSE driver)");
        let opts = format!(
            "fd={},rootmode=40000,user_id={},group_id={}",
            fd.as_raw_fd(),
            nix::unistd::getuid(),
            nix::unistd::getgid()
        );
        let c = |s: &[u8]| CString::new(s).unwrap();
        let (src, target, fstype, data) = (
            c(b"iapeer-stalled"),
            c(dir.as_os_str().as_bytes()),
            c(b"fuse"),
            c(opts.as_bytes()),
        );
        // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        assert_eq!(
            rc,
            0,
            "mount a FUSE file system at {} (this test needs root): {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicUsize::new(0));
        let server = {
            let (stop, reads) = (stop.clone(), reads.clone());
            std::thread::Builder::new()
                .name("stalled-fuse".into())
                .spawn(move || serve(fd, &stop, &reads))
                .unwrap()
        };
        StalledMount {
            dir: dir.to_path_buf(),
            stop,
            reads,
            server: Some(server),
        }
    }

    /// The path of [`StalledMount::FILE`].
    pub fn file(&self) -> PathBuf {
        self.dir.join(Self::FILE)
    }

    /// Reads that have reached the server (and stall there).
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl Drop for StalledMount {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.dir.as_os_str().as_bytes()) {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(server) = self.server.take() {
            // The server closes its end when it returns: the connection is aborted.
            let _ = server.join();
        }
    }
}

fn serve(fd: OwnedFd, stop: &AtomicBool, reads: &AtomicUsize) {
    let mut buf = vec![0u8; 256 * 1024];
    while !stop.load(Ordering::SeqCst) {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 50) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                // Nothing after all, or a request interrupted before it was read.
                Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                // Unmounted.
                _ => return,
            }
        }
        let req = &buf[..n as usize];
        if req.len() < 40 {
            continue;
        }
        let opcode = u32::from_le_bytes(req[4..8].try_into().unwrap());
        let unique = u64::from_le_bytes(req[8..16].try_into().unwrap());
        let node = u64::from_le_bytes(req[16..24].try_into().unwrap());
        let body = &req[40..];
        let answer: Option<Result<Vec<u8>, i32>> = match opcode {
            INIT => Some(Ok(init_out())),
            LOOKUP => {
                let name = body.split(|b| *b == 0).next().unwrap_or_default();
                if node == ROOT && name == StalledMount::FILE.as_bytes() {
                    Some(Ok(entry_out()))
                } else {
                    Some(Err(libc::ENOENT))
                }
            }
            GETATTR => Some(Ok(attr_out(node))),
            OPEN => Some(Ok(open_out())),
            READ => {
                // Never answered: this is the stall.
                reads.fetch_add(1, Ordering::SeqCst);
                None
            }
            STATFS => Some(Ok(statfs_out())),
            RELEASE | FLUSH => Some(Ok(Vec::new())),
            FORGET | BATCH_FORGET | INTERRUPT => None,
            _ => Some(Err(libc::ENOSYS)),
        };
        if let Some(answer) = answer {
            let (error, payload) = match answer {
                Ok(p) => (0i32, p),
                Err(e) => (-e, Vec::new()),
            };
            let mut out = Vec::with_capacity(16 + payload.len());
            out.extend_from_slice(&((16 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&error.to_le_bytes());
            out.extend_from_slice(&unique.to_le_bytes());
            out.extend_from_slice(&payload);
            // SAFETY: `out` is valid for its length.
            unsafe { libc::write(fd.as_raw_fd(), out.as_ptr().cast(), out.len()) };
        }
    }
    // Returning closes the server's end: the connection is aborted.
}

fn init_out() -> Vec<u8> {
    let mut o = Vec::with_capacity(64);
    o.extend_from_slice(&7u32.to_le_bytes()); // major
    o.extend_from_slice(&31u32.to_le_bytes()); // minor
    o.extend_from_slice(&65536u32.to_le_bytes()); // max_readahead
    o.extend_from_slice(&0u32.to_le_bytes()); // flags
    o.extend_from_slice(&16u16.to_le_bytes()); // max_background
    o.extend_from_slice(&12u16.to_le_bytes()); // congestion_threshold
    o.extend_from_slice(&65536u32.to_le_bytes()); // max_write
    o.extend_from_slice(&1u32.to_le_bytes()); // time_gran
    o.resize(64, 0); // max_pages, map_alignment, flags2, unused
    o
}

/// `struct fuse_attr` (88 bytes) of the root folder or the file.
fn attr(node: u64) -> Vec<u8> {
    let (mode, size, nlink) = if node == FILE_NODE {
        (0o100_644u32, FILE_SIZE, 1u32)
    } else {
        (0o040_755u32, 0, 2u32)
    };
    let mut a = Vec::with_capacity(88);
    a.extend_from_slice(&node.to_le_bytes()); // ino
    a.extend_from_slice(&size.to_le_bytes());
    a.extend_from_slice(&size.div_ceil(512).to_le_bytes()); // blocks
    a.extend_from_slice(&[0u8; 24]); // atime, mtime, ctime
    a.extend_from_slice(&[0u8; 12]); // their nanoseconds
    a.extend_from_slice(&mode.to_le_bytes());
    a.extend_from_slice(&nlink.to_le_bytes());
    a.extend_from_slice(&nix::unistd::getuid().as_raw().to_le_bytes());
    a.extend_from_slice(&nix::unistd::getgid().as_raw().to_le_bytes());
    a.extend_from_slice(&0u32.to_le_bytes()); // rdev
    a.extend_from_slice(&4096u32.to_le_bytes()); // blksize
    a.extend_from_slice(&0u32.to_le_bytes()); // flags
    a
}

fn entry_out() -> Vec<u8> {
    let mut e = Vec::with_capacity(128);
    e.extend_from_slice(&FILE_NODE.to_le_bytes()); // nodeid
    e.extend_from_slice(&1u64.to_le_bytes()); // generation
    e.extend_from_slice(&1u64.to_le_bytes()); // entry_valid (s)
    e.extend_from_slice(&1u64.to_le_bytes()); // attr_valid (s)
    e.extend_from_slice(&[0u8; 8]); // their nanoseconds
    e.extend_from_slice(&attr(FILE_NODE));
    e
}

fn attr_out(node: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(104);
    a.extend_from_slice(&1u64.to_le_bytes()); // attr_valid (s)
    a.extend_from_slice(&[0u8; 8]); // attr_valid_nsec, dummy
    a.extend_from_slice(&attr(node));
    a
}

fn open_out() -> Vec<u8> {
    let mut o = Vec::with_capacity(16);
    o.extend_from_slice(&1u64.to_le_bytes()); // fh
    o.extend_from_slice(&FOPEN_DIRECT_IO.to_le_bytes());
    o.extend_from_slice(&0u32.to_le_bytes());
    o
}

fn statfs_out() -> Vec<u8> {
    let mut s = vec![0u8; 80];
    s[40..44].copy_from_slice(&4096u32.to_le_bytes()); // bsize
    s[44..48].copy_from_slice(&255u32.to_le_bytes()); // namelen
    s[48..52].copy_from_slice(&4096u32.to_le_bytes()); // frsize
    s
}
