//! The echo agent's input handling stays linear (issue 12 item 3): typing a 2 MB line without
//! Enter used to redraw the whole composer after every byte (40 MB/s of output at 98 % CPU).

use crate::common;

use common::TestEnv;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LINE: usize = 2 << 20;

#[test]
fn a_2_mb_line_without_enter_costs_linear_output() {
    let env = TestEnv::new();
    let ws = nix::pty::Winsize {
        ws_row: 50,
        ws_col: 220,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&ws), None).expect("openpty");
    let slave: OwnedFd = pty.slave;
    let mut cmd = env.cmd(&["echo-agent"]);
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if nix::libc::setsid() < 0 || nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn the echo agent");
    drop(cmd);
    let master = File::from(pty.master);
    let total = Arc::new(AtomicUsize::new(0));
    let tail = Arc::new(Mutex::new(Vec::<u8>::new()));
    {
        let (mut reader, total, tail) = (master.try_clone().unwrap(), total.clone(), tail.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total.fetch_add(n, Ordering::SeqCst);
                let mut t = tail.lock().unwrap();
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(1 << 20);
                t.drain(..excess);
            }
        });
    }
    let shows = |needle: &str| String::from_utf8_lossy(&tail.lock().unwrap()).contains(needle);
    assert!(
        common::poll(Duration::from_secs(10), || shows("❯ ")),
        "the prompt: not within 10 s"
    );
    let started = Instant::now();
    let before = total.load(Ordering::SeqCst);
    let writer = {
        let mut w = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let chunk = vec![b'a'; 4096];
            for _ in 0..LINE / chunk.len() {
                if w.write_all(&chunk).is_err() {
                    return;
                }
            }
            // Ctrl-C clears the composer; then a short line proves everything was read.
            let _ = w.write_all(b"\x03done\r");
        })
    };
    let outcome = if common::poll(Duration::from_secs(30), || shows("you: done")) {
        Ok(())
    } else {
        Err(format!(
            "the agent had not caught up after 30 s ({} bytes of output so far)",
            total.load(Ordering::SeqCst) - before
        ))
    };
    let _ = child.kill();
    let _ = child.wait();
    outcome.unwrap();
    let _ = writer.join();
    let output = total.load(Ordering::SeqCst) - before;
    eprintln!(
        "typed {LINE} bytes in {:?}; the agent printed {output} bytes",
        started.elapsed()
    );
    assert!(
        output < 8 << 20,
        "{output} bytes of output for {LINE} typed"
    );
}
