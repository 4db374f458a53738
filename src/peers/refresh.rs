//! `refresh` (spec 07 "Lifecycle"): mark a peer's agent runtimes so that their next natural
//! wake starts a fresh conversation. Called by `iapeer refresh` and `POST
//! /fleet/v1/peers/<p>/refresh` (spec 10 §1).

use crate::markers::{Flag, MarkerError, Markers};
use crate::names::{Identity, IdentityError};
use crate::paths::Paths;
use crate::registry::RegistryPeer;
use crate::runtime::RuntimeKind;

/// Why [`refresh_peer`] refused or failed. `Display` is the text for the user.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The runtime asked for is not one the peer declares.
    #[error("peer \"{personality}\" does not declare runtime \"{runtime}\"")]
    Undeclared {
        /// The peer.
        personality: String,
        /// The runtime asked for.
        runtime: String,
    },
    /// The names do not form an identity.
    #[error("{0}")]
    Identity(#[source] IdentityError),
    /// The flag could not be written.
    #[error("{0}")]
    Marker(#[source] MarkerError),
}

/// Set the `fresh-next` flag of `peer`'s agent runtimes (only `runtime` when given); router
/// runtimes are skipped. Returns the identities marked (possibly none). Nothing is ended or
/// woken.
///
/// Errors: [`RefreshError`], `runtime` is not one the peer declares; a name that does not
/// form an identity; the flag cannot be written.
pub fn refresh_peer(
    paths: &Paths,
    peer: &RegistryPeer,
    runtime: Option<&str>,
) -> Result<Vec<Identity>, RefreshError> {
    let rts: Vec<&String> = match runtime {
        Some(rt) if peer.declares(rt) => peer.runtimes.iter().filter(|r| *r == rt).collect(),
        Some(rt) => {
            return Err(RefreshError::Undeclared {
                personality: peer.personality.clone(),
                runtime: rt.to_string(),
            })
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
        let id = Identity::new(rt, &peer.personality).map_err(RefreshError::Identity)?;
        Markers::new(paths, &id)
            .set(Flag::FreshNext)
            .map_err(RefreshError::Marker)?;
        marked.push(id);
    }
    Ok(marked)
}
