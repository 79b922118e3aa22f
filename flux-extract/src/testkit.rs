//! A small builder of hand-made traces, for the extractors' unit tests and for tests of crates
//! downstream (harvest, scoring) that need a realistic trace without running Python.
//!
//! Events get consecutive timestamps, one thread, `frame == activation` (except
//! [`TraceBuilder::resume`]), `parent`/`depth` from the builder's call stack, and the current
//! test's node id. Value types are guessed from the repr ([`val`]).
use flux_trace::{Event, ExcInfo, Kind, Meta, Source, Trace, Value};

pub const FILE: &str = "/usr/lib/python3.11/site-packages/pkg/mod.py";

struct Open {
    act: u64,
    frame: u64,
    name: String,
    file: String,
    line: u32,
}

pub struct TraceBuilder {
    events: Vec<Event>,
    stack: Vec<Open>,
    next: u64,
    test: String,
}

/// A value whose type is guessed from its repr the way Python would print it.
pub fn val(repr: &str) -> Value {
    let ty = if repr.parse::<i64>().is_ok() {
        "int"
    } else if repr.parse::<f64>().is_ok() {
        "float"
    } else if repr.starts_with('\'') || repr.starts_with('"') {
        "str"
    } else if repr == "True" || repr == "False" {
        "bool"
    } else if repr == "None" {
        "NoneType"
    } else if repr.starts_with('[') {
        "list"
    } else {
        "object"
    };
    Value {
        repr: repr.to_string(),
        ty: ty.to_string(),
    }
}

fn locals(changes: &[(&str, &str)]) -> Vec<(String, Value)> {
    changes
        .iter()
        .map(|(n, r)| (n.to_string(), val(r)))
        .collect()
}

impl Default for TraceBuilder {
    fn default() -> TraceBuilder {
        TraceBuilder::new()
    }
}

impl TraceBuilder {
    pub fn new() -> TraceBuilder {
        TraceBuilder {
            events: Vec::new(),
            stack: Vec::new(),
            next: 1,
            test: String::new(),
        }
    }

    fn push(&mut self, mut e: Event) {
        e.ts = self.events.len() as u64 + 1;
        e.test = self.test.clone();
        self.events.push(e);
    }

    fn base(&self, ev: Kind) -> Event {
        let mut e = Event::new(0, 100, 100, ev, Source::Hook);
        if let Some(top) = self.stack.last() {
            e.activation = top.act;
            e.frame = top.frame;
            e.qualname = top.name.clone();
            e.func = top.name.rsplit('.').next().unwrap_or_default().to_string();
            e.file = top.file.clone();
            e.line = top.line;
            e.depth = self.stack.len() as u32 - 1;
            e.parent = if self.stack.len() >= 2 {
                self.stack[self.stack.len() - 2].act
            } else {
                0
            };
        }
        e
    }

    pub fn test(mut self, id: &str) -> TraceBuilder {
        self.test = id.to_string();
        let e = Event::new(0, 100, 100, Kind::TestStart, Source::Hook);
        self.push(e);
        self
    }

    pub fn end(mut self, outcome: &str) -> TraceBuilder {
        let mut e = Event::new(0, 100, 100, Kind::TestEnd, Source::Hook);
        e.outcome = outcome.to_string();
        self.push(e);
        self.test.clear();
        self
    }

    pub fn call(self, name: &str, line: u32, args: &[(&str, &str)]) -> TraceBuilder {
        self.call_in(name, FILE, line, args)
    }

    pub fn call_in(self, name: &str, file: &str, line: u32, args: &[(&str, &str)]) -> TraceBuilder {
        let act = self.next;
        self.enter(name, file, line, act, args)
    }

    /// Resume the generator frame `frame` (a new activation of an existing frame).
    pub fn resume(self, frame: u64, name: &str, line: u32) -> TraceBuilder {
        self.enter(name, FILE, line, frame, &[])
    }

    fn enter(
        mut self,
        name: &str,
        file: &str,
        line: u32,
        frame: u64,
        args: &[(&str, &str)],
    ) -> TraceBuilder {
        let act = self.next;
        self.next += 1;
        self.stack.push(Open {
            act,
            frame,
            name: name.to_string(),
            file: file.to_string(),
            line,
        });
        let mut e = self.base(Kind::Call);
        e.locals = locals(args);
        self.push(e);
        self
    }

    pub fn line(mut self, line: u32, changes: &[(&str, &str)]) -> TraceBuilder {
        if let Some(top) = self.stack.last_mut() {
            top.line = line;
        }
        let mut e = self.base(Kind::Line);
        e.locals = locals(changes);
        self.push(e);
        self
    }

    pub fn ret(self, value: &str) -> TraceBuilder {
        self.ret_with(value, &[])
    }

    pub fn ret_with(mut self, value: &str, changes: &[(&str, &str)]) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.value = Some(val(value));
        e.locals = locals(changes);
        self.push(e);
        self.stack.pop();
        self
    }

    /// A `return` that suspends a generator.
    pub fn suspend(mut self, value: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.value = Some(val(value));
        e.suspended = true;
        self.push(e);
        self.stack.pop();
        self
    }

    /// An `exception` event at the current line of the innermost frame.
    pub fn raise(mut self, ty: &str, msg: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Exception);
        e.exc = Some(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        });
        self.push(e);
        self
    }

    /// A `handled` event at `line` of the innermost frame.
    pub fn handled(mut self, line: u32, ty: &str, msg: &str) -> TraceBuilder {
        if let Some(top) = self.stack.last_mut() {
            top.line = line;
        }
        let mut e = self.base(Kind::Handled);
        e.exc = Some(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        });
        self.push(e);
        self
    }

    /// The innermost frame is left by the exception.
    pub fn unwind(mut self, ty: &str, msg: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.unwind = true;
        e.exc = Some(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        });
        self.push(e);
        self.stack.pop();
        self
    }

    pub fn build(self) -> Trace {
        Trace {
            meta: Meta {
                complete: true,
                ..Meta::default()
            },
            events: self.events,
        }
    }
}
