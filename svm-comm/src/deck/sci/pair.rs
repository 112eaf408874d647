//! The sending and receiving side of one DECK-SCI link (a pair of nodes): the three protocols,
//! the rings' and buffers' read positions, waiting and waking (see the module docs of `sci`).

use super::*;

impl Pair {
    pub(super) fn me(&self) -> NodeId {
        self.hub.me
    }
    pub(super) fn geo(&self) -> &Geometry {
        &self.hub.geo
    }
    pub(super) fn mine(&self) -> &Segment {
        &self.hub.mine
    }
    // Outbound (me → peer): data in their block for me; control in my block for them.
    pub(super) fn out_ctl(&self) -> usize {
        self.geo().block(self.peer as usize)
    }
    // Inbound (peer → me): data in my block for them; control in their block for me.
    pub(super) fn in_ctl(&self) -> usize {
        self.geo().block(self.me() as usize)
    }

    pub(super) fn lost(&self, why: String) -> CommError {
        CommError::Lost {
            me: self.me(),
            peer: self.peer,
            why,
        }
    }
    pub(super) fn corrupt(&self, what: String) -> CommError {
        CommError::Corrupt {
            me: self.me(),
            peer: self.peer,
            what,
        }
    }

    /// The peer closed its side or its process is gone.
    pub(super) fn peer_gone(&self) -> bool {
        self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 || !pid_alive(self.peer_pid)
    }

    /// Why a wait on the peer must stop, if it must.
    pub(super) fn check_peer(&self, waiting_for: &str) -> Result<(), CommError> {
        if self.local_closed.load(SeqCst) {
            return Err(self.lost(format!(
                "the link was closed locally while waiting for {waiting_for}"
            )));
        }
        if self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 {
            return Err(self.lost(format!(
                "node {} closed the connection while we waited for {waiting_for}",
                self.peer
            )));
        }
        if !pid_alive(self.peer_pid) {
            return Err(self.lost(format!(
                "node {} (pid {}) died while we waited for {waiting_for}",
                self.peer, self.peer_pid
            )));
        }
        Ok(())
    }

    /// Sender side: waits until `cond` holds, spinning briefly and then sleeping on the pair's
    /// futex word, which the receiver bumps after publishing progress.
    pub(super) fn wait_until(
        &self,
        waiting_for: &str,
        cond: impl Fn() -> bool,
    ) -> Result<(), CommError> {
        let start = Instant::now();
        let mut i = 0u32;
        while start.elapsed() < self.hub.spin {
            if cond() {
                return Ok(());
            }
            std::hint::spin_loop();
            i += 1;
            if i.is_multiple_of(256) {
                std::thread::yield_now();
            }
        }
        let wake = self.mine().u32_at(self.out_ctl() + C_SPACE_WAKE);
        let sleeping = self.mine().u32_at(self.out_ctl() + C_SENDER_SLEEPING);
        loop {
            let v = wake.load(SeqCst);
            sleeping.store(1, SeqCst);
            fence(SeqCst);
            if cond() {
                sleeping.store(0, SeqCst);
                return Ok(());
            }
            futex_wait(wake, v, NAP);
            sleeping.store(0, SeqCst);
            if cond() {
                return Ok(());
            }
            self.check_peer(waiting_for)?;
        }
    }

    /// Receiver side: tells a sleeping sender that we made progress.
    pub(super) fn wake_sender(&self) {
        fence(SeqCst);
        if self
            .theirs
            .u32_at(self.in_ctl() + C_SENDER_SLEEPING)
            .load(SeqCst)
            != 0
        {
            let w = self.theirs.u32_at(self.in_ctl() + C_SPACE_WAKE);
            w.fetch_add(1, SeqCst);
            futex_wake(w);
        }
    }

    /// Rings the peer's doorbell if any of its threads sleeps on it, and writes a byte into its
    /// pipe for us if its poller asked for one (`poll_armed`, taken back by the swap so that
    /// only one byte is written per request).
    pub(super) fn ring_peer(&self, bell: bool) {
        fence(SeqCst);
        if bell && self.theirs.u32_at(H_SLEEPERS).load(SeqCst) != 0 {
            let b = self.theirs.u32_at(H_BELL);
            b.fetch_add(1, SeqCst);
            futex_wake(b);
        }
        let armed = self.theirs.u32_at(self.in_ctl() + C_POLL_ARMED);
        if armed.load(SeqCst) != 0 && armed.swap(0, SeqCst) != 0 {
            self.tx.signal();
        }
    }

    /// Receiver side: the rendezvous chunks from `first in use` on may not be granted; grants
    /// everything else of the area (the grant is cumulative and only grows).
    pub(super) fn publish_grant(&self, g: &Grants) {
        let base = g.views.iter().copied().fold(g.cursor, u64::min);
        let v = base + self.geo().chunks as u64;
        let grant = self.theirs.u64_at(self.in_ctl() + C_RDV_GRANT);
        if v > grant.load(Relaxed) {
            grant.store(v, Release);
        }
    }

