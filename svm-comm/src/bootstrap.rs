//! Who am I, how many are we, where is the rendezvous, and what is the job key.
//!
//! Sources, first match wins: `svmrun` (`SVM_RANK`, `SVM_SIZE`), Slurm (`SLURM_PROCID`,
//! `SLURM_NTASKS`), Open MPI / PMIx (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`, `PMIX_RANK`).
//! The rendezvous is `SVM_COORD` (host:port of rank 0); `SVM_COORD_FD` is a listening socket
//! inherited from `svmrun`. With none of these, the process is a job of one node.

use crate::wire::{NodeId, KEY_LEN};

/// Where this node's identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Svmrun,
    Slurm,
    OpenMpi,
    Single,
}

#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub rank: NodeId,
    pub size: NodeId,
    pub launcher: Launcher,
    /// host:port of rank 0's rendezvous listener.
    pub coord: Option<String>,
    /// Listening socket inherited from svmrun (rank 0 uses it; others close it).
    pub coord_fd: Option<i32>,
    pub job_key: [u8; KEY_LEN],
    /// `SVM_LISTEN`: address (host or host:port) on which this node accepts mesh connections.
    /// Unset: the local address of this node's connection to the coordinator (see `tcp`).
    pub listen: Option<String>,
    /// `SVM_ADVERTISE`: address (host or host:port) the other nodes are told to connect to.
    /// Unset: the listen address, or the coordinator connection's local address when the
    /// listen address is a wildcard.
    pub advertise: Option<String>,
}

/// Splits `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address into host and port.
pub fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    let s = s.trim();
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return Some((a.ip().to_string(), Some(a.port())));
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Some((ip.to_string(), None));
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        h.parse::<std::net::Ipv6Addr>().ok()?;
        match tail {
            "" => (h, None),
            t => (h, Some(t.strip_prefix(':')?)),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if host.is_empty() || !host.chars().all(valid) {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some((host.to_string(), port))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BootstrapError {
    #[error("{var}={value:?} is not a valid {what}")]
    Invalid {
        var: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("rank {rank} is out of range for a job of {size} nodes ({source_vars})")]
    RankOutOfRange {
        rank: u32,
        size: u32,
        source_vars: &'static str,
    },
    #[error("a job of {size} nodes needs SVM_COORD=host:port naming rank 0's rendezvous address")]
    NoCoordinator { size: u32 },
    #[error(
        "a job of {size} nodes started by {launcher} needs SVM_JOB_KEY (64 hex characters, the same on \
         every node) so that nodes can tell each other from strangers"
    )]
    NoJobKey { size: u32, launcher: &'static str },
    #[error("SVM_JOB_KEY must be 64 hexadecimal characters (32 bytes)")]
    BadJobKey,
    #[error("jobs are limited to {max} nodes, {size} were asked for")]
    TooManyNodes { size: u32, max: u32 },
}

/// Largest job supported.
pub const MAX_NODES: u32 = 1024;

fn num(
    get: &dyn Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<Option<u32>, BootstrapError> {
    match get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| BootstrapError::Invalid {
                var,
                value: v,
                what: "non-negative integer",
            }),
    }
}

/// Parses a 64-character hex job key.
pub fn parse_key(s: &str) -> Result<[u8; KEY_LEN], BootstrapError> {
    let s = s.trim();
    if s.len() != KEY_LEN * 2 {
        return Err(BootstrapError::BadJobKey);
    }
    let mut key = [0u8; KEY_LEN];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| BootstrapError::BadJobKey)?;
    }
    Ok(key)
}

