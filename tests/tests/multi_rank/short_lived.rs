//! Issue 39: a short-lived process is never dropped. The collector read a new stream's header,
//! found none yet, and only then checked whether its writer was alive: a rank that wrote its
//! header, recorded everything and was reaped in between lost its whole stream (no dump, no
//! run-index entry; 1 rank in ~270 runs of 32 ranks with a CPU hog beside). Many waves of
//! short ranks under one run, with the machine kept busy, give the race its chances.

use super::*;

#[test]
fn every_short_lived_rank_of_many_waves_is_in_the_run_index_with_its_dump() {
    const WAVES: usize = 12;
    const WAVE_RANKS: usize = 32;
    let w = worker();
    let l = launcher();
    let script = format!(
        "for i in $(seq {WAVES}); do '{}' -v {WAVE_RANKS} '{}' 1 0 visible >/dev/null || exit 1; done",
        l.display(),
        w.display()
    );
    // keep the CPUs busy: the collector is descheduled between its reads, as on a loaded node
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let run = memscope_run(
        &["-q", "--adapters", "acl,hal,mstx"],
        &["sh", "-c", &script],
        &[],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let idx = run_index(run.out.path());
    let procs = idx["runs"][0]["processes"].as_array().unwrap();
    let mut ranks: Vec<u64> = procs.iter().filter_map(|p| p["rank"].as_u64()).collect();
    ranks.sort();
    let want: Vec<u64> = (0..WAVE_RANKS as u64)
        .flat_map(|r| std::iter::repeat_n(r, WAVES))
        .collect();
    assert_eq!(ranks, want, "every rank of every wave is in the index");
    let dumps = dumps_by_pid(run.out.path());
    assert_eq!(dumps.len(), WAVES * WAVE_RANKS, "one dump per rank");
}
