//! The origin guard (spec 10 §2): an agent answers a human on the channel the human used.
//!
//! When a human (a natural peer) writes to an agent from one runtime (say `web`) and the
//! agent, while that message is unanswered and younger than the arm TTL (48 h), sends to the
//! human on a **different** runtime (say `telegram`), the send is held instead of delivered:
//! kept as `<root>/state/iapeer/origin/pending/og-<8 hex>.json` (attachments already spooled)
//! for the hold TTL (15 min), and the agent is told how to go on (`iapeer confirm-send <id>`,
//! or `--runtime <origin>` to redirect). Same-channel answers, agent-to-agent, human-to-agent,
//! services and an agent's own initiative (the pair answered or expired) pass.
//!
//! The pair state is `<root>/state/iapeer/origin/state.json`:
//! `{"<agent>":{"<human>":{"rt":"web","inboundTs":<ms>,"answeredTs":<ms>?}}}` (personalities,
//! epoch ms); missing or corrupt reads as empty, which never holds anything. Only the router
//! thread writes it, atomically: a human's message arms its pair when it is queued (before
//! the agent can see it), an agent's answer disarms it when accepted. [`decide`] is the pure
//! rule.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::names::Intelligence;
use crate::paths::Paths;

/// One human → agent pair: where the human last wrote from, when, and when the agent
/// answered on that channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pair {
    /// The runtime (channel) the human wrote from.
    pub rt: String,
    /// When that message was accepted, epoch ms.
    pub inbound_ts: u64,
    /// When the agent's answer on that channel was accepted, epoch ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_ts: Option<u64>,
}

/// `state.json`: agent personality → human personality → [`Pair`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OriginState(pub BTreeMap<String, BTreeMap<String, Pair>>);

impl OriginState {
    /// Read `state.json`; missing or not valid JSON of this shape reads as empty.
    pub fn load(paths: &Paths) -> OriginState {
        crate::fsutil::read_json_or_default(&state_file(paths))
    }

    /// Write `state.json` atomically (mode 0600).
    ///
    /// Errors: the write failed (the old file stays).
    pub fn save(&self, paths: &Paths) -> io::Result<()> {
        crate::fsutil::write_json_atomic(&state_file(paths), self, 0o600)
    }

    /// The pair of `agent` and `human`, if any.
    pub fn pair(&self, agent: &str, human: &str) -> Option<&Pair> {
        self.0.get(agent).and_then(|m| m.get(human))
    }
}

/// What an accepted delivery changes in the pair state (spec 10 §2), a pure function of the
/// two natures and the endpoint: a human's message to an agent arms the pair with its
/// runtime; an agent's message to a human on that runtime answers it. `None`: no change.
pub fn note(
    state: &OriginState,
    from: (&str, Intelligence),
    to: (&str, Intelligence),
    endpoint_rt: &str,
    caller_rt: &str,
    now_ms: u64,
) -> Option<OriginState> {
    let mut next = state.clone();
    match (from.1, to.1) {
        (Intelligence::Natural, Intelligence::Artificial) => {
            next.0.entry(to.0.to_string()).or_default().insert(
                from.0.to_string(),
                Pair {
                    rt: caller_rt.to_string(),
                    inbound_ts: now_ms,
                    answered_ts: None,
                },
            );
        }
        (Intelligence::Artificial, Intelligence::Natural) => {
            let pair = next.0.get_mut(from.0)?.get_mut(to.0)?;
            if pair.rt != endpoint_rt || pair.answered_ts.is_some() {
                return None;
            }
            pair.answered_ts = Some(now_ms);
        }
        _ => return None,
    }
    (next != *state).then_some(next)
}

/// The guard's verdict on one send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver it.
    Pass,
    /// Hold it: the human is waiting for an answer on `origin`.
    Hold {
        /// The runtime the human wrote from.
        origin: String,
    },
}

/// The rule (spec 10 §2): an agent's send to a human on `endpoint_rt` is held when the
/// human's last message to that agent came from another runtime, is unanswered and is
/// younger than `arm_ttl`. Everything else passes.
pub fn decide(
    state: &OriginState,
    from: (&str, Intelligence),
    to: (&str, Intelligence),
    endpoint_rt: &str,
    now_ms: u64,
    arm_ttl: Duration,
) -> Verdict {
    if from.1 != Intelligence::Artificial || to.1 != Intelligence::Natural {
        return Verdict::Pass;
    }
    match state.pair(from.0, to.0) {
        Some(p)
            if p.answered_ts.is_none()
                && p.rt != endpoint_rt
                && now_ms.saturating_sub(p.inbound_ts) < arm_ttl.as_millis() as u64 =>
        {
            Verdict::Hold {
                origin: p.rt.clone(),
            }
        }
        _ => Verdict::Pass,
    }
}

