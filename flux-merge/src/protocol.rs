//! The hook's wire protocol (`flux-hook/README.md`, "Wire protocol"), decoded into types.
//!
//! One connection per process: a `hello` object, then one JSON array per line whose first
//! element is the record's tag, then `["bye", n]`. [`RECORDS`] is the protocol's one table: the
//! tag and the name of every field of every record, in order, exactly as the README writes them
//! (a test checks the README and the Python hook's record builders against it). [`decode`]
//! turns a line into a [`Rec`]; a record whose arity or any field is wrong is never read as a
//! default: the stream keeps it as a problem ([`Stream::bad`]) and the trace is incomplete.
//!
//! Adding a record type (e.g. static facts of targeted files, predicate values at lines):
//! 1. a [`RecordSpec`] line in [`RECORDS`] (tag, field names, what it means);
//! 2. a [`Rec`] variant and its arm in [`decode`] (field readers: [`Fields`]);
//! 3. on the Python side, one builder that formats `'["tag",%d,...]'` (see `_core.py`);
//! 4. its line in the README's protocol section. `protocol_doc` (tests) fails until all four
//!    agree; the merge ignores records it has no rule for only where its match says so.
use crate::hook_store::{HookStore, Summary};
use flux_trace::Name;
use serde_json::Value as J;
use std::collections::HashMap;

/// One record type of the protocol.
#[derive(Clone, Copy, Debug)]
pub struct RecordSpec {
    pub tag: &'static str,
    /// Field names after the tag, in order.
    pub fields: &'static [&'static str],
    /// Fields that may follow them (dialect `swe-flux`), in order.
    pub optional: &'static [&'static str],
    pub doc: &'static str,
}

/// Every record type the hook sends (the `hello` object aside).
pub const RECORDS: &[RecordSpec] = &[
    RecordSpec {
        tag: "C",
        fields: &[
            "code_id",
            "co_filename",
            "co_name",
            "co_qualname",
            "co_firstlineno",
            "last_line",
            "traits",
        ],
        optional: &["module"],
        doc: "a code object's definition, before its first use on this connection",
    },
    RecordSpec {
        tag: "c",
        fields: &["ts", "tid", "code_id", "frame_key", "line"],
        optional: &["started", "changed_locals"],
        doc: "an activation starts (fresh: co_firstlineno; resumed: f_lineno); started: null, \"throw\" (opened by gen.throw()/close()) or \"new\" (a fresh start of generator code)",
    },
    RecordSpec {
        tag: "r",
        fields: &[
            "ts",
            "tid",
            "code_id",
            "frame_key",
            "line",
            "how",
            "payload",
            "changed_locals",
        ],
        optional: &[],
        doc: "an activation ends: how = return|yield|unwind",
    },
    RecordSpec {
        tag: "l",
        fields: &[
            "ts",
            "tid",
            "code_id",
            "frame_key",
            "line",
            "changed_locals",
        ],
        optional: &[],
        doc: "a line of targeted code is about to run",
    },
    RecordSpec {
        tag: "x",
        fields: &[
            "ts",
            "tid",
            "code_id",
            "frame_key",
            "line",
            "exc_type",
            "message",
            "kind",
        ],
        optional: &["changed_locals", "object", "origin"],
        doc: "an exception in targeted code: kind = raise|reraise|propagate|thrown; origin = \
              [co_filename, co_qualname, tb_lineno] of the innermost entry of its traceback",
    },
    RecordSpec {
        tag: "h",
        fields: &[
            "ts",
            "tid",
            "code_id",
            "frame_key",
            "except_line",
            "exc_type",
            "message",
        ],
        optional: &[],
        doc: "a handler of targeted code starts",
    },
    RecordSpec {
        tag: "k",
        fields: &[
            "ts",
            "tid",
            "code_id",
            "frame_key",
            "line",
            "expr",
            "result",
        ],
        optional: &[],
        doc: "a predicate of [tracing] predicates, evaluated as a line of targeted code is about \
              to run: result = true|false|[\"error\", exc_type]",
    },
    RecordSpec {
        tag: "F",
        fields: &["co_filename", "facts"],
        optional: &[],
        doc: "the static facts of a targeted file (flux_hook.static_facts), sent at exit",
    },
    RecordSpec {
        tag: "ts",
        fields: &["ts", "tid", "nodeid"],
        optional: &[],
        doc: "a test starts",
    },
    RecordSpec {
        tag: "te",
        fields: &["ts", "tid", "nodeid", "outcome"],
        optional: &[],
        doc: "a test ends: outcome = passed|failed|skipped|error",
    },
    RecordSpec {
        tag: "hx",
        fields: &["t0", "tid", "t1"],
        optional: &[],
        doc: "3.11: from t0 to t1 this thread ran the hook's own work",
    },
    RecordSpec {
        tag: "wo",
        fields: &["ts", "tid"],
        optional: &[],
        doc: "scope tests/targets: a test window opens",
    },
    RecordSpec {
        tag: "wc",
        fields: &["ts", "tid"],
        optional: &[],
        doc: "scope tests/targets: a test window closes",
    },
    RecordSpec {
        tag: "xo",
        fields: &["ts", "tid"],
        optional: &[],
        doc: "scope targets: this thread enters targeted code",
    },
    RecordSpec {
        tag: "xc",
        fields: &["ts", "tid"],
        optional: &[],
        doc: "scope targets: this thread leaves targeted code",
    },
    RecordSpec {
        tag: "lost",
        fields: &["ts", "tid", "reason"],
        optional: &[],
        doc: "records are (possibly) missing",
    },
    RecordSpec {
        tag: "bye",
        fields: &["n"],
        optional: &[],
        doc: "the last record: n records were sent on this connection, hello and bye excluded",
    },
];