impl Bootstrap {
    /// Reads the process environment.
    pub fn from_env() -> Result<Bootstrap, BootstrapError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    /// Reads from any variable lookup (tests pass a map).
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Bootstrap, BootstrapError> {
        let (rank, size, launcher, vars) = if let (Some(r), Some(s)) =
            (num(get, "SVM_RANK")?, num(get, "SVM_SIZE")?)
        {
            (r, s, Launcher::Svmrun, "SVM_RANK/SVM_SIZE")
        } else if let (Some(r), Some(s)) = (num(get, "SLURM_PROCID")?, num(get, "SLURM_NTASKS")?) {
            (r, s, Launcher::Slurm, "SLURM_PROCID/SLURM_NTASKS")
        } else if let Some(s) = num(get, "OMPI_COMM_WORLD_SIZE")? {
            let r = match num(get, "OMPI_COMM_WORLD_RANK")? {
                Some(r) => r,
                None => num(get, "PMIX_RANK")?.ok_or(BootstrapError::Invalid {
                    var: "OMPI_COMM_WORLD_RANK",
                    value: String::new(),
                    what: "rank (neither it nor PMIX_RANK is set)",
                })?,
            };
            (
                r,
                s,
                Launcher::OpenMpi,
                "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE",
            )
        } else {
            (0, 1, Launcher::Single, "none")
        };
        if size == 0 || rank >= size {
            return Err(BootstrapError::RankOutOfRange {
                rank,
                size,
                source_vars: vars,
            });
        }
        if size > MAX_NODES {
            return Err(BootstrapError::TooManyNodes {
                size,
                max: MAX_NODES,
            });
        }
        let coord = get("SVM_COORD").filter(|s| !s.is_empty());
        if size > 1 && coord.is_none() {
            return Err(BootstrapError::NoCoordinator { size });
        }
        let coord_fd = num(get, "SVM_COORD_FD")?.map(|fd| fd as i32);
        let job_key = match get("SVM_JOB_KEY") {
            Some(k) => parse_key(&k)?,
            None if size == 1 => [0u8; KEY_LEN],
            None => {
                let launcher = match launcher {
                    Launcher::Slurm => "Slurm",
                    Launcher::OpenMpi => "Open MPI",
                    _ => "svmrun",
                };
                return Err(BootstrapError::NoJobKey { size, launcher });
            }
        };
        let address = |var: &'static str| -> Result<Option<String>, BootstrapError> {
            match get(var).filter(|s| !s.trim().is_empty()) {
                None => Ok(None),
                Some(v) if split_host_port(&v).is_some() => Ok(Some(v.trim().to_string())),
                Some(v) => Err(BootstrapError::Invalid {
                    var,
                    value: v,
                    what: "address (host, host:port, IP or [IPv6]:port)",
                }),
            }
        };
        let listen = address("SVM_LISTEN")?;
        let advertise = address("SVM_ADVERTISE")?;
        Ok(Bootstrap {
            rank: rank as NodeId,
            size: size as NodeId,
            launcher,
            coord,
            coord_fd,
            job_key,
            listen,
            advertise,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn boot(vars: &[(&str, &str)]) -> Result<Bootstrap, BootstrapError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Bootstrap::from_lookup(&|k| m.get(k).cloned())
    }
    const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn no_launcher_is_a_single_node() {
        let b = boot(&[]).unwrap();
        assert_eq!((b.rank, b.size, b.launcher), (0, 1, Launcher::Single));
    }

    #[test]
    fn svmrun_slurm_and_openmpi() {
        let b = boot(&[
            ("SVM_RANK", "2"),
            ("SVM_SIZE", "4"),
            ("SVM_COORD", "h:1"),
            ("SVM_JOB_KEY", KEY),
        ])
        .unwrap();
        assert_eq!((b.rank, b.size, b.launcher), (2, 4, Launcher::Svmrun));
        assert_eq!(b.job_key[1], 0x11);
        let b = boot(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "3"),
            ("SVM_COORD", "h:1"),
            ("SVM_JOB_KEY", KEY),
        ])
        .unwrap();
        assert_eq!((b.rank, b.size, b.launcher), (1, 3, Launcher::Slurm));
        let b = boot(&[
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMIX_RANK", "1"),
            ("SVM_COORD", "h:1"),
            ("SVM_JOB_KEY", KEY),
        ])
        .unwrap();
        assert_eq!((b.rank, b.size, b.launcher), (1, 2, Launcher::OpenMpi));
    }

    #[test]
    fn errors_are_specific() {
        assert!(matches!(
            boot(&[("SVM_RANK", "x"), ("SVM_SIZE", "2")]),
            Err(BootstrapError::Invalid { .. })
        ));
        assert!(matches!(
            boot(&[("SVM_RANK", "2"), ("SVM_SIZE", "2")]),
            Err(BootstrapError::RankOutOfRange { .. })
        ));
        assert_eq!(
            boot(&[("SVM_RANK", "0"), ("SVM_SIZE", "2")]).unwrap_err(),
            BootstrapError::NoCoordinator { size: 2 }
        );
        assert!(matches!(
            boot(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SVM_COORD", "h:1")
            ]),
            Err(BootstrapError::NoJobKey { .. })
        ));
        assert_eq!(
            boot(&[
                ("SVM_RANK", "0"),
                ("SVM_SIZE", "2"),
                ("SVM_COORD", "h:1"),
                ("SVM_JOB_KEY", "abc")
            ])
            .unwrap_err(),
            BootstrapError::BadJobKey
        );
        let e = boot(&[("SVM_LISTEN", "host:port")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("SVM_LISTEN"), "{e}");
        let e = boot(&[("SVM_ADVERTISE", "a b")]).unwrap_err().to_string();
        assert!(e.contains("SVM_ADVERTISE"), "{e}");
    }

    #[test]
    fn addresses_split() {
        let s = |a: &str| split_host_port(a);
        assert_eq!(s("0.0.0.0"), Some(("0.0.0.0".into(), None)));
        assert_eq!(s("10.1.2.3:77"), Some(("10.1.2.3".into(), Some(77))));
        assert_eq!(s("::"), Some(("::".into(), None)));
        assert_eq!(s("[::1]:9"), Some(("::1".into(), Some(9))));
        assert_eq!(s("[fe80::1]"), Some(("fe80::1".into(), None)));
        assert_eq!(s("node3"), Some(("node3".into(), None)));
        assert_eq!(
            s("node3.example:7411"),
            Some(("node3.example".into(), Some(7411)))
        );
        assert_eq!(s("node3:x"), None);
        assert_eq!(s(":7"), None);
        assert_eq!(s("[node]:7"), None);
        let b = boot(&[("SVM_LISTEN", "0.0.0.0"), ("SVM_ADVERTISE", "node3")]).unwrap();
        assert_eq!(b.listen.as_deref(), Some("0.0.0.0"));
        assert_eq!(b.advertise.as_deref(), Some("node3"));
    }
}
