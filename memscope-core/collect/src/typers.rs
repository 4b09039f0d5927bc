//! A process's typers, and the table that finds the typer of a per-source record
//! ([`Record::Source`]) by its source id: such a record goes to its own adapter's typer alone.
//! Shared records (marks, pool heaps and regions, owner tags, address records, `System`, …)
//! are offered to the typers in list order until one takes them.

use crate::adapter::{SourceId, TypeCtx, Typer};
use memscope_core::event::Event;
use memscope_wire::Record;

/// The typers of one process.
pub struct Typers {
    list: Vec<Box<dyn Typer>>,
    /// Source id → index in `list` (`usize::MAX`: no typer of that source).
    by_source: Vec<usize>,
}

impl Typers {
    /// The typers `list` gives, each with the source whose own records it takes (`None`: a typer
    /// of shared records only, such as the plugin typer).
    pub fn new(list: Vec<(Option<SourceId>, Box<dyn Typer>)>) -> Typers {
        let mut by_source = Vec::new();
        let mut typers = Vec::with_capacity(list.len());
        for (i, (source, t)) in list.into_iter().enumerate() {
            if let Some(s) = source {
                let s = usize::from(s.0);
                if by_source.len() <= s {
                    by_source.resize(s + 1, usize::MAX);
                }
                by_source[s] = i;
            }
            typers.push(t);
        }
        Typers {
            list: typers,
            by_source,
        }
    }

    /// Types `rec` of thread `tid`, pushing its events onto `out`. Returns whether a typer took
    /// it (a per-source record of a source without a typer here is not taken).
    pub fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        if let Record::Source { source, .. } = rec {
            return match self.by_source.get(usize::from(source.0)) {
                Some(&i) if i != usize::MAX => self.list[i].type_record(ctx, tid, rec, out),
                _ => false,
            };
        }
        self.list
            .iter_mut()
            .any(|t| t.type_record(ctx, tid, rec, out))
    }

    /// Lets every typer emit what it still holds (the process ended).
    pub fn finish(&mut self, ctx: &mut TypeCtx, out: &mut Vec<Event>) {
        for t in &mut self.list {
            t.finish(ctx, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::EventType;

    /// Takes every record it is offered and says so with one event.
    struct Greedy(&'static str);

    impl Typer for Greedy {
        fn type_record(
            &mut self,
            ctx: &mut TypeCtx,
            tid: u32,
            _rec: &Record<Box<[u8]>>,
            out: &mut Vec<Event>,
        ) -> bool {
            out.push(Event::new(EventType::custom(self.0), 0, ctx.pid, tid));
            true
        }
    }

    #[test]
    fn a_per_source_record_goes_to_its_own_typer_and_shared_ones_to_the_first_that_takes_them() {
        let mut t = Typers::new(vec![
            (Some(SourceId(0)), Box::new(Greedy("A"))),
            (Some(SourceId(5)), Box::new(Greedy("B"))),
        ]);
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut out = Vec::new();
        let own = |s| Record::Source {
            source: SourceId(s),
            tag: 0x10,
            ts: 1,
            body: Box::from(&[][..]),
        };
        assert!(t.type_record(&mut ctx, 1, &own(5), &mut out));
        assert!(!t.type_record(&mut ctx, 1, &own(3), &mut out));
        assert!(!t.type_record(&mut ctx, 1, &own(900), &mut out));
        assert!(t.type_record(&mut ctx, 1, &Record::OwnerPop { ts: 1 }, &mut out));
        let got: Vec<_> = out.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(got, ["B", "A"]);
    }
}
