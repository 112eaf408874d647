//! Page diffs for the multiple-writer protocols (`sc-mw`, `scope`): a pure encoding, shared by
//! the engine and the simulator.
//!
//! A diff records the bytes of a page that differ between its *twin* (a copy taken when the
//! page was made writable) and its current contents. Runs are exact to the byte: two nodes may
//! write different bytes of one page — even of one word, such as neighbouring `int`s or `char`s
//! — concurrently, and both writes survive when their diffs are applied to the home's master
//! copy. (Equal 8-byte words are skipped a word at a time, so unchanged stretches stay cheap.)
//! A byte written back with the value its twin holds is not in the diff: like every diff-based
//! DSM, this relies on data-race-free programs.
//!
//! Format (all integers little-endian). A message carries any number of page diffs, one after
//! the other:
//!
//! ```text
//! page diff := page: u64, runs: u32, run*          (header of 12 bytes)
//! run       := offset: u32, len: u32, bytes[len]   (len > 0)
//! ```
//!
//! A diff of identical pages is a header with zero runs (12 bytes). Runs produced by
//! [`encode`] are maximal (adjacent changed bytes form one run), in increasing offset order and
//! disjoint; [`check`] and [`apply`] accept any order (later runs win where they overlap) but
//! verify every length and bound, and never panic on malformed input.

/// Unchanged stretches are skipped this many bytes at a time.
pub const WORD: usize = 8;
/// Bytes of a page diff's header (`page: u64, runs: u32`).
pub const PAGE_HEADER: usize = 12;
/// Bytes of a run's header (`offset: u32, len: u32`).
pub const RUN_HEADER: usize = 8;

/// A malformed diff message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error("diff truncated at byte {at}: {what} needs {need} bytes, {left} left")]
    Truncated {
        at: usize,
        what: &'static str,
        need: usize,
        left: usize,
    },
    #[error("diff of page {page}: run at byte {at} (offset {offset}) has length {len}: runs are never empty")]
    Misaligned {
        page: u64,
        at: usize,
        offset: u64,
        len: u64,
    },
    #[error("diff of page {page}: run at byte {at} covers bytes {offset}..{end}, beyond the page size {page_size}")]
    OutOfPage {
        page: u64,
        at: usize,
        offset: u64,
        end: u64,
        page_size: usize,
    },
}

/// What a diff message contains (from [`check`] or [`apply`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffSummary {
    /// Page diffs in the message (a page named twice counts twice).
    pub pages: usize,
    /// Runs over all pages.
    pub runs: usize,
    /// Payload bytes over all runs (the bytes written by [`apply`]).
    pub bytes: usize,
}

/// Appends to `out` the diff of `page`: the words of `cur` that differ from `twin`. Returns the
/// number of payload bytes encoded (0 if the page is unchanged: then only the 12-byte header
/// is appended).
///
/// # Panics
/// If `twin` and `cur` differ in length, or their length is not a multiple of [`WORD`] or does
/// not fit in a `u32` (an engine bug, never a property of received data).
pub fn encode(page: u64, twin: &[u8], cur: &[u8], out: &mut Vec<u8>) -> usize {
    assert_eq!(twin.len(), cur.len(), "twin and page differ in size");
    assert!(
        cur.len() & (WORD - 1) == 0,
        "page size {} is not a multiple of {WORD}",
        cur.len()
    );
    assert!(
        u32::try_from(cur.len()).is_ok(),
        "page size {} does not fit a diff offset",
        cur.len()
    );
    let header = out.len();
    out.extend_from_slice(&page.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let n = cur.len();
    let (mut runs, mut payload, mut i) = (0u32, 0usize, 0usize);
    while i < n {
        if i % WORD == 0 && twin[i..i + WORD] == cur[i..i + WORD] {
            i += WORD;
            continue;
        }
        if twin[i] == cur[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && twin[i] != cur[i] {
            i += 1;
        }
        let (off, len) = (start, i - start);
        // Both fit: the page size fits a u32 (asserted above).
        out.extend_from_slice(&(off as u32).to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&cur[off..off + len]);
        runs += 1;
        payload += len;
    }
    out[header + 8..header + PAGE_HEADER].copy_from_slice(&runs.to_le_bytes());
    payload
}

/// One decoded run: page, byte offset, bytes.
type Run<'a> = (u64, usize, &'a [u8]);

fn take<'a>(
    data: &'a [u8],
    at: &mut usize,
    n: usize,
    what: &'static str,
) -> Result<&'a [u8], DiffError> {
    let left = data.len() - *at;
    if left < n {
        return Err(DiffError::Truncated {
            at: *at,
            what,
            need: n,
            left,
        });
    }
    let s = &data[*at..*at + n];
    *at += n;
    Ok(s)
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Walks a diff message, calling `f` for each run after validating it.
fn walk<'a>(
    data: &'a [u8],
    page_size: usize,
    mut f: impl FnMut(Run<'a>),
) -> Result<DiffSummary, DiffError> {
    let mut sum = DiffSummary::default();
    let mut at = 0usize;
    while at < data.len() {
        let h = take(data, &mut at, PAGE_HEADER, "a page diff header")?;
        let page = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
        let runs = u32_at(&h[8..]);
        sum.pages += 1;
        for _ in 0..runs {
            let run_at = at;
            let r = take(data, &mut at, RUN_HEADER, "a run header")?;
            let (offset, len) = (u32_at(r) as u64, u32_at(&r[4..]) as u64);
            if len == 0 {
                return Err(DiffError::Misaligned {
                    page,
                    at: run_at,
                    offset,
                    len,
                });
            }
            let end = offset + len; // both < 2^32: no overflow
            if end > page_size as u64 {
                return Err(DiffError::OutOfPage {
                    page,
                    at: run_at,
                    offset,
                    end,
                    page_size,
                });
            }
            let bytes = take(data, &mut at, len as usize, "a run's bytes")?;
            f((page, offset as usize, bytes));
            sum.runs += 1;
            sum.bytes += len as usize;
        }
    }
    Ok(sum)
}

