//! Every `SVM_*` variable and its default, read in one place. `svmrun` flags arrive here as the
//! same variables. `docs/configuration.md` documents this table.

use std::time::Duration;

/// Fault backend choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Uffd,
    Segv,
}

/// Statistics output at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsMode {
    Off,
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// `SVM_PROTOCOL`: protocol of the default region (`sc-sw`).
    pub protocol: String,
    /// Whether `SVM_PROTOCOL` was given (a personality's own default applies otherwise).
    pub protocol_given: bool,
    /// `SVM_FAULT`: `uffd` or `segv`; default uffd where the kernel allows, otherwise segv.
    pub fault: Option<FaultKind>,
    /// `SVM_TRANSPORT`: `tcp` (default), `deck`, `auto`.
    pub transport: String,
    /// `SVM_TIMEOUT` (seconds): deadline of every blocking wait; default 300.
    pub timeout: Duration,
    /// `SVM_STATS`: `1`/`text` or `json` prints per-node statistics at exit.
    pub stats: StatsMode,
    /// `SVM_VERBOSE`: progress messages on stderr.
    pub verbose: bool,
    /// `SVM_SPACE_BASE`: address of the shared window (default 0x6000_0000_0000).
    pub space_base: usize,
    /// `SVM_SPACE_SIZE`: size of the shared window in bytes (default 64 GiB; suffixes K/M/G/T).
    pub space_size: usize,
    /// `SVM_PAGE_SIZE`: coherence unit, a multiple of the OS page (default 4096).
    pub page_size: usize,
    /// `SVM_SPIN`: non-blocking polls the engine thread makes after activity before it sleeps
    /// (0 = always sleep). Unset: 64 when the job has no more nodes than this host has CPUs,
    /// else 0 (spinning then only steals time from the threads being waited for).
    pub spin_polls: Option<u32>,
    /// `SVM_PREFETCH`: read-ahead of `sc-sw` — pages the home grants unasked behind a
    /// sequential read stream (default 8; 0 = off).
    pub prefetch: usize,
    /// `SVM_FAULT_AROUND`: a node's first fault on an untouched page it is home of makes the
    /// untouched home pages of the aligned block of this many pages around it writable at
    /// once (zero pages: no memory until written); default 64, 0 or 1 = off.
    pub fault_around: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{var}={value:?}: {why}")]
    Invalid {
        var: &'static str,
        value: String,
        why: String,
    },
}

fn invalid(var: &'static str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        var,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Parses a size with an optional K/M/G/T suffix (powers of 1024) or a 0x hex number.
pub fn parse_size(var: &'static str, s: &str) -> Result<usize, ConfigError> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return usize::from_str_radix(&h.replace('_', ""), 16)
            .map_err(|_| invalid(var, s, "not a hexadecimal number"));
    }
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1usize << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.replace('_', "")
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| invalid(var, s, "not a size (examples: 4096, 64G, 0x600000000000)"))
}