/// A held send: everything needed to send it later as its sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// `og-<8 hex>`.
    pub id: String,
    /// The sender's identity (`<runtime>-<personality>`).
    pub from: String,
    /// The human's personality.
    pub to: String,
    /// The runtime the agent addressed.
    pub runtime: String,
    /// The runtime the human wrote from.
    pub origin: String,
    /// The body.
    pub message: String,
    /// The topic, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Absolute paths of the attachments, already spooled into the human's inbox folder.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// When it was held, epoch ms.
    pub created_ms: u64,
    /// When it expires, epoch ms.
    pub expires_ms: u64,
}

impl Hold {
    /// The refusal text the sender gets: the origin, the channel it chose, the hold id, its
    /// expiry and the two ways on.
    pub fn refusal_text(&self, expires_local: &str) -> String {
        format!(
            "held, NOT delivered yet: {to} wrote to you on \"{origin}\" and has no answer there; \
             this message to {to} on \"{rt}\" is held as {id} until {expires_local}. To deliver \
             it as addressed run `iapeer confirm-send {id}`; to send it on \"{origin}\" instead \
             run `iapeer confirm-send {id} --runtime {origin}`",
            to = self.to,
            origin = self.origin,
            rt = self.runtime,
            id = self.id,
        )
    }
}

/// A held send as the original TypeScript iapeer writes it (`HeldSend` of its
/// `src/transport/originGuard.ts`, kept as `pending/<id>.json`; recorded in
/// `tests/fixtures/iapeer-original-0.4.97/`): `{id, caller, personality, runtime?, message,
/// topic?, attachments?, originRt, originTs, intendedRt, createdMs}` — the sender's address
/// in `caller`, the human in `personality`, the channel it was addressed to in
/// `intendedRt`, and no expiry (it applies its pending TTL to `createdMs` when the hold is
/// claimed). Read so that a hold made before the move can still be confirmed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OriginalHold {
    id: String,
    caller: String,
    personality: String,
    message: String,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    attachments: Vec<String>,
    origin_rt: String,
    intended_rt: String,
    created_ms: u64,
}

/// Read a pending hold file: iapeer's [`Hold`], else the original tool's shape, whose expiry
/// is its `createdMs` plus `hold_ttl` (as the original computes it).
///
/// Errors: the text is neither (the error says what iapeer's own shape lacks).
pub fn read_hold(text: &str, hold_ttl: Duration) -> Result<Hold, serde_json::Error> {
    let ours = match serde_json::from_str::<Hold>(text) {
        Ok(h) => return Ok(h),
        Err(e) => e,
    };
    let o: OriginalHold = serde_json::from_str(text).map_err(|_| ours)?;
    Ok(Hold {
        id: o.id,
        from: o.caller,
        to: o.personality,
        runtime: o.intended_rt,
        origin: o.origin_rt,
        message: o.message,
        topic: o.topic,
        attachments: o.attachments,
        created_ms: o.created_ms,
        expires_ms: o
            .created_ms
            .saturating_add(hold_ttl.as_millis().try_into().unwrap_or(u64::MAX)),
    })
}

/// `<root>/state/iapeer/origin/`.
pub fn dir(paths: &Paths) -> PathBuf {
    paths.state_dir().join("origin")
}

fn state_file(paths: &Paths) -> PathBuf {
    dir(paths).join("state.json")
}

fn pending_dir(paths: &Paths) -> PathBuf {
    dir(paths).join("pending")
}

/// `pending/<id>.json`.
pub fn pending_file(paths: &Paths, id: &str) -> PathBuf {
    pending_dir(paths).join(format!("{id}.json"))
}

/// `pending/<id>.claimed`: a hold taken by `confirm-send` and being delivered.
fn claimed_file(paths: &Paths, id: &str) -> PathBuf {
    pending_dir(paths).join(format!("{id}.claimed"))
}

