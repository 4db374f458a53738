//! A person's own peer on the built-in `human` runtime (issue 8 item 3), for `onboard` and
//! any other verb that makes the operator's peer.

use super::{create_peer, InitOptions, Initialized, PeerError};
use crate::paths::Paths;

/// Create the human peer `name` (folder `<root>/peers/<name>`) on the `human` runtime with
/// intelligence `natural`: messages to it are kept in its inbox
/// (`<root>/state/iapeer/inbox/<name>.jsonl`, read with `iapeer inbox`). Idempotent for a peer
/// that already is this human. The returned [`Initialized::always_on`] is `Some("human")`:
/// a running daemon should be asked to start it (`Request::Start`), else it starts with the
/// daemon.
///
/// Errors: everything [`create_peer`] returns (invalid or taken name, unwritable folder…).
// Called by `onboard` (issue 8 item 2, built in parallel) to make the operator's peer.
#[allow(dead_code)]
pub fn create_human_peer(
    paths: &Paths,
    name: &str,
    description: Option<&str>,
) -> Result<Initialized, PeerError> {
    create_peer(
        paths,
        name,
        None,
        &InitOptions {
            runtime: Some(crate::names::HUMAN_RUNTIME),
            description,
            intelligence: Some("natural"),
            bearer: false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn a_human_peer_is_natural_on_the_human_runtime_and_always_on() {
        let (_dir, paths) = Paths::temp();
        let born = create_human_peer(&paths, "you", Some("the operator")).unwrap();
        assert_eq!(born.always_on.as_deref(), Some("human"));
        let reg = Registry::load(&paths).unwrap();
        let p = reg.find("you").unwrap();
        assert_eq!(p.default_runtime, "human");
        assert_eq!(p.runtimes, vec!["human".to_string()]);
        assert_eq!(p.intelligence, "natural");
        // Again: the same peer, no error.
        create_human_peer(&paths, "you", None).unwrap();
    }
}
