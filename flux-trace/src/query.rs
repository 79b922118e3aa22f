//! Read-only queries over a [`Trace`] that extractors share.
//!
//! Why here: every extractor needs the same few views of a trace (the invocations of a function,
//! the events that belong to one frame, the locals of a frame after a given event, the tests that
//! ran). Defining them once keeps the conventions the question prose quotes in one place.
//!
//! Conventions:
//! - An *invocation* is one Python frame object: all activations (`call`/`return` pairs) that
//!   share [`Event::frame`]. A plain function call is one activation; a generator driven to the
//!   end is one invocation with one activation per resumption. Invocations are numbered from 1 in
//!   order of their first `call` event in the trace.
//! - An event belongs to the activation named by its `activation` field; events that leave it 0
//!   (other than test events) are attributed to the innermost open activation of their thread.
//! - A function name matches an event when it equals the event's `qualname`, or, for events that
//!   carry no `qualname`, when its last dotted component equals the event's `func`.
//! - When both witnesses report the lines of one frame (USDT `line` probes and the hook), an
//!   invocation keeps only the hook's `line` events, which carry the locals; a `call` repeated
//!   for the same activation is kept once.
//! - A test filter matches a pytest node id when it equals it, or when the node id ends with it
//!   right after `::` or `/` (so `test_a` matches `tests/test_x.py::test_a`).
use crate::{Event, Kind, Trace, Value};
use std::collections::{BTreeMap, HashMap};

/// Does `name` (a qualname such as `Add.flatten`) name the function of `e`?
pub fn name_matches(e: &Event, name: &str) -> bool {
    if !e.qualname().is_empty() {
        return e.qualname() == name;
    }
    !e.func().is_empty() && name.rsplit('.').next() == Some(e.func().as_str())
}

/// Does the test filter `filter` select the pytest node id `test`?
pub fn test_matches(test: &str, filter: &str) -> bool {
    if filter.is_empty() || test.is_empty() {
        return false;
    }
    if test == filter {
        return true;
    }
    test.strip_suffix(filter)
        .is_some_and(|head| head.ends_with("::") || head.ends_with('/'))
}

/// Does `file` lie under `within`? True when they are equal, when `file` starts with `within`,
/// or when `file` contains `/` + `within` (so `sympy/` matches `/usr/lib/.../sympy/core/add.py`).
pub fn file_within(file: &str, within: &str) -> bool {
    if within.is_empty() {
        return true;
    }
    let w = within.trim_start_matches('/');
    file == within || file.starts_with(within) || file.contains(&format!("/{w}"))
}

/// For every event, the activation it belongs to (0 for test events and events outside any
/// activation). Call and return events belong to their own activation.
pub fn owners(trace: &Trace) -> Vec<u64> {
    let mut out = Vec::with_capacity(trace.events.len());
    each_owner(trace, |_, owner| out.push(owner));
    out
}

/// [`owners`] one event at a time: `f(index, owner)` in trace order.
pub fn each_owner(trace: &Trace, mut f: impl FnMut(usize, u64)) {
    let mut stacks: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        let stack = stacks.entry((e.pid, e.tid)).or_default();
        let owner = match e.ev {
            Kind::TestStart | Kind::TestEnd => 0,
            Kind::Call => {
                stack.push(e.activation);
                e.activation
            }
            Kind::Return => {
                if let Some(pos) = stack.iter().rposition(|a| *a == e.activation) {
                    stack.truncate(pos);
                }
                e.activation
            }
            _ => {
                if e.activation != 0 {
                    e.activation
                } else {
                    stack.last().copied().unwrap_or(0)
                }
            }
        };
        f(i, owner);
    }
}

/// Frame id of every activation, from the `call` events (`frame` 0 means "same as activation").
pub fn frames(trace: &Trace) -> HashMap<u64, u64> {
    trace
        .events
        .iter()
        .filter(|e| e.ev == Kind::Call && e.activation != 0)
        .map(|e| {
            (
                e.activation,
                if e.frame == 0 { e.activation } else { e.frame },
            )
        })
        .collect()
}