/// Whether `id` has the shape of a hold id (`og-` and 8 lowercase hex digits), so that it
/// can never name a path outside the pending folder.
pub fn valid_id(id: &str) -> bool {
    id.strip_prefix("og-").is_some_and(|h| {
        h.len() == 8
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A new hold id.
pub fn new_id() -> String {
    format!("og-{}", crate::fsutil::random_hex(4))
}

/// Keep `hold` as its pending file (atomically, 0600).
///
/// Errors: the write failed (nothing is kept).
pub fn write_hold(paths: &Paths, hold: &Hold) -> io::Result<()> {
    crate::fsutil::write_json_atomic(&pending_file(paths, &hold.id), hold, 0o600)
}

/// Why a hold cannot be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// No pending hold has this id (never made, confirmed already, expired and removed, or
    /// being confirmed right now).
    Unknown,
    /// The hold belongs to another sender.
    NotYours {
        /// Its sender.
        owner: String,
    },
    /// Its time ran out (it is removed).
    Expired,
    /// The file could not be read or moved.
    Io(String),
}

/// A claimed hold: its file renamed to `.claimed`, so that no second `confirm-send` takes
/// it. [`release`] puts it back (the delivery failed); [`finish`] deletes it (delivered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The `.claimed` file.
    pub path: PathBuf,
}

/// Claim hold `id` for `caller` (`None`: the operator, who may confirm any hold; `Some`: a
/// session's identity, which may confirm only its own) at `now_ms` (`hold_ttl`: the expiry
/// of a hold the original tool wrote, [`read_hold`]). The rename is the claim: of two
/// concurrent claims exactly one succeeds.
pub fn claim(
    paths: &Paths,
    id: &str,
    caller: Option<&str>,
    now_ms: u64,
    hold_ttl: Duration,
) -> Result<(Hold, Claim), ClaimError> {
    if !valid_id(id) {
        return Err(ClaimError::Unknown);
    }
    let pending = pending_file(paths, id);
    let text = match std::fs::read_to_string(&pending) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ClaimError::Unknown),
        Err(e) => return Err(ClaimError::Io(e.to_string())),
    };
    let hold = read_hold(&text, hold_ttl)
        .map_err(|e| ClaimError::Io(format!("{}: {e}", pending.display())))?;
    if let Some(me) = caller {
        if me != hold.from {
            return Err(ClaimError::NotYours { owner: hold.from });
        }
    }
    if now_ms >= hold.expires_ms {
        let _ = std::fs::remove_file(&pending);
        return Err(ClaimError::Expired);
    }
    let claimed = claimed_file(paths, id);
    match std::fs::rename(&pending, &claimed) {
        Ok(()) => Ok((hold, Claim { path: claimed })),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ClaimError::Unknown),
        Err(e) => Err(ClaimError::Io(e.to_string())),
    }
}

/// Put a claimed hold back as pending (its delivery failed): `<id>.claimed`, or the
/// original tool's `<id>.json.claimed`, becomes `<id>.json` again.
pub fn release(claim: &Claim) -> io::Result<()> {
    let back = claim.path.with_extension("");
    let back = if back.extension().is_some_and(|x| x == "json") {
        back
    } else {
        back.with_extension("json")
    };
    std::fs::rename(&claim.path, back)
}

/// Delete a claimed hold (it was delivered).
pub fn finish(claim: &Claim) -> io::Result<()> {
    std::fs::remove_file(&claim.path)
}

/// Remove the pending holds that expired by `now_ms` (`hold_ttl`: the expiry of a hold the
/// original tool wrote, [`read_hold`]); returns the ids removed.
pub fn expire(paths: &Paths, now_ms: u64, hold_ttl: Duration) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(pending_dir(paths)) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in rd.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let expired = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| read_hold(&t, hold_ttl).ok())
            .is_some_and(|h| now_ms >= h.expires_ms);
        if expired && std::fs::remove_file(&path).is_ok() {
            gone.push(stem(&path));
        }
    }
    gone.sort();
    gone
}

/// Put back as pending every hold left claimed by a daemon that died while sending it (at
/// start nothing is being sent, so no claim is live); returns the ids put back.
pub fn recover_claims(paths: &Paths) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(pending_dir(paths)) else {
        return Vec::new();
    };
    let mut back = Vec::new();
    for e in rd.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "claimed")
            && release(&Claim { path: path.clone() }).is_ok()
        {
            back.push(stem(&path));
        }
    }
    back.sort();
    back
}