/// The spec of `tag`.
pub fn spec(tag: &str) -> Option<&'static RecordSpec> {
    RECORDS.iter().find(|r| r.tag == tag)
}

/// A code object as the hook defined it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeDef {
    pub file: Name,
    pub name: Name,
    pub qualname: Name,
    pub firstlineno: u32,
    /// The code's highest line.
    pub last_line: u32,
    /// [`CODE_GEN`] | [`CODE_NO_FIRST_LINE`] | [`CODE_TARGET`].
    pub traits: u32,
    /// `__name__` of its globals: sent for targeted code in dialect `swe-flux` only.
    pub module: Option<Name>,
}

/// The exit status of a process whose hook cannot go on (the agent gone, a bad `FLUX_HOOK_*`
/// setting): the hook's `EXIT_CODE`.
pub const HOOK_EXIT: i32 = 97;

/// The `how` of an `r` record.
pub const HOW: [&str; 3] = ["return", "yield", "unwind"];

/// The `started` of a `c` record, when not null: opened by `gen.throw()`/`close()`, or a fresh
/// start of generator code.
pub const STARTED: [&str; 2] = ["throw", "new"];

// The traits of a code definition (`C` record), as the hook's `CODE_*` constants (the hook's
// Python and this decoder are checked against each other by tests/protocol_doc.rs).

/// A generator, coroutine or async generator.
pub const CODE_GEN: u32 = 1;
/// Its first instruction has no line (`MAKE_CELL`, `COPY_FREE_VARS`, 3.15's generator
/// expressions): 3.15's USDT entry, which reports the line of the frame's current instruction,
/// says 0 for a fresh frame of it.
pub const CODE_NO_FIRST_LINE: u32 = 2;
/// Targeted by the tracing config (lines and values recorded; with scope "targets" the hook
/// reports its activations' starts itself).
pub const CODE_TARGET: u32 = 4;

impl CodeDef {
    /// Whether a USDT entry of this code's (file, name) at `line` may be one of this code's.
    pub fn may_enter_at(&self, line: u32) -> bool {
        if line == 0 {
            return self.has(CODE_NO_FIRST_LINE);
        }
        self.holds_line(line)
    }

    /// Its lines hold `line`.
    pub fn holds_line(&self, line: u32) -> bool {
        self.firstlineno <= line && line <= self.last_line
    }

    pub fn has(&self, trait_bit: u32) -> bool {
        self.traits & trait_bit != 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Return,
    Yield,
    Unwind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcKind {
    Raise,
    Reraise,
    Propagate,
    /// Dialect `swe-flux`: a bare re-raise the hook inferred (3.11 reports no tracer event).
    ReraiseInferred,
    /// Dialect `swe-flux`: 3.11's `StopIteration` at the end of a `yield from`/`await`,
    /// reported to tracers only (not a raise).
    TracerOnly,
    /// Thrown into the generator at the `yield` it was suspended at (`gen.throw()`/`close()`,
    /// a `@contextmanager`'s `__exit__`): the frame's own code did not raise it.
    Thrown,
}

impl ExcKind {
    pub const ALL: [ExcKind; 6] = [
        ExcKind::Raise,
        ExcKind::Reraise,
        ExcKind::Propagate,
        ExcKind::ReraiseInferred,
        ExcKind::TracerOnly,
        ExcKind::Thrown,
    ];
    /// The event's `outcome` (and the protocol's word).
    pub fn as_str(self) -> &'static str {
        match self {
            ExcKind::Raise => "raise",
            ExcKind::Reraise => "reraise",
            ExcKind::Propagate => "propagate",
            ExcKind::ReraiseInferred => "reraise-inferred",
            ExcKind::TracerOnly => "tracer-only",
            ExcKind::Thrown => "thrown",
        }
    }
}

/// `(repr, type name)`.
pub type Pair = (String, String);
pub type Locals = Vec<(String, Pair)>;

/// What a record says of its frame's locals (dialect `swe-flux`, targeted code): `None` when
/// nothing changed, which is most records. A stream holds a record for every start the hook
/// reports (3 M on the SymPy slice, tens of millions in a suite part), so what only some
/// records carry sits behind a pointer and a record is 48 bytes (`a_record_is_small`).
pub type Delta = Option<Box<LocalsDelta>>;

/// The locals changed since the frame's previous event, and the names gone since then.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalsDelta {
    pub locals: Locals,
    pub deleted: Vec<String>,
}

/// An exception record's text and provenance (`x`).
#[derive(Clone, Debug, PartialEq)]
pub struct ExcText {
    pub ty: String,
    pub msg: String,
    /// Dialect `swe-flux`: the exception object (plain repr, `type(e).__name__`).
    pub object: Option<Pair>,
    /// Where it was raised: the innermost entry of its traceback (`None` from hooks before
    /// the field, and in recordings made with them).
    pub origin: Option<flux_trace::ExcOrigin>,
}

