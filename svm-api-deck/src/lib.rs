//! The DECK C API (`include/deck.h`), over svm-comm's µDECK.
//!
//! Every exported function catches panics and returns an error code: no panic crosses the C
//! boundary. Pointers are checked for NULL; beyond that the caller's pointers must be valid as
//! `deck.h` documents (the usual C contract).

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use svm_comm::deck::{Deck, DeckError, Mbox, MboxId, Message};

pub const DECK_OK: c_int = 0;
pub const DECK_ERROR: c_int = -1;
pub const DECK_EINVAL: c_int = -2;
pub const DECK_ETIMEDOUT: c_int = -3;
pub const DECK_EOVERFLOW: c_int = -4;
pub const DECK_EEND: c_int = -5;
pub const DECK_ETYPE: c_int = -6;
pub const DECK_ENOINIT: c_int = -7;
pub const DECK_EAGAIN: c_int = -8;
pub const DECK_EINTERNAL: c_int = -9;

/// `deck_mbox_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct deck_mbox_t {
    pub node: u32,
    pub id: u32,
}

/// `deck_msg_t` (opaque to C).
pub struct deck_msg_t(Message);

struct State {
    deck: Arc<Deck>,
    owned: HashMap<u32, Arc<Mbox>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_error(s: String) {
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn code(e: DeckError) -> c_int {
    let c = match &e {
        DeckError::Overflow { .. } => DECK_EOVERFLOW,
        DeckError::EndOfMessage => DECK_EEND,
        DeckError::TypeMismatch { .. } => DECK_ETYPE,
        DeckError::NoSuchNode(_) | DeckError::NoSuchMailbox(_) | DeckError::BadName => DECK_EINVAL,
        DeckError::Timeout(_) => DECK_ETIMEDOUT,
        DeckError::Comm(_) | DeckError::Setup(_) => DECK_ERROR,
    };
    set_error(e.to_string());
    c
}

fn fail(c: c_int, why: &str) -> c_int {
    set_error(why.to_string());
    c
}

/// Runs `f`, turning a panic into `DECK_EINTERNAL`.
fn guard(f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(c)) => c,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            fail(DECK_EINTERNAL, &format!("internal error: {what}"))
        }
    }
}

fn deck() -> Result<Arc<Deck>, c_int> {
    state()
        .as_ref()
        .map(|s| s.deck.clone())
        .ok_or_else(|| fail(DECK_ENOINIT, "deck_init has not been called"))
}

fn id_of(m: &deck_mbox_t) -> Result<MboxId, c_int> {
    let node = u16::try_from(m.node).map_err(|_| fail(DECK_EINVAL, "mailbox node out of range"))?;
    Ok(MboxId { node, id: m.id })
}

/// Writes `v` through `p`.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) -> Result<(), c_int> {
    if p.is_null() {
        return Err(fail(DECK_EINVAL, "NULL output pointer"));
    }
    // SAFETY: non-NULL (checked) and valid for writes by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// # Safety
/// `p` is NULL or a message from `deck_msg_create`/a retrieve, not destroyed, not used by
/// another thread meanwhile.
unsafe fn msg<'a>(p: *mut deck_msg_t) -> Result<&'a mut Message, c_int> {
    // SAFETY: by the caller's contract, a non-NULL `p` is a live Box<deck_msg_t> used by us only.
    unsafe { p.as_mut() }
        .map(|m| &mut m.0)
        .ok_or_else(|| fail(DECK_EINVAL, "NULL message"))
}

