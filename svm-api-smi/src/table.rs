//! The region table of this process: what each SMI region is (kind, flags, where its memory
//! lies and who homes it, how it is shared) and the lookups by id and address. A leaf: it
//! knows nothing of how regions are made (`region.rs`), replicated (`repl.rs`) or scheduled
//! over (`loops.rs`).

use std::ffi::c_int;

use crate::consts::*;
use crate::{Res, Smi};

pub(crate) type Callback = extern "C" fn(c_int, c_int) -> c_int;

/// The distribution of a region (the low bits of SMI's `region_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Undivided,
    Blocked,
    Cyclic,
    Customized,
    Smp,
    Pt2pt,
    Fragmented,
    Local,
    Remote,
    Rdma,
}

/// A flag OR-ed into SMI's `region_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flag {
    Delayed,
    Nonfixed,
    Register,
    Private,
    Intern,
    Shrinkable,
    Callback,
}

impl Flag {
    const ALL: [Flag; 7] = [
        Flag::Delayed,
        Flag::Nonfixed,
        Flag::Register,
        Flag::Private,
        Flag::Intern,
        Flag::Shrinkable,
        Flag::Callback,
    ];

    /// The flag's bit in SMI's `region_type`.
    pub fn bit(self) -> c_int {
        match self {
            Flag::Delayed => SHM_DELAYED,
            Flag::Nonfixed => SHM_NONFIXED,
            Flag::Register => SHM_REGISTER,
            Flag::Private => SHM_PRIVATE,
            Flag::Intern => SHM_INTERN,
            Flag::Shrinkable => SHM_SHRINKABLE,
            Flag::Callback => SHM_CALLBACK,
        }
    }
}

/// A set of [`Flag`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Flags(u8);

impl Flags {
    pub fn has(self, f: Flag) -> bool {
        self.0 & (1 << f as u8) != 0
    }
    pub fn insert(&mut self, f: Flag) {
        self.0 |= 1 << f as u8;
    }
    /// The bits SMI programs use.
    pub fn bits(self) -> c_int {
        Flag::ALL
            .iter()
            .filter(|f| self.has(**f))
            .fold(0, |b, f| b | f.bit())
    }
}

impl Kind {
    /// The kind and flags of SMI's `region_type`; None for an unknown kind or flag bit.
    pub fn parse(region_type: c_int) -> Option<(Kind, Flags)> {
        let mut flags = Flags::default();
        let mut rest = region_type;
        for f in Flag::ALL {
            if rest & f.bit() != 0 {
                flags.insert(f);
                rest &= !f.bit();
            }
        }
        let kind = match rest {
            SHM_UNDIVIDED => Kind::Undivided,
            SHM_BLOCKED => Kind::Blocked,
            SHM_CYCLIC => Kind::Cyclic,
            SHM_CUSTOMIZED => Kind::Customized,
            SHM_SMP => Kind::Smp,
            SHM_PT2PT => Kind::Pt2pt,
            SHM_FRAGMENTED => Kind::Fragmented,
            SHM_LOCAL => Kind::Local,
            SHM_REMOTE => Kind::Remote,
            SHM_RDMA => Kind::Rdma,
            _ => return None,
        };
        Some((kind, flags))
    }

    /// SMI's value of the kind.
    pub fn value(self) -> c_int {
        match self {
            Kind::Undivided => SHM_UNDIVIDED,
            Kind::Blocked => SHM_BLOCKED,
            Kind::Cyclic => SHM_CYCLIC,
            Kind::Customized => SHM_CUSTOMIZED,
            Kind::Smp => SHM_SMP,
            Kind::Pt2pt => SHM_PT2PT,
            Kind::Fragmented => SHM_FRAGMENTED,
            Kind::Local => SHM_LOCAL,
            Kind::Remote => SHM_REMOTE,
            Kind::Rdma => SHM_RDMA,
        }
    }
}

/// How a region's memory came to this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Collective allocation (every process has it at the same address).
    Collective,
    /// This process's arena (LOCAL, SMP, PT2PT owner): freed with free_local.
    Local,
    /// Imported from another process's directory (REMOTE, RDMA, PT2PT partner).
    Imported,
}

#[derive(Debug)]
pub(crate) struct Region {
    pub id: c_int,
    pub kind: Kind,
    pub flags: Flags,
    pub addr: usize,
    /// Size the program sees (rounded up to pages).
    pub size: usize,
    pub owner: usize,
    pub sgmt_id: c_int,
    pub offset: usize,
    /// (address, bytes, home rank) of each contiguous piece.
    pub segs: Vec<(usize, usize, usize)>,
    pub origin: Origin,
    pub connected: bool,
    /// The program may use the address (false for RDMA: only Put/Get).
    pub mapped: bool,
    /// FRAGMENTED: the array of per-process pointers handed to the program.
    pub frags: Option<Box<[usize]>>,
    pub cb: Option<Callback>,
    pub importers: Vec<usize>,
    /// Directory key and owner of an imported region not yet connected (REMOTE | DELAYED).
    pub import: Option<(usize, u64)>,
    /// Directory key under which this process exported the region.
    pub export: Option<u64>,
    pub mmu: bool,
    /// REGISTER: the DSM copy (in this process's arena) that importers see; `addr` is the
    /// program's own buffer.
    pub shadow: Option<usize>,
}

impl Region {
    pub fn contains(&self, a: usize, len: usize) -> bool {
        a >= self.addr && a.saturating_add(len) <= self.addr + self.size
    }
}

pub(crate) fn new_region(
    s: &Smi,
    kind: Kind,
    flags: Flags,
    addr: usize,
    size: usize,
    owner: usize,
    origin: Origin,
) -> Region {
    let mut st = s.st();
    let id = st.next_region;
    st.next_region += 1;
    Region {
        id,
        kind,
        flags,
        addr,
        size,
        owner,
        sgmt_id: id,
        offset: 0,
        segs: vec![(addr, size, owner)],
        origin,
        connected: true,
        mapped: true,
        frags: None,
        cb: None,
        importers: Vec::new(),
        import: None,
        export: None,
        mmu: false,
        shadow: None,
    }
}

/// Runs `f` on region `id` of this process.
pub(crate) fn with_region<T>(s: &Smi, id: c_int, f: impl FnOnce(&mut Region) -> Res<T>) -> Res<T> {
    let mut st = s.st();
    let r = st
        .regions
        .iter_mut()
        .find(|r| r.id == id)
        .ok_or(SMI_ERR_PARAM)?;
    f(r)
}

pub(crate) fn find_range(s: &Smi, a: usize, len: usize) -> Res<c_int> {
    let st = s.st();
    st.regions
        .iter()
        .filter(|r| r.connected && r.size > 0)
        .find(|r| r.contains(a, len.max(1)))
        .map(|r| r.id)
        .ok_or(SMI_ERR_BADADR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_types_parse_into_kind_and_flags() {
        let (k, f) = Kind::parse(SHM_LOCAL | SHM_REGISTER | SHM_PRIVATE).unwrap();
        assert_eq!(k, Kind::Local);
        assert!(f.has(Flag::Register) && f.has(Flag::Private) && !f.has(Flag::Delayed));
        assert_eq!(f.bits(), SHM_REGISTER | SHM_PRIVATE);
        for v in 0..=SHM_RDMA {
            assert_eq!(Kind::parse(v).unwrap().0.value(), v);
        }
        assert!(Kind::parse(10).is_none());
        assert!(Kind::parse(SHM_UNDIVIDED | (1 << 20)).is_none());
    }
}
