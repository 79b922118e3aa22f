//! The tracing config: what the in-process hook records, and where.
//!
//! It is part of every instance (`[tracing]` in `instance.toml`) and can be given to
//! `flux trace --config FILE` (TOML or JSON). The agent hands it to the hook as JSON in the
//! `FLUX_HOOK_CONFIG` environment variable. Untargeted code pays nothing for lines and values:
//! the hook turns itself off for code objects that match no target.
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracingConfig {
    /// Source files whose code is targeted: each entry matches a code object's `co_filename`
    /// when it is a suffix of it at a path-component boundary (`sympy/core/add.py`) or a glob
    /// with `*` (`*/sympy/core/*.py`).
    #[serde(default)]
    pub files: Vec<String>,
    /// Qualified names of targeted functions (`Add.flatten`, `_parse_token`); empty = every
    /// function in the targeted files. A nested function is targeted if its qualname matches.
    #[serde(default)]
    pub functions: Vec<String>,
    /// SWE-Flux's `TRACE_FUNC` entries: targeted code is further narrowed to the functions
    /// whose `<module>.<qualname>` one of them matches by their rule (equal, dotted prefix
    /// `pkg.mod`, dotted suffix `C.f`, or last component `f`; the module is `__name__` of the
    /// code's globals, which the hook reads from the code's first frame). Empty = no
    /// narrowing. (`functions` cannot say it: it matches `co_qualname` alone, and `f` there
    /// also targets `f.<locals>.g`, which their rule does not.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub module_functions: Vec<String>,
    /// What to record in targeted code.
    #[serde(default = "default_events")]
    pub events: Vec<HookEvent>,
    #[serde(default)]
    pub limits: Limits,
    /// Record pytest test boundaries (test id, start, end, outcome).
    #[serde(default = "yes")]
    pub tests: bool,
    /// Where anything is recorded: the whole run, or only while pytest runs a test.
    #[serde(default, skip_serializing_if = "Scope::is_run")]
    pub scope: Scope,
    /// Invariant predicates the hook evaluates in targeted frames (see [`Predicate`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<Predicate>,
    /// How values and exceptions of targeted code are recorded (see [`Dialect`]).
    #[serde(default, skip_serializing_if = "Dialect::is_flux")]
    pub dialect: Dialect,
    /// JVM: keep only the methods of classes under these prefixes (`org.apache.commons.lang3.`,
    /// or internal `org/apache/commons/lang3/`), filtered in the kernel; empty = every class (the
    /// JDK's included, which most of a test's method calls are). At most 8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// JVM: the test methods (`<binary class name>.<method>`, `org.example.FooTest.testBar`):
    /// each activation of one is a test window (`test_start`/`test_end` around it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_methods: Vec<String>,
    /// Whether the hook sends the static facts of the targeted files at exit (`{"facts": …}`
    /// in the trace: statement spans, loops, handlers, definitions, computed with `ast`; 0.1–1 s
    /// per large file). Off only where nothing reads them (SWE-Flux's parser reads its log).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub facts: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

/// A Python expression over a frame's locals, evaluated by the hook with the frame's live
/// values (not their reprs) each time one of `lines` is about to run in a targeted frame (of
/// `function` if given); each evaluation is a `check` event of the trace carrying its truth
/// value, or the exception it raised. The expression is compiled once; it must not have side
/// effects the question depends on (it runs in the traced process).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    pub expr: String,
    pub lines: Vec<u32>,
    /// Only frames of this function (qualname); default every targeted function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

/// How the hook records targeted code.
///
/// `flux` (the default): bounded reprs (`reprlib`, `limits.depth` nesting, cut to `limits.repr`
/// characters *including* the `...`), dunder names skipped, only changes reported.
///
/// `swe-flux`: what SWE-Flux's `sys.settrace` tracer sees, so that `flux trace --format
/// swe-flux-log` (`flux_interop::sweflux_log`) can write its log exactly:
/// - reprs are the full `repr()`, cut to `limits.repr` characters with `...` appended
///   (`<repr error: Type: message>` when `__repr__` raises);
/// - every name of `f_locals` is considered, dunders included (still at most `limits.locals`);
/// - a local that disappears is reported in [`crate::Event::deleted`];
/// - `exception` events carry the locals changed since the frame's previous event, and the
///   exception object as [`crate::Event::value`] (`type` = `type(e).__name__`, `repr` its repr);
/// - events carry the code's module ([`crate::Event::module`]);
/// - on 3.11, the `StopIteration` that CPython reports to tracers when a `yield from`/`await`
///   finishes (not a raise: flux otherwise leaves it out) is an `exception` event with `outcome`
///   `tracer-only`, and a bare `raise` that the hook infers (3.11 reports no tracer event for
///   it) has `outcome` `reraise-inferred`; an activation that `gen.throw()`/`close()` opens
///   without a tracer `call` event has a `call` with `outcome` `throw`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    #[default]
    Flux,
    SweFlux,
}

