//! The built-in service peers `timer` and `watcher` on the `notifier` runtime (spec 09), for
//! `onboard`: intelligence absent, always on, their call card as the registry description so
//! every agent sees how to call them.

use super::{create_peer, InitOptions, Initialized, PeerError};
use crate::notifier::call::call_card;
use crate::notifier::trigger::Role;
use crate::paths::Paths;

/// The service peers the notifier runtime provides, in order.
pub const NOTIFIER_PEERS: [&str; 2] = ["timer", "watcher"];

/// Create service peer `name` (`timer` or `watcher`; folder `<root>/peers/<name>`) on the
/// `notifier` runtime with its call card as description. The returned
/// [`Initialized::always_on`] is `Some("notifier")`.
///
/// Errors: everything [`create_peer`] returns (taken name, unwritable folder…).
pub fn create_notifier_peer(paths: &Paths, name: &str) -> Result<Initialized, PeerError> {
    create_peer(
        paths,
        name,
        None,
        &InitOptions {
            runtime: Some(crate::runtime::notifier::NAME),
            description: Some(call_card(Role::of_personality(name))),
            intelligence: Some("absent"),
            bearer: false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn service_peers_carry_their_call_card() {
        let (_dir, paths) = Paths::temp();
        for name in NOTIFIER_PEERS {
            let born = create_notifier_peer(&paths, name).unwrap();
            assert_eq!(born.always_on.as_deref(), Some("notifier"));
        }
        let reg = Registry::load(&paths).unwrap();
        let timer = reg.find("timer").unwrap();
        assert_eq!(timer.description, call_card(Role::Time));
        assert_eq!(timer.intelligence, "absent");
        assert_eq!(
            reg.find("watcher").unwrap().description,
            call_card(Role::Event)
        );
    }
}
