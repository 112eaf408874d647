//! The process's DECK instance and the mailboxes this node created, and the entry points
//! that start, stop and describe it.

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, MutexGuard};

use svm_comm::deck::{Deck, Mbox};

use crate::error::{code, fail, guard, DECK_ENOINIT, DECK_OK};

pub(crate) struct State {
    pub(crate) deck: Arc<Deck>,
    pub(crate) owned: HashMap<u32, Arc<Mbox>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

pub(crate) fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn deck() -> Result<Arc<Deck>, c_int> {
    state()
        .as_ref()
        .map(|s| s.deck.clone())
        .ok_or_else(|| fail(DECK_ENOINIT, "deck_init has not been called"))
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
