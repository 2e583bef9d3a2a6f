//! Where updates meet readers: the store (what a new page is sent first) and the streams of
//! the pages open now, each with a bounded queue. A page that does not keep up is dropped
//! (its queue closed), never buffered without limit; its browser reconnects and starts again
//! from the store.

use std::collections::HashSet;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Mutex, MutexGuard};

use crate::store::{ConnView, Store};
use crate::update::{Stamped, Update};

/// Messages a stream may have queued before its page counts as too slow.
pub const QUEUE: usize = 256;
/// Streams open at once at most.
pub const MAX_STREAMS: usize = 16;

struct Sub {
    token: u64,
    id: String,
    tx: SyncSender<String>,
}

struct State {
    store: Store,
    subs: Vec<Sub>,
    /// Streams dropped for being slow (for the log and tests).
    dropped: u64,
    next_token: u64,
}

/// The hub.
pub struct Hub {
    state: Mutex<State>,
    /// CLOCK_REALTIME (ms since the epoch) at the view's origin, when streamed updates are
    /// stamped with when they were taken.
    origin_wall_ms: Option<f64>,
}

/// Why a stream could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Too many streams are open already.
    TooMany,
    /// No connection with that id is kept.
    NoSuchConn,
}

/// One Server-Sent Events message: `event` names it, `data` is one JSON line.
pub fn sse(event: &str, data: &str) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl Hub {
    /// A hub over `store`, with no streams open.
    pub fn new(store: Store) -> Hub {
        Hub {
            state: Mutex::new(State {
                store,
                subs: Vec::new(),
                dropped: 0,
                next_token: 0,
            }),
            origin_wall_ms: None,
        }
    }

    /// Stamps every streamed update with when it was taken ([`Stamped`]): `origin_wall_ms` is
    /// CLOCK_REALTIME at the instant the view's `t_s` counts from.
    pub fn stamping(mut self, origin_wall_ms: f64) -> Hub {
        self.origin_wall_ms = Some(origin_wall_ms);
        self
    }

    /// One update as a stream's message.
    fn message(&self, u: &Update) -> String {
        let data = match self.origin_wall_ms {
            Some(o) => serde_json::to_string(&Stamped {
                update: u,
                taken_ms: o + u.t_s() * 1e3,
            }),
            None => serde_json::to_string(u),
        };
        sse("update", &data.unwrap_or_default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind, still consistent enough to
        // show; the page must keep working.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies updates to the store and queues each to the streams of its connection.
    pub fn publish(&self, updates: &[Update]) {
        let mut st = self.lock();
        let State {
            store,
            subs,
            dropped,
            ..
        } = &mut *st;
        for u in updates {
            store.apply(u);
            let Some(id) = u.id() else { continue };
            let mut msg: Option<String> = None;
            subs.retain(|s| {
                if s.id != id {
                    return true;
                }
                let m = msg.get_or_insert_with(|| self.message(u)).clone();
                match s.tx.try_send(m) {
                    Ok(()) => true,
                    Err(TrySendError::Full(_)) => {
                        *dropped += 1;
                        false
                    }
                    Err(TrySendError::Disconnected(_)) => false,
                }
            });
        }
    }

    /// Opens a stream of connection `id`: its history first, then its updates as published,
    /// until [`Hub::unsubscribe`] with the token returned.
    pub fn subscribe(&self, id: &str) -> Result<(ConnView, Receiver<String>, u64), Refused> {
        let mut st = self.lock();
        if st.subs.len() >= MAX_STREAMS {
            return Err(Refused::TooMany);
        }
        let view = st.store.view(id).ok_or(Refused::NoSuchConn)?;
        let (tx, rx) = sync_channel(QUEUE);
        st.next_token += 1;
        let token = st.next_token;
        st.subs.push(Sub {
            token,
            id: id.to_string(),
            tx,
        });
        Ok((view, rx, token))
    }

    /// Closes a stream (its page went away).
    pub fn unsubscribe(&self, token: u64) {
        self.lock().subs.retain(|s| s.token != token);
    }

    /// The connections pages are watching (the core diagnoses them in full).
    pub fn watched(&self) -> HashSet<u64> {
        self.lock()
            .subs
            .iter()
            .filter_map(|s| s.id.parse().ok())
            .collect()
    }

    /// Streams dropped for being slow so far.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Runs `f` on the store.
    pub fn with_store<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        f(&self.lock().store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Bounds;
    use crate::update::{Point, Source};

    fn point(t: f64) -> Update {
        Update::Point {
            id: "7".into(),
            point: Point {
                t_s: t,
                goodput_bps: Some(1e6),
                delivery_rate_bps: None,
                app_limited: None,
                cwnd_bytes: None,
                snd_wnd_bytes: None,
                ssthresh_bytes: None,
                inflight_bytes: None,
                srtt_ms: None,
                min_rtt_ms: None,
                rttvar_ms: None,
                acked_bytes: None,
                sent_bytes: None,
                shares: None,
            },
        }
    }

    fn hub() -> Hub {
        let source = Source {
            per_ack: false,
            interval_s: 0.25,
            reason: None,
        };
        Hub::new(Store::new(Bounds::default(), source))
    }

    #[test]
    fn a_stream_starts_from_the_history_then_gets_what_follows() {
        let h = hub();
        h.publish(&[point(0.0), point(0.25)]);
        let (view, rx, _) = h.subscribe("7").unwrap();
        assert_eq!(view.points.len(), 2);
        h.publish(&[point(0.5)]);
        let msg = rx.try_recv().unwrap();
        assert!(
            msg.starts_with("event: update\ndata: {\"type\":\"point\""),
            "{msg}"
        );
        assert!(rx.try_recv().is_err());
        assert_eq!(h.watched(), HashSet::from([7]));
        assert_eq!(h.subscribe("8").unwrap_err(), Refused::NoSuchConn);
    }

    #[test]
    fn a_stamping_hub_says_when_each_update_was_taken() {
        let h = hub().stamping(1_700_000_000_000.0);
        h.publish(&[point(0.0)]);
        let (_view, rx, _) = h.subscribe("7").unwrap();
        h.publish(&[point(2.5)]);
        let msg = rx.try_recv().unwrap();
        let data = msg.split_once("data: ").unwrap().1.trim();
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["taken_ms"], 1_700_000_002_500.0);
        // The update itself is unchanged beside the stamp.
        let u: Update = serde_json::from_value(v).unwrap();
        assert_eq!(u, point(2.5));
        // An unstamped hub sends the update alone (as a recording holds it).
        let plain = hub();
        plain.publish(&[point(0.0)]);
        let (_view, rx, _) = plain.subscribe("7").unwrap();
        plain.publish(&[point(1.0)]);
        assert!(!rx.try_recv().unwrap().contains("taken_ms"));
    }

    #[test]
    fn a_slow_page_is_dropped_not_buffered() {
        let h = hub();
        h.publish(&[point(0.0)]);
        let (_view, rx, _) = h.subscribe("7").unwrap();
        // Nobody reads: the queue fills, then the stream is closed.
        for i in 0..QUEUE + 10 {
            h.publish(&[point(1.0 + i as f64)]);
        }
        assert_eq!(h.dropped(), 1);
        assert!(h.watched().is_empty());
        // What was queued before the drop is still delivered, then the stream ends.
        let got: Vec<String> = rx.iter().collect();
        assert_eq!(got.len(), QUEUE);
        // The store kept every point (up to its own bound) for the reconnect.
        let kept = h.with_store(|s| s.view("7").unwrap().points.len());
        assert_eq!(kept, QUEUE + 11);
    }
}
