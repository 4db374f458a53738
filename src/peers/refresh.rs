//! `refresh` (spec 07 "Lifecycle"): mark a peer's agent runtimes so that their next natural
//! wake starts a fresh conversation. Called by `iapeer refresh` and `POST
//! /fleet/v1/peers/<p>/refresh` (spec 10 §1).

use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::paths::Paths;
use crate::registry::RegistryPeer;
use crate::runtime::RuntimeKind;

/// Set the `fresh-next` flag of `peer`'s agent runtimes (only `runtime` when given); router
/// runtimes are skipped. Returns the identities marked (possibly none). Nothing is ended or
/// woken.
///
/// Errors (text for the user): `runtime` is not one the peer declares; a name that does not
/// form an identity; the flag cannot be written.
pub fn refresh_peer(
    paths: &Paths,
    peer: &RegistryPeer,
    runtime: Option<&str>,
) -> Result<Vec<Identity>, String> {
    let rts: Vec<&String> = match runtime {
        Some(rt) if peer.declares(rt) => peer.runtimes.iter().filter(|r| *r == rt).collect(),
        Some(rt) => {
            return Err(format!(
                "peer \"{}\" does not declare runtime \"{rt}\"",
                peer.personality
            ))
        }
        None => peer.runtimes.iter().collect(),
    };
    let mut marked = Vec::new();
    for rt in rts {
        let is_agent =
            crate::runtime::adapter_for(paths, rt).is_ok_and(|a| a.kind() == RuntimeKind::Agent);
        if !is_agent {
            continue;
        }
        let id = Identity::new(rt, &peer.personality).map_err(|e| e.to_string())?;
        Markers::new(paths, &id)
            .set(Flag::FreshNext)
            .map_err(|e| e.to_string())?;
        marked.push(id);
    }
    Ok(marked)
}
