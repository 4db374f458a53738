//! Addressing across hosts (issue 28 item 2): `name@host` names a peer on another host of the
//! federation; a plain `name` is the local peer when there is one, else the only remote peer
//! of that name (by the rosters of the hosts online), and a name several hosts have is
//! refused with the choices. Pure: the daemon gives it what it knows ([`Known`]).

use crate::names::{is_valid_personality, PERSONALITY_PATTERN};
use crate::protocol::{Code, Failure};

/// The pattern of a recipient, for schemas (MCP `send_to_peer`'s `personality`): a peer name,
/// optionally `@` and a host name (both the peer-name rule).
pub const ADDRESS_PATTERN: &str = "^[a-z][a-z0-9-]{0,31}(@[a-z][a-z0-9-]{0,31})?$";

/// A recipient as named: `name` or `name@host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The peer's name.
    pub name: String,
    /// The host, when named.
    pub host: Option<String>,
}

impl Address {
    /// Split `name@host`; a text without `@` is a plain name. Pure.
    ///
    /// Errors (code `invalid-argument`): a part that does not follow the peer-name rule.
    pub fn parse(to: &str) -> Result<Address, Failure> {
        let Some((name, host)) = to.split_once('@') else {
            return Ok(Address {
                name: to.to_string(),
                host: None,
            });
        };
        for (what, part) in [("personality", name), ("host", host)] {
            if !is_valid_personality(part) {
                return Err(Failure::new(
                    Code::InvalidArgument,
                    format!(
                        "invalid address \"{to}\" — its {what} must match {PERSONALITY_PATTERN} \
                         (a peer is named <name> or <name>@<host>)"
                    ),
                ));
            }
        }
        Ok(Address {
            name: name.to_string(),
            host: Some(host.to_string()),
        })
    }
}

/// Another host as this one knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostView {
    /// Its name.
    pub host: String,
    /// Its `alive` key exists.
    pub online: bool,
    /// The names of its peers, from its roster (empty when it is offline: its roster expired).
    pub peers: Vec<String>,
}

/// What the resolution knows: this host's name, whether a local peer has the name, the other
/// hosts.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// This host's name.
    pub own_host: &'a str,
    /// The link reaches Redis now.
    pub connected: bool,
    /// A peer of this host has the name asked for.
    pub local: bool,
    /// The other hosts.
    pub hosts: &'a [HostView],
}

/// Where a send goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A peer of this host, by its name.
    Local(String),
    /// Peer `name` of host `host`.
    Remote {
        /// The peer's name on its host.
        name: String,
        /// The host.
        host: String,
    },
}

