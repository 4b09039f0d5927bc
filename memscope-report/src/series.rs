//! Streaming decimation of a memory level over time.
//!
//! Points fall into time buckets of `width` ns aligned on absolute time (`t / width`); a bucket
//! keeps its first, lowest, highest and last point, so the plot keeps every peak and every
//! trough and a step shape between buckets. When more than `cap` buckets exist the width
//! doubles and neighbours merge, so memory is O(cap) whatever the number of points and no
//! time range needs to be known in advance. Points mostly come in time order; a late one is
//! placed by binary search.

/// A point: time (ns, any origin) and value (bytes).
pub type Point = (u64, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    key: u64,
    first: Point,
    min: Point,
    max: Point,
    last: Point,
}

impl Bucket {
    fn new(key: u64, p: Point) -> Bucket {
        Bucket {
            key,
            first: p,
            min: p,
            max: p,
            last: p,
        }
    }

    fn add(&mut self, p: Point) {
        if p.0 < self.first.0 {
            self.first = p;
        }
        if p.0 >= self.last.0 {
            self.last = p;
        }
        if p.1 < self.min.1 {
            self.min = p;
        }
        if p.1 > self.max.1 {
            self.max = p;
        }
    }

    fn merge(&mut self, o: &Bucket) {
        for p in [o.first, o.min, o.max, o.last] {
            self.add(p);
        }
    }
}

/// A decimated series.
#[derive(Clone, Debug)]
pub struct Series {
    buckets: Vec<Bucket>,
    width: u64,
    cap: usize,
    raw: u64,
    peak: Option<Point>,
    last: Option<Point>,
}

impl Series {
    /// An empty series keeping at most `cap` buckets (at least 1).
    pub fn new(cap: usize) -> Series {
        Series {
            buckets: Vec::new(),
            width: 1,
            cap: cap.max(1),
            raw: 0,
            peak: None,
            last: None,
        }
    }

    /// Adds a point.
    pub fn push(&mut self, t: u64, v: i64) {
        let p = (t, v);
        self.raw += 1;
        match self.peak {
            Some(pk) if v <= pk.1 => {}
            _ => self.peak = Some(p),
        }
        match self.last {
            Some(l) if t < l.0 => {}
            _ => self.last = Some(p),
        }
        let key = t / self.width;
        match self.buckets.last_mut() {
            Some(b) if b.key == key => b.add(p),
            Some(b) if b.key < key => self.buckets.push(Bucket::new(key, p)),
            None => self.buckets.push(Bucket::new(key, p)),
            Some(_) => match self.buckets.binary_search_by_key(&key, |b| b.key) {
                Ok(i) => self.buckets[i].add(p),
                Err(i) => self.buckets.insert(i, Bucket::new(key, p)),
            },
        }
        while self.buckets.len() > self.cap {
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        self.width = self.width.saturating_mul(2);
        let mut out: Vec<Bucket> = Vec::with_capacity(self.buckets.len() / 2 + 1);
        for b in &self.buckets {
            let key = b.key / 2;
            match out.last_mut() {
                Some(o) if o.key == key => o.merge(b),
                _ => {
                    let mut n = *b;
                    n.key = key;
                    out.push(n);
                }
            }
        }
        self.buckets = out;
    }

    /// Lowers the cap to `cap` buckets, merging now.
    pub fn limit(&mut self, cap: usize) {
        self.cap = cap.max(1);
        while self.buckets.len() > self.cap {
            self.coarsen();
        }
    }

    /// Whether no point was added.
    pub fn is_empty(&self) -> bool {
        self.raw == 0
    }

    /// Points added.
    pub fn raw_points(&self) -> u64 {
        self.raw
    }

    /// The highest point (the first one on ties).
    pub fn peak(&self) -> Option<Point> {
        self.peak
    }

    /// The latest point.
    pub fn last(&self) -> Option<Point> {
        self.last
    }

    /// Buckets now held.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Bucket width now, ns.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// The points to plot, in time order: per bucket its first, lowest, highest and last point
    /// (each once).
    pub fn points(&self) -> Vec<Point> {
        let mut out = Vec::with_capacity(self.buckets.len() * 2);
        for b in &self.buckets {
            let mut ps = [b.first, b.min, b.max, b.last];
            ps.sort_by_key(|p| p.0);
            for (i, p) in ps.iter().enumerate() {
                if i == 0 || ps[..i].iter().all(|q| q != p) {
                    out.push(*p);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_every_peak_and_trough_within_the_bucket_cap() {
        let mut s = Series::new(64);
        let mut hi = (0, i64::MIN);
        for i in 0..1_000_000u64 {
            // a saw tooth with one spike
            let v = (i % 1000) as i64 + if i == 777_777 { 1_000_000 } else { 0 };
            if v > hi.1 {
                hi = (i * 10, v);
            }
            s.push(i * 10, v);
        }
        assert!(s.buckets() <= 64, "{}", s.buckets());
        let pts = s.points();
        assert!(pts.len() <= 4 * 64);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(pts.contains(&hi));
        assert_eq!(s.peak(), Some(hi));
        assert_eq!(pts.iter().map(|p| p.1).min(), Some(0));
        assert_eq!(s.last(), Some((9_999_990, 999)));
        assert_eq!(s.raw_points(), 1_000_000);
        s.limit(8);
        assert!(s.buckets() <= 8);
        assert!(s.points().contains(&hi));
    }

    #[test]
    fn late_points_are_placed_in_time_order() {
        let mut s = Series::new(1000);
        for t in [10u64, 30, 20, 5, 40] {
            s.push(t, t as i64);
        }
        let pts = s.points();
        assert_eq!(
            pts.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![5, 10, 20, 30, 40]
        );
        assert_eq!(s.last(), Some((40, 40)));
    }
}
