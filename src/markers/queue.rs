//! The durable task FIFO of an ephemeral peer (spec 05 §6, spec 01 §7):
//! `state/lifecycle/<id>.queue/NNNNNN`, one JSON file per task
//! (`{"task":"<wire envelope>","topic":"…"}`), numbered from `000001` in arrival order.
//!
//! A task is written to a temp file first (mode 0600, synced) and then hard-linked to the next
//! free number, retrying on `EEXIST`, so a reader never sees a part of a task and two writers
//! never share a number. The folder is 0700. The head is the lowest number; a head that cannot
//! be read as a task is renamed `NNNNNN.bad` so it cannot wedge the queue.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;

/// One queued task, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The message's wire envelope (spec 03 §2).
    pub task: String,
    /// The message's topic, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// The head of a queue: the file it came from and the task in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadTask {
    /// `<queue>/NNNNNN`; remove it with [`TaskQueue::remove`] once the task was delivered.
    pub path: PathBuf,
    /// The task.
    pub task: Task,
}

/// One ephemeral peer's queue folder.
#[derive(Debug, Clone)]
pub struct TaskQueue {
    dir: PathBuf,
}

/// Most attempts at finding a free number before [`TaskQueue::append`] gives up.
const LINK_ATTEMPTS: usize = 1000;

impl TaskQueue {
    /// The queue in `dir` (usually `Markers::queue_dir`); nothing is created until a task is
    /// appended.
    pub fn new(dir: PathBuf) -> TaskQueue {
        TaskQueue { dir }
    }

    /// Append `task` durably. Returns the depth after the append (this task included).
    ///
    /// Errors: the folder cannot be created or written, or no free number was found.
    pub fn append(&self, task: &Task) -> io::Result<u64> {
        fsutil::ensure_dir(&self.dir)?;
        let tmp = fsutil::temp_path(&self.dir, ".task.tmp-");
        let linked = self.write_then_link(&tmp, task);
        let _ = fs::remove_file(&tmp);
        linked?;
        Ok(self.numbers().len() as u64)
    }

    fn write_then_link(&self, tmp: &Path, task: &Task) -> io::Result<()> {
        let bytes = serde_json::to_vec(task).map_err(io::Error::other)?;
        let mut f = fsutil::create_new(tmp, fsutil::MODE_PRIVATE)?;
        f.write_all(&bytes)?;
        f.set_permissions(fs::Permissions::from_mode(fsutil::MODE_PRIVATE))?;
        f.sync_all()?;
        drop(f);
        let mut next = self.numbers().last().map_or(1, |n| n + 1);
        for _ in 0..LINK_ATTEMPTS {
            match fs::hard_link(tmp, self.dir.join(file_name(next))) {
                Ok(()) => {
                    if let Ok(d) = fs::File::open(&self.dir) {
                        let _ = d.sync_all();
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => next += 1,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "no free task number in {} after {LINK_ATTEMPTS} attempts",
            self.dir.display()
        )))
    }

    /// Tasks waiting (files named by a number; `.bad` and temp files are not counted).
    pub fn depth(&self) -> u64 {
        self.numbers().len() as u64
    }

    /// The oldest task. A file that cannot be read as a task is renamed `NNNNNN.bad` (logged)
    /// and the next one is tried; `None` when the queue is empty or absent.
    pub fn head(&self) -> Option<HeadTask> {
        for n in self.numbers() {
            let path = self.dir.join(file_name(n));
            let parsed = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Task>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(task) => return Some(HeadTask { path, task }),
                Err(e) if !path.exists() => log::debug!("task {} vanished: {e}", path.display()),
                Err(e) => {
                    let bad = self.dir.join(format!("{}.bad", file_name(n)));
                    log::warn!(
                        "ephemeral queue: {} is not a task ({e}); moved aside to {}",
                        path.display(),
                        bad.display()
                    );
                    if let Err(e) = fs::rename(&path, &bad) {
                        log::warn!("cannot move {} aside: {e}", path.display());
                        return None;
                    }
                }
            }
        }
        None
    }

    /// Remove a delivered head (absent is fine).
    pub fn remove(&self, path: &Path) -> io::Result<()> {
        fsutil::remove_if_exists(path)
    }

