//! Regions of the native API: collective allocations with their own home policy and protocol
//! that can be destroyed (their range is reused), with collective allocations inside them.
//!
//! Region ids are small integers given out lowest-free-first, so every node — making the same
//! collective calls in the same order — names a region by the same id.

use std::sync::Mutex;

use crate::api::{self, Result, SvmError};
use crate::space::{Arena, Home, SpaceError};

/// What a region is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInfo {
    /// The region's id (≥ 1).
    pub id: u32,
    /// Address of its first byte (page aligned; the same on every node).
    pub addr: usize,
    /// Its size in bytes as asked for.
    pub size: usize,
    /// Its coherence protocol.
    pub protocol: String,
}

struct Entry {
    info: RegionInfo,
    /// Collective allocations inside the region.
    heap: Arena,
}

static REGIONS: Mutex<Vec<Option<Entry>>> = Mutex::new(Vec::new());

/// Alignment of allocations inside a region.
pub const REGION_ALIGN: usize = 16;

fn table() -> std::sync::MutexGuard<'static, Vec<Option<Entry>>> {
    REGIONS.lock().unwrap_or_else(|p| p.into_inner())
}

fn bad(id: u32) -> SvmError {
    SvmError::BadRegion {
        node: api::node_id() as crate::NodeId,
        id,
    }
}

/// Creates a region of `size` bytes (collective: every node calls it in the same order with
/// the same arguments) homed by `home`, with coherence protocol `protocol` (`None`: the job's
/// default, `SVM_PROTOCOL`). Its memory reads as zeros.
pub fn create(size: usize, home: Home, protocol: Option<&str>) -> Result<RegionInfo> {
    let n = api::node()?;
    let (addr, protocol) = match protocol {
        Some(p) => (
            api::alloc_collective_in::<u8>(size, home, p)?.addr(),
            p.to_string(),
        ),
        None => (
            api::alloc_collective_with::<u8>(size, home)?.addr(),
            n.protocol_name().to_string(),
        ),
    };
    let mut t = table();
    let slot = t.iter().position(Option::is_none).unwrap_or_else(|| {
        t.push(None);
        t.len() - 1
    });
    let info = RegionInfo {
        id: slot as u32 + 1,
        addr,
        size,
        protocol,
    };
    t[slot] = Some(Entry {
        info: info.clone(),
        heap: Arena::new(addr, addr + size),
    });
    Ok(info)
}

/// Takes a live region out of the table (to destroy it).
fn take(id: u32) -> Result<Entry> {
    let mut t = table();
    let slot = (id as usize).checked_sub(1).ok_or_else(|| bad(id))?;
    t.get_mut(slot)
        .and_then(Option::take)
        .ok_or_else(|| bad(id))
}

/// Destroys region `id` (collective, same order on every node, no thread using it any more):
/// its pages are forgotten everywhere, their memory is released, and its address range and id
/// are reused by later regions. Destroying an unknown or destroyed region is an error.
pub fn destroy(id: u32) -> Result<()> {
    api::node()?;
    let e = take(id)?;
    match api::free_collective(e.info.addr) {
        Ok(()) => Ok(()),
        Err(err) => {
            table()[id as usize - 1] = Some(e);
            Err(err)
        }
    }
}

fn with<R>(id: u32, f: impl FnOnce(&mut Entry) -> Result<R>) -> Result<R> {
    api::node()?;
    let mut t = table();
    let slot = (id as usize).checked_sub(1).ok_or_else(|| bad(id))?;
    match t.get_mut(slot).and_then(Option::as_mut) {
        Some(e) => f(e),
        None => Err(bad(id)),
    }
}

/// What region `id` is.
pub fn info(id: u32) -> Result<RegionInfo> {
    with(id, |e| Ok(e.info.clone()))
}

/// The region holding `addr`, and the offset of `addr` in it.
pub fn lookup(addr: usize) -> Result<Option<(RegionInfo, usize)>> {
    api::node()?;
    Ok(table().iter().flatten().find_map(|e| {
        let off = addr.checked_sub(e.info.addr)?;
        (off < e.info.size).then(|| (e.info.clone(), off))
    }))
}

/// Collective allocation of `bytes` inside region `id` (every node in the same order: the same
/// address everywhere), aligned to [`REGION_ALIGN`].
pub fn alloc(id: u32, bytes: usize) -> Result<usize> {
    with(id, |e| {
        let node = api::node_id() as crate::NodeId;
        if bytes == 0 {
            return Err(SvmError::Space {
                node,
                err: SpaceError::Empty,
            });
        }
        e.heap
            .alloc(bytes, REGION_ALIGN, "the region's")
            .map_err(|err| SvmError::Space { node, err })
    })
}

/// Frees an allocation of [`alloc`] (collective, like it).
pub fn free(id: u32, addr: usize) -> Result<()> {
    with(id, |e| {
        e.heap
            .free(addr)
            .map(|_| ())
            .map_err(|err| SvmError::Space {
                node: api::node_id() as crate::NodeId,
                err,
            })
    })
}
