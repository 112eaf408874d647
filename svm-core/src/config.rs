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
    /// `SVM_UNIX_SOCKETS`: with the `tcp` transport, links to the nodes on this host are
    /// Unix-domain stream sockets (`svm_comm::tcp::establish_local`); default on, `0` = TCP
    /// (docs/configuration.md weighs the two).
    pub unix_sockets: bool,
    /// `SVM_HOST_BARRIER`: barriers in shared memory when every node runs on this host over
    /// DECK-SCI (`docs/sync.md`); default on, `0` = always the message barrier.
    pub host_barrier: bool,
    /// `SVM_SPACE_BASE`: address of the shared window (default 0x6000_0000_0000).
    pub space_base: usize,
    /// `SVM_SPACE_SIZE`: size of the shared window in bytes (default 64 GiB; suffixes K/M/G/T).
    pub space_size: usize,
    /// `SVM_PAGE_SIZE`: coherence unit, a multiple of the OS page (default 4096).
    pub page_size: usize,
    /// `SVM_SPIN`: non-blocking polls the engine thread makes after activity, while a thread
    /// of its node waits for it, before it sleeps (0 = always sleep). Unset: 64 in a job of
    /// one node, else 2048 (every empty poll yields the CPU; see
    /// `node::engine::default_spin_polls`; `api::start_node` resolves it).
    pub spin_polls: Option<u32>,
    /// `SVM_CPUS`: the CPUs this node's threads run on (a CPU list: `0`, `2-3`, `0,4`), bound
    /// before the engine starts; unset: wherever the scheduler puts them. `svmrun` sets it for
    /// every node it starts (`--bind`, `svm_comm::placement`).
    pub cpus: Option<Vec<usize>>,
    /// `SVM_PREFETCH`: read-ahead of `sc-sw` — pages the home grants unasked behind a
    /// sequential read stream (default 8; 0 = off).
    pub prefetch: usize,
    /// `SVM_PROFILE=FILE`: at the end of the job, one merged profile (Markdown at FILE, JSON
    /// at FILE.json; see docs/profiling.md). Off by default.
    pub profile: Option<std::path::PathBuf>,
    /// `SVM_TRACE=FILE`: a Chrome trace-event JSON of the whole job at FILE. Off by default.
    pub trace: Option<std::path::PathBuf>,
    /// `SVM_FAULT_AROUND`: a node's first fault on an untouched page it is home of makes the
    /// untouched home pages of the aligned block of this many pages around it writable at
    /// once (zero pages: no memory until written); default 64, 0 or 1 = off.
    pub fault_around: usize,
    /// `SVM_HOLD_US`: `sc-sw`'s minimum hold, in µs — a node that gets write access back to a
    /// page another node took from it since the node's last release keeps it at least this
    /// long before giving it up to a node of higher rank (ends at the node's next release or
    /// barrier); default [`DEFAULT_HOLD_US`], 0 = off.
    pub hold_us: u64,
    /// `SVM_GRANT_AROUND`: `sc-sw`'s grants around a request at a barrier — a manager whose
    /// node waits at a barrier grants a node that keeps asking it for write access the idle
    /// pages of the aligned block of this many pages around each page asked for; default
    /// [`DEFAULT_GRANT_AROUND`], 0 or 1 = off.
    pub grant_around: usize,
    /// `SVM_FLUSH_AFTER_US`: `sc-mw`'s bounded visibility, in µs — writes not yet flushed
    /// reach their homes (and the other copies are invalidated) at the latest this long after
    /// the first of them, whether or not the node releases; default
    /// [`DEFAULT_FLUSH_AFTER_US`], 0 = only at releases.
    pub flush_after_us: u64,
    /// `SVM_RELEASE_DELAY_US`: in a job of two nodes, how long a lock release whose token
    /// stays on the node may leave its flush to a later release (the token leaving, a
    /// barrier, a semaphore post, a user message) under protocols that allow it (`sc-mw`);
    /// default [`DEFAULT_RELEASE_DELAY_US`], 0 = every release flushes at once.
    pub release_delay_us: u64,
    /// `SVM_PUSH`: `sc-sw`'s producer–consumer push — at its barrier arrivals a home sends
    /// read copies of the pages it wrote to the nodes that asked to read them before;
    /// `1` (default) or `0`.
    pub push: bool,
    /// `SVM_LOCK_PAGES`: pages that travel with their lock — a node asks for the pages a
    /// lock's critical sections wrote along with the lock, and keeps them while the lock's
    /// token is here and wanted elsewhere (protocols that support it: `sc-sw`); `0` (default:
    /// SPLASH-2 radiosity loses more than raytrace gains, docs/protocols.md) or `1`.
    pub lock_pages: bool,
    /// `SVM_FIRST_TOUCH`: under a home-based default protocol (`sc-mw`, `scope`), the C
    /// personalities' `G_MALLOC` / `cvm_alloc` home each page on the first node that touches
    /// it; `1` (default) or `0` (homed on the allocating node, as under `sc-sw`).
    pub first_touch: bool,
    /// `SVM_HOME_MIGRATION`: under `sc-mw` in a job of two nodes, at each barrier a home
    /// hands every page that only the other node wrote since the last barrier to that node,
    /// whose copy holds every write (JIAJIA's home migration); `0` (default: it makes a racy
    /// program's flag more often overtake its datum, docs/protocols.md) or `1`.
    pub home_migration: bool,
    /// `SVM_ENGINE_SLICE_US`: the time slice (µs) the engine thread asks the kernel for
    /// (`sched_setattr`), so that its wake-ups preempt the node's computing thread instead of
    /// waiting for that thread's slice to end; default [`DEFAULT_ENGINE_SLICE_US`], 0 = the
    /// kernel's default slice.
    pub engine_slice_us: u64,
    /// `SVM_ENGINE_NICE`: the nice value the engine thread asks for (-20 to 19); left out
    /// where the process may not raise its priority. Unset: [`DEFAULT_ENGINE_NICE`] while the
    /// job has no more nodes than the CPUs it may use, else the process's own
    /// (`node::engine::default_engine_nice`; `api::start_node` resolves it; None after that:
    /// the process's own).
    pub engine_nice: Option<i32>,
    /// `SVM_SPIN_WAKE`: an application thread that starts waiting for a peer (a lock, a
    /// barrier, a message) wakes its node's engine from its sleep in epoll so that it spins
    /// while the thread waits (`Node::engine_watch`); `1` (default; it applies only where a
    /// peer can answer and the engine spins at all, `node::engine::wakes_to_spin`) or `0`.
    pub spin_wake: bool,
    /// `SVM_WRITE_SCAN`: under `scope`, a node finds the writes to the regions it is the
    /// home of by scanning its page tables at each release instead of by a write fault per
    /// page and interval (userfaultfd backend, Linux 6.7 and later; docs/protocols.md); `1`
    /// (default) or `0`.
    pub write_scan: bool,
}