/// Validates a diff message against `page_size` without applying it.
pub fn check(data: &[u8], page_size: usize) -> Result<DiffSummary, DiffError> {
    walk(data, page_size, |_| {})
}

/// The pages a (valid) diff message names, in order.
pub fn pages(data: &[u8], page_size: usize) -> Result<Vec<u64>, DiffError> {
    let mut v = Vec::new();
    let mut at = 0usize;
    // Re-walk headers only; `check` first so that the walk below cannot fail midway.
    check(data, page_size)?;
    while at < data.len() {
        let h = take(data, &mut at, PAGE_HEADER, "a page diff header")?;
        v.push(u64::from_le_bytes([
            h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
        ]));
        for _ in 0..u32_at(&h[8..]) {
            let r = take(data, &mut at, RUN_HEADER, "a run header")?;
            take(data, &mut at, u32_at(&r[4..]) as usize, "a run's bytes")?;
        }
    }
    Ok(v)
}

/// Applies a diff message: validates all of it first (nothing is applied if any part is
/// malformed), then calls `f(page, byte_offset, bytes)` for every run, in message order; `f`
/// copies `bytes` into the page at `byte_offset` (`byte_offset + bytes.len() <= page_size` is
/// guaranteed).
pub fn apply(
    data: &[u8],
    page_size: usize,
    mut f: impl FnMut(u64, usize, &[u8]),
) -> Result<DiffSummary, DiffError> {
    check(data, page_size)?;
    walk(data, page_size, |(page, off, bytes)| f(page, off, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn apply_to(
        data: &[u8],
        pages: &mut HashMap<u64, Vec<u8>>,
        page_size: usize,
    ) -> Result<DiffSummary, DiffError> {
        apply(data, page_size, |p, off, b| {
            let pg = pages.entry(p).or_insert_with(|| vec![0; page_size]);
            pg[off..off + b.len()].copy_from_slice(b);
        })
    }

    #[test]
    fn identical_pages_give_an_empty_header() {
        let twin = vec![7u8; 64];
        let mut out = Vec::new();
        assert_eq!(encode(3, &twin, &twin, &mut out), 0);
        assert_eq!(out.len(), PAGE_HEADER);
        assert_eq!(
            check(&out, 64).unwrap(),
            DiffSummary {
                pages: 1,
                runs: 0,
                bytes: 0
            }
        );
        assert_eq!(pages(&out, 64).unwrap(), vec![3]);
        assert_eq!(check(&[], 64).unwrap(), DiffSummary::default());
    }

    #[test]
    fn runs_are_exact_to_the_byte() {
        let twin = vec![0u8; 64];
        let mut cur = twin.clone();
        cur[1] = 1;
        cur[7] = 2; // same word, not adjacent: two runs
        cur[8] = 3; // adjacent to byte 7 across a word boundary: merges with it
        cur[40] = 4;
        let mut out = Vec::new();
        assert_eq!(encode(9, &twin, &cur, &mut out), 4);
        assert_eq!(out.len(), PAGE_HEADER + 3 * RUN_HEADER + 4);
        assert_eq!(
            check(&out, 64).unwrap(),
            DiffSummary {
                pages: 1,
                runs: 3,
                bytes: 4
            }
        );
        let mut pages = HashMap::new();
        pages.insert(9, twin.clone());
        apply_to(&out, &mut pages, 64).unwrap();
        assert_eq!(pages[&9], cur);
        // Disjoint words of one page written by two nodes both survive.
        let mut a = twin.clone();
        a[0] = 0xaa;
        let mut b = twin.clone();
        b[56] = 0xbb;
        let mut msg = Vec::new();
        encode(1, &twin, &a, &mut msg);
        encode(1, &twin, &b, &mut msg);
        let mut pages = HashMap::new();
        assert_eq!(apply_to(&msg, &mut pages, 64).unwrap().pages, 2);
        assert_eq!((pages[&1][0], pages[&1][56]), (0xaa, 0xbb));
        // Different bytes of one word (neighbouring 32-bit ints, chars) both survive too.
        let mut a = twin.clone();
        a[0..4].copy_from_slice(&7u32.to_le_bytes());
        let mut b = twin.clone();
        b[4..8].copy_from_slice(&9u32.to_le_bytes());
        let mut msg = Vec::new();
        encode(2, &twin, &a, &mut msg);
        encode(2, &twin, &b, &mut msg);
        let mut pages = HashMap::new();
        apply_to(&msg, &mut pages, 64).unwrap();
        assert_eq!(&pages[&2][0..8], &[7, 0, 0, 0, 9, 0, 0, 0]);
    }

    #[test]
    fn malformed_input_is_refused_before_anything_is_applied() {
        let twin = vec![0u8; 32];
        let mut cur = twin.clone();
        cur[20] = 1;
        let mut good = Vec::new();
        encode(1, &twin, &cur, &mut good);
        // Truncations at every length are errors, and nothing is applied.
        for n in 1..good.len() {
            let mut two = good.clone();
            two.extend_from_slice(&good[..n]);
            let mut called = false;
            let r = apply(&two, 32, |_, _, _| called = true);
            assert!(matches!(r, Err(DiffError::Truncated { .. })), "{n}: {r:?}");
            assert!(!called);
        }
        // Offset beyond the page.
        assert!(matches!(check(&good, 16), Err(DiffError::OutOfPage { .. })));
        let mut bad = good.clone();
        bad[PAGE_HEADER + 4..PAGE_HEADER + 8].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(check(&bad, 32), Err(DiffError::Misaligned { .. })));
        let mut bad = good.clone();
        bad[PAGE_HEADER..PAGE_HEADER + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(check(&bad, 32).is_err());
        let mut bad = good;
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(check(&bad, 32), Err(DiffError::Truncated { .. })));
    }

    proptest! {
        #[test]
        fn round_trip(
            words in 1usize..64,
            seed in proptest::collection::vec(any::<u8>(), 512),
            changes in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..40),
            page in any::<u64>(),
        ) {
            let size = words * WORD;
            let twin: Vec<u8> = seed[..size].to_vec();
            let mut cur = twin.clone();
            for (at, v) in changes {
                cur[at as usize % size] = v;
            }
            let mut out = Vec::new();
            let payload = encode(page, &twin, &cur, &mut out);
            let sum = check(&out, size).unwrap();
            prop_assert_eq!(sum.bytes, payload);
            prop_assert!(payload <= size);
            let mut rebuilt = twin.clone();
            apply(&out, size, |p, off, b| {
                assert_eq!(p, page);
                rebuilt[off..off + b.len()].copy_from_slice(b);
            }).unwrap();
            prop_assert_eq!(rebuilt, cur);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), size in 0usize..200) {
            let _ = check(&data, size);
            let _ = pages(&data, size);
            let _ = apply(&data, size, |_, off, b| assert!(off + b.len() <= size));
        }

        #[test]
        fn mutated_diffs_never_panic(
            idx in any::<usize>(),
            v in any::<u8>(),
            cut in any::<usize>(),
        ) {
            let twin = vec![0u8; 64];
            let mut cur = twin.clone();
            cur[3] = 1;
            cur[30] = 2;
            let mut out = Vec::new();
            encode(5, &twin, &cur, &mut out);
            let i = idx % out.len();
            out[i] = v;
            out.truncate(cut % (out.len() + 1));
            let _ = apply(&out, 64, |_, off, b| assert!(off + b.len() <= 64));
        }
    }
}
