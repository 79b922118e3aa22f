//! Turn drained USDT records into [`flux_trace::Event`]s: resolve string keys, order by time,
//! count what cannot be resolved.
use crate::tracer::{Drained, RawEvent};
use flux_common::{KIND_CALL, KIND_LINE, KIND_RETURN};
use flux_trace::{Event, Kind, Source};

/// Events in (ts, arrival) order and the number whose strings could not be resolved.
pub fn usdt_events(drained: &Drained) -> (Vec<Event>, u64) {
    let mut unresolved = 0;
    let mut evs: Vec<&RawEvent> = drained.events.iter().collect();
    // Stable: equal timestamps keep ring-buffer order (which is per-thread program order).
    evs.sort_by_key(|e| e.ts);
    let mut out = Vec::with_capacity(evs.len());
    for r in evs {
        let kind = match r.kind {
            KIND_CALL => Kind::Call,
            KIND_RETURN => Kind::Return,
            KIND_LINE => Kind::Line,
            _ => continue,
        };
        let mut e = Event::new(r.ts, r.pid, r.tid, kind, Source::Usdt);
        let file = drained.strings.get(&(r.host_tgid, r.file.0, r.file.1));
        let func = drained.strings.get(&(r.host_tgid, r.func.0, r.func.1));
        match (file, func) {
            (Some(f), Some(g)) => {
                e.file = f.to_string();
                e.func = g.to_string();
            }
            _ => unresolved += 1,
        }
        e.line = r.line.max(0) as u32;
        out.push(e);
    }
    (out, unresolved)
}
