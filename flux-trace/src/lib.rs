//! The oracle trace: what one instrumented run of a program did, in order, per thread.
//!
//! Why a crate of its own: everything downstream of tracing (extractors, harvest, export) reads
//! this model and nothing else, so it must not drag in BPF, tokio or Docker. The agent builds a
//! [`Trace`]; extractors are pure functions over it.
//!
//! Model and conventions (the contract extractors rely on):
//! - [`Trace::events`] is ordered by `(ts, seq)`: timestamps are CLOCK_MONOTONIC nanoseconds from
//!   both sources (the kernel's `bpf_ktime_get_ns` and Python's `time.monotonic_ns`), and within
//!   one thread the order is program order.
//! - `call` / `return` are *activations*: a generator or coroutine resumed and suspended again is
//!   one call/return pair per resumption, with the same [`Event::frame`] for every activation of
//!   the same frame object (when the hook saw it), so a generator's activations can be joined.
//!   Every `call` has exactly one matching `return` with the same `activation` id in a complete
//!   trace; a frame left by an exception has a `return` whose `unwind` is set.
//! - `line` means "this line is about to execute"; its `locals` are the locals of the frame that
//!   changed since the frame's previous event (the effect of the code executed in between), as
//!   `sys.settrace` reports them. A `return` carries the final changes the same way.
//! - `file` is the absolute path as the interpreter saw it; `func` is the code object's
//!   `co_name` (what USDT reports); `qualname` is its `co_qualname` where known. A JVM's
//!   events (`flux_merge::jvm`) name a method by its class and name the same way: `qualname`
//!   `StringUtils.isEmpty`, `module` the package, `file` the class's source file relative to
//!   its source root, `sig` the descriptor; they have no lines.
//! - `complete == false` means some event was lost: no gold answer may be taken from it.
//! - With the tracing config's `dialect = "swe-flux"` (see [`config::Dialect`]) targeted events
//!   also carry what SWE-Flux's settrace log needs: the code's `module`, the names of locals that
//!   disappeared (`deleted`), and on `exception` events the locals changed before it and the
//!   exception object as `value` (`type` = its class's `__name__`, `repr` = its plain repr).
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, Write};
pub use thin_vec::ThinVec;

mod code;
pub use code::{Code, CodeNames, Codes};
mod detail;
pub use detail::Detail;

pub mod compare;
pub mod config;
pub mod facts;
pub mod index;
pub mod keep;
pub mod name;
pub mod perfetto;
pub mod query;
pub mod reference;
pub use config::{Dialect, Scope, TracingConfig};
pub use facts::FileFacts;
pub use index::TraceIndex;
pub use keep::Keep;
pub use name::{Interner, Name};

/// Which witness produced an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// CPython's USDT probes, through flux's eBPF programs.
    Usdt,
    /// flux's in-process hook (sys.monitoring or sys.settrace/setprofile).
    Hook,
    /// The third witness: a plain `sys.settrace` reference sharing no code with the hook
    /// ([`reference`]), which re-derives gold answers independently.
    Reference,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An activation of a Python frame starts (a call, or a generator/coroutine resumption).
    Call,
    /// An activation ends (return, yield/await suspension, or exit by exception).
    Return,
    /// A line of a traced function is about to execute.
    Line,
    /// An exception was raised (or re-raised) in this frame at this line.
    Exception,
    /// An exception was caught by a handler in this frame at this line.
    Handled,
    /// A test (pytest item) started; `test` names it.
    TestStart,
    /// A test finished; `test` names it and `outcome` says how.
    TestEnd,
    /// The hook evaluated an invariant predicate (`[tracing] predicates`) on the live locals of
    /// a targeted frame just before `line` runs: `predicate` is its text, `value` its truth
    /// (`True`/`False`, type `bool`), or `exc` the exception evaluating it raised.
    Check,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Call => "call",
            Kind::Return => "return",
            Kind::Line => "line",
            Kind::Exception => "exception",
            Kind::Handled => "handled",
            Kind::TestStart => "test_start",
            Kind::TestEnd => "test_end",
            Kind::Check => "check",
        }
    }
}

