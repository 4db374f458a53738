//! The router's side of the approval broker (spec 10 §4): a gated session's permission hook
//! asks (`approval-request`, held until decided), a human lists, approves or denies; a
//! check every [`SWEEP`] while anything is pending denies the requests past their deadline
//! and those whose hook went away; a session's end and shutdown deny its requests. Each step
//! logs an `ev=approval-…` line. The state and its rules are [`super::broker`].
//!
//! A booting session stuck on a menu its adapter has no answer for asks the same way
//! ([`Router::on_boot_menu`], tool `dialog`): `approve` confirms the menu's default option,
//! anything else — `deny`, a timeout, shutdown — ends the boot at once with the reason
//! instead of waiting out the boot deadline (spec 10 §4, default mode).
//!
//! So does a tool's permission prompt on a live agent's screen in the default bypass mode
//! ([`Router::on_prompt_opened`], issue 32 item 4): Claude Code still asks for a command a
//! project `permissions.ask` rule names or a hook answers `ask` for. `approve` keys in its
//! `Yes` (or the option named), `deny` and every automatic deny its `No`, with the
//! runtime's own keys ([`SessionCmd::AnswerPrompt`]); a prompt that closes on its screen
//! first (someone attached answered it, the turn ended) closes its request. A gated
//! session's prompt is its hook's to ask, never asked twice.
//!
//! Every pending request is also a notice (spec 10 §3, kind `approval`): `list` marks the
//! peer `(approval)`, and the notice goes with the request.
//!
//! `approve`/`deny` of a prompt on a screen answers once the session has said what became
//! of the answer (issue 27, [`super::confirm`]): taken (its prompt closed after the keys,
//! or the runtime's API took it), asked again as a new request (with the session's reason),
//! gone from the screen before it went in, the session ended — or, after
//! [`APPROVAL_CONFIRM_WAIT`] without word, that it is unconfirmed. A hook's or a boot
//! dialog's answer is handed over at once and says so.

use std::time::Duration;

use super::broker::{self, AutoDeny, Pending, Waiter};
use super::confirm::{Settled, Waiting};
use super::ops::refusal;
use super::{Router, Timer};
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::{
    ApprovalDone, ApprovalInfo, ApprovalOutcome, ApprovalVerdict, ApprovalsReply, Code, Reply,
    APPROVAL_CONFIRM_WAIT,
};
use crate::session::handle::SessionCmd;
use crate::session::prompts::Closing;

/// How often pending requests are checked for their deadline and for a hook that left.
pub(crate) const SWEEP: Duration = Duration::from_secs(1);

/// The longest long poll of `approvals` (`wait_ms` is clamped to it).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(300);

/// The reason a human's `deny` without one gives the model.
const DENIED_BY_HUMAN: &str = "denied by a human";

pub(crate) use crate::protocol::DIALOG_TOOL;

/// What a held message waits for when the prompt's request is not known yet (a gated
/// session's hook has not asked yet).
const SOME_APPROVAL: &str =
    "an approval of a permission prompt on the agent's screen (iapeer approvals)";

/// Who waits for a decision.
pub(crate) enum Asker {
    /// A permission hook's held `approval-request` answer.
    Hook(ReplyTo),
    /// A booting session showing a menu its adapter does not know: approve confirms
    /// `default` (the option under the marker).
    BootMenu {
        /// The option labels, top to bottom.
        options: Vec<String>,
        /// Index of the one chosen on an approve without an option (the dialog's selected).
        default: usize,
    },
    /// A tool's permission prompt on a live session's screen: approve keys in option
    /// `approve` (or the one named), deny option `deny`.
    Screen {
        /// The session it is on.
        session: u64,
        /// The prompt's number in that session.
        n: u64,
        /// The option labels, top to bottom.
        options: Vec<String>,
        /// The option that lets the tool run once (or the one a human named).
        approve: usize,
        /// The option that refuses it.
        deny: usize,
    },
}

/// A prompt on a screen: the identity, its session and the prompt's number there.
type OnScreen = (Identity, u64, u64);