/// A predicate's evaluation (`k`): its text, and its truth value or the type of the exception
/// evaluating it raised.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub expr: String,
    pub result: Result<bool, String>,
}

/// A decoded record (definitions, losses and the goodbye are kept in the [`Stream`] itself).
#[derive(Clone, Debug, PartialEq)]
pub enum Rec {
    Call {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        /// Dialect `swe-flux`: opened by `gen.throw()`/`close()` without a tracer call event.
        thrown: bool,
        /// A fresh start of generator code (`"new"`): never a resumption, whatever frame key
        /// it has (a frame closed unseen frees its key for the next one: `fresh-frames`).
        fresh: bool,
        /// Dialect `swe-flux`, targeted code: locals changed since the frame's previous event.
        delta: Delta,
    },
    Ret {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        how: How,
        payload: Option<Box<Pair>>,
        delta: Delta,
    },
    Line {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        delta: Delta,
    },
    Exc {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        kind: ExcKind,
        text: Box<ExcText>,
        /// Dialect `swe-flux`: locals changed before the exception.
        delta: Delta,
    },
    Handled {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        /// Its type and message.
        exc: Box<Pair>,
    },
    /// `k`: a predicate evaluated on the frame's live locals before `line` runs.
    Check {
        ts: u64,
        tid: u32,
        code: u32,
        frame: u64,
        line: u32,
        check: Box<Checked>,
    },
    TestStart {
        ts: u64,
        tid: u32,
        nodeid: Name,
    },
    TestEnd {
        ts: u64,
        tid: u32,
        nodeid: Name,
        outcome: Name,
    },
    /// `hx`: from `ts` to `until` the hook's own work ran in this thread (3.11's settrace
    /// back-end: it may run program code, a `__repr__`, that only USDT sees).
    Internal {
        ts: u64,
        tid: u32,
        until: u64,
    },
    /// `wo` / `wc` (scope "tests"): outside windows the process records nothing and its USDT
    /// probes are off.
    WindowOpen {
        ts: u64,
        tid: u32,
    },
    WindowClose {
        ts: u64,
        tid: u32,
    },
    /// `xo` / `xc` (scope "targets"): this thread enters / leaves the extent of targeted code.
    ExtentOpen {
        ts: u64,
        tid: u32,
    },
    ExtentClose {
        ts: u64,
        tid: u32,
    },
}

impl Rec {
    pub fn ts(&self) -> u64 {
        match self {
            Rec::Call { ts, .. }
            | Rec::Ret { ts, .. }
            | Rec::Line { ts, .. }
            | Rec::Exc { ts, .. }
            | Rec::Handled { ts, .. }
            | Rec::Check { ts, .. }
            | Rec::TestStart { ts, .. }
            | Rec::TestEnd { ts, .. }
            | Rec::Internal { ts, .. }
            | Rec::WindowOpen { ts, .. }
            | Rec::WindowClose { ts, .. }
            | Rec::ExtentOpen { ts, .. }
            | Rec::ExtentClose { ts, .. } => *ts,
        }
    }
    pub fn tid(&self) -> u32 {
        match self {
            Rec::Call { tid, .. }
            | Rec::Ret { tid, .. }
            | Rec::Line { tid, .. }
            | Rec::Exc { tid, .. }
            | Rec::Handled { tid, .. }
            | Rec::Check { tid, .. }
            | Rec::TestStart { tid, .. }
            | Rec::TestEnd { tid, .. }
            | Rec::Internal { tid, .. }
            | Rec::WindowOpen { tid, .. }
            | Rec::WindowClose { tid, .. }
            | Rec::ExtentOpen { tid, .. }
            | Rec::ExtentClose { tid, .. } => *tid,
        }
    }
    /// A record about code (not test boundaries, scopes or the hook's own work).
    pub fn about_code(&self) -> bool {
        matches!(
            self,
            Rec::Call { .. }
                | Rec::Ret { .. }
                | Rec::Line { .. }
                | Rec::Exc { .. }
                | Rec::Handled { .. }
                | Rec::Check { .. }
        )
    }
}

/// The `hello` of a connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    pub pid: u32,
    pub python: String,
    /// `settrace`, `monitoring` or `unsupported`.
    pub mode: String,
    /// `FLUX_HOOK_CALLS` as the hook understood it.
    pub calls: String,
    /// `run`, `tests` or `targets`.
    pub scope: String,
    /// The starts the hook leaves to USDT (`FLUX_HOOK_LEAVE` as it understood it).
    pub leave: Vec<String>,
    /// `"gen_starts": "marked"`: every fresh start of generator code (`throw()`/`close()`
    /// into an unstarted one included) carries `started` = `"new"`, so an unmarked `c` of
    /// generator code that resumes no frame the merge knows resumes one started untraced
    /// (rule `unseen-starts`). Hooks before it (and the corpus they recorded) say nothing.
    pub gen_starts_marked: bool,
}

