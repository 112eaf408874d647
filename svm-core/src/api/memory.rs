//! The native API's shared memory: [`SharedSlice`] and the collective and local allocations.

use super::*;

/// A slice of `T` in the shared window. Copyable; the same address means the same data on every
/// node. Element access is volatile (another node may change the data between two reads).
pub struct SharedSlice<T: bytemuck::Pod> {
    addr: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod> Clone for SharedSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: bytemuck::Pod> Copy for SharedSlice<T> {}

impl<T: bytemuck::Pod> std::fmt::Debug for SharedSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedSlice<{}>({:#x}, len {})",
            std::any::type_name::<T>(),
            self.addr,
            self.len
        )
    }
}

impl<T: bytemuck::Pod> SharedSlice<T> {
    fn bounds(&self) -> (usize, usize) {
        (self.addr, self.len * std::mem::size_of::<T>())
    }

    /// Rebuilds a slice from an address and length another node published (e.g. stored in
    /// shared memory). The range must lie in the shared window.
    pub fn from_raw_parts(addr: usize, len: usize) -> Result<Self> {
        let n = node()?;
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if !n.space.contains(addr)
            || bytes == usize::MAX
            || !n.space.contains(addr + bytes.max(1) - 1)
        {
            return Err(SvmError::Space {
                node: n.me,
                err: SpaceError::BadFree { addr },
            });
        }
        Ok(SharedSlice {
            addr,
            len,
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Address of element 0 in the shared window.
    pub fn addr(&self) -> usize {
        self.addr
    }

    fn at(&self, i: usize) -> usize {
        assert!(
            i < self.len,
            "index {i} out of bounds of a shared slice of length {}",
            self.len
        );
        self.addr + i * std::mem::size_of::<T>()
    }

    pub fn get(&self, i: usize) -> T {
        sys::app_load(self.bounds(), self.at(i))
    }

    pub fn set(&self, i: usize, v: T) {
        sys::app_store(self.bounds(), self.at(i), v)
    }

    /// Copies `dst.len()` elements starting at `start` out of shared memory.
    pub fn read_into(&self, start: usize, dst: &mut [T]) {
        assert!(
            start.checked_add(dst.len()).is_some_and(|e| e <= self.len),
            "range out of bounds"
        );
        for (addr, r) in self.copy_chunks(start, dst.len(), false) {
            sys::app_copy_out(self.bounds(), addr, &mut dst[r]);
        }
    }

    /// Copies `src` into shared memory starting at element `start`.
    pub fn write_from(&self, start: usize, src: &[T]) {
        assert!(
            start.checked_add(src.len()).is_some_and(|e| e <= self.len),
            "range out of bounds"
        );
        for (addr, r) in self.copy_chunks(start, src.len(), true) {
            sys::app_copy_in(self.bounds(), addr, &src[r]);
        }
    }

    /// The chunks of a bulk copy of `len` elements from element `start` on: each chunk's
    /// address and its elements' range within the copy, at most [`COPY_CHUNK_BYTES`] each.
    /// Before a chunk is yielded its pages are asked for at once (`Node::prefetch`, for
    /// writing if `write`), so their transfers overlap; a longer copy goes chunk by chunk, so
    /// a copy of a large range does not put a request for every page of it in flight at once.
    fn copy_chunks(
        &self,
        start: usize,
        len: usize,
        write: bool,
    ) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        let elem = std::mem::size_of::<T>();
        let per_chunk = (COPY_CHUNK_BYTES / elem.max(1)).max(1);
        (0..len).step_by(per_chunk).map(move |from| {
            let to = (from + per_chunk).min(len);
            let addr = self.addr + (start + from) * elem;
            if let Ok(n) = node() {
                n.prefetch(addr, (to - from) * elem, write);
            }
            (addr, from..to)
        })
    }

    /// The elements in place, as cells: read with `get`, write with `set`, no copy. Faults
    /// on pages this node does not hold are served as for any access. Like `Cell`, the view
    /// stays on this thread; threads or nodes must synchronise (locks, barriers) before reading
    /// what others write, as with every accessor. Reads are not volatile: a loop waiting for
    /// another node to change an element must use [`SharedSlice::get`].
    pub fn cells(&self) -> &[std::cell::Cell<T>] {
        sys::app_cells(self.bounds(), self.addr, self.len)
    }

    /// A sub-slice `[start, start+len)`.
    pub fn slice(&self, start: usize, len: usize) -> SharedSlice<T> {
        assert!(
            start.checked_add(len).is_some_and(|e| e <= self.len),
            "sub-slice out of bounds"
        );
        SharedSlice {
            addr: self.addr + start * std::mem::size_of::<T>(),
            len,
            _t: PhantomData,
        }
    }
}

fn bytes_of<T>(len: usize, n: &Node) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b > 0)
        .ok_or(SvmError::Space {
            node: n.me,
            err: SpaceError::Empty,
        })
}