/// A captured value: a bounded, exception-safe `repr` and the name of its type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Value {
    pub repr: String,
    #[serde(rename = "type")]
    pub ty: String,
}

/// One event of the trace. Every event owns its strings (`file`, `func`, `qualname`…), for
/// simplicity of extractors; they are not interned. (While ingesting USDT records the agent
/// keeps each string once, as a `Name`, in `flux_merge::usdt::Drained`; events copy them.)
///
/// What few events carry (locals, values, exceptions, a test's outcome, a predicate) is in
/// [`Event::detail`], one pointer: a suite part's trace is tens of millions of calls and
/// returns of untargeted code, which carry none of it. Its JSON is the same flat object as
/// before (the module `detail`'s serde).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub ev: Kind,
    pub src: Source,
    /// The code's names (`file`, `func`, `qualname`, `module`, `sig`), shared by its events:
    /// read with [`Event::file`] and its siblings.
    pub code: Code,
    pub line: u32,
    /// Activation id: unique in the trace; a `call` and its `return` share it (0 for test events).
    pub activation: u64,
    /// Frame id: the same for all activations of one frame object (generators), else equal to
    /// the activation id.
    pub frame: u64,
    /// Activation id of the caller (0 at the bottom of a thread's stack).
    pub parent: u64,
    /// Stack depth of the activation in its thread (0 = outermost traced frame).
    pub depth: u32,
    /// The activation ended by yielding / awaiting (it may be resumed).
    pub suspended: bool,
    /// The activation ended because an exception propagated out of it.
    pub unwind: bool,
    /// Test node id for test events; for other events, the test running when it happened.
    pub test: Name,
    /// Locals, value, exception, outcome, predicate: read with [`Event::detail`], written with
    /// [`Event::detail_mut`].
    pub(crate) extra: detail::Extra,
}

/// Where an exception was raised: the innermost entry of its traceback (the frame that raised
/// it, or that called the C function that did), as the hook read it at an `exception` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExcOrigin {
    /// `co_filename` of the frame's code.
    pub file: String,
    /// `co_qualname` of the frame's code.
    pub qualname: String,
    /// The line it was executing (`tb_lineno`).
    pub line: u32,
}

/// What an `exception` event is, in its frame (the hook's word, in [`Event::outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcKind {
    /// Raised here: by the frame's own code, or by a C function it called (the traceback's
    /// innermost entry is this frame).
    Raise,
    /// Raised again by the frame's own statement: a bare `raise` (also `reraise-inferred`, the
    /// 3.11 bare `raise` the hook infers), `raise e` of an exception raised before.
    Reraise,
    /// Come out of a Python callee, which raised it (or through which it came).
    Propagate,
    /// Thrown into this generator or coroutine at the `yield`/`await` it was suspended at, by
    /// `throw()`/`close()` from the code that resumed it (a `@contextmanager`'s `__exit__`):
    /// not raised by the frame's own code.
    Thrown,
    /// 3.11's `StopIteration` at the end of a `yield from`/`await`, reported to tracers only
    /// (dialect `swe-flux`): no exception at all.
    TracerOnly,
}

impl ExcKind {
    /// The kind an `exception` event carries in its `outcome`, if any (traces made before the
    /// hook said it, and events of other sources, carry none).
    pub fn of(e: &Event) -> Option<ExcKind> {
        match e.detail().outcome.as_str() {
            "raise" => Some(ExcKind::Raise),
            "reraise" | "reraise-inferred" => Some(ExcKind::Reraise),
            "propagate" => Some(ExcKind::Propagate),
            "thrown" => Some(ExcKind::Thrown),
            "tracer-only" => Some(ExcKind::TracerOnly),
            _ => None,
        }
    }

