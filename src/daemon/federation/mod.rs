//! The daemon's side of delivery across hosts (issue 28 items 2–3): what its federation
//! threads and the router share ([`hub`]) and the stream threads ([`streams`]). The wire
//! contract (`crate::federation::keys`), the addressing rule (`crate::federation::address`)
//! and the link thread (`crate::federation::link`) live in `crate::federation`.

pub mod attach;
pub mod hub;
pub mod streams;