/// One process's stream.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    pub pid: u32,
    pub hello: Option<Hello>,
    pub codes: HashMap<u32, CodeDef>,
    /// Its records per thread (past a bound, in the spill file it was given:
    /// [`Stream::spill_to`]).
    pub records: HookStore,
    /// What the merge reads of the whole stream before its threads.
    pub summary: Summary,
    /// The record count the hook said it sent, if it said goodbye.
    pub bye: Option<u64>,
    /// Records counted on arrival (definitions included, as the hook counts them).
    pub received: u64,
    /// Lines that could not be decoded, with the reason.
    pub bad: Vec<String>,
    /// What the hook itself reported losing (`lost` records).
    pub lost: Vec<String>,
    /// Every line as it arrived, when asked for (recording merge fixtures).
    pub raw: Option<Vec<String>>,
    /// Static facts of targeted files (`F` records), by `co_filename`.
    pub facts: std::collections::BTreeMap<String, flux_trace::FileFacts>,
}

impl Stream {
    /// A stream that keeps its raw lines (see [`Stream::raw`]).
    pub fn recording() -> Stream {
        Stream {
            raw: Some(Vec::new()),
            ..Stream::default()
        }
    }

    /// The scope the hook said it runs with (`run` when it said nothing).
    pub fn scope(&self) -> &str {
        self.hello.as_ref().map_or("run", |h| h.scope.as_str())
    }

    /// Why this stream cannot be trusted, if it cannot.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.hello.is_none() {
            p.push(format!(
                "hook stream of pid {} has no valid hello",
                self.pid
            ));
        }
        match self.bye {
            None => p.push(format!(
                "hook stream of pid {} ended without `bye` (process killed, or exec after fork)",
                self.pid
            )),
            Some(n) if n != self.received => p.push(format!(
                "hook stream of pid {}: {} records announced, {} received",
                self.pid, n, self.received
            )),
            _ => {}
        }
        if let Some(p2) = self.out_of_order() {
            p.push(p2);
        }
        for l in self.lost.iter().take(3) {
            p.push(format!("hook of pid {} lost records: {l}", self.pid));
        }
        for b in self.bad.iter().take(3) {
            p.push(format!("hook stream of pid {}: {b}", self.pid));
        }
        if self.bad.len() > 3 {
            p.push(format!(
                "hook stream of pid {}: … and {} more bad records",
                self.pid,
                self.bad.len() - 3
            ));
        }
        p
    }

    /// Rule `stream-order`: the hook writes each thread's records in program order, stamped
    /// as they happen, so their times never go back; the merge orders by time, and a record
    /// stamped out of that order would be placed silently elsewhere (a handler after the line
    /// it precedes). `hx` is written after the work it spans, stamped with its start: it is
    /// the one record exempt.
    fn out_of_order(&self) -> Option<String> {
        let (i, tid, ts, prev) = self.summary.out_of_order?;
        Some(format!(
            "hook stream of pid {}: record {i} of thread {tid} is stamped {ts} after one stamped {prev}: records out of program order",
            self.pid
        ))
    }

    /// Write this stream's records past `after` held to `file` (an unlinked temporary file),
    /// as the lines they came as (issue 28: the agent's memory no longer grows with them).
    pub fn spill_to(&mut self, file: std::fs::File, after: usize) {
        self.records.spill_to(file, after);
    }

    /// Decode one line of the protocol into this stream.
    pub fn feed(&mut self, line: &str) {
        if let Some(raw) = &mut self.raw {
            raw.push(line.to_string());
        }
        if let Err(e) = self.feed_inner(line) {
            self.bad.push(format!("{e}: {:.100}", line));
        }
    }

    fn feed_inner(&mut self, line: &str) -> Result<(), String> {
        let v: J = serde_json::from_str(line).map_err(|e| format!("unparseable record ({e})"))?;
        if let Some(o) = v.as_object() {
            if !o.contains_key("hello") {
                return Err("unexpected object".into());
            }
            let h = hello(&v)?;
            self.pid = h.pid;
            self.hello = Some(h);
            return Ok(());
        }
        let a = v.as_array().ok_or("not a record")?;
        let tag = a
            .first()
            .and_then(|t| t.as_str())
            .ok_or("record without a tag")?;
        if tag == "bye" {
            self.bye = Some(Fields::new(tag, a)?.u64(0)?);
            return Ok(());
        }
        self.received += 1;
        match decode(tag, a)? {
            Decoded::Rec(r) => {
                self.summary.note(&r);
                self.records.push(r, line);
            }
            Decoded::Code(id, c) => {
                self.codes.insert(id, c);
            }
            Decoded::Lost(tid, reason) => self.lost.push(format!("thread {tid}: {reason}")),
            Decoded::Facts(file, facts) => {
                self.facts.insert(file, *facts);
            }
        }
        Ok(())
    }
}

/// A record's line parsed again (read back from a spill file): it parsed when it came.
pub(crate) fn reparse(line: &str) -> Result<Rec, String> {
    let v: J = serde_json::from_str(line).map_err(|e| format!("unparseable record ({e})"))?;
    let a = v.as_array().ok_or("not a record")?;
    let tag = a
        .first()
        .and_then(|t| t.as_str())
        .ok_or("record without a tag")?;
    match decode(tag, a)? {
        Decoded::Rec(r) => Ok(r),
        _ => Err("not a record of code or scope".into()),
    }
}

