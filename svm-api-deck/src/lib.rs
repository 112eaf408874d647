//! The DECK C API (`include/deck.h`), over svm-comm's µDECK.
//!
//! Every exported function catches panics and returns an error code: no panic crosses the C
//! boundary. Pointers are checked for NULL; beyond that the caller's pointers must be valid as
//! `deck.h` documents (the usual C contract): a `deck_msg_t *` is a live handle this library
//! handed out (not yet destroyed, not used by another thread during the call), everything else
//! points to memory valid for the access. That contract is each pointer-taking function's
//! `# Safety` (they are `unsafe extern "C" fn`s), and every dereference goes through svm-core's
//! C boundary ([`svm_core::sys::cabi`]) in an `unsafe` block that names it.

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use svm_comm::deck::{Deck, DeckError, Mbox, MboxId, Message};
use svm_core::sys::cabi;

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
            let what = cabi::panic_message(&*p);
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

/// Writes `v` through the C out-parameter `p`.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn put<T>(p: *mut T, v: T) -> Result<(), c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if unsafe { cabi::write_out(p, v) } {
        Ok(())
    } else {
        Err(fail(DECK_EINVAL, "NULL output pointer"))
    }
}

/// Hands `m` to C as a new message handle written through `out` (nothing is allocated when
/// `out` is NULL).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn put_msg(out: *mut *mut deck_msg_t, m: Message) -> Result<(), c_int> {
    if out.is_null() {
        return Err(fail(DECK_EINVAL, "NULL output pointer"));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { put(out, cabi::handle_new(deck_msg_t(m))) }
}

/// The message behind a handle (NULL or a live message from this library, not used by another
/// thread meanwhile: `deck.h`'s contract).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn msg<'a>(p: *mut deck_msg_t) -> Result<&'a mut Message, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::handle_mut(p) }
        .map(|m| &mut m.0)
        .ok_or_else(|| fail(DECK_EINVAL, "NULL message"))
}

/// The message behind a handle, read only.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn msg_ref<'a>(p: *const deck_msg_t, what: &str) -> Result<&'a Message, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::handle_ref(p) }
        .map(|m| &m.0)
        .ok_or_else(|| fail(DECK_EINVAL, what))
}

/// A copy of the C caller's mailbox (NULL or a valid `deck_mbox_t`).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn mbox(p: *const deck_mbox_t) -> Result<deck_mbox_t, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::read_in(p) }.ok_or_else(|| fail(DECK_EINVAL, "NULL mailbox"))
}

/// A name passed by the C caller (NULL or a NUL-terminated string), which must be UTF-8.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn name<'a>(p: *const c_char) -> Result<&'a str, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::c_str(p) }
        .ok_or_else(|| fail(DECK_EINVAL, "NULL name"))?
        .to_str()
        .map_err(|_| fail(DECK_EINVAL, "name is not UTF-8"))
}

fn mbox_t(id: MboxId) -> deck_mbox_t {
    deck_mbox_t {
        node: id.node as u32,
        id: id.id,
    }
}

/// Starts DECK from the environment. `argc`/`argv` are accepted for compatibility and unused.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
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

/// # C contract
/// `out` is NULL or valid for a write.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_create(out: *mut *mut deck_msg_t, size: usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { put_msg(out, Message::new(size)) }.map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message, not used afterwards.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_destroy(m: *mut deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { cabi::handle_take(m) }.ok_or_else(|| fail(DECK_EINVAL, "NULL message"))?;
        drop(m);
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_clear(m: *mut deck_msg_t) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { msg(m) }.map(|m| m.clear()).map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_reset(m: *mut deck_msg_t) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { msg(m) }.map(|m| m.reset()).map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_length(m: *const deck_msg_t) -> usize {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    catch_unwind(|| unsafe { cabi::handle_ref(m) }.map_or(0, |m| m.0.len())).unwrap_or(0)
}