/// # Safety
/// `p` is NULL or a valid `deck_mbox_t`.
unsafe fn mbox<'a>(p: *const deck_mbox_t) -> Result<&'a deck_mbox_t, c_int> {
    // SAFETY: by the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| fail(DECK_EINVAL, "NULL mailbox"))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn name<'a>(p: *const c_char) -> Result<&'a str, c_int> {
    if p.is_null() {
        return Err(fail(DECK_EINVAL, "NULL name"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| fail(DECK_EINVAL, "name is not UTF-8"))
}

fn new_msg(m: Message) -> *mut deck_msg_t {
    Box::into_raw(Box::new(deck_msg_t(m)))
}

/// Starts DECK from the environment. `argc`/`argv` are accepted for compatibility and unused.
#[no_mangle]
pub extern "C" fn deck_init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    guard(|| {
        let mut st = state();
        if st.is_some() {
            return Ok(DECK_OK);
        }
        let deck = Deck::init(None).map_err(code)?;
        *st = Some(State {
            deck,
            owned: HashMap::new(),
        });
        Ok(DECK_OK)
    })
}

/// Shuts DECK down (after a barrier, so nothing is in flight).
#[no_mangle]
pub extern "C" fn deck_done() -> c_int {
    guard(|| {
        let st = state()
            .take()
            .ok_or_else(|| fail(DECK_ENOINIT, "deck_init has not been called"))?;
        st.deck.barrier().map_err(code)?;
        st.deck.done();
        Ok(DECK_OK)
    })
}

#[no_mangle]
pub extern "C" fn deck_node() -> c_int {
    guard(|| Ok(deck()?.node() as c_int))
}

#[no_mangle]
pub extern "C" fn deck_nodes() -> c_int {
    guard(|| Ok(deck()?.nodes() as c_int))
}

/// The calling thread's last error text (valid until its next DECK call).
#[no_mangle]
pub extern "C" fn deck_strerror() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_create(out: *mut *mut deck_msg_t, size: usize) -> c_int {
    // SAFETY: forwarded caller contract.
    guard(|| unsafe { put(out, new_msg(Message::new(size))) }.map(|_| DECK_OK))
}

/// # Safety
/// `m` is NULL or a live message, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_destroy(m: *mut deck_msg_t) -> c_int {
    guard(|| {
        if m.is_null() {
            return Err(fail(DECK_EINVAL, "NULL message"));
        }
        // SAFETY: a live message created by Box::into_raw, destroyed once by the caller's contract.
        drop(unsafe { Box::from_raw(m) });
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_clear(m: *mut deck_msg_t) -> c_int {
    // SAFETY: forwarded caller contract.
    guard(|| unsafe { msg(m) }.map(|m| m.clear()).map(|_| DECK_OK))
}

/// # Safety
/// `m` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_reset(m: *mut deck_msg_t) -> c_int {
    // SAFETY: forwarded caller contract.
    guard(|| unsafe { msg(m) }.map(|m| m.reset()).map(|_| DECK_OK))
}

/// # Safety
/// `m` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_length(m: *const deck_msg_t) -> usize {
    // SAFETY: forwarded caller contract (only read).
    catch_unwind(|| unsafe { m.as_ref() }.map_or(0, |m| m.0.len())).unwrap_or(0)
}

/// # Safety
/// `m` is NULL or a live message; `data` is valid for `len` bytes (or `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack(
    m: *mut deck_msg_t,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { msg(m) }?;
        let b: &[u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return Err(fail(DECK_EINVAL, "NULL data"));
        } else {
            // SAFETY: non-NULL, `len` readable bytes by the caller's contract.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        m.pack_bytes(b).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` is NULL or a live message; `buf` valid for `cap` bytes; `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack(
    m: *mut deck_msg_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { msg(m) }?;
        let b = m.unpack_bytes().map_err(code)?;
        if b.len() > cap {
            return Err(fail(
                DECK_EOVERFLOW,
                &format!("{} bytes do not fit a buffer of {cap}", b.len()),
            ));
        }
        if !b.is_empty() {
            if buf.is_null() {
                return Err(fail(DECK_EINVAL, "NULL buffer"));
            }
            // SAFETY: `buf` has room for `cap >= b.len()` bytes by the caller's contract and
            // cannot overlap our private Vec.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf.cast::<u8>(), b.len()) };
        }
        if !len.is_null() {
            // SAFETY: non-NULL, writable by the caller's contract.
            unsafe { len.write(b.len()) };
        }
        Ok(DECK_OK)
    })
}