    /// Whether the frame of the event raised the exception (its own code, a C function it
    /// called, or its own re-raise), as opposed to receiving it.
    pub fn raised_here(self) -> bool {
        matches!(self, ExcKind::Raise | ExcKind::Reraise)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExcInfo {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub msg: String,
}

impl Event {
    /// A bare event; the rest of the fields are filled by the builder that makes it.
    pub fn new(ts: u64, pid: u32, tid: u32, ev: Kind, src: Source) -> Event {
        Event {
            ts,
            pid,
            tid,
            ev,
            src,
            code: Code::NONE,
            line: 0,
            activation: 0,
            frame: 0,
            parent: 0,
            depth: 0,
            suspended: false,
            unwind: false,
            test: Name::EMPTY,
            extra: detail::Extra::default(),
        }
    }

    /// What few events carry (locals, value, exception, outcome, predicate); empty for most.
    pub fn detail(&self) -> &Detail {
        self.extra.get()
    }

    /// The detail, to write (allocated on first use).
    pub fn detail_mut(&mut self) -> &mut Detail {
        self.extra.get_mut()
    }

    /// The detail, taken out (the event keeps none).
    pub fn take_detail(&mut self) -> Detail {
        self.extra.0.take().map(|d| *d).unwrap_or_default()
    }

    /// Replace the detail (an empty one takes no allocation).
    pub fn set_detail(&mut self, d: Detail) {
        self.extra = detail::Extra::of(d);
    }

    /// Make the event's code and names the table's copies (a trace read from a file repeats a
    /// few names millions of times: one copy each is what keeps it small in memory).
    pub fn share_names(&mut self, codes: &mut Codes) {
        self.code = codes.share(&self.code);
        self.test = codes.names.intern(&self.test);
        if let Some(d) = self.extra.0.as_deref_mut() {
            d.outcome = codes.names.intern(&d.outcome);
            d.predicate = codes.names.intern(&d.predicate);
        }
    }

    /// `co_filename` of the event's code.
    pub fn file(&self) -> &Name {
        &self.code.file
    }

    /// `co_name` of the event's code.
    pub fn func(&self) -> &Name {
        &self.code.func
    }

    /// `co_qualname` of the event's code (empty until known).
    pub fn qualname(&self) -> &Name {
        &self.code.qualname
    }

    /// The module of the event's code (see [`CodeNames::module`]).
    pub fn module(&self) -> &Name {
        &self.code.module
    }

    /// A JVM method's descriptor (see [`CodeNames::sig`]).
    pub fn sig(&self) -> &Name {
        &self.code.sig
    }

    /// The code's names, to change for this event alone (copied first when shared).
    pub fn code_mut(&mut self) -> &mut CodeNames {
        self.code.names_mut()
    }

    /// The qualified name if known, else the code name.
    pub fn name(&self) -> &str {
        if self.code.qualname.is_empty() {
            &self.code.func
        } else {
            &self.code.qualname
        }
    }
}

/// What is known about how a trace was made, and whether it can be trusted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// False if any event was lost or unreadable, or a source ended abnormally.
    pub complete: bool,
    /// Why it is incomplete, one reason per entry.
    #[serde(default)]
    pub problems: Vec<String>,
    pub lost_events: u64,
    #[serde(default)]
    pub interpreter: String,
    /// How calls were taken: `usdt`, `hook`, or `usdt+hook` (entries from the hook).
    #[serde(default)]
    pub calls: String,
    /// Events per kind and source, e.g. `usdt.return` → 1234.
    #[serde(default)]
    pub counts: std::collections::BTreeMap<String, u64>,
    /// Labels such as "not reproducible" that every output derived from the trace must carry.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Set when the run kept only part of its trace ([`keep`]): what it kept, and the names
    /// whose activations kept their calls. Absent: every event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<keep::Kept>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub meta: Meta,
    pub events: Vec<Event>,
    /// Static facts of the targeted source files that ran, by `co_filename` (see [`facts`]):
    /// computed by the hook in the traced process, so they describe the exact files that ran.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub facts: std::collections::BTreeMap<String, FileFacts>,
}

/// The JSONL line that carries one file's static facts (before the events).
#[derive(Deserialize)]
struct FactsLine {
    facts: FileFacts,
}

#[derive(Serialize)]
struct FactsLineRef<'a> {
    facts: &'a FileFacts,
}