/// The hold id a pending or claimed file is named for (`og-….json`, `og-….claimed`, the
/// original's `og-….json.claimed`).
fn stem(path: &Path) -> String {
    let name = crate::fsutil::file_name(path);
    name.split('.').next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Duration = Duration::from_secs(48 * 3600);
    /// The hold TTL the tests claim with (applies only to the original tool's holds).
    const TTL: Duration = Duration::from_secs(15 * 60);
    const NAT: Intelligence = Intelligence::Natural;
    const ART: Intelligence = Intelligence::Artificial;
    const ABS: Intelligence = Intelligence::Absent;

    fn armed(rt: &str, at: u64) -> OriginState {
        note(
            &OriginState::default(),
            ("ann", NAT),
            ("bot", ART),
            "claude",
            rt,
            at,
        )
        .unwrap()
    }

    /// Spec 10 §2: a human's message arms the pair with the channel it came from; the
    /// agent's send to that human on another channel is held, on the same channel passes.
    #[test]
    fn another_channel_is_held_the_same_passes() {
        let s = armed("web", 1_000);
        assert_eq!(s.pair("bot", "ann").unwrap().rt, "web");
        assert_eq!(
            decide(&s, ("bot", ART), ("ann", NAT), "telegram", 2_000, H),
            Verdict::Hold {
                origin: "web".into()
            }
        );
        assert_eq!(
            decide(&s, ("bot", ART), ("ann", NAT), "web", 2_000, H),
            Verdict::Pass
        );
    }

    /// Answered on the origin channel (or past the arm TTL), the agent writes on any channel.
    #[test]
    fn an_answered_or_old_pair_passes() {
        let s = armed("web", 1_000);
        let answered = note(&s, ("bot", ART), ("ann", NAT), "web", "claude", 3_000).unwrap();
        assert_eq!(
            answered.pair("bot", "ann").unwrap().answered_ts,
            Some(3_000)
        );
        assert_eq!(
            decide(&answered, ("bot", ART), ("ann", NAT), "telegram", 4_000, H),
            Verdict::Pass
        );
        let ttl = H.as_millis() as u64;
        assert_eq!(
            decide(
                &s,
                ("bot", ART),
                ("ann", NAT),
                "telegram",
                1_000 + ttl - 1,
                H
            ),
            Verdict::Hold {
                origin: "web".into()
            }
        );
        assert_eq!(
            decide(&s, ("bot", ART), ("ann", NAT), "telegram", 1_000 + ttl, H),
            Verdict::Pass
        );
        // An answer on another channel answers nothing; a new human message re-arms.
        assert_eq!(
            note(&s, ("bot", ART), ("ann", NAT), "telegram", "claude", 3_000),
            None
        );
        let rearmed = note(
            &answered,
            ("ann", NAT),
            ("bot", ART),
            "claude",
            "telegram",
            5_000,
        )
        .unwrap();
        assert_eq!(
            decide(&rearmed, ("bot", ART), ("ann", NAT), "web", 6_000, H),
            Verdict::Hold {
                origin: "telegram".into()
            }
        );
    }

    /// Agent-to-agent, human-to-agent, services and a pair never armed pass; nothing but a
    /// human → agent message arms.
    #[test]
    fn only_an_agent_answering_an_armed_human_is_ever_held() {
        let s = armed("web", 1_000);
        for (from, to) in [
            (("bot", ART), ("ann", ART)),
            (("ann", NAT), ("bot", ART)),
            (("bot", ABS), ("ann", NAT)),
            (("other", ART), ("ann", NAT)),
            (("bot", ART), ("zed", NAT)),
        ] {
            assert_eq!(decide(&s, from, to, "telegram", 2_000, H), Verdict::Pass);
        }
        for (from, to) in [
            (("a", ART), ("b", ART)),
            (("t", ABS), ("b", ART)),
            (("ann", NAT), ("zed", NAT)),
        ] {
            assert_eq!(note(&OriginState::default(), from, to, "x", "y", 1), None);
        }
    }

    #[test]
    fn hold_ids_are_og_and_eight_hex_digits() {
        let id = new_id();
        assert!(valid_id(&id), "{id}");
        for bad in [
            "og-1234567",
            "og-123456789",
            "og-1234567G",
            "xx-12345678",
            "og-../../x",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    fn hold(paths: &Paths, from: &str, expires_ms: u64) -> Hold {
        let h = Hold {
            id: new_id(),
            from: from.into(),
            to: "ann".into(),
            runtime: "telegram".into(),
            origin: "web".into(),
            message: "hi".into(),
            topic: None,
            attachments: vec![],
            created_ms: 1,
            expires_ms,
        };
        write_hold(paths, &h).unwrap();
        h
    }

    /// A claim is a rename: the owner (or the operator) takes it once; another session is
    /// told whose it is; a release puts it back, a finish removes it; an expired one goes.
    #[test]
    fn claims_are_exclusive_owned_and_expire() {
        let (_dir, paths) = Paths::temp();
        let h = hold(&paths, "claude-bot", 10_000);
        assert_eq!(
            claim(&paths, &h.id, Some("codex-other"), 5_000, TTL),
            Err(ClaimError::NotYours {
                owner: "claude-bot".into()
            })
        );
        let (got, c) = claim(&paths, &h.id, Some("claude-bot"), 5_000, TTL).unwrap();
        assert_eq!(got, h);
        assert_eq!(
            claim(&paths, &h.id, None, 5_000, TTL),
            Err(ClaimError::Unknown)
        );
        release(&c).unwrap();
        let (_, c) = claim(&paths, &h.id, None, 5_000, TTL).unwrap();
        finish(&c).unwrap();
        assert_eq!(
            claim(&paths, &h.id, None, 5_000, TTL),
            Err(ClaimError::Unknown)
        );
        let old = hold(&paths, "claude-bot", 10_000);
        assert_eq!(
            claim(&paths, &old.id, None, 10_000, TTL),
            Err(ClaimError::Expired)
        );
        assert!(!pending_file(&paths, &old.id).exists());
        // A claim left by a daemon that died mid-send is pending again after a restart.
        let crashed = hold(&paths, "claude-bot", 10_000);
        let (_, _left) = claim(&paths, &crashed.id, None, 5_000, TTL).unwrap();
        assert_eq!(recover_claims(&paths), vec![crashed.id.clone()]);
        assert!(claim(&paths, &crashed.id, None, 5_000, TTL).is_ok());
        let (a, b) = (
            hold(&paths, "claude-bot", 10_000),
            hold(&paths, "claude-bot", 20_000),
        );
        assert_eq!(expire(&paths, 15_000, TTL), vec![a.id.clone()]);
        assert!(pending_file(&paths, &b.id).exists());
        assert_eq!(
            claim(&paths, "og-../../etc", None, 0, TTL),
            Err(ClaimError::Unknown)
        );
    }

    /// A hold the original TypeScript iapeer wrote (its exact file, recorded from its
    /// source) is read as a hold: sender, human, channels, body, and an expiry of its
    /// `createdMs` plus the hold TTL; its claimed file (`<id>.json.claimed`) is put back
    /// as `<id>.json` after a crash (issue 30 item 7).
    #[test]
    fn the_original_tools_holds_are_read_and_recovered() {
        let text = include_str!(
            "../tests/fixtures/iapeer-original-95c837e/origin/pending/og-1a2b3c4d.json"
        );
        let h = read_hold(text, TTL).unwrap();
        assert_eq!(h.id, "og-1a2b3c4d");
        assert_eq!(h.from, "echo-bot");
        assert_eq!(h.to, "ann");
        assert_eq!((h.runtime.as_str(), h.origin.as_str()), ("human", "web"));
        assert_eq!(h.message, "from the original");
        assert_eq!(h.topic.as_deref(), Some("release"));
        assert_eq!(h.created_ms, 1_784_102_283_000);
        assert_eq!(h.expires_ms, 1_784_102_283_000 + 900_000);
        let err = read_hold(r#"{"id":"og-1a2b3c4d"}"#, TTL).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");

        let (_dir, paths) = Paths::temp();
        std::fs::create_dir_all(pending_dir(&paths)).unwrap();
        let claimed = pending_dir(&paths).join("og-1a2b3c4d.json.claimed");
        std::fs::write(&claimed, text).unwrap();
        assert_eq!(recover_claims(&paths), vec!["og-1a2b3c4d".to_string()]);
        assert!(pending_file(&paths, "og-1a2b3c4d").is_file());
        let (got, _) = claim(&paths, "og-1a2b3c4d", Some("echo-bot"), h.created_ms, TTL).unwrap();
        assert_eq!(got, h);
    }

    /// Missing or corrupt state reads as empty (never holds); a saved state reads back.
    #[test]
    fn state_round_trips_and_junk_reads_empty() {
        let (_dir, paths) = Paths::temp();
        assert_eq!(OriginState::load(&paths), OriginState::default());
        let s = armed("web", 7);
        s.save(&paths).unwrap();
        assert_eq!(OriginState::load(&paths), s);
        let text = std::fs::read_to_string(state_file(&paths)).unwrap();
        assert!(text.contains("\"inboundTs\": 7"), "{text}");
        std::fs::write(state_file(&paths), "{not json").unwrap();
        assert_eq!(OriginState::load(&paths), OriginState::default());
    }
}
