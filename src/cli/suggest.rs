//! Did-you-mean (spec 07 "General rules"): the closest known word to a mistyped verb, flag or
//! peer name, by edit distance.

/// The optimal-string-alignment distance between `a` and `b`, in characters: insertions,
/// deletions, substitutions and swaps of two neighbours each cost 1 (`sned` → `send` is 1).
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // rows[i][j]: distance between a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// The candidate `word` most likely meant, if one is close enough: the same word in another
/// case first; else the single nearest within 1 edit for words up to 4 characters, 2 for
/// longer ones. `None` on a tie or when nothing is near.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    let limit = if word.chars().count() <= 4 { 1 } else { 2 };
    let mut best: Option<(usize, &'a str)> = None;
    let mut tie = false;
    for c in candidates {
        if c == word {
            continue;
        }
        let d = if c.to_lowercase() == lower {
            0
        } else {
            distance(&lower, &c.to_lowercase())
        };
        match best {
            Some((bd, _)) if d > bd => {}
            Some((bd, _)) if d == bd => tie = true,
            _ => {
                best = Some((d, c));
                tie = false;
            }
        }
    }
    match best {
        Some((d, c)) if d <= limit && !tie => Some(c),
        _ => None,
    }
}

/// ` — did you mean "<closest>"?`, or nothing.
pub fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates)
        .map(|c| format!(" — did you mean \"{c}\"?"))
        .unwrap_or_default()
}

/// The peer name a daemon's `not-registered` refusal is about: the first quoted word of
/// `peer "<name>" is not …`.
pub fn refused_peer(error: &str) -> Option<&str> {
    let rest = error.strip_prefix("peer \"")?;
    rest.split('"').next().filter(|n| !n.is_empty())
}

/// The daemon's refusal of a stopped endpoint (`"<peer>" (<rt>) is stopped and not accepting
/// messages; start it to resume`) with the command that starts it appended; other texts as
/// they are.
pub fn with_start_command(error: &str) -> String {
    let stopped = error.ends_with("is stopped and not accepting messages; start it to resume");
    let peer = error
        .strip_prefix('"')
        .and_then(|rest| rest.split('"').next())
        .filter(|p| !p.is_empty());
    match (stopped, peer) {
        (true, Some(peer)) => format!("{error}: iapeer start {peer}"),
        _ => error.to_string(),
    }
}

/// What became of `name` when it was renamed or removed (` — it was renamed to "robert"`),
/// else [`typo_hint`]; nothing when the registry cannot be read.
pub fn peer_hint(paths: &crate::paths::Paths, name: &str) -> String {
    match crate::registry::Registry::load(paths) {
        Ok(reg) => match crate::registry::former::fate_of(paths, &reg, name) {
            Some(fate) => fate.clause(),
            None => hint(name, reg.peers.iter().map(|p| p.personality.as_str())),
        },
        Err(_) => String::new(),
    }
}

/// [`hint`] over the registered peers of `paths` (nothing when the registry cannot be read):
/// for a daemon refusal that already says what became of the name.
pub fn typo_hint(paths: &crate::paths::Paths, name: &str) -> String {
    match crate::registry::Registry::load(paths) {
        Ok(reg) => hint(name, reg.peers.iter().map(|p| p.personality.as_str())),
        Err(_) => String::new(),
    }
}

/// The CLI's refusal of a peer name the registry does not hold (code `not-registered`, as the
/// daemon's), with the registered name meant when there is one.
pub fn not_registered(paths: &crate::paths::Paths, name: &str) -> super::CliError {
    super::CliError::Refused(crate::protocol::Failure::new(
        crate::protocol::Code::NotRegistered,
        format!(
            "peer \"{name}\" is not in the iapeer peers index{}",
            peer_hint(paths, name)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits_and_swaps() {
        assert_eq!(distance("send", "send"), 0);
        assert_eq!(distance("sned", "send"), 1);
        assert_eq!(distance("mesage", "message"), 1);
        assert_eq!(distance("bobb", "bob"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("é", "e"), 1, "characters, not bytes");
    }

    #[test]
    fn closest_prefers_case_then_the_unique_nearest_within_the_limit() {
        let verbs = ["send", "list", "stop", "start", "status"];
        assert_eq!(closest("sned", verbs), Some("send"));
        assert_eq!(closest("lsit", verbs), Some("list"));
        assert_eq!(closest("frobnicate", verbs), None);
        assert_eq!(closest("Carol", ["carol", "bob"]), Some("carol"));
        assert_eq!(closest("bobb", ["carol", "bob"]), Some("bob"));
        assert_eq!(closest("message", ["message"]), None, "the word itself");
        // sta → stop? start? a tie at distance 2 is over the limit anyway; "stat" ties
        // between start and status.
        assert_eq!(closest("stat", ["start", "state"]), None);
        assert_eq!(closest("x", ["send"]), None);
    }

    #[test]
    fn the_refused_peer_is_the_first_quoted_name() {
        assert_eq!(
            refused_peer("peer \"carl\" is not in the iapeer peers index"),
            Some("carl")
        );
        assert_eq!(refused_peer("unknown caller \"zed\""), None);
        assert_eq!(refused_peer("peer \"\" is not"), None);
    }

    #[test]
    fn a_stopped_refusal_names_the_start_command() {
        assert_eq!(
            with_start_command(
                "\"bob\" (echo) is stopped and not accepting messages; start it to resume"
            ),
            "\"bob\" (echo) is stopped and not accepting messages; start it to resume: iapeer start bob"
        );
        assert_eq!(
            with_start_command("peer \"bob\" is not live"),
            "peer \"bob\" is not live"
        );
    }

    #[test]
    fn hint_reads_as_a_question() {
        assert_eq!(hint("sned", ["send"]), " — did you mean \"send\"?");
        assert_eq!(hint("zzz", ["send"]), "");
    }
}