fn hello(v: &J) -> Result<Hello, String> {
    let s = |k: &str| -> Result<String, String> {
        v.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("hello without a string `{k}`"))
    };
    let pid = v
        .get("pid")
        .and_then(|x| x.as_u64())
        .and_then(|p| u32::try_from(p).ok())
        .ok_or("hello without a valid `pid`")?;
    let leave = match v.get("leave") {
        None => Vec::new(),
        Some(l) => l
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
            .ok_or("hello with a `leave` that is not a list of strings")?,
    };
    Ok(Hello {
        pid,
        python: s("python")?,
        mode: s("mode")?,
        calls: s("calls")?,
        scope: s("scope")?,
        leave,
        gen_starts_marked: match v.get("gen_starts") {
            None => false,
            Some(x) if x.as_str() == Some("marked") => true,
            Some(x) => return Err(format!("hello with an unknown `gen_starts` {x}")),
        },
    })
}

/// What one record line decodes to.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    Rec(Rec),
    Code(u32, CodeDef),
    /// `lost`: (tid, reason).
    Lost(u32, String),
    /// `F`: a file's static facts.
    Facts(String, Box<flux_trace::FileFacts>),
}

/// The fields of one record, checked against its [`RecordSpec`]: every reader names the
/// field it failed on.
pub struct Fields<'a> {
    spec: &'static RecordSpec,
    a: &'a [J],
}

impl<'a> Fields<'a> {
    /// The record's fields, if `tag` is known and the arity is exact.
    pub fn new(tag: &str, a: &'a [J]) -> Result<Fields<'a>, String> {
        let spec = spec(tag).ok_or_else(|| format!("unknown record tag {tag:?}"))?;
        let n = a.len() - 1;
        if n < spec.fields.len() || n > spec.fields.len() + spec.optional.len() {
            return Err(format!(
                "record `{tag}` has {n} fields, the protocol says {} ({}{}{})",
                spec.fields.len(),
                spec.fields.join(", "),
                if spec.optional.is_empty() {
                    ""
                } else {
                    ", then optionally "
                },
                spec.optional.join(", ")
            ));
        }
        Ok(Fields { spec, a })
    }
    fn get(&self, i: usize) -> &'a J {
        self.a.get(i + 1).unwrap_or(&J::Null)
    }
    /// Whether optional field `i` was sent.
    pub fn has(&self, i: usize) -> bool {
        i + 1 < self.a.len()
    }
    fn err(&self, i: usize, want: &str) -> String {
        let name = self
            .spec
            .fields
            .iter()
            .chain(self.spec.optional)
            .nth(i)
            .copied()
            .unwrap_or("?");
        format!(
            "record `{}` field {} ({name}): expected {want}, got {}",
            self.spec.tag,
            i + 1,
            self.get(i)
        )
    }
    pub fn u64(&self, i: usize) -> Result<u64, String> {
        self.get(i)
            .as_u64()
            .ok_or_else(|| self.err(i, "an unsigned integer"))
    }
    pub fn u32(&self, i: usize) -> Result<u32, String> {
        self.get(i)
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.err(i, "an unsigned 32-bit integer"))
    }
    pub fn str(&self, i: usize) -> Result<String, String> {
        self.get(i)
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.err(i, "a string"))
    }
    /// `[repr, type]` or null.
    pub fn opt_pair(&self, i: usize) -> Result<Option<Pair>, String> {
        let v = self.get(i);
        if v.is_null() {
            return Ok(None);
        }
        pair(v)
            .map(Some)
            .ok_or_else(|| self.err(i, "null or [string, string]"))
    }
    /// `[file, qualname, line]` or null (absent: null).
    pub fn opt_origin(&self, i: usize) -> Result<Option<flux_trace::ExcOrigin>, String> {
        let v = self.get(i);
        if v.is_null() {
            return Ok(None);
        }
        let bad = || self.err(i, "null or [string, string, line]");
        match v.as_array().map(Vec::as_slice) {
            Some([file, qualname, line]) => Ok(Some(flux_trace::ExcOrigin {
                file: file.as_str().ok_or_else(bad)?.to_string(),
                qualname: qualname.as_str().ok_or_else(bad)?.to_string(),
                line: line
                    .as_u64()
                    .and_then(|l| u32::try_from(l).ok())
                    .ok_or_else(bad)?,
            })),
            _ => Err(bad()),
        }
    }
    /// `{name: [repr, type] | null}` or null (absent: null): the changed locals, and the names
    /// mapped to null (gone since the frame's previous event).
    pub fn locals(&self, i: usize) -> Result<Delta, String> {
        let v = self.get(i);
        if v.is_null() {
            return Ok(None);
        }
        let m = v
            .as_object()
            .ok_or_else(|| self.err(i, "null or an object"))?;
        let (mut changed, mut gone) = (Vec::new(), Vec::new());
        for (k, v) in m {
            match (v.is_null(), pair(v)) {
                (true, _) => gone.push(k.clone()),
                (false, Some(p)) => changed.push((k.clone(), p)),
                (false, None) => return Err(self.err(i, "{name: [string, string] | null}")),
            }
        }
        Ok((!changed.is_empty() || !gone.is_empty()).then(|| {
            Box::new(LocalsDelta {
                locals: changed,
                deleted: gone,
            })
        }))
    }
    /// A string, or null / absent.
    pub fn opt_str(&self, i: usize) -> Result<Option<String>, String> {
        let v = self.get(i);
        if v.is_null() {
            return Ok(None);
        }
        v.as_str()
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| self.err(i, "null or a string"))
    }
    /// One of `words` (their index).
    pub fn word(&self, i: usize, words: &[&str]) -> Result<usize, String> {
        self.get(i)
            .as_str()
            .and_then(|w| words.iter().position(|x| *x == w))
            .ok_or_else(|| self.err(i, &words.join("|")))
    }
}