    pub(super) fn set_cursor(&self, cursor: u64) {
        let mut g = lock(&self.grants);
        g.cursor = cursor;
        self.publish_grant(&g);
    }

    /// A [`DeckView`] of the in-place message starting at chunk `first` was dropped.
    pub(super) fn release_view(&self, first: u64) {
        let mut g = lock(&self.grants);
        if let Some(i) = g.views.iter().position(|&f| f == first) {
            g.views.swap_remove(i);
        }
        self.publish_grant(&g);
        drop(g);
        self.wake_sender();
    }

    /// Writes one slot of the outbound ring (bytes 0..62 of `slot` are the payload, `len6` the
    /// length field), waiting for space first.
    pub(super) fn put_slot(
        &self,
        st: &mut SendState,
        slot: &mut [u8; SLOT],
        len6: u8,
    ) -> Result<(), CommError> {
        self.put_slot_bell(st, slot, len6, true)
    }

    /// [`put_slot`](Self::put_slot); `wake = false` (a rendezvous chunk that does not end its
    /// message) skips the doorbell when the receiver said it only wants the last chunk.
    pub(super) fn put_slot_bell(
        &self,
        st: &mut SendState,
        slot: &mut [u8; SLOT],
        len6: u8,
        wake: bool,
    ) -> Result<(), CommError> {
        let g = *self.geo();
        let read = self.mine().u64_at(self.out_ctl() + C_RING_READ);
        let w = st.ring_w;
        self.wait_until("ring space", || w - read.load(Acquire) < g.ring as u64)?;
        let off = g.ring_off(self.me() as usize) + (w % g.ring as u64) as usize * SLOT;
        slot[62] = w as u8;
        self.theirs.write(off, &slot[..63]);
        self.theirs.u8_at(off + 63).store(g.tag(w) | len6, Release);
        st.ring_w = w + 1;
        self.ring_peer(wake || self.theirs.u32_at(self.in_ctl() + C_QUIET).load(Relaxed) == 0);
        Ok(())
    }

    /// The protocol a message of `n` bytes travels by (forced, or chosen by size).
    pub(super) fn protocol_for(&self, n: usize) -> Protocol {
        match self.force.load(Relaxed) {
            1 => Protocol::Short,
            2 => Protocol::Eager,
            3 => Protocol::Rendezvous,
            _ if n <= P1_MAX => Protocol::Short,
            _ if n <= self.geo().limit => Protocol::Eager,
            _ => Protocol::Rendezvous,
        }
    }

    pub(super) fn send_parts(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let g = *self.geo();
        let proto = self.protocol_for(n);
        if self.local_closed.load(SeqCst) {
            return Err(self.lost("send on a closed link".into()));
        }
        if self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 {
            return Err(self.lost(format!("node {} closed the connection", self.peer)));
        }
        let mut st = lock(&self.send);
        let mut slot = [0u8; SLOT];
        match proto {
            Protocol::Short => {
                if n > P1_MAX {
                    return Err(self.lost(format!(
                        "protocol 1 carries at most {P1_MAX} bytes, not {n}"
                    )));
                }
                let mut o = 0;
                for p in parts {
                    slot[o..o + p.len()].copy_from_slice(p);
                    o += p.len();
                }
                self.put_slot(&mut st, &mut slot, n as u8)
            }
            Protocol::Eager => {
                let need = (EAGER_HDR + n).next_multiple_of(SLOT);
                let cap = g.eager as u64;
                if need as u64 > cap {
                    return Err(self.lost(format!(
                        "protocol 2 carries at most {} bytes, not {n}",
                        g.eager - EAGER_HDR
                    )));
                }
                let mut start = st.eager_w;
                if start % cap + need as u64 > cap {
                    start = start.next_multiple_of(cap);
                }
                let end = start + need as u64;
                let read = self.mine().u64_at(self.out_ctl() + C_EAGER_READ);
                self.wait_until("eager buffer space", || end - read.load(Acquire) <= cap)?;
                let off = g.eager_off(self.me() as usize) + (start % cap) as usize;
                let mut hdr = [0u8; EAGER_HDR];
                hdr[..4].copy_from_slice(&(n as u32).to_le_bytes());
                hdr[4..].copy_from_slice(&EAGER_MAGIC.to_le_bytes());
                self.theirs.write(off, &hdr);
                write_parts_range(&self.theirs, off + EAGER_HDR, parts, 0, n);
                // The Release store of the control packet's id byte orders the data before it.
                slot[0] = K_EAGER;
                slot[8..16].copy_from_slice(&start.to_le_bytes());
                slot[16..20].copy_from_slice(&(n as u32).to_le_bytes());
                st.eager_w = end;
                self.put_slot(&mut st, &mut slot, LEN_CTRL)
            }
            Protocol::Rendezvous => {
                if n as u64 > MAX_MSG {
                    return Err(self.lost(format!(
                        "message of {n} bytes exceeds the limit of {MAX_MSG}"
                    )));
                }
                let nchunks = n.div_ceil(g.chunk) as u64;
                let area = g.chunks as u64;
                let mut first = st.rdv_next;
                // A message that fits in the area never straddles its end, so that the receiver
                // can hand it out in place as one contiguous range.
                if nchunks <= area && first % area + nchunks > area {
                    first = first.next_multiple_of(area);
                }
                slot[0] = K_RDV_REQ;
                slot[8..16].copy_from_slice(&(n as u64).to_le_bytes());
                slot[16..24].copy_from_slice(&first.to_le_bytes());
                self.put_slot(&mut st, &mut slot, LEN_CTRL)?;
                st.rdv_next = first + nchunks;
                let grant = self.mine().u64_at(self.out_ctl() + C_RDV_GRANT);
                for k in 0..nchunks {
                    let abs = first + k;
                    self.wait_until("a rendezvous grant", || grant.load(Acquire) > abs)?;
                    let a = k as usize * g.chunk;
                    let b = (a + g.chunk).min(n);
                    let off =
                        g.rdv_off(self.me() as usize) + (abs % g.chunks as u64) as usize * g.chunk;
                    write_parts_range(&self.theirs, off, parts, a, b);
                    let mut s = [0u8; SLOT];
                    s[0] = K_RDV_DATA;
                    s[8..16].copy_from_slice(&abs.to_le_bytes());
                    s[16..20].copy_from_slice(&((b - a) as u32).to_le_bytes());
                    self.put_slot_bell(&mut st, &mut s, LEN_CTRL, b == n)?;
                }
                Ok(())
            }
        }
    }

