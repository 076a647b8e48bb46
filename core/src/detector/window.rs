//! Rolling windows of one namespace: a ring of per-tick miss counts (alert 1's steady state
//! is their median, robust to the spikes themselves) and a few cumulative histogram marks
//! (alerts 2 and 3 read the difference between now and the oldest mark).

use crate::metrics::{CounterSnapshot, HistogramSnapshot};

/// Ticks kept for the steady state.
pub(crate) const RING: usize = 64;
/// Ticks of history before alert 1 may fire (a cold start is not a stampede).
pub(crate) const MIN_HISTORY: usize = 8;
/// Histogram marks kept: the latency window is covered in quarters.
const MARKS: usize = 5;

/// What one tick saw.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Bucket {
    pub(crate) misses: u64,
    pub(crate) expired: u64,
    pub(crate) cold: u64,
    pub(crate) loads: u64,
}

impl Bucket {
    pub(crate) fn between(now: &CounterSnapshot, before: &CounterSnapshot) -> Self {
        Self {
            misses: now.misses.saturating_sub(before.misses),
            expired: now.expired_misses.saturating_sub(before.expired_misses),
            cold: now.cold_misses.saturating_sub(before.cold_misses),
            loads: now.loads.saturating_sub(before.loads),
        }
    }
}

#[derive(Clone, Default)]
struct Mark {
    at: u64,
    load: HistogramSnapshot,
    wait: HistogramSnapshot,
}

/// The rolling state of one namespace.
pub(crate) struct Window {
    ring: [u64; RING],
    head: usize,
    len: usize,
    /// The counters at the last tick.
    pub(crate) prev: CounterSnapshot,
    marks: [Mark; MARKS],
    marks_len: usize,
    marks_head: usize,
}

impl Default for Window {
    fn default() -> Self {
        Self {
            ring: [0; RING],
            head: 0,
            len: 0,
            prev: CounterSnapshot::default(),
            marks: Default::default(),
            marks_len: 0,
            marks_head: 0,
        }
    }
}

impl Window {
    /// Records one tick's misses.
    pub(crate) fn push(&mut self, misses: u64) {
        self.ring[self.head] = misses;
        self.head = (self.head + 1) % RING;
        self.len = (self.len + 1).min(RING);
    }

    /// The steady state: the median misses per tick of the ticks recorded, once there are
    /// enough of them.
    pub(crate) fn steady(&self) -> Option<u64> {
        if self.len < MIN_HISTORY {
            return None;
        }
        let mut v = self.ring;
        let v = &mut v[..self.len];
        v.sort_unstable();
        Some(v[self.len / 2])
    }

    /// Adds a histogram mark when the last is at least `every` old.
    pub(crate) fn mark(
        &mut self,
        now: u64,
        every: u64,
        load: &HistogramSnapshot,
        wait: &HistogramSnapshot,
    ) {
        let newest = (self.marks_head + MARKS - 1) % MARKS;
        if self.marks_len > 0 && now < self.marks[newest].at.saturating_add(every) {
            return;
        }
        self.marks[self.marks_head] = Mark {
            at: now,
            load: load.clone(),
            wait: wait.clone(),
        };
        self.marks_head = (self.marks_head + 1) % MARKS;
        self.marks_len = (self.marks_len + 1).min(MARKS);
    }

    /// Load durations and waits since the oldest mark.
    pub(crate) fn latency(
        &self,
        load: &HistogramSnapshot,
        wait: &HistogramSnapshot,
    ) -> (HistogramSnapshot, HistogramSnapshot) {
        if self.marks_len == 0 {
            return (load.clone(), wait.clone());
        }
        let oldest = (self.marks_head + MARKS - self.marks_len) % MARKS;
        let m = &self.marks[oldest];
        (minus(load, &m.load), minus(wait, &m.wait))
    }
}

fn minus(a: &HistogramSnapshot, b: &HistogramSnapshot) -> HistogramSnapshot {
    let mut d = a.clone();
    for (x, y) in d.counts.iter_mut().zip(&b.counts) {
        *x = x.saturating_sub(*y);
    }
    d.sum = a.sum.saturating_sub(b.sum);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_is_the_median_of_the_ticks() {
        let mut w = Window::default();
        for m in [0, 1, 2, 100, 1, 2, 1] {
            w.push(m);
        }
        assert_eq!(w.steady(), None);
        w.push(0);
        // 0 1 2 100 1 2 1 0 → sorted 0 0 1 1 1 2 2 100 → median 1
        assert_eq!(w.steady(), Some(1));
        for _ in 0..200 {
            w.push(3);
        }
        assert_eq!(w.steady(), Some(3));
    }
}