fn pair(v: &J) -> Option<Pair> {
    match v.as_array()?.as_slice() {
        [a, b] => Some((a.as_str()?.to_string(), b.as_str()?.to_string())),
        _ => None,
    }
}

/// Decode the record `a` (whose first element is `tag`).
pub fn decode(tag: &str, a: &[J]) -> Result<Decoded, String> {
    let f = Fields::new(tag, a)?;
    // Every record but `C` starts with (ts, tid).
    let tt = || -> Result<(u64, u32), String> { Ok((f.u64(0)?, f.u32(1)?)) };
    let rec = match tag {
        "C" => {
            let c = CodeDef {
                file: f.str(1)?.into(),
                name: f.str(2)?.into(),
                qualname: f.str(3)?.into(),
                firstlineno: f.u32(4)?,
                last_line: f.u32(5)?,
                traits: f.u32(6)?,
                module: f.opt_str(7)?.map(Name::from),
            };
            return Ok(Decoded::Code(f.u32(0)?, c));
        }
        "lost" => return Ok(Decoded::Lost(f.u32(1)?, f.str(2)?)),
        "F" => {
            let facts: flux_trace::FileFacts = serde_json::from_value(f.get(1).clone())
                .map_err(|e| f.err(1, &format!("static facts ({e})")))?;
            return Ok(Decoded::Facts(f.str(0)?, Box::new(facts)));
        }
        "k" => {
            let (ts, tid) = tt()?;
            let result = match f.get(6) {
                J::Bool(b) => Ok(*b),
                v => match v.as_array().map(Vec::as_slice) {
                    Some([J::String(e), J::String(ty)]) if e == "error" => Err(ty.clone()),
                    _ => return Err(f.err(6, "true, false or [\"error\", exc_type]")),
                },
            };
            Rec::Check {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                check: Box::new(Checked {
                    expr: f.str(5)?,
                    result,
                }),
            }
        }
        "c" => {
            let (ts, tid) = tt()?;
            let [throw, new] = STARTED;
            let (thrown, fresh) = match f.opt_str(5)?.as_deref() {
                None => (false, false),
                Some(w) if w == throw => (true, false),
                Some(w) if w == new => (false, true),
                Some(_) => return Err(f.err(5, "null, \"throw\" or \"new\"")),
            };
            Rec::Call {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                thrown,
                fresh,
                delta: f.locals(6)?,
            }
        }
        "r" => {
            let (ts, tid) = tt()?;
            Rec::Ret {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                how: [How::Return, How::Yield, How::Unwind][f.word(5, &HOW)?],
                payload: f.opt_pair(6)?.map(Box::new),
                delta: f.locals(7)?,
            }
        }
        "l" => {
            let (ts, tid) = tt()?;
            Rec::Line {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                delta: f.locals(5)?,
            }
        }
        "x" => {
            let (ts, tid) = tt()?;
            let words = ExcKind::ALL.map(ExcKind::as_str);
            Rec::Exc {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                kind: ExcKind::ALL[f.word(7, &words)?],
                text: Box::new(ExcText {
                    ty: f.str(5)?,
                    msg: f.str(6)?,
                    object: f.opt_pair(9)?,
                    origin: f.opt_origin(10)?,
                }),
                delta: f.locals(8)?,
            }
        }
        "h" => {
            let (ts, tid) = tt()?;
            Rec::Handled {
                ts,
                tid,
                code: f.u32(2)?,
                frame: f.u64(3)?,
                line: f.u32(4)?,
                exc: Box::new((f.str(5)?, f.str(6)?)),
            }
        }
        "ts" => {
            let (ts, tid) = tt()?;
            Rec::TestStart {
                ts,
                tid,
                nodeid: f.str(2)?.into(),
            }
        }
        "te" => {
            let (ts, tid) = tt()?;
            Rec::TestEnd {
                ts,
                tid,
                nodeid: f.str(2)?.into(),
                outcome: f.str(3)?.into(),
            }
        }
        "hx" => {
            let (ts, tid) = tt()?;
            Rec::Internal {
                ts,
                tid,
                until: f.u64(2)?,
            }
        }
        "wo" | "wc" | "xo" | "xc" => {
            let (ts, tid) = tt()?;
            match tag {
                "wo" => Rec::WindowOpen { ts, tid },
                "wc" => Rec::WindowClose { ts, tid },
                "xo" => Rec::ExtentOpen { ts, tid },
                _ => Rec::ExtentClose { ts, tid },
            }
        }
        other => return Err(format!("record tag {other:?} has no decoder")),
    };
    Ok(Decoded::Rec(rec))
}

/// Everything the hook sent during one run.
#[derive(Clone, Debug, Default)]
pub struct HookCapture {
    pub streams: Vec<Stream>,
    /// Problems outside any one stream (accept errors, refused peers, streams cut by the grace
    /// timeout).
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = r#"{"hello":1,"pid":7,"python":"3.15.2","mode":"monitoring","calls":"all","scope":"run","clock":"monotonic_ns"}"#;