impl Dialect {
    pub fn is_flux(&self) -> bool {
        *self == Dialect::Flux
    }
}

/// `run`: the whole program, from the hook's installation (`sitecustomize`, before the program's
/// first line; interpreter start-up before it is left out and counted) to the hook's end (its
/// `atexit` handler, registered first and so run after the program's own handlers and after
/// non-daemon threads are joined). Interpreter finalisation after that (module teardown,
/// `__del__` of objects still alive at exit) is not part of any trace: the hook no longer
/// follows it, so on 3.11 its USDT events are left out and counted
/// (`merge.usdt_events_after_hook_end`), never filed as traced calls. `tests`: only inside pytest's
/// test protocols (from a test's setup to its teardown): the hook traces nothing and the USDT
/// probes' semaphores stay at zero outside them (CPython then skips the probes: no trap), so
/// imports and collection cost nothing; calls outside tests are not in the trace.
/// `targets`: inside tests, and there only while an activation of targeted code runs (its
/// *extent*: from its start or resumption to its return, yield or unwind, with everything it
/// calls): the probes fire only there. For questions about what targeted code does and calls
/// (callees, lines, values, exceptions raised in or through it); not for its callers or for calls
/// made elsewhere, which are not in the trace (extractors that read them refuse the scope).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    Run,
    Tests,
    Targets,
}

impl Scope {
    pub fn is_run(&self) -> bool {
        *self == Scope::Run
    }
    /// Test windows are in force (`tests` and `targets`).
    pub fn windows(&self) -> bool {
        *self != Scope::Run
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Tests => "tests",
            Scope::Targets => "targets",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookEvent {
    Line,
    Call,
    Return,
    Exception,
    Variables,
}

impl HookEvent {
    /// Every event, in the order configs list them.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::Line,
        HookEvent::Call,
        HookEvent::Return,
        HookEvent::Exception,
        HookEvent::Variables,
    ];
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Longest `repr` kept, in characters; longer ones are cut and end with `...`.
    #[serde(default = "d_repr")]
    pub repr: usize,
    /// Most locals recorded per event.
    #[serde(default = "d_locals")]
    pub locals: usize,
    /// Nesting depth of containers shown by the bounded repr.
    #[serde(default = "d_depth")]
    pub depth: usize,
}

fn d_repr() -> usize {
    200
}
fn d_locals() -> usize {
    50
}
fn d_depth() -> usize {
    3
}
fn yes() -> bool {
    true
}
fn default_events() -> Vec<HookEvent> {
    vec![
        HookEvent::Line,
        HookEvent::Call,
        HookEvent::Return,
        HookEvent::Exception,
        HookEvent::Variables,
    ]
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            repr: d_repr(),
            locals: d_locals(),
            depth: d_depth(),
        }
    }
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            files: Vec::new(),
            functions: Vec::new(),
            module_functions: Vec::new(),
            events: default_events(),
            limits: Limits::default(),
            tests: true,
            scope: Scope::Run,
            predicates: Vec::new(),
            dialect: Dialect::Flux,
            classes: Vec::new(),
            test_methods: Vec::new(),
            facts: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_missing_fields_and_unknown_fields_are_rejected() {
        let c: TracingConfig = serde_json::from_str(r#"{"files":["a.py"]}"#).unwrap();
        assert_eq!(c.limits.repr, 200);
        assert!(c.tests);
        assert_eq!(c.events.len(), 5);
        assert_eq!(c.scope, Scope::Run);
        assert!(
            !serde_json::to_string(&c).unwrap().contains("scope"),
            "the default is not written"
        );
        let t: TracingConfig = serde_json::from_str(r#"{"scope":"tests"}"#).unwrap();
        assert_eq!(t.scope, Scope::Tests);
        let x: TracingConfig = serde_json::from_str(r#"{"scope":"targets"}"#).unwrap();
        assert_eq!((x.scope, x.scope.windows()), (Scope::Targets, true));
        assert!(
            serde_json::to_string(&x)
                .unwrap()
                .contains(r#""scope":"targets""#),
            "the hook is told"
        );
        assert!(serde_json::from_str::<TracingConfig>(r#"{"scope":"imports"}"#).is_err());
        let d: TracingConfig = serde_json::from_str(r#"{"dialect":"swe-flux"}"#).unwrap();
        assert_eq!(d.dialect, Dialect::SweFlux);
        assert!(serde_json::to_string(&d)
            .unwrap()
            .contains(r#""dialect":"swe-flux""#));
        assert!(!serde_json::to_string(&c).unwrap().contains("dialect"));
        let err = serde_json::from_str::<TracingConfig>(r#"{"file":["a.py"]}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `file`"), "{err}");
    }
}