/// An `approve`/`deny` held for the session's word ([`super::confirm`]): the reply so far
/// (its `outcome` filled in when known) and where it goes.
pub(crate) type Held = (ApprovalDone, ReplyTo);

impl Asker {
    /// The asker is gone: a hook whose connection closed (a session's end is handled by
    /// [`Router::deny_approvals_of`]).
    fn abandoned(&self) -> bool {
        match self {
            Asker::Hook(r) => r.abandoned(),
            Asker::BootMenu { .. } | Asker::Screen { .. } => false,
        }
    }
}

impl Router {
    /// `approval-request`: hold `reply` until a human decides. Refused when `token` is not
    /// the live session of `identity`.
    pub(crate) fn op_approval_request(
        &mut self,
        identity: &str,
        token: &str,
        tool: String,
        summary: String,
        reply: ReplyTo,
    ) {
        let Some(ident) = self.live.by_token(token).cloned() else {
            return reply.finish(Reply::from(not_live(identity)));
        };
        if ident.to_string() != identity {
            return reply.finish(Reply::from(not_live(identity)));
        }
        let id = self.approvals.free_id(broker::new_id);
        self.open_approval(id, ident, tool, summary, Asker::Hook(reply), |ev| ev);
    }

    /// A booting session of `identity` shows a menu its adapter does not know
    /// ([`crate::session::handle::EventKind::BootMenu`]): put it to a human.
    pub(crate) fn on_boot_menu(
        &mut self,
        identity: &Identity,
        options: Vec<String>,
        cursor: usize,
        question: String,
    ) {
        let Some(default) = options.get(cursor).cloned() else {
            return;
        };
        let default_index = cursor;
        let listed: Vec<String> = options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mark = if i == cursor { " (default)" } else { "" };
                format!("{}. {o}{mark}", i + 1)
            })
            .collect();
        let id = self.approvals.free_id(broker::new_id);
        let summary = format!(
            "a dialog at boot iapeer has no answer for: \"{question}\" — {} — approve chooses \
             \"{default}\" (another: iapeer approve {id} <number|label>), deny ends the boot",
            listed.join(" · ")
        );
        let waiting = format!("waiting for a human: iapeer approve {id}");
        let menu = Asker::BootMenu {
            options,
            default: default_index,
        };
        let tool = DIALOG_TOOL.to_string();
        self.open_approval(id, identity.clone(), tool, summary, menu, |ev| ev);
        self.progress_to_waiters(identity, &waiting);
    }

    /// A tool's permission prompt `n` opened on the screen of `identity`'s session
    /// `session` ([`crate::session::handle::EventKind::PromptOpened`]): put it to a human,
    /// unless the session is gated (`hooked`: its hook asks the same question).
    pub(crate) fn on_prompt_opened(
        &mut self,
        identity: &Identity,
        session: u64,
        n: u64,
        prompt: crate::adapter::PermissionPrompt,
        hooked: bool,
    ) {
        if hooked {
            return;
        }
        let id = self.approvals.free_id(broker::new_id);
        let screen = Asker::Screen {
            session,
            n,
            options: prompt.options,
            approve: prompt.approve,
            deny: prompt.deny,
        };
        let reason = prompt.reason;
        self.open_approval(
            id.clone(),
            identity.clone(),
            prompt.tool,
            prompt.summary,
            screen,
            |ev| {
                ev.field("source", "screen")
                    .opt("reason", (!reason.is_empty()).then_some(reason.as_str()))
            },
        );
        // The request asked again for an answer its prompt did not take.
        if let Some(settled) = self.confirming.opened(identity, session, &id) {
            finish_confirming(settled);
        }
    }

    /// Permission prompt `n` of `identity`'s session `session` is gone from its screen
    /// (`how`): a request still pending for it was answered there (or its turn ended), and is
    /// closed; an `approve`/`deny` waiting for it is told what became of its answer (one
    /// asked again waits for the new request, [`Router::on_prompt_opened`]).
    pub(crate) fn on_prompt_closed(
        &mut self,
        identity: &Identity,
        session: u64,
        n: u64,
        how: Closing,
    ) {
        if let Some(settled) = self.confirming.closed(identity, session, n, &how) {
            finish_confirming(settled);
        }
        let gone = self.approvals.take_where(|p| {
            &p.identity == identity
                && matches!(p.reply, Asker::Screen { session: s, n: m, .. } if s == session && m == n)
        });
        for p in gone {
            self.close_approval(
                &p,
                "the prompt closed on its screen: answered there, or its turn ended",
            );
        }
    }

    /// What a message held behind a permission prompt of `identity` waits for: the
    /// newest pending request of that session, with the verbs that answer it.
    pub(crate) fn awaited_approval(&self, identity: &Identity) -> String {
        self.approvals
            .list()
            .into_iter()
            .rev()
            .find(|p| &p.identity == identity && p.tool != DIALOG_TOOL)
            .map_or_else(
                || SOME_APPROVAL.to_string(),
                |p| {
                    format!(
                        "{} (iapeer approve {id} | iapeer deny {id})",
                        crate::session::hold::awaited_approval(&p.tool, &p.summary),
                        id = p.id
                    )
                },
            )
    }

    /// Put request `id` of `identity` (its `tool` and `summary`, answered through `reply`)
    /// on the board: `ev=approval-requested` (with what `more` adds), pending until its
    /// deadline, and a notice (kind `approval`) for as long.
    fn open_approval(
        &mut self,
        id: String,
        identity: Identity,
        tool: String,
        summary: String,
        reply: Asker,
        more: impl FnOnce(Event) -> Event,
    ) {
        let created_ms = self.now.ms;
        let deadline_ms = created_ms + self.cfg.approval_timeout.as_millis() as u64;
        let ev = Event::new("approval-requested")
            .field("id", &id)
            .field("identity", identity.to_string())
            .field("tool", &tool)
            .field("summary", &summary)
            .field(
                "timeout_ms",
                self.cfg.approval_timeout.as_millis().to_string(),
            );
        self.lifecycle(more(ev));
        let p = Pending {
            id,
            identity,
            tool,
            summary,
            created_ms,
            deadline_ms,
            reply,
        };
        self.raise_approval_notice(&p.identity, &p.id, &p.tool, &p.summary, p.deadline_ms);
        self.approvals.open(p);
        self.answer_waiters();
        self.arm_sweep();
    }

    /// A request taken off the board without an answer (its prompt went away): logged,
    /// and its notice cleared.
    fn close_approval(&mut self, p: &Pending<Asker>, reason: &str) {
        self.lifecycle(
            Event::new("approval-closed")
                .field("id", &p.id)
                .field("identity", p.identity.to_string())
                .field("tool", &p.tool)
                .field("reason", reason),
        );
        self.clear_approval_notice(&p.identity, &p.id);
    }

    /// The session of `identity` became ready: a boot menu still asked about was answered
    /// on its screen (by someone attached); its request is closed.
    pub(crate) fn close_boot_menus_of(&mut self, identity: &Identity) {
        let menus = self
            .approvals
            .take_where(|p| &p.identity == identity && matches!(p.reply, Asker::BootMenu { .. }));
        for p in menus {
            self.close_approval(&p, "the session went on: answered on its screen");
        }
    }

    /// `approvals` with `wait_ms`: answer now when a prompt asked after `since_ms` is
    /// pending (or without `wait_ms`), else hold the answer until one is or `wait_ms` (at
    /// most [`MAX_WAIT`]) has passed.
    pub(crate) fn op_approvals_wait(
        &mut self,
        wait_ms: Option<u64>,
        since_ms: u64,
        reply: ReplyTo,
    ) {
        self.sweep_approvals();
        match wait_ms.filter(|w| *w > 0) {
            Some(w) if !self.approvals.has_newer(since_ms) => {
                let w = w.min(MAX_WAIT.as_millis() as u64);
                self.approvals.wait(Waiter {
                    since_ms,
                    deadline_ms: self.now.ms + w,
                    reply,
                });
                self.arm_sweep();
                crate::config::test_events::emit("approvals-wait");
            }
            _ => reply.finish(self.op_approvals()),
        }
    }

    /// Arm the sweep timer when it is the first thing to wait for the clock.
    fn arm_sweep(&mut self) {
        if !self.sweep_armed && (self.approvals.needs_sweep() || !self.confirming.is_empty()) {
            self.sweep_armed = true;
            self.set_timer(self.now.at + SWEEP, Timer::ApprovalSweep);
        }
    }

    /// Answer the long polls that are due.
    fn answer_waiters(&mut self) {
        let due = self.approvals.due_waiters(self.now.ms, ReplyTo::abandoned);
        if due.is_empty() {
            return;
        }
        let list = self.op_approvals_now();
        for w in due {
            w.reply.finish(list.clone());
        }
    }

    /// `approvals`: the pending requests, oldest first.
    pub(crate) fn op_approvals(&mut self) -> ApprovalsReply {
        self.sweep_approvals();
        self.op_approvals_now()
    }

    fn op_approvals_now(&self) -> ApprovalsReply {
        ApprovalsReply {
            approvals: self
                .approvals
                .list()
                .into_iter()
                .map(|p| ApprovalInfo {
                    id: p.id.clone(),
                    identity: p.identity.to_string(),
                    personality: p.identity.personality.clone(),
                    runtime: p.identity.runtime.clone(),
                    tool: p.tool.clone(),
                    summary: p.summary.clone(),
                    created_ms: p.created_ms,
                    deadline_ms: p.deadline_ms,
                    options: match &p.reply {
                        Asker::BootMenu { options, .. } | Asker::Screen { options, .. } => {
                            Some(options.clone())
                        }
                        Asker::Hook(_) => None,
                    },
                    default_option: match &p.reply {
                        Asker::BootMenu { default, .. } => Some(*default),
                        Asker::Screen { approve, .. } => Some(*approve),
                        Asker::Hook(_) => None,
                    },
                })
                .collect(),
        }
    }

    /// `approve` (`allow`) or `deny`: answer the request `id` and its asker, then `reply`
    /// ([`Router::decide_approval`]) with what became of the answer: at once for a hook or a
    /// boot dialog, once the session says for a prompt on its screen ([`super::confirm`]).
    pub(crate) fn op_decide_approval(
        &mut self,
        id: &str,
        allow: bool,
        reason: Option<String>,
        option: Option<String>,
        reply: ReplyTo,
    ) {
        let (mut done, on_screen) = match self.decide_approval(id, allow, reason, option) {
            Ok(d) => d,
            Err(r) => return reply.finish(r),
        };
        let Some((identity, session, n)) = on_screen else {
            return reply.finish(done);
        };
        if self.live.get(&identity).is_none_or(|s| s.id != session) {
            done.with(ApprovalOutcome::SessionEnded);
            return reply.finish(done);
        }
        let span = (
            self.now.ms,
            self.now.ms + APPROVAL_CONFIRM_WAIT.as_millis() as u64,
        );
        self.confirming
            .wait(Waiting::new(identity, session, n, span, (done, reply)));
        self.arm_sweep();
    }

    /// Answer the request `id` (`allow`, `reason`, `option` as [`Router::op_decide_approval`]
    /// takes them): the reply, its outcome filled in for a hook or a boot dialog; with the
    /// session and prompt number whose word it waits for when it is a prompt on a screen.
    /// `option` (approve only) picks a boot dialog's option by 1-based number or label.
    fn decide_approval(
        &mut self,
        id: &str,
        allow: bool,
        reason: Option<String>,
        option: Option<String>,
    ) -> Result<(ApprovalDone, Option<OnScreen>), Refusal> {
        self.sweep_approvals();
        let verb = if allow { "approve" } else { "deny" };
        let Some(mut p) = self.approvals.take(id) else {
            let shape = if broker::valid_id(id) {
                "is not pending (answered, denied when its time ran out, or never asked)"
            } else {
                "is not an approval id (ap- and 8 hex digits)"
            };
            return Err(refusal(
                Code::InvalidArgument,
                format!(
                    "cannot {verb} \"{id}\": it {shape} — iapeer approvals lists the pending ones"
                ),
            ));
        };
        if let Some(wanted) = option.filter(|o| !o.trim().is_empty()) {
            let chosen = match &p.reply {
                Asker::BootMenu { options, .. } => choose(options, &wanted),
                // Approving with the prompt's refusal would log a deny as an approve.
                Asker::Screen { options, deny, .. } => choose(options, &wanted).and_then(|i| {
                    if i == *deny {
                        Err(format!(
                            "option {} ({}) refuses the tool: iapeer deny {id}",
                            i + 1,
                            options[i]
                        ))
                    } else {
                        Ok(i)
                    }
                }),
                Asker::Hook(_) => Err(format!(
                    "cannot approve \"{id}\" with an option: it is a tool's permission prompt, \
                     which is approved or denied as it is"
                )),
            };
            match chosen {
                Ok(i) => match &mut p.reply {
                    Asker::BootMenu { default, .. } => *default = i,
                    Asker::Screen { approve, .. } => *approve = i,
                    Asker::Hook(_) => {}
                },
                Err(e) => {
                    self.approvals.open(p);
                    return Err(refusal(Code::InvalidArgument, e));
                }
            }
        }
        let reason = (!allow).then(|| {
            reason
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| DENIED_BY_HUMAN.to_string())
        });
        let mut done = ApprovalDone {
            id: p.id.clone(),
            decision: verb.to_string(),
            identity: p.identity.to_string(),
            outcome: None,
            detail: String::new(),
        };
        let on_screen = match &p.reply {
            Asker::Screen { session, n, .. } => Some((p.identity.clone(), *session, *n)),
            Asker::Hook(_) => {
                done.with(ApprovalOutcome::Handed { to: "hook".into() });
                None
            }
            Asker::BootMenu { .. } => {
                done.with(ApprovalOutcome::Handed {
                    to: "boot-dialog".into(),
                });
                None
            }
        };
        self.answer_approval(p, allow, reason, if allow { "approved" } else { "denied" });
        Ok((done, on_screen))
    }

    /// The sweep timer: deny what is past its deadline or whose hook left; re-armed while
    /// anything is pending.
    pub(crate) fn on_approval_sweep(&mut self) {
        self.sweep_armed = false;
        self.sweep_approvals();
        self.arm_sweep();
    }

    /// Deny every request of a session that ended.
    pub(crate) fn deny_approvals_of(&mut self, identity: &Identity) {
        for p in self.approvals.of_identity(identity) {
            self.auto_deny(p, AutoDeny::SessionEnded);
        }
        self.confirming
            .ended(identity)
            .into_iter()
            .for_each(finish_confirming);
    }

    /// Deny every request and answer every long poll: the daemon is stopping.
    pub(crate) fn deny_all_approvals(&mut self) {
        for p in self.approvals.drain() {
            self.auto_deny(p, AutoDeny::Shutdown);
        }
        self.confirming
            .drain()
            .into_iter()
            .for_each(finish_confirming);
        let list = self.op_approvals_now();
        for w in self.approvals.drain_waiters() {
            w.reply.finish(list.clone());
        }
    }

    fn sweep_approvals(&mut self) {
        for p in self.approvals.abandoned(Asker::abandoned) {
            self.auto_deny(p, AutoDeny::Disconnected);
        }
        for p in self.approvals.expired(self.now.ms) {
            self.auto_deny(p, AutoDeny::Timeout);
        }
        // A requester that left (Ctrl-C) is not answered.
        self.confirming.forget(|(_, reply)| reply.abandoned());
        self.confirming
            .due(self.now.ms)
            .into_iter()
            .for_each(finish_confirming);
        self.answer_waiters();
    }

    fn auto_deny(&mut self, p: Pending<Asker>, why: AutoDeny) {
        self.answer_approval(p, false, Some(why.message().to_string()), why.as_str());
    }

    fn answer_approval(
        &mut self,
        p: Pending<Asker>,
        allow: bool,
        reason: Option<String>,
        how: &str,
    ) {
        let ev = Event::new(if allow {
            "approval-approved"
        } else {
            "approval-denied"
        })
        .field("id", &p.id)
        .field("identity", p.identity.to_string())
        .field("tool", &p.tool)
        .field("by", how)
        .field(
            "waited_ms",
            self.now.ms.saturating_sub(p.created_ms).to_string(),
        )
        .opt("reason", reason.as_deref())
        .opt(
            "option",
            match &p.reply {
                Asker::BootMenu {
                    options,
                    default: chosen,
                }
                | Asker::Screen {
                    options,
                    approve: chosen,
                    ..
                } if allow => Some(format!("{}. {}", chosen + 1, options[*chosen])),
                _ => None,
            },
        );
        self.lifecycle(ev);
        self.clear_approval_notice(&p.identity, &p.id);
        match p.reply {
            Asker::Hook(reply) => reply.finish(ApprovalVerdict {
                id: p.id,
                allow,
                reason,
            }),
            Asker::BootMenu { options, default } => {
                let answer = if allow {
                    Ok((default, options))
                } else {
                    Err(format!(
                        "boot stopped at a dialog iapeer does not know ({}): {}",
                        p.id,
                        reason.unwrap_or_else(|| DENIED_BY_HUMAN.to_string())
                    ))
                };
                if let Some(s) = self.live.get(&p.identity) {
                    s.handle.send(SessionCmd::AnswerBootMenu(answer));
                }
            }
            Asker::Screen {
                session,
                n,
                approve,
                deny,
                ..
            } => {
                let choice = if allow { approve } else { deny };
                if let Some(s) = self.live.get(&p.identity).filter(|s| s.id == session) {
                    s.handle.send(SessionCmd::AnswerPrompt { n, choice });
                }
            }
        }
    }
}

