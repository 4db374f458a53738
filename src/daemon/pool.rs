//! A small pool of worker threads for the router's blocking side work (issue 13 item 3: no
//! thread per request). At most `max` workers run; a worker is started only when a job finds
//! none idle, and leaves after [`IDLE_EXIT`] without work, so an idle daemon keeps none.
//! Jobs wait in an unbounded FIFO channel; each runs once.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

/// How long a worker waits for a job before it ends.
pub const IDLE_EXIT: Duration = Duration::from_secs(2);

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Counts {
    workers: usize,
    idle: usize,
}

/// A bounded, self-trimming pool of named worker threads.
pub struct Pool {
    name: &'static str,
    max: usize,
    tx: Sender<Job>,
    rx: Receiver<Job>,
    counts: Arc<Mutex<Counts>>,
}

impl Pool {
    /// A pool of at most `max` (≥ 1) threads named `name`; none is started yet.
    pub fn new(name: &'static str, max: usize) -> Pool {
        let (tx, rx) = crossbeam_channel::unbounded();
        Pool {
            name,
            max: max.max(1),
            tx,
            rx,
            counts: Arc::default(),
        }
    }

    /// Run `job` on a worker, starting one if none is idle and fewer than `max` run.
    ///
    /// Errors: no worker runs and none could be started (the job is dropped unrun).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> io::Result<()> {
        // Cannot fail: this pool holds the receiver.
        let _ = self.tx.send(Box::new(job));
        let mut c = lock(&self.counts);
        if c.idle > 0 || c.workers >= self.max {
            return Ok(());
        }
        let rx = self.rx.clone();
        let counts = Arc::clone(&self.counts);
        let spawned = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || work(&rx, &counts));
        match spawned {
            Ok(_) => {
                c.workers += 1;
                Ok(())
            }
            Err(e) if c.workers == 0 => {
                // Nobody would ever run it: take it back.
                let _ = self.rx.try_recv();
                Err(e)
            }
            // The running workers will get to it.
            Err(_) => Ok(()),
        }
    }

    /// Workers running now.
    #[cfg(test)]
    pub fn workers(&self) -> usize {
        lock(&self.counts).workers
    }
}

fn lock(m: &Mutex<Counts>) -> std::sync::MutexGuard<'_, Counts> {
    // Counts stay valid if a holder panicked.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn work(rx: &Receiver<Job>, counts: &Mutex<Counts>) {
    loop {
        lock(counts).idle += 1;
        let got = rx.recv_timeout(IDLE_EXIT);
        let mut c = lock(counts);
        c.idle -= 1;
        match got {
            Ok(job) => {
                drop(c);
                // A panicking job must not take the worker's count with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            // A job queued while this worker was timing out is still this worker's.
            Err(RecvTimeoutError::Timeout) if !rx.is_empty() => {}
            Err(_) => {
                c.workers -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    #[test]
    fn every_job_runs_once_on_at_most_max_threads_and_idle_workers_leave() {
        let pool = Pool::new("test-pool", 3);
        let ran = Arc::new(AtomicUsize::new(0));
        let busiest = Arc::new(AtomicUsize::new(0));
        let now_running = Arc::new(AtomicUsize::new(0));
        for _ in 0..200 {
            let (ran, busiest, now_running) = (ran.clone(), busiest.clone(), now_running.clone());
            pool.run(move || {
                let n = now_running.fetch_add(1, Ordering::SeqCst) + 1;
                busiest.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
                now_running.fetch_sub(1, Ordering::SeqCst);
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            assert!(pool.workers() <= 3);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while ran.load(Ordering::SeqCst) < 200 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 200);
        assert!(busiest.load(Ordering::SeqCst) <= 3);
        let deadline = Instant::now() + IDLE_EXIT * 5;
        while pool.workers() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(pool.workers(), 0, "idle workers leave");
        // And a later job starts one again.
        let (tx, rx) = crossbeam_channel::bounded(1);
        pool.run(move || tx.send(()).unwrap()).unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_panicking_job_does_not_lose_a_worker() {
        let pool = Pool::new("test-pool", 1);
        pool.run(|| panic!("job panics on purpose")).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(1);
        pool.run(move || tx.send(7).unwrap()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 7);
        assert_eq!(pool.workers(), 1);
    }
}