/// Where `addr` goes. Pure.
///
/// - `name@<this host>` and a plain name a local peer has: [`Target::Local`].
/// - `name@host`: that host when it is online and its roster has the name, or when it is
///   offline (its roster is gone; the message waits in its inbox stream).
/// - a plain name no local peer has: the only online host whose roster has it.
///
/// Errors: code `offline` for a named host while the link does not reach Redis; code
/// `not-registered` for a host the federation does not know, a name its roster
/// does not have, or a plain name nobody has (as a local send says it: `Local` is returned
/// then, and the ordinary path refuses it); code `invalid-argument` for a plain name several
/// hosts have, listing `name@host` for each.
pub fn resolve(addr: &Address, known: Known<'_>) -> Result<Target, Failure> {
    let name = &addr.name;
    match &addr.host {
        Some(h) if h == known.own_host => Ok(Target::Local(name.clone())),
        Some(h) if !known.connected => Err(Failure::new(
            Code::Offline,
            format!(
                "host {h} cannot be reached: this host's link to the federation's Redis is away \
                 (iapeer federation status says since when and why); message NOT delivered — \
                 sends to this host's peers go on"
            ),
        )),
        Some(h) => {
            let Some(view) = known.hosts.iter().find(|v| &v.host == h) else {
                let mut names: Vec<&str> = known.hosts.iter().map(|v| v.host.as_str()).collect();
                names.push(known.own_host);
                names.sort_unstable();
                return Err(Failure::new(
                    Code::NotRegistered,
                    format!(
                        "host \"{h}\" is not in the federation (its hosts: {}); message NOT \
                         delivered",
                        names.join(", ")
                    ),
                ));
            };
            if view.online && !view.peers.iter().any(|p| p == name) {
                return Err(Failure::new(
                    Code::NotRegistered,
                    format!(
                        "peer \"{name}\" is not on host {h} (its peers: {}); message NOT delivered",
                        if view.peers.is_empty() {
                            "none".to_string()
                        } else {
                            view.peers.join(", ")
                        }
                    ),
                ));
            }
            Ok(Target::Remote {
                name: name.clone(),
                host: h.clone(),
            })
        }
        None if known.local => Ok(Target::Local(name.clone())),
        None => {
            let mut hosts: Vec<&str> = known
                .hosts
                .iter()
                .filter(|v| v.online && v.peers.iter().any(|p| p == name))
                .map(|v| v.host.as_str())
                .collect();
            hosts.sort_unstable();
            match hosts.as_slice() {
                [] => Ok(Target::Local(name.clone())),
                [h] => Ok(Target::Remote {
                    name: name.clone(),
                    host: h.to_string(),
                }),
                many => Err(Failure::new(
                    Code::InvalidArgument,
                    format!(
                        "\"{name}\" is ambiguous: no peer of this host has that name and {} \
                         hosts have one — name one: {}; message NOT delivered",
                        many.len(),
                        many.iter()
                            .map(|h| format!("{name}@{h}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str, online: bool, peers: &[&str]) -> HostView {
        HostView {
            host: h.into(),
            online,
            peers: peers.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn go(to: &str, local: bool, hosts: &[HostView]) -> Result<Target, Failure> {
        let addr = Address::parse(to)?;
        resolve(
            &addr,
            Known {
                own_host: "a",
                connected: true,
                local,
                hosts,
            },
        )
    }

    fn remote(name: &str, host: &str) -> Target {
        Target::Remote {
            name: name.into(),
            host: host.into(),
        }
    }

    #[test]
    fn the_schema_pattern_is_the_name_rule_twice() {
        let name = PERSONALITY_PATTERN
            .trim_start_matches('^')
            .trim_end_matches('$');
        assert_eq!(ADDRESS_PATTERN, format!("^{name}(@{name})?$"));
    }

    #[test]
    fn addresses_parse_and_bad_ones_say_which_part() {
        assert_eq!(
            Address::parse("bob").unwrap(),
            Address {
                name: "bob".into(),
                host: None
            }
        );
        assert_eq!(Address::parse("bob@b").unwrap().host.as_deref(), Some("b"));
        for (bad, part) in [
            ("Bob@b", "personality"),
            ("bob@", "host"),
            ("bob@b@c", "host"),
        ] {
            let e = Address::parse(bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument);
            assert!(
                e.error.contains(&format!("its {part} must match")),
                "{bad}: {}",
                e.error
            );
        }
    }

    #[test]
    fn a_plain_name_is_local_first_then_the_only_remote_one() {
        let hosts = [
            host("b", true, &["bob", "carol"]),
            host("c", true, &["carol"]),
        ];
        assert_eq!(go("bob", true, &hosts), Ok(Target::Local("bob".into())));
        assert_eq!(go("bob", false, &hosts), Ok(remote("bob", "b")));
        assert_eq!(
            go("zed", false, &hosts),
            Ok(Target::Local("zed".into())),
            "nobody has it: the local path refuses it as today"
        );
        let e = go("carol", false, &hosts).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert_eq!(
            e.error,
            "\"carol\" is ambiguous: no peer of this host has that name and 2 hosts have one — \
             name one: carol@b, carol@c; message NOT delivered"
        );
        let offline = [host("b", false, &[])];
        assert_eq!(
            go("bob", false, &offline),
            Ok(Target::Local("bob".into())),
            "an offline host's peers are not guessed"
        );
    }

    #[test]
    fn a_named_host_is_that_host() {
        let hosts = [host("b", true, &["bob"]), host("c", false, &[])];
        assert_eq!(go("bob@b", true, &hosts), Ok(remote("bob", "b")));
        assert_eq!(go("bob@a", false, &hosts), Ok(Target::Local("bob".into())));
        assert_eq!(
            go("bob@c", false, &hosts),
            Ok(remote("bob", "c")),
            "offline: waits in its inbox"
        );
        let e = go("zed@b", false, &hosts).unwrap_err();
        assert_eq!(e.code, Code::NotRegistered);
        assert_eq!(
            e.error,
            "peer \"zed\" is not on host b (its peers: bob); message NOT delivered"
        );
        let away = resolve(
            &Address::parse("bob@b").unwrap(),
            Known {
                own_host: "a",
                connected: false,
                local: false,
                hosts: &[],
            },
        )
        .unwrap_err();
        assert_eq!(away.code, Code::Offline);
        assert!(
            away.error.starts_with(
                "host b cannot be reached: this host's link to the federation's Redis is away"
            ),
            "{}",
            away.error
        );
        let e = go("bob@d", false, &hosts).unwrap_err();
        assert_eq!(
            e.error,
            "host \"d\" is not in the federation (its hosts: a, b, c); message NOT delivered"
        );
    }
}
