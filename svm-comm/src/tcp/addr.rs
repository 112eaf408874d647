//! Which addresses a node listens on and tells the others (see [`super::setup`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

use super::io_why;
use crate::bootstrap::{split_host_port, Bootstrap, Launcher};

pub(super) fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// `spec` (host or host:port) with `port` added when it has none.
pub(super) fn with_port(spec: &str, port: u16) -> String {
    match split_host_port(spec) {
        Some((_, Some(_))) => spec.trim().to_string(),
        Some((h, None)) if h.contains(':') => format!("[{h}]:{port}"),
        Some((h, None)) => format!("{h}:{port}"),
        None => spec.to_string(),
    }
}

fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// Rank 0's listener: the inherited one, or `SVM_COORD`'s port on `SVM_LISTEN`'s host, or on
/// SVM_COORD's address when that is an IP address or `localhost`, or on every address when it
/// is a host name (which may resolve to a loopback address on its own host, as Debian's
/// `127.0.1.1` entries do, while the other hosts reach it on another).
pub(super) fn coordinator_listener(boot: &Bootstrap, coord: &str) -> Result<TcpListener, String> {
    let (host, port) = match split_host_port(coord) {
        Some((h, Some(p))) => (h, p),
        _ => return Err(format!("SVM_COORD={coord:?} is not host:port")),
    };
    if let Some(spec) = &boot.listen {
        let (lh, lp) = split_host_port(spec).unwrap_or((spec.clone(), None));
        let lp = lp.unwrap_or(port);
        return TcpListener::bind((lh.as_str(), lp)).map_err(|e| {
            format!(
                "cannot listen on SVM_LISTEN={spec} port {lp} (the port of SVM_COORD={coord}): {} \
                 (port in use? choose another SVM_COORD)",
                io_why(&e)
            )
        });
    }
    let r = if host.parse::<IpAddr>().is_ok() || host == "localhost" {
        TcpListener::bind((host.as_str(), port))
    } else {
        let v4 = (host.as_str(), port)
            .to_socket_addrs()
            .map(|mut a| a.any(|a| a.is_ipv4()))
            .unwrap_or(true);
        let any = if v4 {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        };
        TcpListener::bind((any, port))
    };
    r.map_err(|e| {
        format!(
            "cannot listen on SVM_COORD={coord}: {} (port in use? choose another SVM_COORD)",
            io_why(&e)
        )
    })
}

/// A node's mesh listener: `SVM_LISTEN`, or the local address `local` of its connection to the
/// coordinator. When that connection goes over loopback under Slurm or Open MPI (the host name
/// in SVM_COORD resolved to a loopback address on rank 0's own host), other hosts may still need
/// to reach this node, so it listens on every address.
pub(super) fn node_listener(boot: &Bootstrap, local: IpAddr) -> Result<TcpListener, String> {
    if let Some(spec) = &boot.listen {
        let (h, p) = split_host_port(spec).unwrap_or((spec.clone(), None));
        return TcpListener::bind((h.as_str(), p.unwrap_or(0)))
            .map_err(|e| format!("cannot listen on SVM_LISTEN={spec}: {}", io_why(&e)));
    }
    let ip = if local.is_loopback() && matches!(boot.launcher, Launcher::Slurm | Launcher::OpenMpi)
    {
        unspecified_like(local)
    } else {
        local
    };
    TcpListener::bind((ip, 0)).map_err(|e| {
        format!(
            "cannot listen on {ip} (the address this node reaches SVM_COORD from): {}; set \
             SVM_LISTEN to an address of this host",
            io_why(&e)
        )
    })
}

/// The address a node tells the others: `SVM_ADVERTISE`, else its listener's address, with a
/// wildcard replaced by the coordinator connection's local address — or left unspecified when
/// that is loopback, which asks rank 0 to fill in its own host's address.
pub(super) fn advertised(boot: &Bootstrap, bound: SocketAddr, local: IpAddr) -> String {
    if let Some(a) = &boot.advertise {
        return with_port(a, bound.port());
    }
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    if local.is_loopback() {
        SocketAddr::new(unspecified_like(local), bound.port()).to_string()
    } else {
        SocketAddr::new(local, bound.port()).to_string()
    }
}