/// The default of `SVM_HOLD_US`; measurements in docs/protocols.md.
pub const DEFAULT_HOLD_US: u64 = 10_000;

/// The default of `SVM_GRANT_AROUND` (pages); measurements in docs/protocols.md.
pub const DEFAULT_GRANT_AROUND: u64 = 64;

/// The default of `SVM_FLUSH_AFTER_US`; measurements in docs/protocols.md.
pub const DEFAULT_FLUSH_AFTER_US: u64 = 1000;

/// The default of `SVM_RELEASE_DELAY_US`; measurements in docs/protocols.md.
pub const DEFAULT_RELEASE_DELAY_US: u64 = 5000;

/// The default of `SVM_ENGINE_SLICE_US`: the shortest slice Linux gives a normal thread;
/// measurements in docs/configuration.md.
pub const DEFAULT_ENGINE_SLICE_US: u64 = 100;

/// The default of `SVM_ENGINE_NICE` while every node has a CPU of its own; measurements in
/// docs/configuration.md.
pub const DEFAULT_ENGINE_NICE: i32 = -10;

/// The range of slices the kernel accepts (`sched_setattr` clamps to it).
pub const ENGINE_SLICE_US_RANGE: std::ops::RangeInclusive<u64> = 100..=100_000;

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

/// Largest coherence unit: a page (or its diff, which may be larger) travels in one message,
/// whose data is limited to `svm_comm::wire::MAX_DATA_LEN` (64 MiB).
pub const MAX_PAGE_SIZE: usize = svm_comm::wire::MAX_DATA_LEN as usize / 4;