pub const PROTOCOLS: &[&str] = &["sc-sw", "sc-mw", "scope"];
pub const TRANSPORTS: &[&str] = &["tcp", "deck", "auto"];

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let protocol_given = get("SVM_PROTOCOL").is_some();
        let protocol = get("SVM_PROTOCOL").unwrap_or_else(|| "sc-sw".into());
        if !PROTOCOLS.contains(&protocol.as_str()) {
            let why = format!("unknown protocol (supported: {})", PROTOCOLS.join(", "));
            return Err(invalid("SVM_PROTOCOL", &protocol, why));
        }
        let fault = match get("SVM_FAULT").as_deref() {
            None => None,
            Some("uffd") => Some(FaultKind::Uffd),
            Some("segv") => Some(FaultKind::Segv),
            Some(v) => return Err(invalid("SVM_FAULT", v, "expected uffd or segv")),
        };
        let transport = get("SVM_TRANSPORT").unwrap_or_else(|| "tcp".into());
        if !TRANSPORTS.contains(&transport.as_str()) {
            return Err(invalid(
                "SVM_TRANSPORT",
                &transport,
                "unknown transport (expected tcp, deck or auto)",
            ));
        }
        let timeout = match get("SVM_TIMEOUT") {
            None => Duration::from_secs(300),
            Some(v) => match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s),
                _ => {
                    return Err(invalid(
                        "SVM_TIMEOUT",
                        &v,
                        "expected a positive number of seconds",
                    ))
                }
            },
        };
        let stats = match get("SVM_STATS").as_deref() {
            None | Some("0") | Some("off") => StatsMode::Off,
            Some("1") | Some("text") | Some("on") => StatsMode::Text,
            Some("json") => StatsMode::Json,
            Some(v) => return Err(invalid("SVM_STATS", v, "expected 1, text or json")),
        };
        let verbose = matches!(get("SVM_VERBOSE").as_deref(), Some(v) if v != "0");
        let space_base = match get("SVM_SPACE_BASE") {
            None => 0x6000_0000_0000,
            Some(v) => parse_size("SVM_SPACE_BASE", &v)?,
        };
        let space_size = match get("SVM_SPACE_SIZE") {
            None => 64 << 30,
            Some(v) => parse_size("SVM_SPACE_SIZE", &v)?,
        };
        let os_page = crate::sys::os_page_size();
        let page_size = match get("SVM_PAGE_SIZE") {
            None => os_page,
            Some(v) => parse_size("SVM_PAGE_SIZE", &v)?,
        };
        if page_size == 0 || page_size % os_page != 0 || !page_size.is_power_of_two() {
            return Err(invalid(
                "SVM_PAGE_SIZE",
                &page_size.to_string(),
                format!("must be a power-of-two multiple of the OS page size {os_page}"),
            ));
        }
        if space_base % page_size != 0 {
            return Err(invalid(
                "SVM_SPACE_BASE",
                &format!("{space_base:#x}"),
                "must be page aligned",
            ));
        }
        if space_size < page_size * 64 || space_size % page_size != 0 {
            return Err(invalid(
                "SVM_SPACE_SIZE",
                &space_size.to_string(),
                "must be a page multiple of at least 64 pages",
            ));
        }
        let spin_polls = match get("SVM_SPIN") {
            None => None,
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| invalid("SVM_SPIN", &v, "expected a count"))?,
            ),
        };
        let prefetch = match get("SVM_PREFETCH") {
            None => 8,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|p| *p <= 256)
                .ok_or_else(|| {
                    invalid("SVM_PREFETCH", &v, "expected a page count from 0 to 256")
                })?,
        };
        let fault_around = match get("SVM_FAULT_AROUND") {
            None => 64,
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|p| *p <= 4096)
                .ok_or_else(|| {
                    invalid(
                        "SVM_FAULT_AROUND",
                        &v,
                        "expected a page count from 0 to 4096",
                    )
                })?,
        };
        Ok(Config {
            prefetch,
            fault_around,
            protocol,
            protocol_given,
            fault,
            transport,
            timeout,
            stats,
            verbose,
            space_base,
            space_size,
            page_size,
            spin_polls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.protocol, "sc-sw");
        assert_eq!(c.space_base, 0x6000_0000_0000);
        assert_eq!(c.space_size, 64 << 30);
        assert_eq!(c.fault, None);
    }

    #[test]
    fn sizes_and_errors() {
        assert_eq!(parse_size("X", "64G").unwrap(), 64 << 30);
        assert_eq!(
            parse_size("X", "0x7000_0000_0000").unwrap(),
            0x7000_0000_0000
        );
        assert!(cfg(&[("SVM_FAULT", "mmu")]).is_err());
        assert!(cfg(&[("SVM_TIMEOUT", "-1")]).is_err());
        assert!(cfg(&[("SVM_PAGE_SIZE", "1000")]).is_err());
        assert_eq!(cfg(&[("SVM_PROTOCOL", "scope")]).unwrap().protocol, "scope");
        let e = cfg(&[("SVM_PROTOCOL", "lrc")]).unwrap_err().to_string();
        assert!(e.contains("unknown protocol"), "{e}");
        assert_eq!(cfg(&[("SVM_TRANSPORT", "auto")]).unwrap().transport, "auto");
        let e = cfg(&[("SVM_TRANSPORT", "sci")]).unwrap_err().to_string();
        assert!(e.contains("unknown transport"), "{e}");
    }
}