    /// The task numbers present, ascending.
    fn numbers(&self) -> Vec<u64> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut numbers: Vec<u64> = entries
            .filter_map(Result::ok)
            .filter_map(|e| task_number(&e.file_name().to_string_lossy()))
            .collect();
        numbers.sort_unstable();
        numbers
    }
}

/// `000042` for 42 (six digits, wider past 999999).
fn file_name(n: u64) -> String {
    format!("{n:06}")
}

/// The number of a task file name: at least six ASCII digits and nothing else.
fn task_number(name: &str) -> Option<u64> {
    (name.len() >= 6 && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn task(body: &str) -> Task {
        Task {
            task: format!("<iap from=\"a\"><msg>{body}</msg></iap>"),
            topic: Some("t".into()),
        }
    }

    fn queue() -> (tempfile::TempDir, TaskQueue) {
        let dir = tempfile::tempdir().unwrap();
        let q = TaskQueue::new(dir.path().join("claude-w.queue"));
        (dir, q)
    }

    /// Spec 05 §6: files are numbered six digits from 000001 in arrival order, the folder is
    /// 0700 and the files 0600, and the head is the oldest task until it is removed.
    #[test]
    fn fifo_order_names_and_modes() {
        let (_d, q) = queue();
        assert_eq!(q.depth(), 0);
        assert!(q.head().is_none());
        for (i, b) in ["one", "two", "three"].iter().enumerate() {
            assert_eq!(q.append(&task(b)).unwrap(), i as u64 + 1);
        }
        let mut names: Vec<String> = fs::read_dir(&q.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["000001", "000002", "000003"]);
        assert_eq!(fs::metadata(&q.dir).unwrap().mode() & 0o777, 0o700);
        let f = fs::metadata(q.dir.join("000001")).unwrap();
        assert_eq!(f.mode() & 0o777, 0o600);
        let text = fs::read_to_string(q.dir.join("000001")).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"task": task("one").task, "topic": "t"})
        );
        for b in ["one", "two", "three"] {
            let head = q.head().unwrap();
            assert_eq!(head.task, task(b));
            q.remove(&head.path).unwrap();
        }
        assert!(q.head().is_none());
        assert_eq!(q.depth(), 0);
    }

    /// A number is never reused while a later one exists: appends after a removal go after
    /// the newest task, so the order stays FIFO.
    #[test]
    fn appends_after_a_removal_stay_behind_the_newest() {
        let (_d, q) = queue();
        q.append(&task("a")).unwrap();
        q.append(&task("b")).unwrap();
        q.remove(&q.head().unwrap().path).unwrap();
        q.append(&task("c")).unwrap();
        assert!(q.dir.join("000003").exists());
        assert_eq!(q.head().unwrap().task, task("b"));
    }

    /// Spec 05 §6: a head that cannot be parsed is moved aside (`.bad`) and the next task is
    /// the head; `.bad` and temp files do not count in the depth.
    #[test]
    fn an_unreadable_head_is_moved_aside() {
        let (_d, q) = queue();
        q.append(&task("a")).unwrap();
        q.append(&task("b")).unwrap();
        fs::write(q.dir.join("000001"), b"{not json").unwrap();
        fs::write(q.dir.join(".task.tmp-1-x"), b"partial").unwrap();
        assert_eq!(q.head().unwrap().task, task("b"));
        assert!(q.dir.join("000001.bad").exists());
        assert_eq!(q.depth(), 1);
    }

    /// Concurrent writers never share a number and lose nothing.
    #[test]
    fn concurrent_appends_get_distinct_numbers() {
        let (_d, q) = queue();
        crate::testkit::at_once(8, 25, |t, i| {
            q.append(&task(&format!("{t}-{i}"))).unwrap();
        });
        assert_eq!(q.depth(), 200);
        let mut seen = std::collections::HashSet::new();
        while let Some(h) = q.head() {
            assert!(seen.insert(h.task.task.clone()), "duplicate {h:?}");
            q.remove(&h.path).unwrap();
        }
        assert_eq!(seen.len(), 200);
    }

    #[test]
    fn task_numbers() {
        assert_eq!(task_number("000001"), Some(1));
        assert_eq!(task_number("1234567"), Some(1234567));
        for bad in ["00001", "000001.bad", ".task.tmp-1", "abcdef", ""] {
            assert_eq!(task_number(bad), None, "{bad}");
        }
    }
}