/// End of the user address space a process can map without asking for more (x86-64: 128 TiB
/// minus a guard page; other 64-bit targets: 256 TiB).
pub fn user_space_end() -> usize {
    if cfg!(target_arch = "x86_64") {
        (1usize << 47) - 4096
    } else if cfg!(target_pointer_width = "64") {
        1usize << 48
    } else {
        0xc000_0000
    }
}

/// Lowest address a process may map (`/proc/sys/vm/mmap_min_addr`, usually 64 KiB).
fn mmap_min_addr() -> usize {
    std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 16)
}

fn tib(n: usize) -> String {
    format!("{:.0} TiB", n as f64 / (1u64 << 40) as f64)
}

/// The window and page size make sense on this machine; every error names the variable and
/// what would work.
fn check_window(os_page: usize, page: usize, base: usize, size: usize) -> Result<(), ConfigError> {
    let page_s = page.to_string();
    if page == 0 || !page.is_multiple_of(os_page) || !page.is_power_of_two() {
        return Err(invalid(
            "SVM_PAGE_SIZE",
            &page_s,
            format!(
                "must be a power-of-two multiple of the OS page size {os_page} (e.g. {os_page}, \
                 {}, {})",
                os_page * 2,
                os_page * 16
            ),
        ));
    }
    if page > MAX_PAGE_SIZE {
        return Err(invalid(
            "SVM_PAGE_SIZE",
            &page_s,
            format!(
                "is too large: a page must fit in one message; the largest supported page is \
                 {MAX_PAGE_SIZE} ({} MiB)",
                MAX_PAGE_SIZE >> 20
            ),
        ));
    }
    let end = user_space_end();
    let base_s = format!("{base:#x}");
    let default = "the default 0x600000000000";
    if base == 0 {
        return Err(invalid(
            "SVM_SPACE_BASE",
            &base_s,
            format!("the window cannot start at address 0; use {default}"),
        ));
    }
    if !base.is_multiple_of(page) {
        return Err(invalid(
            "SVM_SPACE_BASE",
            &base_s,
            format!(
                "must be a multiple of the page size {page} (SVM_PAGE_SIZE), e.g. {:#x}",
                base / page * page + page
            ),
        ));
    }
    let min = mmap_min_addr();
    if base < min || base >= end {
        return Err(invalid(
            "SVM_SPACE_BASE",
            &base_s,
            format!("is outside the user address space ({min:#x}..{end:#x}); use {default}"),
        ));
    }
    let size_s = size.to_string();
    if size > end - min {
        return Err(invalid(
            "SVM_SPACE_SIZE",
            &size_s,
            format!(
                "is larger than the user address space ({}); the default is 64G",
                tib(end - min)
            ),
        ));
    }
    if size < page * 64 || !size.is_multiple_of(page) {
        return Err(invalid(
            "SVM_SPACE_SIZE",
            &size_s,
            format!(
                "must be a multiple of the page size {page} of at least 64 pages ({} bytes)",
                page * 64
            ),
        ));
    }
    if size > end - base {
        return Err(invalid(
            "SVM_SPACE_SIZE",
            &size_s,
            format!(
                "the window {base:#x}..{:#x} (SVM_SPACE_BASE + SVM_SPACE_SIZE) ends beyond the \
                 user address space at {end:#x}; at this base at most {}G fit",
                base as u128 + size as u128,
                (end - base) >> 30
            ),
        ));
    }
    Ok(())
}