macro_rules! typed {
    ($pack:ident, $unpack:ident, $t:ty) => {
        /// # Safety
        /// `m` is NULL or a live message.
        #[no_mangle]
        pub unsafe extern "C" fn $pack(m: *mut deck_msg_t, v: $t) -> c_int {
            // SAFETY: forwarded caller contract.
            guard(|| unsafe { msg(m) }?.pack(&v).map(|_| DECK_OK).map_err(code))
        }
        /// # Safety
        /// `m` is NULL or a live message; `out` NULL or writable.
        #[no_mangle]
        pub unsafe extern "C" fn $unpack(m: *mut deck_msg_t, out: *mut $t) -> c_int {
            guard(|| {
                if out.is_null() {
                    return Err(fail(DECK_EINVAL, "NULL output pointer"));
                }
                // SAFETY: forwarded caller contract.
                let v = unsafe { msg(m) }?.unpack::<$t>().map_err(code)?;
                // SAFETY: forwarded caller contract.
                unsafe { put(out, v) }?;
                Ok(DECK_OK)
            })
        }
    };
}
typed!(deck_msg_pack_int32, deck_msg_unpack_int32, i32);
typed!(deck_msg_pack_uint32, deck_msg_unpack_uint32, u32);
typed!(deck_msg_pack_int64, deck_msg_unpack_int64, i64);
typed!(deck_msg_pack_uint64, deck_msg_unpack_uint64, u64);
typed!(deck_msg_pack_double, deck_msg_unpack_double, f64);

