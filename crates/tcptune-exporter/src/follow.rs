//! The connections the aggregator follows, keyed by namespace and socket cookie, with each
//! group's count of connections by state and by current limit class kept as connections
//! come, change and go. A host with 10k connections has more entries than the CPU's caches
//! hold, so each pass over all of them costs a cache miss per connection: a poll touches an
//! entry once, when its socket is dumped, and neither the gauges nor an unchanged host need
//! another pass.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::{Limit, Sample};

use crate::delta::{index, Delta, CLASSES};

/// TCP states are numbered 1 to 12 (`tcp_info::state_name`); arrays indexed by state.
pub(crate) const STATES: usize = 16;

/// A followed connection's key: its namespace (the aggregator's number for it) and the
/// kernel's socket cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConnKey {
    pub ns: u32,
    pub cookie: u64,
}

/// One multiplication per word (FxHash's constant) instead of SipHash: the keys are cookies
/// the kernel hands out from a counter, not values a peer can choose to collide.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map by [`ConnKey`].
pub(crate) type KeyMap<V> = HashMap<ConnKey, V, BuildHasherDefault<KeyHasher>>;

/// One connection the aggregator follows.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub group: usize,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    /// The socket's inode (0 when the kernel gave none): how its process is found.
    pub inode: u32,
    /// Its process's CPU figure from the last measurement ([`crate::cpu`]), when measured.
    pub cpu: Option<CpuUse>,
    /// Its last sample, boxed: the entry stays small (a lookup reads less memory) and a new
    /// sample is written in place.
    pub last: Box<Sample>,
    /// Seconds per class over the time the exporter followed it.
    pub seconds: [f64; CLASSES],
    /// The class of its last interval.
    pub current: Option<Limit>,
}

impl Conn {
    /// Takes an interval `d` that ended with the sample `cur`, in `state`.
    pub fn took(&mut self, d: &Delta, state: u8, cur: Sample) {
        for (t, s) in self.seconds.iter_mut().zip(d.seconds) {
            *t += s;
        }
        self.current = d.dominant().or(self.current);
        self.state = state;
        *self.last = cur;
    }

    /// Where it counts in the gauges: group, state, class.
    fn place(&self) -> (usize, usize, usize) {
        let l = self.current.unwrap_or(Limit::NotEnoughEvidence);
        (self.group, usize::from(self.state) % STATES, index(l))
    }
}

/// The followed connections and their counts.
#[derive(Default)]
pub(crate) struct Followed {
    map: KeyMap<Conn>,
    /// Per group: connections by state, by current class.
    by_state: Vec<[i64; STATES]>,
    by_limit: Vec<[i64; CLASSES]>,
    /// Per namespace number: how many are followed.
    per_ns: Vec<usize>,
}

impl Followed {
    fn count(&mut self, ns: u32, c: &Conn, n: i64) {
        let (g, state, class) = c.place();
        if self.by_state.len() <= g {
            self.by_state.resize(g + 1, [0; STATES]);
            self.by_limit.resize(g + 1, [0; CLASSES]);
        }
        self.by_state[g][state] += n;
        self.by_limit[g][class] += n;
        let ns = ns as usize;
        if self.per_ns.len() <= ns {
            self.per_ns.resize(ns + 1, 0);
        }
        self.per_ns[ns] = self.per_ns[ns].saturating_add_signed(n as isize);
    }

    /// Follows `c` under `k` (replacing what was there).
    pub fn insert(&mut self, k: ConnKey, c: Conn) {
        self.count(k.ns, &c, 1);
        if let Some(old) = self.map.insert(k, c) {
            self.count(k.ns, &old, -1);
        }
    }

    /// Stops following `k`.
    pub fn remove(&mut self, k: &ConnKey) -> Option<Conn> {
        let c = self.map.remove(k)?;
        self.count(k.ns, &c, -1);
        Some(c)
    }

    /// Runs `f` on the connection under `k`, keeping the counts true to what it changes.
    pub fn update<R>(&mut self, k: &ConnKey, f: impl FnOnce(&mut Conn) -> R) -> Option<R> {
        let c = self.map.get_mut(k)?;
        let before = c.place();
        let r = f(c);
        let after = c.place();
        if before != after {
            self.by_state[before.0][before.1] -= 1;
            self.by_limit[before.0][before.2] -= 1;
            self.by_state[after.0][after.1] += 1;
            self.by_limit[after.0][after.2] += 1;
        }
        Some(r)
    }

    /// How many are followed in namespace number `ns`.
    pub fn in_ns(&self, ns: u32) -> usize {
        self.per_ns.get(ns as usize).copied().unwrap_or(0)
    }

    /// Those of namespace `ns` whose last sample is older than `at`.
    pub fn older_in(&self, ns: u32, at: tcptune_model::Dur) -> Vec<ConnKey> {
        self.map
            .iter()
            .filter(|(k, c)| k.ns == ns && c.last.at_s < at)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Group `g`'s connections by state (indexed by state number).
    pub fn by_state(&self, g: usize) -> [i64; STATES] {
        self.by_state.get(g).copied().unwrap_or([0; STATES])
    }

    /// Group `g`'s connections by current class (in `Limit::ALL`'s order).
    pub fn by_limit(&self, g: usize) -> [i64; CLASSES] {
        self.by_limit.get(g).copied().unwrap_or([0; CLASSES])
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ConnKey, &Conn)> {
        self.map.iter()
    }

    /// Sets each connection's CPU figure from `figures` by inode (none where absent); the
    /// figure changes no count.
    pub fn set_cpu(&mut self, figures: &HashMap<u32, CpuUse>) {
        for c in self.map.values_mut() {
            c.cpu = figures.get(&c.inode).copied();
        }
    }
}

#[cfg(test)]
impl Followed {
    /// The counts recomputed from every entry, to check the kept ones against.
    pub fn recount(&self) -> (Vec<[i64; STATES]>, Vec<[i64; CLASSES]>, Vec<usize>) {
        let (mut st, mut li) = (
            vec![[0; STATES]; self.by_state.len()],
            vec![[0; CLASSES]; self.by_limit.len()],
        );
        let mut ns = vec![0; self.per_ns.len()];
        for (k, c) in &self.map {
            let (g, s, l) = c.place();
            st[g][s] += 1;
            li[g][l] += 1;
            ns[k.ns as usize] += 1;
        }
        (st, li, ns)
    }

    /// The counts as kept.
    pub fn kept(&self) -> (Vec<[i64; STATES]>, Vec<[i64; CLASSES]>, Vec<usize>) {
        (
            self.by_state.clone(),
            self.by_limit.clone(),
            self.per_ns.clone(),
        )
    }
}