/// `var` parsed as a `T` (surrounding blanks ignored) that `ok` accepts; unset: None;
/// anything else: an error saying `what` was expected.
fn checked<T: std::str::FromStr>(
    get: &dyn Fn(&str) -> Option<String>,
    var: &'static str,
    ok: impl Fn(&T) -> bool,
    what: impl Into<String>,
) -> Result<Option<T>, ConfigError> {
    let Some(v) = get(var) else {
        return Ok(None);
    };
    match v.trim().parse::<T>().ok().filter(|x| ok(x)) {
        Some(x) => Ok(Some(x)),
        None => Err(invalid(var, &v, what.into())),
    }
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
        // A switch of 0 or 1, `default` when unset.
        let switch = |var: &'static str, default: bool| match get(var).as_deref().map(str::trim) {
            None => Ok(default),
            Some("1") => Ok(true),
            Some("0") => Ok(false),
            Some(v) => Err(invalid(var, v, "expected 0 or 1")),
        };
        let on_unless_0 = |var: &'static str| switch(var, true);
        let host_barrier = on_unless_0("SVM_HOST_BARRIER")?;
        let unix_sockets = on_unless_0("SVM_UNIX_SOCKETS")?;
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
        check_window(os_page, page_size, space_base, space_size)?;
        let spin_polls = match get("SVM_SPIN") {
            None => None,
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| invalid("SVM_SPIN", &v, "expected a count"))?,
            ),
        };
        let cpus =
            match get("SVM_CPUS") {
                None => None,
                Some(v) => Some(svm_comm::placement::parse_cpu_list(&v).map_err(|why| {
                    invalid("SVM_CPUS", &v, format!("expected a CPU list: {why}"))
                })?),
            };
        let at_most = |var: &'static str, default: u64, max: u64, unit: &str| {
            let what = format!("expected {unit} from 0 to {max}");
            Ok(checked(get, var, |n: &u64| *n <= max, what)?.unwrap_or(default))
        };
        let prefetch = at_most("SVM_PREFETCH", 8, 256, "a page count")? as usize;
        let profile = get("SVM_PROFILE").map(std::path::PathBuf::from);
        let trace = get("SVM_TRACE").map(std::path::PathBuf::from);
        if profile.is_some() && profile == trace {
            return Err(invalid(
                "SVM_TRACE",
                &trace.unwrap_or_default().display().to_string(),
                "is also SVM_PROFILE: give the profile and the trace different files",
            ));
        }
        let fault_around = at_most("SVM_FAULT_AROUND", 64, 4096, "a page count")? as usize;
        let hold_us = at_most("SVM_HOLD_US", DEFAULT_HOLD_US, 1_000_000, "microseconds")?;
        let grant_around = at_most(
            "SVM_GRANT_AROUND",
            DEFAULT_GRANT_AROUND,
            4096,
            "a page count",
        )? as usize;
        let flush_after_us = at_most(
            "SVM_FLUSH_AFTER_US",
            DEFAULT_FLUSH_AFTER_US,
            1_000_000,
            "microseconds",
        )?;
        let release_delay_us = at_most(
            "SVM_RELEASE_DELAY_US",
            DEFAULT_RELEASE_DELAY_US,
            1_000_000,
            "microseconds",
        )?;
        let push = on_unless_0("SVM_PUSH")?;
        let lock_pages = switch("SVM_LOCK_PAGES", false)?;
        let first_touch = on_unless_0("SVM_FIRST_TOUCH")?;
        let home_migration = switch("SVM_HOME_MIGRATION", false)?;
        let engine_slice_us = checked(
            get,
            "SVM_ENGINE_SLICE_US",
            |us: &u64| *us == 0 || ENGINE_SLICE_US_RANGE.contains(us),
            "expected 0 (the kernel's default) or microseconds from 100 to 100000",
        )?
        .unwrap_or(DEFAULT_ENGINE_SLICE_US);
        let engine_nice = checked(
            get,
            "SVM_ENGINE_NICE",
            |n: &i32| (-20..=19).contains(n),
            "expected a nice value from -20 to 19",
        )?;
        let spin_wake = on_unless_0("SVM_SPIN_WAKE")?;
        let write_scan = on_unless_0("SVM_WRITE_SCAN")?;
        Ok(Config {
            push,
            lock_pages,
            first_touch,
            home_migration,
            engine_slice_us,
            engine_nice,
            spin_wake,
            write_scan,
            profile,
            trace,
            prefetch,
            fault_around,
            hold_us,
            grant_around,
            flush_after_us,
            release_delay_us,
            protocol,
            protocol_given,
            fault,
            transport,
            timeout,
            stats,
            verbose,
            host_barrier,
            unix_sockets,
            space_base,
            space_size,
            page_size,
            spin_polls,
            cpus,
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
        assert_eq!((c.profile, c.trace), (None, None));
        let c = cfg(&[("SVM_PROFILE", "p.md"), ("SVM_TRACE", "t.json")]).unwrap();
        assert_eq!(c.profile.unwrap().to_str(), Some("p.md"));
        assert_eq!(c.trace.unwrap().to_str(), Some("t.json"));
        assert!(cfg(&[("SVM_PROFILE", "x"), ("SVM_TRACE", "x")]).is_err());
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
        assert!(cfg(&[]).unwrap().host_barrier);
        assert!(!cfg(&[("SVM_HOST_BARRIER", "0")]).unwrap().host_barrier);
        assert!(cfg(&[]).unwrap().unix_sockets);
        assert!(cfg(&[("SVM_UNIX_SOCKETS", "1")]).unwrap().unix_sockets);
        assert!(!cfg(&[("SVM_UNIX_SOCKETS", "0")]).unwrap().unix_sockets);
        assert!(cfg(&[("SVM_UNIX_SOCKETS", "yes")]).is_err());
        let e = cfg(&[("SVM_HOST_BARRIER", "yes")]).unwrap_err().to_string();
        assert!(
            e.contains("SVM_HOST_BARRIER") && e.contains("0 or 1"),
            "{e}"
        );
        assert_eq!(cfg(&[]).unwrap().cpus, None);
        assert_eq!(
            cfg(&[("SVM_CPUS", "1,3-4")]).unwrap().cpus,
            Some(vec![1, 3, 4])
        );
        let e = cfg(&[("SVM_CPUS", "two")]).unwrap_err().to_string();
        assert!(e.contains("SVM_CPUS") && e.contains("CPU list"), "{e}");
        let e = cfg(&[("SVM_TRANSPORT", "sci")]).unwrap_err().to_string();
        assert!(e.contains("unknown transport"), "{e}");
    }

    #[test]
    fn flush_after_and_release_delay() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.flush_after_us, c.release_delay_us),
            (DEFAULT_FLUSH_AFTER_US, DEFAULT_RELEASE_DELAY_US)
        );
        let c = cfg(&[("SVM_FLUSH_AFTER_US", "0"), ("SVM_RELEASE_DELAY_US", "0")]).unwrap();
        assert_eq!((c.flush_after_us, c.release_delay_us), (0, 0));
        let c = cfg(&[("SVM_FLUSH_AFTER_US", "1000000")]).unwrap();
        assert_eq!(c.flush_after_us, 1_000_000);
        says(
            &[("SVM_FLUSH_AFTER_US", "1000001")],
            "SVM_FLUSH_AFTER_US",
            "microseconds",
        );
        says(
            &[("SVM_RELEASE_DELAY_US", "soon")],
            "SVM_RELEASE_DELAY_US",
            "microseconds",
        );
    }

    #[test]
    fn hold_and_push() {
        let c = cfg(&[]).unwrap();
        assert_eq!((c.hold_us, c.push), (DEFAULT_HOLD_US, true));
        let c = cfg(&[("SVM_HOLD_US", " 0 "), ("SVM_PUSH", "0")]).unwrap();
        assert_eq!((c.hold_us, c.push), (0, false));
        assert!(!cfg(&[]).unwrap().lock_pages);
        assert!(cfg(&[("SVM_LOCK_PAGES", "1")]).unwrap().lock_pages);
        assert!(!cfg(&[("SVM_LOCK_PAGES", "0")]).unwrap().lock_pages);
        assert!(cfg(&[]).unwrap().first_touch);
        assert!(!cfg(&[("SVM_FIRST_TOUCH", "0")]).unwrap().first_touch);
        says(&[("SVM_FIRST_TOUCH", "yes")], "SVM_FIRST_TOUCH", "0 or 1");
        assert!(!cfg(&[]).unwrap().home_migration);
        assert!(cfg(&[("SVM_HOME_MIGRATION", "1")]).unwrap().home_migration);
        assert!(!cfg(&[("SVM_HOME_MIGRATION", "0")]).unwrap().home_migration);
        says(
            &[("SVM_HOME_MIGRATION", "on")],
            "SVM_HOME_MIGRATION",
            "0 or 1",
        );
        assert_eq!(
            cfg(&[("SVM_HOLD_US", "1000000")]).unwrap().hold_us,
            1_000_000
        );
        says(&[("SVM_HOLD_US", "1000001")], "SVM_HOLD_US", "microseconds");
        says(&[("SVM_HOLD_US", "-5")], "SVM_HOLD_US", "microseconds");
        assert_eq!(
            cfg(&[]).unwrap().grant_around,
            DEFAULT_GRANT_AROUND as usize
        );
        assert_eq!(cfg(&[("SVM_GRANT_AROUND", "0")]).unwrap().grant_around, 0);
        says(
            &[("SVM_GRANT_AROUND", "4097")],
            "SVM_GRANT_AROUND",
            "page count",
        );
        says(
            &[("SVM_GRANT_AROUND", "all")],
            "SVM_GRANT_AROUND",
            "page count",
        );
        says(&[("SVM_PUSH", "on")], "SVM_PUSH", "0 or 1");
        says(&[("SVM_LOCK_PAGES", "yes")], "SVM_LOCK_PAGES", "0 or 1");
    }

    #[test]
    fn engine_nice() {
        assert_eq!(cfg(&[]).unwrap().engine_nice, None);
        for (v, n) in [("-20", -20), (" 0 ", 0), ("19", 19)] {
            assert_eq!(cfg(&[("SVM_ENGINE_NICE", v)]).unwrap().engine_nice, Some(n));
        }
        for v in ["-21", "20", "low"] {
            says(
                &[("SVM_ENGINE_NICE", v)],
                "SVM_ENGINE_NICE",
                "from -20 to 19",
            );
        }
    }

    #[test]
    fn spin_wake() {
        assert!(cfg(&[]).unwrap().spin_wake, "on by default");
        assert!(cfg(&[("SVM_SPIN_WAKE", "1")]).unwrap().spin_wake);
        assert!(!cfg(&[("SVM_SPIN_WAKE", "0")]).unwrap().spin_wake);
        says(&[("SVM_SPIN_WAKE", "on")], "SVM_SPIN_WAKE", "0 or 1");
    }

    #[test]
    fn write_scan() {
        assert!(cfg(&[]).unwrap().write_scan, "on by default");
        assert!(!cfg(&[("SVM_WRITE_SCAN", "0")]).unwrap().write_scan);
        says(&[("SVM_WRITE_SCAN", "yes")], "SVM_WRITE_SCAN", "0 or 1");
    }

    #[test]
    fn engine_slice() {
        assert_eq!(cfg(&[]).unwrap().engine_slice_us, DEFAULT_ENGINE_SLICE_US);
        for (v, us) in [
            ("0", 0),
            ("100", 100),
            (" 2000 ", 2000),
            ("100000", 100_000),
        ] {
            assert_eq!(
                cfg(&[("SVM_ENGINE_SLICE_US", v)]).unwrap().engine_slice_us,
                us
            );
        }
        for v in ["99", "100001", "fast", "-1"] {
            says(
                &[("SVM_ENGINE_SLICE_US", v)],
                "SVM_ENGINE_SLICE_US",
                "from 100 to 100000",
            );
        }
    }

    fn says(vars: &[(&str, &str)], var: &str, what: &str) {
        let e = cfg(vars).unwrap_err().to_string();
        assert!(e.starts_with(var) && e.contains(what), "{vars:?}: {e}");
    }

    #[test]
    fn bad_windows_and_pages_name_the_variable() {
        says(&[("SVM_SPACE_BASE", "0")], "SVM_SPACE_BASE", "address 0");
        says(
            &[("SVM_SPACE_BASE", "0x600000000001")],
            "SVM_SPACE_BASE",
            "multiple",
        );
        let top = format!("{:#x}", user_space_end() / 4096 * 4096);
        says(&[("SVM_SPACE_BASE", &top)], "SVM_SPACE_BASE", "outside");
        says(
            &[("SVM_SPACE_BASE", "0xffff800000000000")],
            "SVM_SPACE_BASE",
            "outside",
        );
        says(
            &[("SVM_SPACE_SIZE", "100T")],
            "SVM_SPACE_SIZE",
            "ends beyond",
        );
        says(
            &[("SVM_SPACE_SIZE", "1000T")],
            "SVM_SPACE_SIZE",
            "larger than",
        );
        says(&[("SVM_SPACE_SIZE", "4096")], "SVM_SPACE_SIZE", "64 pages");
        says(&[("SVM_PAGE_SIZE", "1G")], "SVM_PAGE_SIZE", "too large");
        says(
            &[("SVM_PAGE_SIZE", "12288")],
            "SVM_PAGE_SIZE",
            "power-of-two",
        );
        says(&[("SVM_PAGE_SIZE", "0")], "SVM_PAGE_SIZE", "power-of-two");
        assert!(cfg(&[("SVM_PAGE_SIZE", "16M")]).is_ok());
        assert!(cfg(&[("SVM_SPACE_BASE", "0x100000000"), ("SVM_SPACE_SIZE", "1G")]).is_ok());
    }
}