impl ApprovalDone {
    /// Fill in `outcome` and the line that says it.
    fn with(&mut self, outcome: ApprovalOutcome) {
        self.detail = outcome.describe(&self.decision);
        self.outcome = Some(outcome);
    }
}

/// Answer a held `approve`/`deny` with what became of its answer, and log it.
fn finish_confirming(((mut done, reply), outcome): Settled<Held>) {
    done.with(outcome);
    log::info!(
        "approval {} of {}: {}: {}",
        done.id,
        done.identity,
        done.decision,
        done.detail
    );
    reply.finish(done);
}

/// The index of `wanted` among a boot dialog's `options`: a 1-based number, or a label
/// (compared as the dialog reader compares them). Errors: neither, listing the options.
fn choose(options: &[String], wanted: &str) -> Result<usize, String> {
    let wanted = wanted.trim();
    let by_number = wanted
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=options.len()).contains(n))
        .map(|n| n - 1);
    by_number
        .or_else(|| {
            options
                .iter()
                .position(|o| crate::term::menu::label_matches(o, wanted))
        })
        .or_else(|| {
            let lower = wanted.to_lowercase();
            options.iter().position(|o| {
                let o = o.to_lowercase();
                crate::term::menu::label_matches(&o, &lower)
            })
        })
        .ok_or_else(|| {
            let listed: Vec<String> = options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{}. {o}", i + 1))
                .collect();
            format!(
                "\"{wanted}\" is not an option of this dialog — choose one of: {}",
                listed.join(", ")
            )
        })
}

fn not_live(identity: &str) -> Refusal {
    refusal(
        Code::NotLive,
        format!(
            "\"{identity}\" has no live session with this token — approval-request is run by \
             a gated session's permission hook, with its PEER_IDENTITY and IAPEER_TOKEN"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::choose;

    #[test]
    fn a_dialog_option_is_chosen_by_number_or_label() {
        let options = ["Yes (recommended)".to_string(), "No".to_string()];
        assert_eq!(choose(&options, "1"), Ok(0));
        assert_eq!(choose(&options, " 2 "), Ok(1));
        assert_eq!(choose(&options, "No"), Ok(1));
        assert_eq!(
            choose(&options, "Yes"),
            Ok(0),
            "a parenthesised note is not needed"
        );
        for bad in ["0", "3", "Maybe", "N"] {
            let err = choose(&options, bad).unwrap_err();
            assert!(
                err.contains("choose one of: 1. Yes (recommended), 2. No"),
                "{bad}: {err}"
            );
        }
    }
}
