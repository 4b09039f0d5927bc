//! The batches the merge thread hands to the pipeline's ([`crate::process`]'s split release):
//! HOST records, most of a busy stream, travel in 40 bytes each; the others beside them, by
//! value. Half the bytes of a batch of whole records cross between the two cores.

use memscope_stream::spool::Sourced;
use memscope_wire::{HostRecord, Record};

/// One record of a batch, in merge order.
enum Handed {
    /// A HOST `Malloc`/`Free` of process image `image`, thread `tid`.
    Host {
        image: u32,
        tid: u32,
        rec: HostRecord,
    },
    /// Any other record: its index in [`Batch::others`].
    Other(u32),
}

/// Records in merge order, on their way from the merge thread to the pipeline's.
#[derive(Default)]
pub(crate) struct Batch {
    entries: Vec<Handed>,
    others: Vec<(usize, Sourced)>,
}

impl Batch {
    /// An empty batch with room for `n` records.
    pub(crate) fn with_capacity(n: usize) -> Batch {
        Batch {
            entries: Vec::with_capacity(n),
            others: Vec::new(),
        }
    }

    /// Records in the batch.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch holds no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends the record the merge lends in `slot` (of process image `image`): a HOST record
    /// is read where it lies, any other taken.
    #[inline(always)]
    pub(crate) fn push(&mut self, image: usize, slot: &mut Option<Sourced>) {
        let Some(src) = slot else {
            return;
        };
        if let Some(rec) = HostRecord::of(&src.rec) {
            self.entries.push(Handed::Host {
                image: image as u32,
                tid: src.tid,
                rec,
            });
        } else if let Some(src) = slot.take() {
            self.entries.push(Handed::Other(self.others.len() as u32));
            self.others.push((image, src));
        }
    }

    /// Hands every record to `f` (image, thread, record) in order and empties the batch,
    /// keeping its room.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, u32, &Record)) {
        for e in self.entries.drain(..) {
            match e {
                Handed::Host { image, tid, rec } => f(image as usize, tid, &rec.record()),
                Handed::Other(i) => {
                    let (image, src) = &self.others[i as usize];
                    f(*image, src.tid, &src.rec);
                }
            }
        }
        self.others.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sourced(tid: u32, rec: Record) -> Option<Sourced> {
        Some(Sourced {
            tid,
            chunk: 0,
            seq: 0,
            rec,
        })
    }

    #[test]
    fn a_batch_hands_host_and_other_records_back_in_the_order_they_were_pushed() {
        let recs = vec![
            (
                0,
                7,
                Record::Malloc {
                    ts: 1,
                    addr: 0x10,
                    size: 64,
                    stack: 3,
                },
            ),
            (
                1,
                8,
                Record::Mark {
                    ts: 2,
                    stream: 0,
                    msg: b"step"[..].into(),
                    null: false,
                },
            ),
            (0, 7, Record::Free { ts: 3, addr: 0x10 }),
            (1, 9, Record::RangeEnd { ts: 4, id: 5 }),
            (
                0,
                8,
                Record::Malloc {
                    ts: 5,
                    addr: 0x20,
                    size: 8,
                    stack: 0,
                },
            ),
        ];
        let mut b = Batch::with_capacity(2);
        for (image, tid, rec) in &recs {
            let mut slot = sourced(*tid, rec.clone());
            b.push(*image, &mut slot);
        }
        assert_eq!(b.len(), recs.len());
        let mut got = Vec::new();
        b.drain(|image, tid, rec| got.push((image, tid, rec.clone())));
        assert_eq!(got, recs);
        assert!(b.is_empty());
        // emptied, it is filled again from the start
        b.push(2, &mut sourced(1, Record::Free { ts: 6, addr: 0x20 }));
        let mut again = Vec::new();
        b.drain(|image, tid, rec| again.push((image, tid, rec.clone())));
        assert_eq!(again, vec![(2, 1, Record::Free { ts: 6, addr: 0x20 })]);
    }
}
