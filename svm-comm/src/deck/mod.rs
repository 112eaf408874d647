//! µDECK, the communication kernel of the seeds: messages, mailboxes, a name server on node 0,
//! group operations, threads and local semaphores — over any set of [`Link`]s (the TCP mesh or
//! DECK-SCI shared memory, [`sci`]).
//!
//! - A [`Deck`] owns the links of this node and a receive thread that delivers posted messages
//!   into mailbox queues and runs the name server on node 0.
//! - [`Message`]: typed pack/unpack with a cursor; [`Mbox`]: a mailbox owned by its creator (only
//!   the creator retrieves); [`MboxId`]: its global address, which anybody may post to and which
//!   can be packed into a message.
//! - `bind(mbox, name)` registers a name at node 0; `fetch(name)` waits until it is bound.
//! - Group operations (broadcast, gather, reduce, barrier) use a well-known mailbox on every
//!   node; every node must call them in the same order, from one thread at a time.
//!
//! On the wire a DECK message is a frame with the common header (kind [`DECK_KIND`], no control
//! payload) whose data is `op` + operands.

mod msg;
pub mod sci;
pub mod thread;

pub use msg::{Message, Pack};
pub use thread::Semaphore;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bootstrap::{Bootstrap, Launcher};
use crate::transport::{CommError, Link, RecvBuf};
use crate::wire::{Header, NodeId, HEADER_LEN, MAX_DATA_LEN};

/// Header kind of DECK frames.
pub const DECK_KIND: u8 = 0xDE;
const OP_POST: u8 = 1;
const OP_BIND: u8 = 2;
const OP_FETCH: u8 = 3;
/// Mailbox of the group operations on every node.
const MBOX_GROUP: u32 = 1;
const FIRST_USER_MBOX: u32 = 16;

/// Errors of the µDECK API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeckError {
    #[error("packing {need} bytes into a message with {free} bytes free")]
    Overflow { need: usize, free: usize },
    #[error("unpacking past the end of the message")]
    EndOfMessage,
    #[error("unpacking type tag {expected} but the message holds tag {found}")]
    TypeMismatch { expected: u8, found: u8 },
    #[error("no node {0} in this job")]
    NoSuchNode(NodeId),
    #[error("mailbox {0:?} does not exist (destroyed?)")]
    NoSuchMailbox(MboxId),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("communication failed: {0}")]
    Comm(String),
    #[error("setup failed: {0}")]
    Setup(String),
    #[error("name is empty or longer than 4096 bytes")]
    BadName,
}

impl From<CommError> for DeckError {
    fn from(e: CommError) -> Self {
        DeckError::Comm(e.to_string())
    }
}

/// The global address of a mailbox: its node and its number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MboxId {
    pub node: NodeId,
    pub id: u32,
}