/// # Safety
/// `m` NULL or a live message; `b` NULL or a valid mailbox.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_mbox(m: *mut deck_msg_t, b: *const deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let id = id_of(unsafe { mbox(b) }?)?;
        // SAFETY: forwarded caller contract.
        unsafe { msg(m) }?.pack(&id).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` NULL or a live message; `b` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_mbox(m: *mut deck_msg_t, b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let id = unsafe { msg(m) }?.unpack::<MboxId>().map_err(code)?;
        // SAFETY: forwarded caller contract.
        unsafe {
            put(
                b,
                deck_mbox_t {
                    node: id.node as u32,
                    id: id.id,
                },
            )
        }?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` and `inner` NULL or live messages (distinct).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_msg(m: *mut deck_msg_t, inner: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract (read only).
        let inner = unsafe { inner.as_ref() }
            .ok_or_else(|| fail(DECK_EINVAL, "NULL inner message"))?
            .0
            .clone();
        // SAFETY: forwarded caller contract.
        unsafe { msg(m) }?.pack(&inner).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` NULL or a live message; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_msg(
    m: *mut deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: forwarded caller contract.
        let inner = unsafe { msg(m) }?.unpack::<Message>().map_err(code)?;
        // SAFETY: forwarded caller contract.
        unsafe { put(out, new_msg(inner)) }?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_create(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL mailbox"));
        }
        let d = deck()?;
        let b = d.mbox_create();
        if !nm.is_null() {
            // SAFETY: forwarded caller contract.
            d.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        }
        let id = b.id();
        if let Some(st) = state().as_mut() {
            st.owned.insert(id.id, Arc::new(b));
        }
        // SAFETY: forwarded caller contract.
        unsafe {
            put(
                out,
                deck_mbox_t {
                    node: id.node as u32,
                    id: id.id,
                },
            )
        }?;
        Ok(DECK_OK)
    })
}

fn owned(b: &deck_mbox_t) -> Result<Arc<Mbox>, c_int> {
    let st = state();
    let st = st
        .as_ref()
        .ok_or_else(|| fail(DECK_ENOINIT, "deck_init has not been called"))?;
    if b.node != st.deck.node() as u32 {
        return Err(fail(
            DECK_EINVAL,
            "only the node that created a mailbox retrieves from it",
        ));
    }
    st.owned
        .get(&b.id)
        .cloned()
        .ok_or_else(|| fail(DECK_EINVAL, "no such mailbox (destroyed?)"))
}

/// # Safety
/// `b` NULL or a valid mailbox.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_destroy(b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let b = *unsafe { mbox(b) }?;
        owned(&b)?;
        if let Some(st) = state().as_mut() {
            st.owned.remove(&b.id);
        }
        Ok(DECK_OK)
    })
}

/// # Safety
/// `b` NULL or a valid mailbox; `m` NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_post(b: *const deck_mbox_t, m: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let id = id_of(unsafe { mbox(b) }?)?;
        // SAFETY: forwarded caller contract (read only).
        let m = unsafe { m.as_ref() }.ok_or_else(|| fail(DECK_EINVAL, "NULL message"))?;
        deck()?.post(id, &m.0).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// `timeout`: None blocks, Some(0) does not wait.
///
/// # Safety
/// `b` NULL or valid; `out` NULL or writable.
unsafe fn retrieve(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout: Option<Duration>,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: forwarded caller contract.
        let b = owned(unsafe { mbox(b) }?)?;
        let m = match timeout {
            None => b.retrieve(),
            Some(t) if t.is_zero() => b
                .try_retrieve()
                .ok_or_else(|| fail(DECK_EAGAIN, "no message"))?,
            Some(t) => b
                .retrieve_timeout(t)
                .ok_or_else(|| fail(DECK_ETIMEDOUT, "no message in time"))?,
        };
        // SAFETY: forwarded caller contract.
        unsafe { put(out, new_msg(m)) }?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `b` NULL or valid; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_retrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { retrieve(b, out, None) }
}

/// # Safety
/// `b` NULL or valid; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout_ms: c_long,
) -> c_int {
    let t = Duration::from_millis(timeout_ms.max(1) as u64);
    // SAFETY: forwarded caller contract.
    unsafe { retrieve(b, out, Some(t)) }
}

/// # Safety
/// `b` NULL or valid; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tryretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { retrieve(b, out, Some(Duration::ZERO)) }
}

/// # Safety
/// `b` NULL or valid; `nm` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_bind(b: *const deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let b = owned(unsafe { mbox(b) }?)?;
        // SAFETY: forwarded caller contract.
        deck()?.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
unsafe fn fetch(out: *mut deck_mbox_t, nm: *const c_char, timeout: Option<Duration>) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let n = unsafe { name(nm) }?;
        let d = deck()?;
        let id = match timeout {
            None => d.fetch(n),
            Some(t) => d.fetch_timeout(n, t),
        }
        .map_err(code)?;
        // SAFETY: forwarded caller contract.
        unsafe {
            put(
                out,
                deck_mbox_t {
                    node: id.node as u32,
                    id: id.id,
                },
            )
        }?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_fetch(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { fetch(out, nm, None) }
}

/// # Safety
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tfetch(
    out: *mut deck_mbox_t,
    nm: *const c_char,
    timeout_ms: c_long,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        fetch(
            out,
            nm,
            Some(Duration::from_millis(timeout_ms.max(0) as u64)),
        )
    }
}

#[no_mangle]
pub extern "C" fn deck_barrier() -> c_int {
    guard(|| deck()?.barrier().map(|_| DECK_OK).map_err(code))
}

fn root_of(root: c_int) -> Result<u16, c_int> {
    u16::try_from(root).map_err(|_| fail(DECK_EINVAL, "root out of range"))
}

/// # Safety
/// `m` NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn deck_bcast(root: c_int, m: *mut deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let m = unsafe { msg(m) }?;
        deck()?.broadcast(root_of(root)?, m).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # Safety
/// `result` NULL or writable (only written on the root).
#[no_mangle]
pub unsafe extern "C" fn deck_reduce_double(
    root: c_int,
    v: f64,
    op: c_int,
    result: *mut f64,
) -> c_int {
    guard(|| {
        let f: fn(f64, f64) -> f64 = match op {
            0 => |a, b| a + b,
            1 => f64::min,
            2 => f64::max,
            _ => return Err(fail(DECK_EINVAL, "unknown reduction operation")),
        };
        if let Some(r) = deck()?.reduce(root_of(root)?, v, f).map_err(code)? {
            // SAFETY: forwarded caller contract.
            unsafe { put(result, r) }?;
        }
        Ok(DECK_OK)
    })
}

/// # Safety
/// `m` NULL or a live message; on the root `out` has room for `deck_nodes()` pointers.
#[no_mangle]
pub unsafe extern "C" fn deck_gather(
    root: c_int,
    m: *const deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        // SAFETY: forwarded caller contract (read only).
        let m = unsafe { m.as_ref() }.ok_or_else(|| fail(DECK_EINVAL, "NULL message"))?;
        let d = deck()?;
        if d.node() as c_int == root && out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output array on the root"));
        }
        if let Some(all) = d.gather(root_of(root)?, &m.0).map_err(code)? {
            for (i, x) in all.into_iter().enumerate() {
                // SAFETY: `out` has room for deck_nodes() entries by the caller's contract.
                unsafe { out.add(i).write(new_msg(x)) };
            }
        }
        Ok(DECK_OK)
    })
}