/// One frame object of a function: its activations and the indices (into `trace.events`) of
/// every event that belongs to it, in trace order.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    pub frame: u64,
    /// Activation ids in order; the first one is the call that created the frame, unless the
    /// frame started where nothing was traced (see [`Invocation::starts_here`]). Inline when
    /// there is one (most frames: an index of a suite part holds millions).
    pub activations: smallvec::SmallVec<[u64; 1]>,
    /// Indices into `Trace::events`: calls, lines, exceptions, handled, returns of this frame
    /// (inline for a call and its return).
    pub events: smallvec::SmallVec<[usize; 2]>,
    /// The test running at the first call ("" outside tests): the event's name shared, not
    /// copied (an index of a suite part holds millions of invocations).
    pub test: crate::Name,
}

impl Invocation {
    /// Whether the frame starts in the trace: its first activation is a fresh call. A
    /// generator started before the trace's scope (the test window, every extent of targeted
    /// code) and resumed inside it has a frame id of its own (the merge's `unseen-starts`):
    /// its activations are resumptions, and it is no call of the code it runs under.
    pub fn starts_here(&self) -> bool {
        self.activations.first() == Some(&self.frame)
    }

    /// The first `call` event of the frame.
    pub fn first_call<'t>(&self, trace: &'t Trace) -> Option<&'t Event> {
        self.events
            .iter()
            .map(|&i| &trace.events[i])
            .find(|e| e.ev == Kind::Call)
    }

    /// Line numbers of the frame's `line` events, in order.
    pub fn lines(&self, trace: &Trace) -> Vec<u32> {
        self.events
            .iter()
            .map(|&i| &trace.events[i])
            .filter(|e| e.ev == Kind::Line)
            .map(|e| e.line)
            .collect()
    }

    /// The frame's locals after the event at position `k` of [`Invocation::events`]: the
    /// arguments of the first call, updated by the changes carried by every later event of the
    /// frame up to and including position `k`.
    pub fn locals_through(&self, trace: &Trace, k: usize) -> BTreeMap<String, Value> {
        let mut state = BTreeMap::new();
        for &i in self.events.iter().take(k.saturating_add(1)) {
            for (name, v) in &trace.events[i].detail().locals {
                state.insert(name.clone(), v.clone());
            }
        }
        state
    }

    /// Position (in [`Invocation::events`]) of the event at which the effects of the `line`
    /// event at position `k` are visible: the next `line` or `return` event of the frame.
    /// `None` if the frame has no later such event (an incomplete trace).
    pub fn effects_of(&self, trace: &Trace, k: usize) -> Option<usize> {
        ((k + 1)..self.events.len())
            .find(|&j| matches!(trace.events[self.events[j]].ev, Kind::Line | Kind::Return))
    }
}

/// Which invocations to collect.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter<'a> {
    /// Only frames whose first call happened in a test matching this filter.
    pub test: Option<&'a str>,
    /// Only functions whose file lies [`file_within`] this.
    pub file: Option<&'a str>,
}

/// All invocations of the function named `function`, in order of their first call.
pub fn invocations(trace: &Trace, function: &str, filter: Filter<'_>) -> Vec<Invocation> {
    invocations_where(trace, filter, |e| name_matches(e, function))
}

/// All invocations whose first call satisfies `pred` (and `filter`), in order of first call.
/// (Built by [`crate::TraceIndex`], which holds the conventions; extractors asking many
/// questions of one trace keep an index instead of calling this.)
pub fn invocations_where(
    trace: &Trace,
    filter: Filter<'_>,
    pred: impl Fn(&Event) -> bool,
) -> Vec<Invocation> {
    crate::TraceIndex::new(trace).invocations_where(filter, pred)
}

/// One pytest test as the trace saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRun {
    pub id: String,
    /// The `outcome` of its `test_end` event ("" if it has none).
    pub outcome: String,
}

