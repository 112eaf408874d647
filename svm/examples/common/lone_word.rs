//! What the racy-flag examples (`litmus`, `flags`) share: their `[ROUNDS]` command line, and
//! a `u64` alone on its page, so that each shared variable is a page of its own.

use svm::{Home, SharedSlice};

const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / std::mem::size_of::<u64>();

/// Parses `[ROUNDS]` (a positive integer, `default` when absent) or `-h`/`--help` (None).
pub fn parse_rounds(default: u64) -> Result<Option<u64>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [h] if h == "-h" || h == "--help" => Ok(None),
        [] => Ok(Some(default)),
        [r] => match r.parse::<u64>() {
            Ok(rounds) if rounds >= 1 => Ok(Some(rounds)),
            _ => Err(format!("ROUNDS must be a positive integer, got {r:?}")),
        },
        _ => Err(format!(
            "expected at most one argument (ROUNDS), got {}",
            args.len()
        )),
    }
}

/// A `u64` alone on its page: two pages are allocated and the word that starts the page inside
/// them is used.
#[derive(Clone, Copy)]
pub struct LoneWord {
    pages: SharedSlice<u64>,
    index: usize,
}

impl LoneWord {
    /// Collective.
    pub fn alloc(home: Home) -> svm::Result<LoneWord> {
        let pages = svm::alloc_collective_with::<u64>(2 * WORDS_PER_PAGE, home)?;
        let index = ((PAGE - pages.addr() % PAGE) % PAGE) / std::mem::size_of::<u64>();
        Ok(LoneWord { pages, index })
    }

    pub fn get(&self) -> u64 {
        self.pages.get(self.index)
    }

    pub fn set(&self, v: u64) {
        self.pages.set(self.index, v)
    }
}