/// # C contract
/// `m` is NULL or a live message; `data` is valid for `len` bytes (or `len` is 0).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack(
    m: *mut deck_msg_t,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        let b =
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { cabi::bytes(data.cast::<u8>(), len) }.ok_or_else(|| fail(DECK_EINVAL, "NULL data"))?;
        m.pack_bytes(b).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` is NULL or a live message; `buf` valid for `cap` bytes; `len` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack(
    m: *mut deck_msg_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        let b = m.unpack_bytes().map_err(code)?;
        if b.len() > cap {
            return Err(fail(
                DECK_EOVERFLOW,
                &format!("{} bytes do not fit a buffer of {cap}", b.len()),
            ));
        }
        // `buf` has room for `cap >= b.len()` bytes (the C caller's contract).
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !unsafe { cabi::copy_bytes(buf.cast::<u8>(), b.as_ptr(), b.len()) } {
            return Err(fail(DECK_EINVAL, "NULL buffer"));
        }
        // `len` is optional: NULL means the caller does not want it.
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { cabi::write_out(len, b.len()) };
        Ok(DECK_OK)
    })
}

macro_rules! typed {
    ($pack:ident, $unpack:ident, $t:ty) => {
        /// # C contract
        /// `m` is NULL or a live message.
        ///
        /// # Safety
        /// Each pointer argument is NULL or valid, for the duration of the call, for the access this
        /// function's C documentation describes (the C caller's contract; NULL is refused with an
        /// error code).
        #[no_mangle]
        pub unsafe extern "C" fn $pack(m: *mut deck_msg_t, v: $t) -> c_int {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            guard(|| unsafe { msg(m) }?.pack(&v).map(|_| DECK_OK).map_err(code))
        }
        /// # C contract
        /// `m` is NULL or a live message; `out` NULL or writable.
        ///
        /// # Safety
        /// Each pointer argument is NULL or valid, for the duration of the call, for the access this
        /// function's C documentation describes (the C caller's contract; NULL is refused with an
        /// error code).
        #[no_mangle]
        pub unsafe extern "C" fn $unpack(m: *mut deck_msg_t, out: *mut $t) -> c_int {
            guard(|| {
                if out.is_null() {
                    return Err(fail(DECK_EINVAL, "NULL output pointer"));
                }
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                let v = unsafe { msg(m) }?.unpack::<$t>().map_err(code)?;
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
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

/// # C contract
/// `m` NULL or a live message; `b` NULL or a valid mailbox.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_mbox(m: *mut deck_msg_t, b: *const deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = id_of(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { msg(m) }?.pack(&id).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; `b` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_mbox(m: *mut deck_msg_t, b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = unsafe { msg(m) }?.unpack::<MboxId>().map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(b, mbox_t(id)) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` and `inner` NULL or live messages (distinct).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_msg(m: *mut deck_msg_t, inner: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let inner = unsafe { msg_ref(inner, "NULL inner message") }?.clone();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { msg(m) }?.pack(&inner).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_msg(
    m: *mut deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let inner = unsafe { msg(m) }?.unpack::<Message>().map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put_msg(out, inner) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_create(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL mailbox"));
        }
        let d = deck()?;
        let b = d.mbox_create();
        if !nm.is_null() {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            d.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        }
        let id = b.id();
        if let Some(st) = state().as_mut() {
            st.owned.insert(id.id, Arc::new(b));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(out, mbox_t(id)) }?;
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

/// # C contract
/// `b` NULL or a valid mailbox.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_destroy(b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = unsafe { mbox(b) }?;
        owned(&b)?;
        if let Some(st) = state().as_mut() {
            st.owned.remove(&b.id);
        }
        Ok(DECK_OK)
    })
}

/// # C contract
/// `b` NULL or a valid mailbox; `m` NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_post(b: *const deck_mbox_t, m: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = id_of(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg_ref(m, "NULL message") }?;
        deck()?.post(id, m).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// `timeout`: None blocks, Some(0) does not wait.
///
/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn retrieve(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout: Option<Duration>,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = owned(&unsafe { mbox(b) }?)?;
        let m = match timeout {
            None => b.retrieve(),
            Some(t) if t.is_zero() => b
                .try_retrieve()
                .ok_or_else(|| fail(DECK_EAGAIN, "no message"))?,
            Some(t) => b
                .retrieve_timeout(t)
                .ok_or_else(|| fail(DECK_ETIMEDOUT, "no message in time"))?,
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put_msg(out, m) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_retrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, None) }
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout_ms: c_long,
) -> c_int {
    let t = Duration::from_millis(timeout_ms.max(1) as u64);
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, Some(t)) }
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tryretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, Some(Duration::ZERO)) }
}