#[derive(Default)]
struct Queue {
    q: Mutex<VecDeque<Message>>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Queue {
    fn push(&self, m: Message) {
        lock(&self.q).push_back(m);
        self.cv.notify_one();
    }
    fn pop(&self, deadline: Option<Instant>) -> Option<Message> {
        let mut g = lock(&self.q);
        loop {
            if let Some(m) = g.pop_front() {
                return Some(m);
            }
            match deadline {
                None => g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    g = self
                        .cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}

#[derive(Default)]
struct NameServer {
    names: HashMap<String, MboxId>,
    waiting: HashMap<String, Vec<MboxId>>,
}

/// Which transport [`Deck::init`] uses between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    /// DECK-SCI shared memory (all nodes on this host).
    Sci,
}

/// One node's DECK runtime.
pub struct Deck {
    me: NodeId,
    size: NodeId,
    links: Vec<Option<Arc<dyn Link>>>,
    boxes: Mutex<HashMap<u32, Arc<Queue>>>,
    next_box: AtomicU32,
    ns: Mutex<NameServer>,
    group_seq: AtomicU64,
    group_stash: Mutex<Vec<(u64, NodeId, Message)>>,
    group_q: Arc<Queue>,
    stop: AtomicBool,
    lost: Mutex<Vec<String>>,
    recv_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    timeout: Duration,
}

/// A mailbox owned by this node. Only its owner retrieves; dropping it destroys it.
pub struct Mbox {
    deck: Arc<Deck>,
    id: MboxId,
    q: Arc<Queue>,
}

impl Mbox {
    /// Its global address (post to it, pack it into messages).
    pub fn id(&self) -> MboxId {
        self.id
    }

    /// Blocks until a message arrives.
    pub fn retrieve(&self) -> Message {
        loop {
            if let Some(m) = self.q.pop(None) {
                return m;
            }
        }
    }

    /// Waits at most `timeout`; `None` when nothing arrived.
    pub fn retrieve_timeout(&self, timeout: Duration) -> Option<Message> {
        self.q.pop(Some(Instant::now() + timeout))
    }

    /// Does not wait.
    pub fn try_retrieve(&self) -> Option<Message> {
        lock(&self.q.q).pop_front()
    }

    /// Destroys the mailbox; later posts to it are dropped (and reported on stderr).
    pub fn destroy(self) {}
}

impl Drop for Mbox {
    fn drop(&mut self) {
        lock(&self.deck.boxes).remove(&self.id.id);
    }
}

impl Deck {
    /// Starts DECK over the given links (`links[me]` is ignored) and spawns the receive thread.
    /// `timeout` bounds the waits of group operations.
    pub fn new(
        me: NodeId,
        links: Vec<Option<Box<dyn Link>>>,
        timeout: Duration,
    ) -> Result<Arc<Deck>, DeckError> {
        let size = links.len() as NodeId;
        let links: Vec<Option<Arc<dyn Link>>> = links
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                if i == me as usize {
                    None
                } else {
                    l.map(Arc::from)
                }
            })
            .collect();
        let group_q = Arc::new(Queue::default());
        let mut boxes = HashMap::new();
        boxes.insert(MBOX_GROUP, group_q.clone());
        let deck = Arc::new(Deck {
            me,
            size,
            links,
            boxes: Mutex::new(boxes),
            next_box: AtomicU32::new(FIRST_USER_MBOX),
            ns: Mutex::new(NameServer::default()),
            group_seq: AtomicU64::new(0),
            group_stash: Mutex::new(Vec::new()),
            group_q,
            stop: AtomicBool::new(false),
            lost: Mutex::new(Vec::new()),
            recv_thread: Mutex::new(None),
            timeout,
        });
        let d = deck.clone();
        let h = std::thread::Builder::new()
            .name("deck-recv".into())
            .spawn(move || d.receive_loop())
            .map_err(|e| DeckError::Setup(format!("cannot start the receive thread: {e}")))?;
        *lock(&deck.recv_thread) = Some(h);
        Ok(deck)
    }

    /// Starts DECK from the environment (`svmrun`, Slurm or Open MPI variables, see
    /// [`Bootstrap`]). `transport`: `None` reads `SVM_TRANSPORT` (`tcp`, `deck`, or `auto`:
    /// shared memory under `svmrun`, TCP otherwise).
    pub fn init(transport: Option<Transport>) -> Result<Arc<Deck>, DeckError> {
        let boot = Bootstrap::from_env().map_err(|e| DeckError::Setup(e.to_string()))?;
        let timeout = std::env::var("SVM_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(60), Duration::from_secs);
        let transport = match transport {
            Some(t) => t,
            None => match std::env::var("SVM_TRANSPORT").unwrap_or_default().as_str() {
                "tcp" => Transport::Tcp,
                "deck" | "sci" => Transport::Sci,
                "" | "auto"
                    if boot.launcher == Launcher::Svmrun || boot.launcher == Launcher::Single =>
                {
                    Transport::Sci
                }
                "" | "auto" => Transport::Tcp,
                other => {
                    return Err(DeckError::Setup(format!(
                        "SVM_TRANSPORT={other:?}: expected tcp, deck or auto"
                    )))
                }
            },
        };
        Self::init_with(&boot, transport, timeout)
    }

    /// Starts DECK for an explicit bootstrap.
    pub fn init_with(
        boot: &Bootstrap,
        transport: Transport,
        timeout: Duration,
    ) -> Result<Arc<Deck>, DeckError> {
        let me = boot.rank;
        let n = boot.size as usize;
        let mut links: Vec<Option<Box<dyn Link>>> = (0..n).map(|_| None).collect();
        let setup_timeout = timeout.min(Duration::from_secs(120));
        match transport {
            Transport::Tcp if n > 1 => {
                let inherited = match (me, boot.coord_fd) {
                    (0, Some(fd)) => Some(sci::inherited_listener(fd).map_err(|e| {
                        DeckError::Setup(format!(
                            "SVM_COORD_FD={fd} is not a usable listening socket: {e}"
                        ))
                    })?),
                    (_, Some(fd)) => {
                        let _ = nix::unistd::close(fd);
                        None
                    }
                    _ => None,
                };
                let mesh = crate::tcp::establish(boot, inherited, setup_timeout)?;
                crate::tcp::refuse_strangers(me, mesh.listener, boot.job_key, boot.size);
                for (i, l) in mesh.links.into_iter().enumerate() {
                    links[i] = l.map(|l| Box::new(l) as Box<dyn Link>);
                }
            }
            _ => {
                if let Some(fd) = boot.coord_fd {
                    let _ = nix::unistd::close(fd);
                }
                if n > 1 {
                    let cfg = sci::DeckConfig::from_env().map_err(DeckError::Setup)?;
                    for (i, l) in sci::establish(boot, &cfg, setup_timeout)?
                        .into_iter()
                        .enumerate()
                    {
                        links[i] = l.map(|l| Box::new(l) as Box<dyn Link>);
                    }
                }
            }
        }
        Self::new(me, links, timeout)
    }

    /// This node's rank.
    pub fn node(&self) -> NodeId {
        self.me
    }

    /// Number of nodes.
    pub fn nodes(&self) -> NodeId {
        self.size
    }

    /// Creates a mailbox owned by this node.
    pub fn mbox_create(self: &Arc<Self>) -> Mbox {
        let id = self.next_box.fetch_add(1, Relaxed);
        let q = Arc::new(Queue::default());
        lock(&self.boxes).insert(id, q.clone());
        Mbox {
            deck: self.clone(),
            id: MboxId { node: self.me, id },
            q,
        }
    }

    /// Creates a mailbox and binds it to `name`.
    pub fn mbox_create_named(self: &Arc<Self>, name: &str) -> Result<Mbox, DeckError> {
        let m = self.mbox_create();
        self.bind(&m, name)?;
        Ok(m)
    }

    fn send_frame(&self, to: NodeId, parts: &[&[u8]]) -> Result<(), DeckError> {
        let link = self
            .links
            .get(to as usize)
            .and_then(|l| l.as_ref())
            .ok_or(DeckError::NoSuchNode(to))?;
        let n: usize = parts.iter().map(|p| p.len()).sum();
        if n > MAX_DATA_LEN as usize {
            return Err(DeckError::Comm(format!(
                "message of {n} bytes exceeds the limit of {MAX_DATA_LEN}"
            )));
        }
        let h = Header {
            kind: DECK_KIND,
            flags: 0,
            source: self.me,
            ctrl_len: 0,
            data_len: n as u32,
            seq: 0,
        }
        .emit();
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.push(&h);
        all.extend_from_slice(parts);
        link.send(&all)?;
        Ok(())
    }

    /// Posts a copy of `msg` to `to`, asynchronously.
    pub fn post(&self, to: MboxId, msg: &Message) -> Result<(), DeckError> {
        if to.node >= self.size {
            return Err(DeckError::NoSuchNode(to.node));
        }
        if to.node == self.me {
            let q = lock(&self.boxes)
                .get(&to.id)
                .cloned()
                .ok_or(DeckError::NoSuchMailbox(to))?;
            q.push(Message::from_bytes(msg.as_bytes().to_vec()));
            return Ok(());
        }
        self.send_frame(to.node, &[&[OP_POST], &to.id.to_le_bytes(), msg.as_bytes()])
    }

    /// Registers `mbox` under `name` at the name server (node 0).
    pub fn bind(&self, mbox: &Mbox, name: &str) -> Result<(), DeckError> {
        if name.is_empty() || name.len() > 4096 {
            return Err(DeckError::BadName);
        }
        if self.me == 0 {
            self.ns_bind(name.to_string(), mbox.id);
            return Ok(());
        }
        self.send_frame(0, &[&[OP_BIND], &mbox_bytes(mbox.id), name.as_bytes()])
    }

    /// Looks `name` up, waiting until it is bound.
    pub fn fetch(self: &Arc<Self>, name: &str) -> Result<MboxId, DeckError> {
        self.fetch_inner(name, None)
    }

    /// Like [`fetch`](Self::fetch), giving up after `timeout`.
    pub fn fetch_timeout(
        self: &Arc<Self>,
        name: &str,
        timeout: Duration,
    ) -> Result<MboxId, DeckError> {
        self.fetch_inner(name, Some(timeout))
    }

    fn fetch_inner(
        self: &Arc<Self>,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<MboxId, DeckError> {
        if name.is_empty() || name.len() > 4096 {
            return Err(DeckError::BadName);
        }
        let reply = self.mbox_create();
        if self.me == 0 {
            self.ns_fetch(name.to_string(), reply.id);
        } else {
            self.send_frame(0, &[&[OP_FETCH], &mbox_bytes(reply.id), name.as_bytes()])?;
        }
        let mut m = match timeout {
            None => reply.retrieve(),
            Some(t) => reply.retrieve_timeout(t).ok_or_else(|| {
                DeckError::Timeout(format!("the name {name:?} was not bound within {t:?}"))
            })?,
        };
        m.unpack::<MboxId>()
    }

    fn ns_bind(&self, name: String, id: MboxId) {
        let waiting = {
            let mut ns = lock(&self.ns);
            ns.names.insert(name.clone(), id);
            ns.waiting.remove(&name).unwrap_or_default()
        };
        for w in waiting {
            self.ns_reply(w, id);
        }
    }

    fn ns_fetch(&self, name: String, reply: MboxId) {
        let found = {
            let mut ns = lock(&self.ns);
            match ns.names.get(&name) {
                Some(id) => Some(*id),
                None => {
                    ns.waiting.entry(name).or_default().push(reply);
                    None
                }
            }
        };
        if let Some(id) = found {
            self.ns_reply(reply, id);
        }
    }

    fn ns_reply(&self, to: MboxId, id: MboxId) {
        let mut m = Message::new(16);
        if m.pack(&id).is_ok() {
            if let Err(e) = self.post(to, &m) {
                eprintln!(
                    "deck: node {}: name server cannot answer {to:?}: {e}",
                    self.me
                );
            }
        }
    }

    fn receive_loop(self: Arc<Self>) {
        let mut bufs: Vec<RecvBuf> = (0..self.size).map(|_| RecvBuf::new()).collect();
        let mut open: Vec<usize> = (0..self.size as usize)
            .filter(|i| self.links[*i].is_some())
            .collect();
        let fds: Vec<i32> = self
            .links
            .iter()
            .map(|l| l.as_ref().map_or(-1, |l| l.poll_fd()))
            .collect();
        while !open.is_empty() && !self.stop.load(SeqCst) {
            // Each fd belongs to a link in `self.links`, which lives as long as `self` (this
            // loop holds an Arc), so the descriptors stay open while polled.
            let polled: Vec<i32> = open.iter().map(|&i| fds[i]).collect();
            let ready: Vec<usize> =
                match sci::poll_readable(&polled, nix::poll::PollTimeout::from(100u16)) {
                    Ok(at) => at.into_iter().map(|k| open[k]).collect(),
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => {
                        eprintln!("deck: node {}: poll failed: {e}", self.me);
                        return;
                    }
                };
            for peer in ready {
                let Some(link) = self.links[peer].as_ref() else {
                    continue;
                };
                let alive = match link.recv_available(&mut bufs[peer]) {
                    Ok(a) => a,
                    Err(e) => {
                        self.note_lost(format!("node {peer}: {e}"));
                        false
                    }
                };
                loop {
                    match bufs[peer].next_frame() {
                        Ok(Some(f)) => self.dispatch(peer as NodeId, f),
                        Ok(None) => break,
                        Err(e) => {
                            self.note_lost(format!("malformed frame from node {peer}: {e}"));
                            link.close();
                            open.retain(|p| *p != peer);
                            break;
                        }
                    }
                }
                if !alive {
                    open.retain(|p| *p != peer);
                }
            }
        }
    }

    fn note_lost(&self, why: String) {
        if !self.stop.load(SeqCst) {
            eprintln!("deck: node {}: {why}", self.me);
        }
        lock(&self.lost).push(why);
    }

    fn dispatch(&self, from: NodeId, frame: &[u8]) {
        let Ok(h) = Header::parse(frame) else { return };
        let data = &frame[HEADER_LEN + h.ctrl_len as usize..];
        if h.kind != DECK_KIND || data.is_empty() {
            self.note_lost(format!(
                "node {from} sent a frame of kind {} that is not a DECK message",
                h.kind
            ));
            return;
        }
        let body = &data[1..];
        match data[0] {
            OP_POST if body.len() >= 4 => {
                let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
                let q = lock(&self.boxes).get(&id).cloned();
                match q {
                    Some(q) => q.push(Message::from_bytes(body[4..].to_vec())),
                    None => eprintln!(
                        "deck: node {}: message from node {from} to unknown mailbox {id} dropped",
                        self.me
                    ),
                }
            }
            OP_BIND | OP_FETCH if body.len() >= 6 && self.me == 0 => {
                let id = MboxId {
                    node: u16::from_le_bytes([body[0], body[1]]),
                    id: u32::from_le_bytes([body[2], body[3], body[4], body[5]]),
                };
                let name = String::from_utf8_lossy(&body[6..]).into_owned();
                if data[0] == OP_BIND {
                    self.ns_bind(name, id);
                } else {
                    self.ns_fetch(name, id);
                }
            }
            op => self.note_lost(format!(
                "node {from} sent a malformed DECK message (op {op}, {} bytes)",
                data.len()
            )),
        }
    }

    fn group_send(&self, to: NodeId, seq: u64, payload: &Message) -> Result<(), DeckError> {
        let mut m = Message::new(payload.len() + 32);
        m.pack(&seq)?;
        m.pack(&self.me)?;
        m.pack(payload)?;
        self.post(
            MboxId {
                node: to,
                id: MBOX_GROUP,
            },
            &m,
        )
    }

    fn group_recv(&self, seq: u64, from: NodeId) -> Result<Message, DeckError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            {
                let mut st = lock(&self.group_stash);
                if let Some(i) = st.iter().position(|(s, f, _)| *s == seq && *f == from) {
                    return Ok(st.swap_remove(i).2);
                }
            }
            let Some(mut m) = self.group_q.pop(Some(deadline)) else {
                return Err(DeckError::Timeout(format!(
                    "group operation {seq}: nothing from node {from} within {:?}",
                    self.timeout
                )));
            };
            let s = m.unpack::<u64>()?;
            let f = m.unpack::<NodeId>()?;
            let payload = m.unpack::<Message>()?;
            lock(&self.group_stash).push((s, f, payload));
        }
    }

    /// Broadcast from `root`: on the root `msg` is sent, elsewhere it is replaced by the root's.
    pub fn broadcast(&self, root: NodeId, msg: &mut Message) -> Result<(), DeckError> {
        if root >= self.size {
            return Err(DeckError::NoSuchNode(root));
        }
        let seq = self.group_seq.fetch_add(1, SeqCst);
        if self.me == root {
            for n in (0..self.size).filter(|n| *n != root) {
                self.group_send(n, seq, msg)?;
            }
        } else {
            *msg = self.group_recv(seq, root)?;
        }
        Ok(())
    }

    /// Gathers every node's `msg` at `root`: `Some(messages by rank)` there, `None` elsewhere.
    pub fn gather(&self, root: NodeId, msg: &Message) -> Result<Option<Vec<Message>>, DeckError> {
        if root >= self.size {
            return Err(DeckError::NoSuchNode(root));
        }
        let seq = self.group_seq.fetch_add(1, SeqCst);
        if self.me != root {
            self.group_send(root, seq, msg)?;
            return Ok(None);
        }
        let mut all = Vec::with_capacity(self.size as usize);
        for n in 0..self.size {
            all.push(if n == root {
                Message::from_bytes(msg.as_bytes().to_vec())
            } else {
                self.group_recv(seq, n)?
            });
        }
        Ok(Some(all))
    }

    /// Reduces every node's `v` with `op` at `root` (`Some(result)` there).
    pub fn reduce<T: Pack + Copy>(
        &self,
        root: NodeId,
        v: T,
        op: impl Fn(T, T) -> T,
    ) -> Result<Option<T>, DeckError> {
        let mut m = Message::new(64);
        m.pack(&v)?;
        match self.gather(root, &m)? {
            None => Ok(None),
            Some(all) => {
                let mut acc: Option<T> = None;
                for mut m in all {
                    let x = m.unpack::<T>()?;
                    acc = Some(match acc {
                        None => x,
                        Some(a) => op(a, x),
                    });
                }
                Ok(acc)
            }
        }
    }

    /// Waits until every node has called `barrier`.
    pub fn barrier(&self) -> Result<(), DeckError> {
        self.gather(0, &Message::new(0))?;
        self.broadcast(0, &mut Message::new(0))
    }

    /// Problems the receive thread saw (lost links, malformed frames).
    pub fn errors(&self) -> Vec<String> {
        lock(&self.lost).clone()
    }

    /// Shuts DECK down: closes every link (peers see the end of the connection) and stops the
    /// receive thread. Call after a final barrier so no message is in flight.
    pub fn done(&self) {
        self.stop.store(true, SeqCst);
        for l in self.links.iter().flatten() {
            l.close();
        }
        if let Some(h) = lock(&self.recv_thread).take() {
            let _ = h.join();
        }
    }
}

fn mbox_bytes(id: MboxId) -> [u8; 6] {
    let mut b = [0u8; 6];
    b[..2].copy_from_slice(&id.node.to_le_bytes());
    b[2..].copy_from_slice(&id.id.to_le_bytes());
    b
}

#[cfg(test)]
mod tests;
