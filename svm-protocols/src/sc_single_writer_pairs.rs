//! sc-sw's remembered pairs: a request for a page that was followed by a request for the next
//! page asks for both at once from then on (the two halves of a row, a struct straddling
//! pages), so the two round trips overlap (docs/protocols.md).

use svm_core::protocol::{Access, Action, Context, PageId};

use super::ScSingleWriter;

/// Times a remembered pair (see [`Pair`]) is used before it must be seen again: a pair whose
/// second page stopped being used costs at most this many needless requests.
pub(super) const PAIR_BUDGET: u8 = 8;

/// Pages a request brings along behind it through remembered pairs, at most.
const MAX_PAIRED: usize = 8;

/// Node side: this node's request for a page was followed by its request for the next page
/// (the two halves of a row, a struct straddling pages): the next requests for the first page
/// ask for the second in the same breath, so both round trips overlap.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pair {
    /// Access the second page was asked with.
    pub(super) access: Access,
    /// Paired requests left before the pair must be observed again.
    pub(super) budget: u8,
    /// A write access asked for through this pair was used (the thread wrote the page before
    /// anyone took it): later ones are installed writable at once. Until then they come
    /// read-only and exclusive (`NodePage::paired`), which costs a local fault per use.
    pub(super) trusted: bool,
}

impl ScSingleWriter {
    /// This node gives `page` up: if it held it exclusively because a remembered pair asked
    /// for write access (`NodePage::paired`) and never wrote it, another node wants the page,
    /// so asking for it early only takes it from that node: forget the pair.
    pub(super) fn forget_unused_pair(&mut self, ctx: &dyn Context, page: PageId) {
        let np = self.node_page(ctx, page);
        if std::mem::take(&mut np.paired) && np.exclusive {
            self.forget_pair_ending_at(page, |_| true);
        }
    }

    /// Forgets the remembered pair whose second page is `page`, if `which` accepts it.
    pub(super) fn forget_pair_ending_at(&mut self, page: PageId, which: impl Fn(&Pair) -> bool) {
        let Some(first) = page.checked_sub(1) else {
            return;
        };
        if self.pairs.get(&first).is_some_and(which) {
            self.pairs.remove(&first);
            self.stats.pairs_dropped += 1;
        }
    }

    /// This node just asked for `page` on a fault: if its previous request was for the page
    /// before (same region, same manager), remember the pair.
    pub(super) fn learn_pair(&mut self, ctx: &dyn Context, page: PageId, access: Access) {
        if let Some(prev) = self.last_request {
            if prev.checked_add(1) == Some(page)
                && ctx.same_region(prev, page)
                && ctx.home(prev) == ctx.home(page)
            {
                self.pairs.insert(
                    prev,
                    Pair {
                        access,
                        budget: PAIR_BUDGET,
                        trusted: false,
                    },
                );
            }
        }
        self.last_request = Some(page);
    }

    /// Asks for the pages remembered behind `page` (see [`Pair`]) along with it, each as
    /// its own request, as if the thread had already touched it: sequential consistency
    /// only depends on which copies exist when a thread accesses a page, never on why they
    /// were asked for.
    pub(super) fn request_paired(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        out: &mut Vec<Action>,
    ) {
        let mut first = page;
        for _ in 0..MAX_PAIRED {
            let Some(pair) = self.pairs.get_mut(&first) else {
                break;
            };
            let (access, trusted) = (pair.access, pair.trusted);
            pair.budget -= 1;
            if pair.budget == 0 {
                self.pairs.remove(&first);
            }
            let next = first + 1;
            let np = self.node_page(ctx, next);
            if np.access < access && !np.exclusive {
                if !self.request(ctx, next, access, out) {
                    break;
                }
                self.node_page(ctx, next).paired = !trusted;
                self.stats.pages_paired += 1;
            }
            self.last_request = Some(next);
            first = next;
        }
    }
}