/// # C contract
/// `b` NULL or valid; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_bind(b: *const deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = owned(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        deck()?.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn fetch(out: *mut deck_mbox_t, nm: *const c_char, timeout: Option<Duration>) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let n = unsafe { name(nm) }?;
        let d = deck()?;
        let id = match timeout {
            None => d.fetch(n),
            Some(t) => d.fetch_timeout(n, t),
        }
        .map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(out, mbox_t(id)) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_fetch(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { fetch(out, nm, None) }
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tfetch(
    out: *mut deck_mbox_t,
    nm: *const c_char,
    timeout_ms: c_long,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
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

/// # C contract
/// `m` NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_bcast(root: c_int, m: *mut deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        deck()?.broadcast(root_of(root)?, m).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `result` NULL or writable (only written on the root).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
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
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { put(result, r) }?;
        }
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; on the root `out` has room for `deck_nodes()` pointers.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_gather(
    root: c_int,
    m: *const deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg_ref(m, "NULL message") }?;
        let d = deck()?;
        if d.node() as c_int == root && out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output array on the root"));
        }
        if let Some(all) = d.gather(root_of(root)?, m).map_err(code)? {
            let handles: Vec<*mut deck_msg_t> = all
                .into_iter()
                .map(|x| cabi::handle_new(deck_msg_t(x)))
                .collect();
            // `out` has room for deck_nodes() entries on the root (the C caller's contract).
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            if !unsafe { cabi::write_array(out, &handles) } {
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                handles
                    .into_iter()
                    .for_each(|h| drop(unsafe { cabi::handle_take(h) }));
                return Err(fail(DECK_EINVAL, "NULL output array on the root"));
            }
        }
        Ok(DECK_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_through_the_c_entry_points() {
        let mut m: *mut deck_msg_t = std::ptr::null_mut();
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { deck_msg_create(std::ptr::null_mut(), 16) },
            DECK_EINVAL
        );
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_create(&mut m, 256) }, DECK_OK);
        assert!(!m.is_null());
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_pack_int32(m, -7) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { deck_msg_pack(m, b"abc".as_ptr().cast(), 3) },
            DECK_OK
        );
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { deck_msg_pack(m, std::ptr::null(), 3) },
            DECK_EINVAL
        );
        let mut inner: *mut deck_msg_t = std::ptr::null_mut();
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_create(&mut inner, 64) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_pack_double(inner, 2.5) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_pack_msg(m, inner) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_destroy(inner) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert!(unsafe { deck_msg_length(m) } > 0);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_length(std::ptr::null()) }, 0);

        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_reset(m) }, DECK_OK);
        let mut v = 0i32;
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_unpack_int32(m, &mut v) }, DECK_OK);
        assert_eq!(v, -7);
        let (mut buf, mut len) = ([0u8; 2], 0usize);
        assert_eq!(
            // SAFETY: the pointers are NULL or this test's own live values and handles.
            unsafe { deck_msg_unpack(m, buf.as_mut_ptr().cast(), 2, &mut len) },
            DECK_EOVERFLOW
        );
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_reset(m) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_unpack_int32(m, &mut v) }, DECK_OK);
        let mut buf = [0u8; 8];
        assert_eq!(
            // SAFETY: the pointers are NULL or this test's own live values and handles.
            unsafe { deck_msg_unpack(m, buf.as_mut_ptr().cast(), 8, &mut len) },
            DECK_OK
        );
        assert_eq!(&buf[..len], b"abc");
        let mut out: *mut deck_msg_t = std::ptr::null_mut();
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_unpack_msg(m, &mut out) }, DECK_OK);
        let mut d = 0f64;
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_unpack_double(out, &mut d) }, DECK_OK);
        assert_eq!(d, 2.5);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_destroy(out) }, DECK_OK);

        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_clear(m) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_length(m) }, 0);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_clear(std::ptr::null_mut()) }, DECK_EINVAL);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { deck_msg_destroy(m) }, DECK_OK);
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { deck_msg_destroy(std::ptr::null_mut()) },
            DECK_EINVAL
        );
    }

    #[test]
    fn names_must_be_utf8_and_mailboxes_non_null() {
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { name(c"box".as_ptr()) }, Ok("box"));
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { name(c"\xff".as_ptr()) }, Err(DECK_EINVAL));
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { name(std::ptr::null()) }, Err(DECK_EINVAL));
        let b = deck_mbox_t { node: 1, id: 9 };
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert_eq!(unsafe { mbox(&b) }.map(|m| (m.node, m.id)), Ok((1, 9)));
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        assert!(unsafe { mbox(std::ptr::null()) }.is_err());
    }
}