    #[test]
    fn parses_every_record_kind_and_checks_the_goodbye() {
        let mut st = Stream::default();
        for l in [
            HELLO,
            r#"["C",1,"/a.py","f","C.f",3,6,2]"#,
            r#"["c",10,7,1,140,3]"#,
            r#"["l",11,7,1,140,4,{"x":["1","int"]}]"#,
            r#"["x",12,7,1,140,4,"ValueError","bad","raise"]"#,
            r#"["h",13,7,1,140,5,"ValueError","bad"]"#,
            r#"["r",14,7,1,140,6,"return",["2","int"],null]"#,
            r#"["ts",15,7,"t.py::test_a"]"#,
            r#"["te",16,7,"t.py::test_a","passed"]"#,
            r#"["hx",17,7,19]"#,
            r#"["wo",20,7]"#,
            r#"["wc",21,7]"#,
            r#"["bye",11]"#,
        ] {
            st.feed(l);
        }
        assert!(st.bad.is_empty(), "{:?}", st.bad);
        assert_eq!(st.pid, 7);
        assert_eq!(st.codes[&1].qualname, "C.f");
        assert_eq!((st.codes[&1].last_line, st.codes[&1].traits), (6, 2));
        assert!(st.codes[&1].may_enter_at(0), "no first line: USDT says 0");
        assert!(!st.codes[&1].may_enter_at(7));
        assert_eq!(st.records.kept().len(), 10);
        assert_eq!(
            st.records.all()[7],
            Rec::Internal {
                ts: 17,
                tid: 7,
                until: 19
            }
        );
        assert_eq!(st.records.all()[8], Rec::WindowOpen { ts: 20, tid: 7 });
        assert_eq!(st.records.all()[9], Rec::WindowClose { ts: 21, tid: 7 });
        assert!(st.problems().is_empty(), "{:?}", st.problems());
        assert_eq!(
            st.records.all()[1],
            Rec::Line {
                ts: 11,
                tid: 7,
                code: 1,
                frame: 140,
                line: 4,
                delta: Some(Box::new(LocalsDelta {
                    locals: vec![("x".into(), ("1".into(), "int".into()))],
                    deleted: vec![],
                })),
            }
        );
        assert!(matches!(
            st.records.all()[4],
            Rec::Ret {
                how: How::Return,
                payload: Some(_),
                ..
            }
        ));
        st.bye = Some(12);
        assert!(st.problems()[0].contains("12 records announced, 11 received"));
        st.bye = None;
        assert!(st.problems()[0].contains("without `bye`"));
        st.bye = Some(9);
        st.feed(r#"["lost",17,7,"RecursionError at the limit"]"#);
        assert!(st
            .problems()
            .iter()
            .any(|p| p.contains("lost records: thread 7: RecursionError")));
    }

    #[test]
    fn the_swe_flux_dialect_fields_are_read() {
        let mut st = Stream::default();
        for l in [
            r#"{"hello":1,"pid":7,"python":"3.11.2","mode":"settrace","calls":"entries","scope":"run"}"#,
            r#"["C",1,"/a.py","f","C.f",3,6,0,"pkg.a"]"#,
            r#"["C",2,"/a.py","g","g",9,9,0]"#,
            r#"["c",10,7,1,140,3,"throw",{"a":["1","int"]}]"#,
            r#"["l",11,7,1,140,4,{"x":["1","int"],"e":null}]"#,
            r#"["x",12,7,1,140,5,"KeyError","'k'","raise",{"y":["2","int"]},["KeyError('k')","KeyError"]]"#,
            r#"["x",13,7,1,140,5,"StopIteration","","tracer-only",null,["StopIteration()","StopIteration"]]"#,
            r#"["x",14,7,1,140,5,"KeyError","'k'","reraise-inferred"]"#,
            r#"["x",15,7,1,140,5,"KeyError","'k'","thrown",null,null,["/b.py","h",8]]"#,
            r#"["bye",8]"#,
        ] {
            st.feed(l);
        }
        assert!(st.problems().is_empty(), "{:?}", st.problems());
        assert_eq!(st.codes[&1].module.as_deref(), Some("pkg.a"));
        assert_eq!(
            st.codes[&2].module, None,
            "records without the dialect have no module"
        );
        assert!(
            matches!(&st.records.all()[0], Rec::Call { thrown: true, delta: Some(d), .. } if d.locals[0].0 == "a")
        );
        assert!(
            matches!(&st.records.all()[1], Rec::Line { delta: Some(d), .. } if d.locals.len() == 1 && d.deleted == ["e"])
        );
        match &st.records.all()[2] {
            Rec::Exc {
                kind,
                delta: Some(d),
                text,
                ..
            } => {
                assert_eq!(*kind, ExcKind::Raise);
                assert_eq!(d.locals[0].0, "y");
                assert_eq!(
                    text.object.as_ref(),
                    Some(&("KeyError('k')".to_string(), "KeyError".to_string()))
                );
            }
            r => panic!("{r:?}"),
        }
        assert!(matches!(
            st.records.all()[3],
            Rec::Exc {
                kind: ExcKind::TracerOnly,
                ..
            }
        ));
        assert!(matches!(
            &st.records.all()[4],
            Rec::Exc {
                kind: ExcKind::ReraiseInferred,
                text,
                ..
            } if text.object.is_none() && text.origin.is_none()
        ));
        // Issue 23.2: where it was raised, from its traceback, and the thrown-in kind.
        match &st.records.all()[5] {
            Rec::Exc {
                kind: ExcKind::Thrown,
                delta,
                text,
                ..
            } => {
                assert!(delta.is_none());
                let o = text.origin.as_ref().expect("an origin");
                assert_eq!(
                    (o.file.as_str(), o.qualname.as_str(), o.line),
                    ("/b.py", "h", 8)
                );
            }
            r => panic!("{r:?}"),
        }
    }

    /// `k` and `F`, the records the extractors' predicates and static facts arrive in.
    #[test]
    fn checks_and_facts_decode() {
        let mut st = Stream::default();
        st.feed(HELLO);
        st.feed(r#"["k",10,7,1,140,4,"len(s) == d",true]"#);
        st.feed(r#"["k",11,7,1,140,4,"s[9]", ["error", "IndexError"]]"#);
        st.feed(r#"["F","/a.py",{"file":"/a.py","functions":[{"qualname":"<module>","def_line":1,"first_line":1,"last_line":2}]}]"#);
        st.bye = Some(3);
        assert!(st.problems().is_empty(), "{:?}", st.problems());
        assert!(
            matches!(&st.records.all()[0], Rec::Check { line: 4, check, .. } if check.expr == "len(s) == d" && check.result == Ok(true))
        );
        assert!(
            matches!(&st.records.all()[1], Rec::Check { check, .. } if check.result == Err("IndexError".into()))
        );
        assert_eq!(st.facts["/a.py"].functions[0].last_line, 2);
    }

    #[test]
    fn a_record_is_small() {
        // A stream holds a record for every start the hook reports: at 232 bytes a record,
        // the 3 M of the 3.11 SymPy slice were ~700 MB of the agent's memory.
        let size = std::mem::size_of::<Rec>();
        assert!(size <= 48, "a hook record is {size} bytes");
    }

    #[test]
    fn garbage_is_reported_not_ignored() {
        let mut st = Stream::default();
        st.feed(HELLO);
        st.feed("{nope");
        st.feed(r#"["zz",1,2]"#);
        st.bye = Some(1);
        let p = st.problems();
        assert!(p.iter().any(|m| m.contains("unparseable")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("unknown record tag")), "{p:?}");
    }

    /// A missing or malformed field used to be read as 0 (`u(g(i))`): a call of code 0 at
    /// time 0. It is now a bad record, and the stream's problems say which field.
    #[test]
    fn a_missing_or_malformed_field_is_a_problem_never_a_zero() {
        for (line, field) in [
            (r#"["c",10,7,1,140]"#, "has 4 fields"),
            (r#"["c",10,7,"one",140,3]"#, "field 3 (code_id)"),
            (r#"["c",-1,7,1,140,3]"#, "field 1 (ts)"),
            (
                r#"["r",14,7,1,140,6,"sideways",null,null]"#,
                "field 6 (how)",
            ),
            (
                r#"["r",14,7,1,140,6,"return",["2"],null]"#,
                "field 7 (payload)",
            ),
            (r#"["l",11,7,1,140,4,{"x":1}]"#, "field 6 (changed_locals)"),
            (r#"["c",10,7,1,140,3,"thrown",null]"#, "field 6 (started)"),
            (r#"["c",10,7,1,140,3,null,null,9]"#, "has 8 fields"),
            (r#"["x",12,7,1,140,4,"E","m","thrownin"]"#, "field 8 (kind)"),
            (
                r#"["x",12,7,1,140,4,"E","m","raise",null,null,["/a.py","f"]]"#,
                "field 11 (origin)",
            ),
            (
                r#"["x",12,7,1,140,4,"E","m","raise",null,null,["/a.py","f",-3]]"#,
                "field 11 (origin)",
            ),
            (r#"["C",1,"/a.py","f","C.f",3,6]"#, "has 6 fields"),
            (r#"["c",10,4294967296,1,140,3]"#, "field 2 (tid)"),
            (r#"["k",10,7,1,140,4,"x > 0","yes"]"#, "field 7 (result)"),
            (
                r#"["k",10,7,1,140,4,"x > 0",["error"]]"#,
                "field 7 (result)",
            ),
            (r#"["F","/a.py",{"functions":7}]"#, "field 2 (facts)"),
        ] {
            let mut st = Stream::default();
            st.feed(HELLO);
            st.feed(line);
            assert!(
                st.records.kept().is_empty() && st.codes.is_empty(),
                "{line} was taken"
            );
            assert_eq!(st.bad.len(), 1, "{line}");
            assert!(st.bad[0].contains(field), "{line}: {}", st.bad[0]);
        }
        let mut st = Stream::default();
        st.feed(r#"{"hello":1,"python":"3.11.2"}"#);
        st.feed(r#"["bye",0]"#);
        assert!(
            st.problems().iter().any(|p| p.contains("no valid hello")),
            "{:?}",
            st.problems()
        );
    }

    #[test]
    fn every_spec_has_a_decoder() {
        for s in RECORDS.iter().filter(|s| s.tag != "bye") {
            let mut a = vec![J::String(s.tag.into())];
            a.extend(std::iter::repeat_n(J::Null, s.fields.len()));
            let e = decode(s.tag, &a).unwrap_err();
            assert!(!e.contains("no decoder"), "{}: {e}", s.tag);
        }
    }
}
