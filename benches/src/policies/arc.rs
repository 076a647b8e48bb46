//! ARC (Megiddo and Modha, FAST '03) as a model: the `caches` crate's `AdaptiveCache`
//! panics on these traces (an `unwrap` on a `None` in its `put`, caches 0.3.0), so the
//! reference is written from the paper, over `hashlink`'s ordered sets.

use hashlink::LinkedHashSet;

/// An ARC of `capacity` entries: `t1`/`t2` hold entries seen once/more than once, `b1`/`b2`
/// the ghosts of what each evicted, `p` the target size of `t1`, moved by ghost hits.
pub struct Arc {
    t1: LinkedHashSet<u32>,
    t2: LinkedHashSet<u32>,
    b1: LinkedHashSet<u32>,
    b2: LinkedHashSet<u32>,
    p: usize,
    c: usize,
}

impl Arc {
    /// An empty ARC of `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            t1: LinkedHashSet::new(),
            t2: LinkedHashSet::new(),
            b1: LinkedHashSet::new(),
            b2: LinkedHashSet::new(),
            p: 0,
            c: capacity.max(1),
        }
    }

    /// Reads `x`: `true` on a hit (the paper's case I), else admits it.
    pub fn access(&mut self, x: u32) -> bool {
        if self.t1.remove(&x) || self.t2.remove(&x) {
            self.t2.insert(x);
            return true;
        }
        if self.b1.remove(&x) {
            let delta = (self.b2.len() / self.b1.len().max(1)).max(1);
            self.p = (self.p + delta).min(self.c);
            self.replace(false);
            self.t2.insert(x);
        } else if self.b2.remove(&x) {
            let delta = (self.b1.len() / self.b2.len().max(1)).max(1);
            self.p = self.p.saturating_sub(delta);
            self.replace(true);
            self.t2.insert(x);
        } else {
            let l1 = self.t1.len() + self.b1.len();
            if l1 == self.c {
                if self.t1.len() < self.c {
                    self.b1.pop_front();
                    self.replace(false);
                } else {
                    self.t1.pop_front();
                }
            } else {
                let total = l1 + self.t2.len() + self.b2.len();
                if total >= self.c {
                    if total == 2 * self.c {
                        self.b2.pop_front();
                    }
                    self.replace(false);
                }
            }
            self.t1.insert(x);
        }
        false
    }

    /// Evicts from `t1` or `t2` into its ghost list (the paper's REPLACE); `in_b2` says the
    /// miss was a ghost of `t2`.
    fn replace(&mut self, in_b2: bool) {
        if self.t1.len() + self.t2.len() < self.c {
            return;
        }
        let from_t1 =
            !self.t1.is_empty() && (self.t1.len() > self.p || (in_b2 && self.t1.len() == self.p));
        if from_t1 {
            if let Some(y) = self.t1.pop_front() {
                self.b1.insert(y);
            }
        } else if let Some(y) = self.t2.pop_front() {
            self.b2.insert(y);
        } else if let Some(y) = self.t1.pop_front() {
            self.b1.insert(y);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arc_never_holds_more_than_its_capacity_and_hits_what_it_holds() {
        let mut a = Arc::new(3);
        for k in [1, 2, 3, 1, 4, 5, 1, 6, 2, 1] {
            a.access(k);
            assert!(a.t1.len() + a.t2.len() <= 3);
            assert!(a.t1.len() + a.t2.len() + a.b1.len() + a.b2.len() <= 6);
        }
        assert!(a.access(1), "1, read four times, is kept");
    }
}