/// The tests of the trace in order of their `test_start` (a test id seen only on other events
/// is added where first seen). Each id appears once.
pub fn tests(trace: &Trace) -> Vec<TestRun> {
    let mut out: Vec<TestRun> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for e in &trace.events {
        if e.test.is_empty() {
            continue;
        }
        let i = *index.entry(e.test.as_str()).or_insert_with(|| {
            out.push(TestRun {
                id: e.test.to_string(),
                outcome: String::new(),
            });
            out.len() - 1
        });
        if e.ev == Kind::TestEnd {
            out[i].outcome = e.detail().outcome.to_string();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meta, Source};

    fn ev(ev: Kind, act: u64, frame: u64, parent: u64, line: u32, name: &str) -> Event {
        let mut e = Event::new(0, 1, 1, ev, Source::Hook);
        e.activation = act;
        e.frame = frame;
        e.parent = parent;
        e.line = line;
        e.code_mut().qualname = name.into();
        e.code_mut().func = name.rsplit('.').next().unwrap_or("").into();
        e.test = "t.py::test_a".into();
        e
    }

    #[test]
    fn generator_activations_join_into_one_invocation() {
        // gen frame 10 resumed twice (activations 10 and 11); f called once (activation 12).
        // A line event with activation 0 belongs to the innermost open activation (12).
        let mut line0 = ev(Kind::Line, 0, 0, 0, 21, "");
        line0.code_mut().qualname.clear();
        let t = Trace {
            meta: Meta::default(),
            events: vec![
                ev(Kind::Call, 10, 10, 0, 1, "gen"),
                ev(Kind::Line, 10, 10, 0, 2, "gen"),
                ev(Kind::Return, 10, 10, 0, 2, "gen"),
                ev(Kind::Call, 12, 12, 0, 20, "C.f"),
                line0,
                ev(Kind::Return, 12, 12, 0, 21, "C.f"),
                ev(Kind::Call, 11, 10, 0, 2, "gen"),
                ev(Kind::Line, 11, 10, 0, 3, "gen"),
                ev(Kind::Return, 11, 10, 0, 3, "gen"),
            ],
            facts: Default::default(),
        };
        let g = invocations(&t, "gen", Filter::default());
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].activations[..], [10, 11]);
        assert_eq!(g[0].lines(&t), vec![2, 3]);
        let f = invocations(&t, "C.f", Filter::default());
        assert_eq!(f[0].lines(&t), vec![21]);
        assert!(invocations(&t, "f", Filter::default()).is_empty());
    }

    #[test]
    fn lines_from_both_witnesses_are_not_doubled() {
        // Activation 1 reported by both witnesses: two calls, usdt and hook lines of line 2.
        let mut usdt_call = ev(Kind::Call, 1, 1, 0, 1, "f");
        usdt_call.src = Source::Usdt;
        let mut usdt_line = ev(Kind::Line, 1, 1, 0, 2, "f");
        usdt_line.src = Source::Usdt;
        let t = Trace {
            meta: Meta::default(),
            events: vec![
                usdt_call,
                ev(Kind::Call, 1, 1, 0, 1, "f"),
                usdt_line,
                ev(Kind::Line, 1, 1, 0, 2, "f"),
                ev(Kind::Return, 1, 1, 0, 2, "f"),
            ],
            facts: Default::default(),
        };
        let f = invocations(&t, "f", Filter::default());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].activations[..], [1]);
        assert_eq!(f[0].lines(&t), vec![2]);
        assert_eq!(f[0].events[..], [0, 3, 4]);
    }

    #[test]
    fn filters_match_at_boundaries() {
        assert!(test_matches("tests/t.py::test_a", "test_a"));
        assert!(test_matches("tests/t.py::test_a", "t.py::test_a"));
        assert!(!test_matches("tests/t.py::test_ab", "b"));
        assert!(file_within(
            "/usr/lib/site-packages/sympy/core/add.py",
            "sympy/"
        ));
        assert!(!file_within(
            "/usr/lib/site-packages/nosympy/add.py",
            "sympy/"
        ));
    }
}