/// The lines of [`Trace::write_jsonl`] before its events: one `{"facts": ...}` object per file
/// (for a writer that has the events one at a time: the merge writing a whole trace as it goes).
pub fn write_facts_jsonl(
    facts: &std::collections::BTreeMap<String, FileFacts>,
    mut w: impl Write,
) -> std::io::Result<()> {
    for f in facts.values() {
        serde_json::to_writer(&mut w, &FactsLineRef { facts: f })?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// One event's line of [`Trace::write_jsonl`].
pub fn write_event_jsonl(e: &Event, mut w: impl Write) -> std::io::Result<()> {
    serde_json::to_writer(&mut w, e)?;
    w.write_all(b"\n")
}

/// An event's line as [`write_event_jsonl`] wrote it (without its newline), its names shared
/// through `codes`.
pub fn read_event_jsonl(line: &str, codes: &mut Codes) -> serde_json::Result<Event> {
    let mut e: Event = serde_json::from_str(line)?;
    e.share_names(codes);
    Ok(e)
}

/// A writer that passes everything through and hashes it: a trace's digest (sha256, lowercase
/// hex) taken from the very bytes written.
pub struct Sha256Writer<W> {
    inner: W,
    hash: sha2::Sha256,
}

impl<W: Write> Sha256Writer<W> {
    pub fn new(inner: W) -> Self {
        use sha2::Digest;
        Sha256Writer {
            inner,
            hash: sha2::Sha256::new(),
        }
    }

    /// The digest of what was written (the writer is flushed first).
    pub fn finish(mut self) -> std::io::Result<String> {
        use sha2::Digest;
        self.inner.flush()?;
        Ok(self
            .hash
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    }
}

impl<W: Write> Write for Sha256Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: usize,
        msg: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{path}: more than {MAX_EVENTS} events (no trace flux makes or reads is longer)")]
    TooLong { path: String },
}

/// The most events a trace holds: [`TraceIndex`] keeps event indices in 32 bits, and no run
/// comes near it (the agent's budget, `--max-events`, is clamped to it).
pub const MAX_EVENTS: usize = u32::MAX as usize - 1;

impl Trace {
    /// Count events per `src.kind`, as the summary and `Meta::counts` report them.
    pub fn count_by_kind(&self) -> std::collections::BTreeMap<String, u64> {
        let mut m = std::collections::BTreeMap::new();
        for e in &self.events {
            *m.entry(format!("{}.{}", src_str(e.src), e.ev.as_str()))
                .or_insert(0) += 1;
        }
        m
    }

    /// Write one JSON object per event, after one `{"facts": ...}` object per file of
    /// [`Trace::facts`] (none for a trace without facts, so such a trace's JSONL is unchanged).
    pub fn write_jsonl(&self, mut w: impl Write) -> std::io::Result<()> {
        write_facts_jsonl(&self.facts, &mut w)?;
        for e in &self.events {
            write_event_jsonl(e, &mut w)?;
        }
        w.flush()
    }

    /// Read events (and facts) written by [`Trace::write_jsonl`]; `meta` is left default
    /// (complete).
    pub fn read_jsonl(r: impl BufRead, path: &str) -> Result<Trace, TraceError> {
        let mut events = Vec::new();
        let mut facts = std::collections::BTreeMap::new();
        let mut codes = Codes::default();
        for (i, line) in r.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |err: serde_json::Error| TraceError::Parse {
                path: path.to_string(),
                line: i + 1,
                msg: err.to_string(),
            };
            if line.starts_with("{\"facts\":") {
                let f: FactsLine = serde_json::from_str(&line).map_err(bad)?;
                facts.insert(f.facts.file.clone(), f.facts);
                continue;
            }
            let e = read_event_jsonl(&line, &mut codes).map_err(bad)?;
            if events.len() == MAX_EVENTS {
                return Err(TraceError::TooLong {
                    path: path.to_string(),
                });
            }
            events.push(e);
        }
        Ok(Trace {
            meta: Meta {
                complete: true,
                ..Meta::default()
            },
            events,
            facts,
        })
    }

    /// The static facts of the file `file` (a `co_filename` as events carry it).
    pub fn facts_of(&self, file: &str) -> Option<&FileFacts> {
        self.facts.get(file)
    }

    /// Events of one thread, in order.
    pub fn thread(&self, pid: u32, tid: u32) -> impl Iterator<Item = &Event> {
        self.events
            .iter()
            .filter(move |e| e.pid == pid && e.tid == tid)
    }

    /// The (pid, tid) pairs in order of first appearance.
    pub fn threads(&self) -> Vec<(u32, u32)> {
        let mut seen = Vec::new();
        for e in &self.events {
            if !seen.contains(&(e.pid, e.tid)) {
                seen.push((e.pid, e.tid));
            }
        }
        seen
    }

    /// Index of the `return` of each activation, by activation id.
    pub fn returns_by_activation(&self) -> HashMap<u64, usize> {
        self.events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.ev == Kind::Return && e.activation != 0)
            .map(|(i, e)| (e.activation, i))
            .collect()
    }

    /// The `(caller, callee)` activation pairs in call order: the dynamic call tree's edges.
    pub fn call_edges(&self) -> Vec<(Option<&Event>, &Event)> {
        let calls: HashMap<u64, &Event> = self
            .events
            .iter()
            .filter(|e| e.ev == Kind::Call)
            .map(|e| (e.activation, e))
            .collect();
        self.events
            .iter()
            .filter(|e| e.ev == Kind::Call)
            .map(|e| (calls.get(&e.parent).copied(), e))
            .collect()
    }
}

