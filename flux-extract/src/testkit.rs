//! A small builder of hand-made traces, for the extractors' unit tests and for tests of crates
//! downstream (harvest, scoring) that need a realistic trace without running Python.
//!
//! Events get consecutive timestamps, one thread, `frame == activation` (except
//! [`TraceBuilder::resume`]), `parent`/`depth` from the builder's call stack, and the current
//! test's node id. Value types are guessed from the repr ([`val`]).
//!
//! [`facts_from_source`] gives a hand-built trace the static facts of a real source text: it
//! runs the real `flux_hook.static_facts` with a Python 3.11+ (test support only: the one place
//! this crate starts a process).
use flux_trace::{Event, ExcInfo, ExcOrigin, FileFacts, Kind, Meta, Source, Trace, Value};
use std::collections::BTreeMap;

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
    facts: BTreeMap<String, FileFacts>,
}

/// The static facts `flux_hook.static_facts` computes for `source` as the file `file`, with
/// `/usr/bin/python3.11` (else `python3`). Panics with the interpreter's message if it fails:
/// for tests only.
pub fn facts_from_source(source: &str, file: &str) -> FileFacts {
    use std::io::Write;
    let hook = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.join("flux-hook"))
        .expect("workspace layout");
    let py = if std::path::Path::new("/usr/bin/python3.11").exists() {
        "/usr/bin/python3.11"
    } else {
        "python3"
    };
    let script = format!(
        "import sys, json; sys.path.insert(0, {hook:?}); \
         from flux_hook.static_facts import facts_for_source; \
         print(json.dumps(facts_for_source(sys.stdin.buffer.read(), {file:?})))",
        hook = hook.display().to_string(),
    );
    let mut child = std::process::Command::new(py)
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {py} for static facts: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(source.as_bytes())
        .expect("write source");
    let out = child.wait_with_output().expect("static facts");
    assert!(
        out.status.success(),
        "static_facts failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("static facts JSON")
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

fn locals(changes: &[(&str, &str)]) -> flux_trace::ThinVec<(String, Value)> {
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
            facts: BTreeMap::new(),
        }
    }

    /// Attach static facts (keyed by their `file`).
    pub fn facts(mut self, f: FileFacts) -> TraceBuilder {
        self.facts.insert(f.file.clone(), f);
        self
    }

    /// Attach the static facts of `source` as the builder's default file [`FILE`].
    pub fn source(self, source: &str) -> TraceBuilder {
        self.facts(facts_from_source(source, FILE))
    }

    /// A `check` event: the hook evaluated `predicate` in the innermost frame at `line`;
    /// `held` is its truth value, or None when evaluating it raised `error`.
    pub fn check(
        mut self,
        line: u32,
        predicate: &str,
        held: Option<bool>,
        error: &str,
    ) -> TraceBuilder {
        let mut e = self.base(Kind::Check);
        e.line = line;
        e.detail_mut().predicate = predicate.to_string().into();
        match held {
            Some(b) => {
                e.detail_mut().value = Some(Box::new(Value {
                    repr: if b { "True" } else { "False" }.into(),
                    ty: "bool".into(),
                }))
            }
            None => {
                e.detail_mut().exc = Some(Box::new(ExcInfo {
                    ty: error.to_string(),
                    msg: String::new(),
                }))
            }
        }
        self.push(e);
        self
    }

    fn push(&mut self, mut e: Event) {
        e.ts = self.events.len() as u64 + 1;
        e.test = self.test.clone().into();
        self.events.push(e);
    }

    fn base(&self, ev: Kind) -> Event {
        let mut e = Event::new(0, 100, 100, ev, Source::Hook);
        if let Some(top) = self.stack.last() {
            e.activation = top.act;
            e.frame = top.frame;
            e.code_mut().qualname = top.name.clone().into();
            e.code_mut().func = top
                .name
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_string()
                .into();
            e.code_mut().file = top.file.clone().into();
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
        e.detail_mut().outcome = outcome.to_string().into();
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

    /// The activation id the next call or resumption gets (a generator's frame id is its first
    /// activation's).
    pub fn next_activation(&self) -> u64 {
        self.next
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
        e.detail_mut().locals = locals(args);
        self.push(e);
        self
    }

    pub fn line(mut self, line: u32, changes: &[(&str, &str)]) -> TraceBuilder {
        if let Some(top) = self.stack.last_mut() {
            top.line = line;
        }
        let mut e = self.base(Kind::Line);
        e.detail_mut().locals = locals(changes);
        self.push(e);
        self
    }

    pub fn ret(self, value: &str) -> TraceBuilder {
        self.ret_with(value, &[])
    }

    pub fn ret_with(mut self, value: &str, changes: &[(&str, &str)]) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.detail_mut().value = Some(Box::new(val(value)));
        e.detail_mut().locals = locals(changes);
        self.push(e);
        self.stack.pop();
        self
    }

    /// A `return` that suspends a generator.
    pub fn suspend(mut self, value: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.detail_mut().value = Some(Box::new(val(value)));
        e.suspended = true;
        self.push(e);
        self.stack.pop();
        self
    }

    /// An `exception` event at the current line of the innermost frame.
    pub fn raise(mut self, ty: &str, msg: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Exception);
        e.detail_mut().exc = Some(Box::new(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        }));
        self.push(e);
        self
    }

    /// An `exception` event of the innermost frame as the hook records it: with its kind
    /// (`raise`, `reraise`, `propagate`, `thrown`) and where it was raised (`origin`: qualname and
    /// line of the traceback's innermost entry, in [`FILE`]).
    pub fn exception(
        self,
        ty: &str,
        msg: &str,
        kind: &str,
        origin: Option<(&str, u32)>,
    ) -> TraceBuilder {
        let mut b = self.raise(ty, msg);
        if let Some(e) = b.events.last_mut() {
            e.detail_mut().outcome = kind.to_string().into();
            e.detail_mut().origin = origin
                .map(|(q, line)| ExcOrigin {
                    file: FILE.to_string(),
                    qualname: q.to_string(),
                    line,
                })
                .map(Box::new);
        }
        b
    }

    /// A `handled` event at `line` of the innermost frame.
    pub fn handled(mut self, line: u32, ty: &str, msg: &str) -> TraceBuilder {
        if let Some(top) = self.stack.last_mut() {
            top.line = line;
        }
        let mut e = self.base(Kind::Handled);
        e.detail_mut().exc = Some(Box::new(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        }));
        self.push(e);
        self
    }

    /// The innermost frame is left by the exception.
    pub fn unwind(mut self, ty: &str, msg: &str) -> TraceBuilder {
        let mut e = self.base(Kind::Return);
        e.unwind = true;
        e.detail_mut().exc = Some(Box::new(ExcInfo {
            ty: ty.to_string(),
            msg: msg.to_string(),
        }));
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
            facts: self.facts,
        }
    }
}

/// The parts of `answer` that `template` names: object keys it lists (recursively), list items
/// by position (or all after a one-item template list); what an instance template without
/// `[extractor.answer]` selects (for tests of
/// extractors whose records carry more fields than a test looks at).
pub fn pick(answer: &serde_json::Value, template: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match (answer, template) {
        (J::Object(a), J::Object(t)) if !(t.len() == 1 && t.contains_key("*")) => J::Object(
            t.iter()
                .filter_map(|(k, sub)| a.get(k).map(|v| (k.clone(), pick(v, sub))))
                .collect(),
        ),
        (J::Object(a), J::Object(t)) => {
            let sub = &t["*"];
            J::Object(a.iter().map(|(k, v)| (k.clone(), pick(v, sub))).collect())
        }
        (J::Array(a), J::Array(t)) if t.len() == a.len() => {
            J::Array(a.iter().zip(t).map(|(v, x)| pick(v, x)).collect())
        }
        (J::Array(a), J::Array(t)) if t.len() == 1 => {
            J::Array(a.iter().map(|v| pick(v, &t[0])).collect())
        }
        _ => answer.clone(),
    }
}