/// Bytes of a bulk copy whose pages are asked for at once ([`SharedSlice::copy_chunks`]).
const COPY_CHUNK_BYTES: usize = 256 * 1024;

/// Collective allocation homed on node 0: every node calls it in the same order and gets the
/// same address. Zero-initialised.
#[track_caller]
pub fn alloc_collective<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    alloc_collective_with(len, Home::Node(0))
}

/// Collective allocation with a home policy.
#[track_caller]
pub fn alloc_collective_with<T: bytemuck::Pod>(
    len: usize,
    home: SpaceHome,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    collective_slice(n, len, std::panic::Location::caller(), |bytes| {
        n.space.alloc_collective(bytes, home)
    })
}

/// Collective allocation of a region with its own home policy and coherence protocol
/// (`"sc-sw"`, `"sc-mw"`, `"scope"`): different regions may use different protocols in one
/// run.
#[track_caller]
pub fn alloc_collective_in<T: bytemuck::Pod>(
    len: usize,
    home: SpaceHome,
    protocol: &str,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    let proto = crate::protocol::protocol_id(protocol)
        .ok_or_else(|| SvmError::UnknownProtocol(protocol.to_string()))?;
    collective_slice(n, len, std::panic::Location::caller(), |bytes| {
        n.space.alloc_collective_proto(bytes, home, proto)
    })
}

/// A collective allocation of `len` elements by `alloc` (given the bytes), recorded for the
/// profiler at `caller`; messages held back for its pages are looked at again.
fn collective_slice<T: bytemuck::Pod>(
    n: &Node,
    len: usize,
    caller: &'static std::panic::Location<'static>,
    alloc: impl FnOnce(usize) -> std::result::Result<usize, SpaceError>,
) -> Result<SharedSlice<T>> {
    let bytes = bytes_of::<T>(len, n)?;
    let addr = alloc(bytes).map_err(|err| SvmError::Space { node: n.me, err })?;
    if crate::profile::on() {
        crate::profile::allocated(addr, bytes, true, caller);
    }
    // Before the messages held back for the region are looked at: none of its pages has
    // engine state yet.
    n.scan_home_writes(
        addr,
        bytes.div_ceil(n.space.page_size()) * n.space.page_size(),
    );
    n.retry_deferred();
    Ok(SharedSlice {
        addr,
        len,
        _t: PhantomData,
    })
}

/// Allocation in this node's arena: no messages; homed on this node. Other nodes may use it
/// once they learn its address (e.g. through a collective slice).
#[track_caller]
pub fn alloc_local<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    local_slice(len, Space::alloc_local, std::panic::Location::caller())
}

/// Allocation in this node's arena whose pages are each homed on the first node that touches
/// them (no messages at allocation; the first touch of a page asks its directory node, one
/// round trip). For data one node allocates and others initialise and then mostly write
/// themselves — a master allocating for its workers — under the home-based protocols
/// (`sc-mw`, `scope`), whose homes receive every diff. Free it with [`free_local`].
#[track_caller]
pub fn alloc_local_first_touch<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    local_slice(
        len,
        Space::alloc_local_first_touch,
        std::panic::Location::caller(),
    )
}

/// A slice of `len` elements from one of this node's local allocators.
fn local_slice<T: bytemuck::Pod>(
    len: usize,
    alloc: fn(&Space, usize) -> std::result::Result<usize, SpaceError>,
    caller: &'static std::panic::Location<'static>,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    let bytes = bytes_of::<T>(len, n)?;
    let addr = alloc(&n.space, bytes).map_err(|err| SvmError::Space { node: n.me, err })?;
    if crate::profile::on() {
        crate::profile::allocated(addr, bytes, false, caller);
    }
    Ok(SharedSlice {
        addr,
        len,
        _t: PhantomData,
    })
}

/// Frees a slice from [`alloc_local`] or [`alloc_local_first_touch`] (only on the node that
/// allocated it).
pub fn free_local<T: bytemuck::Pod>(s: SharedSlice<T>) -> Result<()> {
    let n = node()?;
    n.space
        .free_local(s.addr)
        .map_err(|err| SvmError::Space { node: n.me, err })
}