pub fn src_str(s: Source) -> &'static str {
    match s {
        Source::Usdt => "usdt",
        Source::Hook => "hook",
        Source::Reference => "reference",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_80_bytes() {
        // The merged trace is the agent's largest holding (tens of millions of events in a
        // suite part): what few events carry (locals, value, exception, outcome, predicate)
        // is one pointer, and an event without it allocates nothing; its code's five names
        // are one shared pointer too (`Code`: 112 bytes with the five inline).
        assert_eq!(std::mem::size_of::<Event>(), 80);
        let call = serde_json::from_str::<Event>(
            r#"{"ts":1,"pid":2,"tid":3,"ev":"call","src":"usdt","func":"f","line":4,"depth":0}"#,
        )
        .unwrap();
        assert!(call.extra.0.is_none(), "{call:?}");
        let mut e = Event::new(1, 2, 3, Kind::Line, Source::Hook);
        e.detail_mut().deleted.push("x".into());
        let line = serde_json::to_string(&e).unwrap();
        assert!(
            line.contains(r#""deleted":["x"]"#) && !line.contains("locals"),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), e);
    }

    #[test]
    fn an_empty_detail_is_no_detail() {
        let mut a = Event::new(1, 2, 3, Kind::Return, Source::Hook);
        let b = a.clone();
        a.detail_mut().locals = ThinVec::new();
        assert_eq!(a, b, "an empty detail equals none");
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        a.set_detail(Detail::default());
        assert!(a.extra.0.is_none());
    }

    /// The JSON of every field, in the order the keys always had: a trace written before the
    /// detail was boxed writes back byte for byte.
    #[test]
    fn an_events_keys_keep_their_order() {
        let line = r#"{"ts":10,"pid":1,"tid":2,"ev":"exception","src":"hook","file":"/a.py","func":"f","qualname":"C.f","module":"m","sig":"()V","line":3,"activation":7,"frame":8,"parent":5,"depth":2,"locals":[["x",{"repr":"1","type":"int"}]],"deleted":["y"],"value":{"repr":"E()","type":"E"},"suspended":true,"unwind":true,"exc":{"type":"E","msg":"m"},"origin":{"file":"/b.py","qualname":"g","line":9},"test":"t.py::a","outcome":"raise","predicate":"x > 0"}"#;
        let e: Event = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&e).unwrap(), line);
    }

    #[test]
    fn jsonl_round_trip_keeps_every_field() {
        let mut e = Event::new(10, 1, 2, Kind::Return, Source::Hook);
        e.code_mut().file = "/a.py".into();
        e.code_mut().func = "f".into();
        e.code_mut().qualname = "C.f".into();
        e.code_mut().module = "pkg.m".into();
        e.line = 3;
        e.activation = 7;
        e.frame = 7;
        e.parent = 5;
        e.depth = 2;
        e.detail_mut().locals = thin_vec::thin_vec![(
            "x".into(),
            Value {
                repr: "1".into(),
                ty: "int".into(),
            },
        )];
        e.detail_mut().deleted = thin_vec::thin_vec!["gone".into()];
        e.detail_mut().value = Some(Box::new(Value {
            repr: "None".into(),
            ty: "NoneType".into(),
        }));
        e.unwind = true;
        e.detail_mut().exc = Some(Box::new(ExcInfo {
            ty: "ValueError".into(),
            msg: "bad".into(),
        }));
        e.detail_mut().origin = Some(Box::new(ExcOrigin {
            file: "/b.py".into(),
            qualname: "g".into(),
            line: 9,
        }));
        let mut facts = std::collections::BTreeMap::new();
        facts.insert(
            "/a.py".to_string(),
            FileFacts {
                file: "/a.py".into(),
                lines: 3,
                ..FileFacts::default()
            },
        );
        let t = Trace {
            meta: Meta::default(),
            events: vec![e.clone(), Event::new(11, 1, 2, Kind::Line, Source::Usdt)],
            facts,
        };
        let mut buf = Vec::new();
        t.write_jsonl(&mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.lines().nth(2).unwrap().contains("\"src\":\"usdt\""));
        assert!(text.lines().next().unwrap().starts_with("{\"facts\":"));
        assert!(text.lines().nth(1).unwrap().contains("\"ev\":\"return\""));
        let back = Trace::read_jsonl(&buf[..], "t.jsonl").unwrap();
        assert_eq!(back.events, t.events);
        assert_eq!(back.facts, t.facts);
    }

    #[test]
    fn an_event_stays_small() {
        // The agent holds every event of a run (SymPy's suite parts: 15 M): names are shared
        // and one pointer wide (`Name`) and the rare parts (value, exception, origin) boxed.
        // Was 448 bytes with owned `String`s and inline options, each name a heap copy of its
        // own; 256 with names as fat `Arc<str>`s.
        assert!(
            std::mem::size_of::<Event>() <= 192,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn a_read_trace_keeps_one_copy_of_each_name() {
        let line = r#"{"ts":1,"pid":1,"tid":1,"ev":"call","src":"usdt","file":"/a.py","func":"f"}"#;
        let text = format!("{line}\n{line}\n");
        let t = Trace::read_jsonl(text.as_bytes(), "t.jsonl").unwrap();
        assert!(t.events[0].file().ptr_eq(t.events[1].file()));
        assert!(t.events[0].func().ptr_eq(t.events[1].func()));
    }

    #[test]
    fn read_jsonl_names_the_bad_line() {
        let err = Trace::read_jsonl(&b"{\"ts\":1}\n"[..], "x.jsonl").unwrap_err();
        assert!(err.to_string().starts_with("x.jsonl:1:"), "{err}");
    }
}
