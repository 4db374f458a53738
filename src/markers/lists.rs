//! The pure rules behind the death ring and the topic list (spec 01 §7, spec 05 §2.5, §3).

use std::path::Path;

/// How many deaths `.deaths` keeps (a ring: the oldest is dropped).
pub const DEATHS_KEPT: usize = 16;
/// How many topics `.topic` keeps (the oldest is dropped).
pub const TOPICS_KEPT: usize = 16;

/// Append a death at `now_ms` to the ring, dropping the oldest beyond [`DEATHS_KEPT`].
pub fn push_death(deaths: &mut Vec<u64>, now_ms: u64) {
    deaths.push(now_ms);
    if deaths.len() > DEATHS_KEPT {
        deaths.drain(..deaths.len() - DEATHS_KEPT);
    }
}

/// The crash-loop guard (spec 05 §2 step 5): true when at least `max` of `deaths` (epoch ms)
/// happened within the last `window_ms` before `now_ms`, boundary included. Deaths stamped
/// in the future (clock steps) count as recent. `max == 0` disables the guard.
pub fn crash_looping(deaths: &[u64], now_ms: u64, max: usize, window_ms: u64) -> bool {
    max > 0
        && deaths
            .iter()
            .filter(|&&d| now_ms.saturating_sub(d) <= window_ms)
            .count()
            >= max
}

/// A topic as stored: line breaks become spaces (one topic per line on disk).
pub(super) fn clean_topic(topic: &str) -> String {
    topic.replace(['\r', '\n'], " ")
}

/// Note `topic` in `topics` (oldest first): it moves to (or is added at) the end; beyond
/// [`TOPICS_KEPT`] the oldest are dropped. Line breaks become spaces; an empty or blank
/// topic is ignored. Returns whether the list changed.
pub fn note_topic_in(topics: &mut Vec<String>, topic: &str) -> bool {
    let topic = clean_topic(topic);
    if topic.trim().is_empty() || topics.last() == Some(&topic) {
        return false;
    }
    topics.retain(|t| *t != topic);
    topics.push(topic);
    if topics.len() > TOPICS_KEPT {
        topics.drain(..topics.len() - TOPICS_KEPT);
    }
    true
}

/// The entry names in `dir` (lossy UTF-8); empty when the folder is missing or unreadable.
pub(super) fn dir_names(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::warn!("cannot list {}: {e}", dir.display());
            }
            Vec::new()
        }
    }
}
