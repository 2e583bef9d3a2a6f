//! A bounded history: the last `span_s` seconds of items, and never more than `cap` of them
//! (at per-ACK rates the time bound alone would not bound memory).

use std::collections::VecDeque;

/// Anything stamped with seconds since the view started.
pub trait Stamped {
    /// When the item happened, seconds since the view started.
    fn t_s(&self) -> f64;
}

/// The ring.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    span_s: f64,
    cap: usize,
}

impl<T: Stamped> Ring<T> {
    /// An empty ring keeping at most `span_s` seconds and `cap` items (at least one).
    pub fn new(span_s: f64, cap: usize) -> Ring<T> {
        Ring {
            items: VecDeque::new(),
            span_s,
            cap: cap.max(1),
        }
    }

    /// Appends `item` and drops what fell out of the span or past the cap.
    pub fn push(&mut self, item: T) {
        let now = item.t_s();
        self.items.push_back(item);
        while self.items.len() > self.cap {
            self.items.pop_front();
        }
        while self
            .items
            .front()
            .is_some_and(|f| now - f.t_s() > self.span_s)
        {
            self.items.pop_front();
        }
    }

    /// Items kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// The newest item.
    pub fn last(&self) -> Option<&T> {
        self.items.back()
    }
}

impl Stamped for crate::update::Point {
    fn t_s(&self) -> f64 {
        self.t_s
    }
}

impl Stamped for crate::update::AckPoint {
    fn t_s(&self) -> f64 {
        self.t_s
    }
}

impl Stamped for crate::update::Event {
    fn t_s(&self) -> f64 {
        self.t_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Stamped for f64 {
        fn t_s(&self) -> f64 {
            *self
        }
    }

    #[test]
    fn the_span_and_the_cap_both_bound_it() {
        let mut r = Ring::new(10.0, 5);
        for t in [0.0, 1.0, 2.0] {
            r.push(t);
        }
        assert_eq!(r.len(), 3);
        r.push(11.5); // 0.0 and 1.0 are more than 10 s older
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2.0, 11.5]);
        for i in 0..20 {
            r.push(12.0 + f64::from(i) * 0.01);
        }
        assert_eq!(r.len(), 5);
        assert_eq!(r.last().copied(), Some(12.19));
    }
}
