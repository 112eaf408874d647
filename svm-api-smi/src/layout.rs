//! Layout and splitting helpers: how SMI cuts a region into per-process pieces and an index
//! range into per-process blocks. Pure functions without state; `region.rs` and `loops.rs`
//! use them.

use svm_core::api::Home;

/// `bytes` rounded up to whole pages (at least one).
pub(crate) fn page_round(page: usize, bytes: usize) -> usize {
    bytes.max(1).div_ceil(page) * page
}

/// SMI's BLOCKED rule with one process per node: node i's block ends at
/// round((i+1)*pages/n) pages, at least one page each, the last node takes the remainder.
pub(crate) fn blocked_runs(pages: u64, n: usize) -> Vec<u64> {
    let mut runs = Vec::with_capacity(n);
    let mut prev = 0u64;
    for i in 0..n {
        let end = if i + 1 == n {
            pages.max(prev + 1)
        } else {
            let r = (((i as u64 + 1) * pages) as f64 / n as f64).round() as u64;
            r.max(prev + 1)
        };
        runs.push(end - prev);
        prev = end;
    }
    runs
}

/// Runs of (home rank, pages) as a segment list starting at `addr`.
pub(crate) fn segs_of(
    page: usize,
    addr: usize,
    runs: &[(usize, u64)],
) -> Vec<(usize, usize, usize)> {
    let mut a = addr;
    runs.iter()
        .map(|&(p, pages)| {
            let len = pages as usize * page;
            let seg = (a, len, p);
            a += len;
            seg
        })
        .collect()
}

pub(crate) fn runs_home(runs: &[(usize, u64)]) -> Home {
    Home::Runs(runs.iter().map(|&(p, k)| (p as u16, k)).collect())
}

/// Splits `[0, len)` into contiguous blocks proportional to `weights` (in rank order).
pub(crate) fn weighted_blocks(len: i64, weights: &[f64]) -> Vec<(i64, i64)> {
    let total: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    let n = weights.len();
    let mut out = Vec::with_capacity(n);
    let mut acc = 0.0;
    let mut prev = 0i64;
    for (i, w) in weights.iter().enumerate() {
        acc += w.max(0.0);
        let end = if i + 1 == n || total <= 0.0 {
            if total <= 0.0 {
                (len * (i as i64 + 1)) / n as i64
            } else {
                len
            }
        } else {
            ((acc / total) * len as f64).round() as i64
        };
        let end = end.clamp(prev, len);
        out.push((prev, end));
        prev = end;
    }
    out
}

/// SMI's REGULAR loop split of `[lo, hi]`: `(hi - lo + 1) / n` indices per process (rounded
/// down), the last process also takes the rest.
pub(crate) fn regular_block(lo: i64, hi: i64, me: usize, n: usize) -> (i64, i64) {
    let k = (hi - lo + 1).max(0) / n as i64;
    let a = lo + me as i64 * k;
    if me + 1 == n {
        (a, hi)
    } else {
        (a, a + k - 1)
    }
}

/// Number of indices of class `p` (i % n == p) in `[0, len)`.
pub(crate) fn class_count(len: i64, p: usize, n: usize) -> i64 {
    if len <= p as i64 {
        0
    } else {
        (len - p as i64 + n as i64 - 1) / n as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_runs_follow_the_proportional_rule() {
        assert_eq!(blocked_runs(8, 4), vec![2, 2, 2, 2]);
        assert_eq!(blocked_runs(10, 4), vec![3, 2, 3, 2]);
        assert_eq!(blocked_runs(10, 3), vec![3, 4, 3]);
        // Fewer pages than nodes: at least one page each.
        assert_eq!(blocked_runs(2, 4), vec![1, 1, 1, 1]);
        assert_eq!(blocked_runs(1, 1), vec![1]);
        for n in 1..6 {
            for pages in n as u64..50 {
                assert_eq!(blocked_runs(pages, n).iter().sum::<u64>(), pages);
            }
        }
    }

    #[test]
    fn weighted_blocks_cover_everything_once() {
        for len in 0..40 {
            for w in [
                vec![1.0],
                vec![1.0, 1.0, 1.0],
                vec![3.0, 1.0],
                vec![0.0, 0.0],
                vec![1.0, 0.0, 2.0, 5.0],
            ] {
                let b = weighted_blocks(len, &w);
                assert_eq!(b.len(), w.len());
                assert_eq!(b[0].0, 0);
                assert_eq!(b.last().unwrap().1, len);
                for pair in b.windows(2) {
                    assert_eq!(pair[0].1, pair[1].0);
                }
            }
        }
        assert_eq!(weighted_blocks(10, &[1.0, 1.0]), vec![(0, 5), (5, 10)]);
        assert_eq!(weighted_blocks(12, &[3.0, 1.0]), vec![(0, 9), (9, 12)]);
    }

    #[test]
    fn regular_blocks_follow_smi() {
        assert_eq!(regular_block(0, 9, 0, 4), (0, 1));
        assert_eq!(regular_block(0, 9, 2, 4), (4, 5));
        assert_eq!(regular_block(0, 9, 3, 4), (6, 9));
        assert_eq!(regular_block(5, 5, 0, 1), (5, 5));
    }

    #[test]
    fn cyclic_classes_partition_the_range() {
        for len in 0..30 {
            for n in 1..5 {
                let total: i64 = (0..n).map(|p| class_count(len, p, n)).sum();
                assert_eq!(total, len);
            }
        }
    }
}
