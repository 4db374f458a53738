//! Whose process is at the other end of a loopback TCP connection (issue 26 follow-up): the
//! HTTP acceptor lets in only connections whose client socket belongs to the daemon's own
//! uid, so another local user (root included, unless the daemon runs as root) cannot take
//! the capacity of the owner's agents, CLI, page and packages, which all run as the owner.
//! Such a connection is answered 401 before anything of it is read.
//!
//! How (Linux): the client's socket is a socket of this host, in this network namespace,
//! whose local address is the connection's client address and whose remote address is ours.
//! The kernel's `sock_diag` netlink interface looks one socket up by those four values
//! (`SOCK_DIAG_BY_FAMILY` without `NLM_F_DUMP`: a hash lookup, whatever the number of open
//! sockets; reading `/proc/net/tcp` instead took 11 ms per accept with 1 000 connections
//! open) and answers its owner's uid (`inet_diag_msg.idiag_uid`). Elsewhere there is no
//! such lookup: [`PeerUids::new`] fails and every connection is let in (the fleet token
//! and the MCP session tokens still apply).

use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_sock_diag::constants::{AF_INET, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::Socket;

/// Whether a connection whose client socket is owned by `peer` (`None`: the kernel has no
/// such socket, e.g. the client is gone already) is let in by a daemon running as `own`:
/// only the same uid.
pub fn admitted(peer: Option<u32>, own: u32) -> bool {
    peer == Some(own)
}

/// A `sock_diag` netlink socket for looking up the owners of client sockets; one per
/// acceptor thread (a request and its answer at a time).
pub struct PeerUids {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl PeerUids {
    /// Open the netlink socket.
    ///
    /// Errors: the socket cannot be opened (not Linux, or netlink is not allowed here).
    pub fn new() -> io::Result<PeerUids> {
        let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        Ok(PeerUids {
            socket,
            seq: 0,
            buf: vec![0; 8192],
        })
    }

    /// The uid owning the TCP socket whose local address is `client` and whose remote
    /// address is `server`; `None` when there is none (an IPv6 address), or its process has
    /// closed it already (the kernel still holds it, as an orphan without an owner).
    ///
    /// Errors: the netlink request or its answer failed.
    pub fn lookup(&mut self, client: SocketAddr, server: SocketAddr) -> io::Result<Option<u32>> {
        let (SocketAddr::V4(client), SocketAddr::V4(server)) = (client, server) else {
            return Ok(None);
        };
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.seq;
        let mut request = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family: AF_INET,
                protocol: IPPROTO_TCP,
                extensions: ExtensionFlags::empty(),
                states: StateFlags::all(),
                socket_id: SocketId {
                    source_port: client.port(),
                    destination_port: server.port(),
                    source_address: (*client.ip()).into(),
                    destination_address: (*server.ip()).into(),
                    interface_id: 0,
                    // INET_DIAG_NOCOOKIE: any socket of these addresses.
                    cookie: [0xff; 8],
                },
            })
            .into(),
        );
        request.finalize();
        let mut out = vec![0; request.buffer_len()];
        request.serialize(&mut out);
        self.socket.send(&out, 0)?;
        loop {
            let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
            let answer = NetlinkMessage::<SockDiagMessage>::deserialize(&self.buf[..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            if answer.header.sequence_number != self.seq {
                continue; // the late answer of an earlier request
            }
            return match answer.payload {
                // No inode: its process closed it (an orphan, which reads as uid 0), so
                // nobody is there to serve.
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r))
                    if r.header.inode == 0 =>
                {
                    Ok(None)
                }
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    Ok(Some(r.header.uid))
                }
                // ENOENT: no such socket.
                NetlinkPayload::Error(e) if e.code.map(|c| c.get()) == Some(-nix::libc::ENOENT) => {
                    Ok(None)
                }
                NetlinkPayload::Error(e) => Err(e.to_io()),
                other => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected sock_diag answer: {other:?}"),
                )),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_daemons_own_uid_is_let_in() {
        assert!(admitted(Some(1000), 1000));
        assert!(!admitted(Some(1001), 1000));
        assert!(!admitted(Some(0), 1000), "root is another user too");
        assert!(admitted(Some(0), 0), "unless the daemon runs as root");
        assert!(!admitted(None, 1000), "no client socket: nobody to let in");
    }

    #[test]
    fn the_client_socket_of_a_loopback_connection_is_found_with_its_uid() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let (accepted, peer) = server.accept().unwrap();
        let mut uids = PeerUids::new().unwrap();
        let me = nix::unistd::getuid().as_raw();
        assert_eq!(peer, client.local_addr().unwrap());
        let local = accepted.local_addr().unwrap();
        assert_eq!(uids.lookup(peer, local).unwrap(), Some(me));
        // Many lookups in a row each get their own answer.
        for _ in 0..100 {
            assert_eq!(uids.lookup(peer, local).unwrap(), Some(me));
        }
        // A client that closed its socket before the accept: an orphan with no owner.
        let quitter = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let quitter_addr = quitter.local_addr().unwrap();
        drop(quitter);
        let (late, _) = server.accept().unwrap();
        assert_eq!(
            uids.lookup(quitter_addr, late.local_addr().unwrap())
                .unwrap(),
            None
        );
        drop(client);
        drop(accepted);
        let gone: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(uids.lookup(gone, local).unwrap(), None);
    }
}
