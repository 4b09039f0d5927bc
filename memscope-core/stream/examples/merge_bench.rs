//! Component figure of the collector's merge alone (issue 37): `merge_bench STREAM [REPS]`
//! merges one kept stream file from start to end and prints ns per record.
use memscope_stream::spool::{ProcessMerge, StreamFile};
fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: merge_bench STREAM [REPS]");
    let reps: usize = std::env::args()
        .nth(2)
        .map_or(3, |s| s.parse().expect("REPS"));
    for _ in 0..reps {
        let t = std::time::Instant::now();
        let mut m = ProcessMerge::new();
        m.add_image(StreamFile::open(std::path::Path::new(&path)).expect("open"));
        m.set_final();
        let (mut n, mut sum) = (0u64, 0u64);
        loop {
            m.poll().expect("read");
            let mut got = 0;
            while m
                .next_with(u64::MAX, |_, s| {
                    sum = sum.wrapping_add(s.as_ref().map_or(0, |s| s.seq))
                })
                .expect("read")
            {
                got += 1;
            }
            n += got;
            if got == 0 && m.pending() == 0 {
                break;
            }
        }
        let e = t.elapsed();
        println!(
            "{n} records in {e:?}: {:.1} ns/record ({sum})",
            e.as_nanos() as f64 / n as f64
        );
    }
}
