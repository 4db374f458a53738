//! The turns of the messages a session's runtime took (issue 32): followed until each ends by
//! the runtime's records, so that a session that dies mid-task can say which messages it cut
//! off; and, for a runtime whose conversation ids iapeer learns, the id read from the records
//! of its first confirmed delivery.

use super::*;
use crate::adapter::ConversationNaming;
use crate::session::deliver::TurnFollower;

impl Session {
    /// A message the runtime took: follow its turn, and learn the session's conversation
    /// from it when that is still unknown.
    pub(super) fn follow_turn(&mut self, turn: TurnFollower) {
        if self.cfg.conversation.is_none()
            && self.cfg.adapter.conversation_naming() == ConversationNaming::Learned
        {
            if let Some(id) = turn
                .conversation()
                .filter(|id| crate::markers::valid_conversation_id(id))
            {
                if let Some(bound) = self.cfg.adapter.for_conversation(&id) {
                    self.cfg.adapter = bound;
                }
                self.cfg.conversation = Some(id.clone());
                self.emit(EventKind::Conversation { id });
            }
        }
        self.turns.push(turn);
    }

    /// Forget the followed turns whose end the records show.
    pub(super) fn poll_turns(&mut self, now: Instant) {
        self.turns.retain_mut(|t| !t.poll(now));
    }

    /// An interrupt ends the running turn (Claude Code 2.1.332 records no end for it,
    /// `interrupt-transcript.jsonl`): nothing taken before it is in progress any more.
    pub(super) fn turns_interrupted(&mut self) {
        self.turns.clear();
    }

    /// The session is over: one last look at each followed turn, then report those that had
    /// not ended ([`EventKind::TurnsCut`]).
    pub(super) fn cut_turns(&mut self) {
        let ids: Vec<u64> = std::mem::take(&mut self.turns)
            .into_iter()
            .filter_map(|mut t| (!t.last_look()).then_some(t.id))
            .collect();
        if !ids.is_empty() {
            self.emit(EventKind::TurnsCut { ids });
        }
    }

    /// When [`Session::poll_turns`] next needs to run.
    pub(super) fn next_turn_poll(&self) -> Option<Instant> {
        self.turns.iter().map(TurnFollower::next_deadline).min()
    }
}
