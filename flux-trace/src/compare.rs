//! Two traces of the same run, compared as call graphs: does a program take the same path each
//! time it runs? (17.4: determinism.)
//!
//! A gold answer is only as reproducible as the run it comes from. `flux harvest --check`
//! compares answers; this compares what can differ under them: the calls. Each thread's
//! sequence of activation starts and ends (function, file, line, depth, how it ended) is kept;
//! timestamps, ids, pids and tids differ by design and are not. Threads are matched as a
//! multiset (their start order may differ), processes likewise. [`call_divergence`] names the
//! first difference, with context, or says there is none.
//!
//! What the hook and the agent do so that runs agree (flux-hook/README.md "Determinism"):
//! PYTHONHASHSEED=0, `random` seeded, address-space randomisation off where the launcher can.
use crate::{Kind, Trace};
use std::collections::BTreeMap;
use std::fmt;

/// One thread's calls and returns, rendered (`call q file:line d3`, `return q file:line d3
/// unwind`).
pub fn call_sequences(t: &Trace) -> Vec<Vec<String>> {
    let mut by: BTreeMap<(u32, u32), Vec<String>> = BTreeMap::new();
    for e in &t.events {
        let how = match e.ev {
            Kind::Call => "",
            Kind::Return if e.unwind => " unwind",
            Kind::Return if e.suspended => " yield",
            Kind::Return => "",
            _ => continue,
        };
        let name = if e.qualname().is_empty() {
            &e.func()
        } else {
            &e.qualname()
        };
        by.entry((e.pid, e.tid)).or_default().push(format!(
            "{} {name} {}:{} d{}{how}",
            e.ev.as_str(),
            e.file(),
            e.line,
            e.depth
        ));
    }
    let mut v: Vec<Vec<String>> = by.into_values().collect();
    v.sort();
    v
}

/// Where two traces' calls first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the thread in the sorted multiset (see [`call_sequences`]).
    pub thread: usize,
    /// Index of the first differing call/return in that thread.
    pub index: usize,
    /// Up to 3 events before it and 3 from it, on each side.
    pub left: Vec<String>,
    pub right: Vec<String>,
    /// Thread counts, when they differ (then `thread`/`index` are those of the first thread
    /// whose sequence has no equal on the other side).
    pub threads: (usize, usize),
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.threads.0 != self.threads.1 {
            write!(f, "{} threads vs {}; ", self.threads.0, self.threads.1)?;
        }
        writeln!(
            f,
            "thread #{} differs at call/return #{}:",
            self.thread, self.index
        )?;
        for (side, evs) in [("first", &self.left), ("second", &self.right)] {
            writeln!(f, "  {side}:")?;
            for e in evs {
                writeln!(f, "    {e}")?;
            }
        }
        Ok(())
    }
}

/// The first difference between the calls of `a` and `b`, or `None` when every thread made the
/// same calls in the same order.
pub fn call_divergence(a: &Trace, b: &Trace) -> Option<Divergence> {
    let (x, y) = (call_sequences(a), call_sequences(b));
    if x == y {
        return None;
    }
    let empty = Vec::new();
    let n = x.len().max(y.len());
    let t = (0..n).find(|&i| x.get(i) != y.get(i)).expect("they differ");
    let (p, q) = (x.get(t).unwrap_or(&empty), y.get(t).unwrap_or(&empty));
    let i = p.iter().zip(q).take_while(|(l, r)| l == r).count();
    let window = |s: &[String]| s[i.saturating_sub(3).min(s.len())..(i + 3).min(s.len())].to_vec();
    Some(Divergence {
        thread: t,
        index: i,
        left: window(p),
        right: window(q),
        threads: (x.len(), y.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, Source};

    fn ev(tid: u32, k: Kind, q: &str, line: u32, depth: u32) -> Event {
        let mut e = Event::new(0, 1, tid, k, Source::Usdt);
        e.code_mut().qualname = q.into();
        e.code_mut().file = "/m.py".into();
        e.line = line;
        e.depth = depth;
        e
    }

    fn trace(events: Vec<Event>) -> Trace {
        Trace {
            meta: Default::default(),
            events,
            facts: Default::default(),
        }
    }

    #[test]
    fn the_same_calls_in_another_thread_order_do_not_diverge() {
        let a = trace(vec![
            ev(1, Kind::Call, "f", 1, 0),
            ev(2, Kind::Call, "g", 5, 0),
            ev(1, Kind::Return, "f", 2, 0),
            ev(2, Kind::Return, "g", 6, 0),
        ]);
        let b = trace(vec![
            ev(9, Kind::Call, "g", 5, 0),
            ev(9, Kind::Return, "g", 6, 0),
            ev(8, Kind::Call, "f", 1, 0),
            ev(8, Kind::Line, "f", 2, 0),
            ev(8, Kind::Return, "f", 2, 0),
        ]);
        assert_eq!(call_divergence(&a, &b), None);
    }

    #[test]
    fn another_callee_is_named_with_its_context() {
        // The shape of SymPy's unseeded assumption shuffle: the same caller asks its facts in
        // another order.
        let a = trace(vec![
            ev(1, Kind::Call, "ask", 1, 0),
            ev(1, Kind::Call, "Integer._eval_is_odd", 10, 1),
            ev(1, Kind::Return, "Integer._eval_is_odd", 11, 1),
            ev(1, Kind::Return, "ask", 3, 0),
        ]);
        let b = trace(vec![
            ev(1, Kind::Call, "ask", 1, 0),
            ev(1, Kind::Call, "Rational._eval_is_zero", 20, 1),
            ev(1, Kind::Return, "Rational._eval_is_zero", 21, 1),
            ev(1, Kind::Return, "ask", 3, 0),
        ]);
        let d = call_divergence(&a, &b).expect("they differ");
        assert_eq!((d.thread, d.index, d.threads), (0, 1, (1, 1)));
        assert_eq!(d.left[0], "call ask /m.py:1 d0");
        assert_eq!(d.left[1], "call Integer._eval_is_odd /m.py:10 d1");
        assert_eq!(d.right[1], "call Rational._eval_is_zero /m.py:20 d1");
        assert!(d.to_string().contains("differs at call/return #1"));
    }

    #[test]
    fn how_an_activation_ended_counts() {
        let mut r = ev(1, Kind::Return, "f", 2, 0);
        let a = trace(vec![ev(1, Kind::Call, "f", 1, 0), r.clone()]);
        r.unwind = true;
        let b = trace(vec![ev(1, Kind::Call, "f", 1, 0), r]);
        assert_eq!(
            call_divergence(&a, &b).unwrap().right[1],
            "return f /m.py:2 d0 unwind"
        );
    }
}