    /// Is there an unread (or corrupt) slot at the head of the inbound ring?
    pub(super) fn has_inbound(&self) -> bool {
        let g = self.geo();
        let pos = self
            .theirs
            .u64_at(self.in_ctl() + C_RING_READ)
            .load(Acquire);
        let off = g.ring_off(self.peer as usize) + (pos % g.ring as u64) as usize * SLOT;
        let id = self.mine().u8_at(off + 63).load(Acquire);
        !self.slot_empty(pos, id)
    }

    pub(super) fn slot_empty(&self, pos: u64, id: u8) -> bool {
        let g = self.geo();
        if pos < g.ring as u64 {
            id == 0
        } else {
            id & 0xC0 == g.tag(pos - g.ring as u64)
        }
    }

    /// Consumes one slot of the inbound ring if one is there. Returns `Ok(Some(end))` when it
    /// consumed a packet (`end`: a whole message is complete), `Ok(None)` when the ring is empty.
    pub(super) fn step(
        &self,
        st: &mut RecvState,
        mode: Mode,
        sink: &mut dyn FnMut(Piece<'_>, bool),
    ) -> Result<Option<bool>, CommError> {
        let g = *self.geo();
        let pos = st.ring_r;
        let off = g.ring_off(self.peer as usize) + (pos % g.ring as u64) as usize * SLOT;
        let id = self.mine().u8_at(off + 63).load(Acquire);
        if id & 0xC0 != g.tag(pos) {
            if self.slot_empty(pos, id) {
                return Ok(None);
            }
            return Err(self.corrupt(format!(
                "ring slot {pos}: id byte {id:#04x} carries no valid lap tag"
            )));
        }
        let mut slot = [0u8; SLOT];
        self.mine().read(off, &mut slot[..63]);
        if slot[62] != pos as u8 {
            return Err(self.corrupt(format!(
                "ring slot {pos}: sequence number {} instead of {}",
                slot[62], pos as u8
            )));
        }
        let len6 = id & 0x3F;
        let u64_at = |i: usize| u64::from_le_bytes(slot[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(slot[i..i + 4].try_into().unwrap_or([0; 4]));
        let mut end = true;
        if len6 != LEN_CTRL {
            sink(Piece::Bytes(&slot[..len6 as usize]), true);
        } else {
            if slot[1..8].iter().any(|b| *b != 0) {
                return Err(self.corrupt(format!(
                    "control packet at slot {pos}: reserved bytes are not zero"
                )));
            }
            match slot[0] {
                K_EAGER => {
                    let (start, n) = (u64_at(8), u32_at(16) as usize);
                    let cap = g.eager as u64;
                    let need = (EAGER_HDR + n).next_multiple_of(SLOT);
                    let expect_wrap = st.eager_r.next_multiple_of(cap);
                    if (start != st.eager_r && start != expect_wrap)
                        || need as u64 > cap
                        || start % cap + need as u64 > cap
                    {
                        return Err(self.corrupt(format!(
                            "eager control packet at slot {pos}: message of {n} bytes at {start}, expected one at {}",
                            st.eager_r
                        )));
                    }
                    let hoff = g.eager_off(self.peer as usize) + (start % cap) as usize;
                    let mut hdr = [0u8; EAGER_HDR];
                    self.mine().read(hoff, &mut hdr);
                    let hl = u32::from_le_bytes(hdr[..4].try_into().unwrap_or([0; 4])) as usize;
                    let hm = u32::from_le_bytes(hdr[4..].try_into().unwrap_or([0; 4]));
                    if hl != n || hm != EAGER_MAGIC {
                        return Err(self.corrupt(format!(
                            "eager buffer header at {start} does not match its control packet"
                        )));
                    }
                    sink(Piece::Shared(self.mine(), hoff + EAGER_HDR, n), true);
                    st.eager_r = start + need as u64;
                    self.theirs
                        .u64_at(self.in_ctl() + C_EAGER_READ)
                        .store(st.eager_r, Release);
                }
                K_RDV_REQ => {
                    let (total, first) = (u64_at(8), u64_at(16));
                    let area = g.chunks as u64;
                    let nchunks = total.div_ceil(g.chunk as u64);
                    // The sender skips to the start of the area when a message that fits would
                    // straddle its end.
                    let skipped = nchunks <= area
                        && st.rdv_next % area + nchunks > area
                        && first == st.rdv_next.next_multiple_of(area);
                    if st.rdv.is_some() || total > MAX_MSG || (first != st.rdv_next && !skipped) {
                        return Err(self.corrupt(format!(
                            "rendezvous request at slot {pos}: {total} bytes from chunk {first}"
                        )));
                    }
                    if total == 0 {
                        sink(Piece::Bytes(&[]), true);
                    } else {
                        let in_place = mode == Mode::View && nchunks <= area;
                        st.rdv = Some(Rdv {
                            remaining: total,
                            first,
                            next: first,
                            in_place,
                        });
                        // An in-place message is only useful whole: no doorbell before its last
                        // chunk (the last one always rings).
                        self.mine()
                            .u32_at(self.out_ctl() + C_QUIET)
                            .store(in_place as u32, Relaxed);
                        self.set_cursor(first);
                        end = false;
                    }
                }
                K_RDV_DATA => {
                    let (abs, n) = (u64_at(8), u32_at(16) as u64);
                    let Some(r) = st.rdv.as_mut() else {
                        return Err(self
                            .corrupt(format!("rendezvous data at slot {pos} without a request")));
                    };
                    if abs != r.next || n != r.remaining.min(g.chunk as u64) {
                        return Err(self.corrupt(format!(
                            "rendezvous data at slot {pos}: chunk {abs} of {n} bytes, expected chunk {} of {}",
                            r.next,
                            r.remaining.min(g.chunk as u64)
                        )));
                    }
                    let area = g.chunks as u64;
                    let coff = g.rdv_off(self.peer as usize) + (abs % area) as usize * g.chunk;
                    r.remaining -= n;
                    r.next += 1;
                    end = r.remaining == 0;
                    let (first, next) = (r.first, r.next);
                    if !r.in_place {
                        // Copied out chunk by chunk: each chunk is free again at once.
                        sink(Piece::Shared(self.mine(), coff, n as usize), end);
                        self.set_cursor(next);
                    } else if end {
                        // The whole message is in place, contiguous from its first chunk.
                        let off = g.rdv_off(self.peer as usize) + (first % area) as usize * g.chunk;
                        let len = ((next - first - 1) * g.chunk as u64 + n) as usize;
                        if mode == Mode::View {
                            let mut gr = lock(&self.grants);
                            gr.views.push(first);
                            gr.cursor = next;
                            self.publish_grant(&gr);
                            drop(gr);
                            sink(Piece::Held(first, off, len), true);
                        } else {
                            sink(Piece::Shared(self.mine(), off, len), true);
                            self.set_cursor(next);
                        }
                    }
                    if end {
                        st.rdv = None;
                        st.rdv_next = next;
                        self.mine()
                            .u32_at(self.out_ctl() + C_QUIET)
                            .store(0, Relaxed);
                    }
                }
                k => {
                    return Err(
                        self.corrupt(format!("control packet at slot {pos} has unknown kind {k}"))
                    )
                }
            }
        }
        st.ring_r = pos + 1;
        self.theirs
            .u64_at(self.in_ctl() + C_RING_READ)
            .store(st.ring_r, Release);
        self.wake_sender();
        Ok(Some(end))
    }
}
