//! Where shared memory was allocated.
//!
//! At allocation (only while profiling) the native API records the `#[track_caller]` location
//! of its caller and the raw return addresses of the stack (`backtrace::trace`, no
//! symbolisation). At finish, [`resolve`] decides per allocation:
//! - svm-core linked into the main executable (a Rust program): the caller's `file:line`;
//! - svm-core inside a shared library (a C personality, `libsvm_*.so`): the first return
//!   address outside that library is the C program's call (G_MALLOC, SMI_Cmalloc, cvm_alloc,
//!   …), symbolised with `backtrace` (gimli/addr2line): `function (file:line)` with debug
//!   information, else `function` from the symbol table, else `module+offset`; when that
//!   address is not in the executable (libc starting the personality's own set-up) the
//!   runtime allocated for itself: `svm runtime (file:line)`.
//!
//! Static data (the SPLASH/CVM personalities share the program's `.data`/`.bss`) is named by
//! [`static_symbols`] from the executable's own symbol table (`object`).

use std::collections::BTreeMap;
use std::panic::Location;

use serde::{Deserialize, Serialize};

use crate::PageId;

/// Most stack frames looked at per allocation.
const MAX_FRAMES: usize = 24;

/// An allocation as recorded on the hot path (no symbolisation).
pub struct Captured {
    addr: usize,
    len: usize,
    collective: bool,
    loc: &'static Location<'static>,
    ips: Vec<usize>,
}

impl Captured {
    pub fn here(
        addr: usize,
        len: usize,
        collective: bool,
        loc: &'static Location<'static>,
    ) -> Captured {
        let mut ips = Vec::with_capacity(MAX_FRAMES);
        backtrace::trace(|f| {
            ips.push(f.ip() as usize);
            ips.len() < MAX_FRAMES
        });
        Captured {
            addr,
            len,
            collective,
            loc,
            ips,
        }
    }
}

/// A resolved allocation site.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Site {
    pub addr: usize,
    pub len: usize,
    pub collective: bool,
    /// `file:line` (Rust) or the C caller's function.
    pub site: String,
}

/// One mapping of `/proc/self/maps` with a file behind it.
struct Map {
    start: usize,
    end: usize,
    offset: usize,
    path: String,
}

fn maps() -> Vec<Map> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let _perms = f.next()?;
            let offset = usize::from_str_radix(f.next()?, 16).ok()?;
            let _dev = f.next()?;
            let _inode = f.next()?;
            let path = f.next()?.to_string();
            if !path.starts_with('/') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Map {
                start: usize::from_str_radix(a, 16).ok()?,
                end: usize::from_str_radix(b, 16).ok()?,
                offset,
                path,
            })
        })
        .collect()
}

fn module_of(maps: &[Map], ip: usize) -> Option<&Map> {
    maps.iter().find(|m| ip >= m.start && ip < m.end)
}

fn marker() {}

/// Symbolises one return address: `function (file:line)`, `function`, or `module+0xoff`.
fn symbolise(maps: &[Map], ip: usize) -> String {
    let mut name = None;
    let mut file_line = None;
    // The return address points after the call: look up the call instruction itself.
    backtrace::resolve((ip - 1) as *mut std::ffi::c_void, |s| {
        if name.is_none() {
            name = s.name().map(|n| format!("{n:#}"));
        }
        if file_line.is_none() {
            if let (Some(f), Some(l)) = (s.filename(), s.lineno()) {
                let f = f
                    .file_name()
                    .map(|x| x.to_string_lossy().into_owned())
                    .unwrap_or_default();
                file_line = Some(format!("{f}:{l}"));
            }
        }
    });
    match (name, file_line) {
        (Some(n), Some(fl)) => format!("{n} ({fl})"),
        (Some(n), None) => n,
        _ => match module_of(maps, ip) {
            Some(m) => {
                let base = m.path.rsplit('/').next().unwrap_or(&m.path);
                format!("{base}+{:#x}", ip - m.start + m.offset)
            }
            None => format!("{ip:#x}"),
        },
    }
}

/// Resolves the recorded allocations (see the module documentation).
pub fn resolve(caps: &[Captured]) -> Vec<Site> {
    if caps.is_empty() {
        return Vec::new();
    }
    let maps = maps();
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let core = module_of(&maps, marker as fn() as usize).map(|m| m.path.clone());
    let rust_program = core.as_deref().is_none_or(|c| c == exe);
    let mut cache: BTreeMap<usize, String> = BTreeMap::new();
    caps.iter()
        .map(|c| {
            let rust = || format!("{}:{}", c.loc.file(), c.loc.line());
            let site = if rust_program {
                rust()
            } else {
                let outside = c.ips.iter().copied().find(|ip| {
                    module_of(&maps, *ip).map(|m| Some(&m.path) != core.as_ref()) == Some(true)
                });
                // A caller in the executable is the program's; one elsewhere (libc starting
                // the personality) means the runtime allocated for itself.
                let in_exe = |ip: usize| module_of(&maps, ip).is_some_and(|m| m.path == exe);
                match outside {
                    Some(ip) if in_exe(ip) => cache
                        .entry(ip)
                        .or_insert_with(|| symbolise(&maps, ip))
                        .clone(),
                    _ => format!("svm runtime ({})", rust()),
                }
            };
            Site {
                addr: c.addr,
                len: c.len,
                collective: c.collective,
                site,
            }
        })
        .collect()
}

/// Names of the executable's data symbols on each static page (`(page, address)` pairs).
pub fn static_symbols(
    pages: &[(PageId, usize)],
    page_size: usize,
) -> BTreeMap<PageId, Vec<String>> {
    let mut out = BTreeMap::new();
    if pages.is_empty() {
        return out;
    }
    let syms = exe_data_symbols();
    for &(page, addr) in pages {
        let end = addr + page_size;
        let i = syms.partition_point(|s| s.0 + s.1.max(1) <= addr);
        let names: Vec<String> = syms[i..]
            .iter()
            .take_while(|s| s.0 < end)
            .filter(|s| s.0 + s.1.max(1) > addr)
            .take(8)
            .map(|s| s.2.clone())
            .collect();
        out.insert(page, names);
    }
    out
}

/// The executable's data/bss symbols as (run-time address, size, name), sorted by address.
fn exe_data_symbols() -> Vec<(usize, usize, String)> {
    use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
    let Ok(data) = std::fs::read("/proc/self/exe") else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Load bias: where the first file byte is mapped, minus the lowest segment address.
    let low = file.segments().map(|s| s.address()).min().unwrap_or(0) as usize;
    let bias = maps()
        .iter()
        .filter(|m| m.path == exe && m.offset == 0)
        .map(|m| m.start)
        .min()
        .map(|s| s.wrapping_sub(low))
        .unwrap_or(0);
    let mut syms: Vec<(usize, usize, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Data && !s.is_undefined())
        .filter_map(|s| {
            let name = s.name().ok()?;
            // Runtime and linker symbols (`__dso_handle`, `__TMC_END__`, …) say nothing.
            if name.is_empty() || name.starts_with("__") {
                return None;
            }
            let name = format!("{:#}", backtrace::SymbolName::new(name.as_bytes()));
            Some((
                (s.address() as usize).wrapping_add(bias),
                s.size() as usize,
                name,
            ))
        })
        .collect();
    syms.sort();
    syms.dedup_by(|a, b| a.0 == b.0 && a.2 == b.2);
    syms
}
