//! Extractors: named pure functions from a merged [`Trace`] and parameters to a gold JSON answer.
//!
//! Why a crate of its own: the gold answer of every flux instance is *harvested* by applying one
//! named extractor to the trace of an instrumented test run, and the question prose quotes the
//! extractor's conventions. Keeping the extractors pure (no I/O, no clock, no randomness) makes a
//! gold answer a function of the trace alone, so it can be re-derived and audited.
//!
//! Entry points: [`extractors`] (the registry, with each extractor's exact definition in
//! [`Extractor::doc`], its parameters with their types, and the [`shape`] of what it computes),
//! [`extract`] (validate the parameters, refuse an incomplete trace, run), [`extract_indexed`]
//! (the same over a [`TraceIndex`] built once for many questions), [`candidates`] (what a
//! function's run offers to ask about, for `flux gen`), [`QuestionKind`] and [`answer_size`]
//! (the screening gate), and [`pysrc`] (a static read of Python source: definitions, their
//! spans, loops; flux-eval's prompts and flux-instance's checks of hand-written parameters).
//!
//! An extractor computes a record whose shape it declares ([`Extractor::shape`]: every field an
//! instance may select, such as `file`, `func`, `qualname` and `line` of an executed-path item);
//! the instance's answer template selects, renames and nests those fields
//! (`flux_instance::template`), so the answer's layout belongs to the instance and no instance
//! needs code of its own. [`extract`] checks every output against the declared shape.
//!
//! Conventions shared by all extractors (see `flux_trace::query` for the trace-level ones):
//! - `function` is a qualified name (`Add.flatten`, `outer.<locals>.inner`), matched exactly
//!   against `co_qualname`. `invocation` counts that function's frames from 1 in order of their
//!   first call, after the `test` and `file` filters are applied. A name whose invocations come
//!   from more than one source file is an error naming the files unless `file` says which.
//! - Line numbers in parameters are always absolute line numbers of the source file. Line numbers
//!   in answers are absolute unless `normalize = "relative"`, which reports `line - def_line + 1`
//!   (the function's first line is 1); `def_line` is the line of the frame's first `call` event
//!   (CPython reports `co_firstlineno`: the first decorator line for a decorated function) unless
//!   the `def_line` parameter gives it. With `line_mode = "statement"` a line is first normalised to
//!   the first line of the statement that holds it (from the trace's static facts).
//! - Values are the tracer's bounded `repr` strings; a variable's value "after line L" is the
//!   frame's state at its next `line` or `return` event after that execution of L, and "at line
//!   L" (`at = "before"`, SWE-Flux's reading) the state the `line` event of L shows, before L runs.
//! - A location in an answer carries `file` (relative to `root` if given, else the path after the
//!   last `site-packages/` or `dist-packages/`, else absolute), `abs_file`, `module`, `qualname`,
//!   `func` (`module.qualname`, SWE-Flux's identity) and `line`.
//! - Test lists are in the order the tests started in the trace; events outside any test are
//!   ignored by the across-tests (M) extractors.
//!
//! Architecture invariant: this crate reads nothing but its arguments; it does not know about
//! instance files, containers or the agent (`testkit`, test support, is the one exception: it can
//! run the real `flux_hook.static_facts` to give hand-built traces real facts).
use flux_trace::{Trace, TraceIndex};
use serde_json::{Map, Value};

mod calls;
pub mod candidates;
mod cfg;
mod common;
mod dataflow;
mod exceptions;
mod invariants;
mod kinds;
mod loops;
mod params;
pub mod pysrc;
mod registry;
mod render;
pub mod shape;
mod state;
pub mod testkit;

pub use candidates::{candidates, Candidates};
pub use dataflow::uses_from_source;
pub use exceptions::raise_origins;
pub use kinds::{answer_size, QuestionKind};
pub use params::{ParamType, Params};
pub use registry::conventions;

/// Why an extractor could not produce an answer. Every message names what was asked for and
/// what the trace holds, so a failed harvest can be fixed from the message alone.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("unknown extractor `{name}`; known extractors: {known}")]
    UnknownExtractor { name: String, known: String },
    #[error("unknown parameter `{param}`; allowed: {allowed}")]
    UnknownParam { param: String, allowed: String },
    #[error("missing required parameter `{param}`")]
    MissingParam { param: String },
    #[error("parameter `{param}`: expected {expected}, got {got}")]
    BadParam {
        param: String,
        expected: &'static str,
        got: String,
    },
    #[error("parameter `{param}`: expected {expected}, got {got}")]
    BadParamType {
        param: String,
        expected: String,
        got: String,
    },
    #[error("parameters must be a JSON object, got {got}")]
    ParamsNotObject { got: String },
    #[error(
        "function `{function}` has {count} invocation(s){scope}; invocation {asked} was asked for"
    )]
    NoInvocation {
        function: String,
        count: usize,
        asked: usize,
        scope: String,
    },
    #[error(
        "function `{function}` names code in {} files ({}); give `file` to say which",
        files.len(),
        files.join(", ")
    )]
    Ambiguous {
        function: String,
        files: Vec<String>,
    },
    /// The trace does not show what the parameters ask about (a line never executed, a variable
    /// never bound, no exception of that type).
    #[error("{0}")]
    NotObserved(String),
    #[error("the trace is incomplete ({problems}); no gold answer may be taken from it")]
    Incomplete { problems: String },
    #[error("extractor `{extractor}`: {source}")]
    In {
        extractor: String,
        #[source]
        source: Box<ExtractError>,
    },
}

/// An extractor's entry point: a pure function of the indexed trace and the parameters.
pub type ExtractFn = fn(&TraceIndex<'_>, &Params) -> Result<Value, ExtractError>;

/// One parameter an extractor accepts.
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    pub name: &'static str,
    pub ty: ParamType,
    pub required: bool,
    pub doc: &'static str,
}

/// A registered extractor.
#[derive(Clone, Copy, Debug)]
pub struct Extractor {
    pub name: &'static str,
    /// The question kinds it serves.
    pub kinds: &'static [QuestionKind],
    /// Its exact definition, quotable in question prose.
    pub doc: &'static str,
    pub params: &'static [ParamDoc],
    /// The shape of what it computes for the given parameters (JSON text with type names as
    /// leaves): every field an instance template may select.
    pub shape: fn(&Params) -> &'static str,
    /// Its usual answer template for the given parameters (a selection of the shape).
    pub template: fn(&Params) -> &'static str,
    pub run: ExtractFn,
    /// It reads only what runs inside activations of its `function` / `raised_in` (or of any
    /// traced code), so a trace with `[tracing] scope = "targets"` answers it exactly when the
    /// config targets that function. `call_graph` reads calls made anywhere: it does not.
    pub targets_scope: bool,
    /// Parameters naming functions whose lines, locals or exceptions the extractor reads: the
    /// tracing config must target them (checked when an instance loads).
    pub targeted: &'static [&'static str],
    /// With these parameters it reads nothing but the test boundaries, the events of its
    /// `function`'s activations and those of the activations they call directly: a run asked
    /// only its answer, with scope `targets` and that function targeted, may keep just those
    /// (`flux_trace::Keep::TargetCalls`). An extractor saying so is checked by
    /// `an_extractor_reading_target_calls_only_answers_the_same_from_them`.
    pub target_calls_only: fn(&Params) -> bool,
}

/// The registry of every extractor, in kind order.
pub fn extractors() -> &'static [Extractor] {
    registry::REGISTRY
}

/// The extractor called `name`.
pub fn find(name: &str) -> Option<&'static Extractor> {
    registry::REGISTRY.iter().find(|e| e.name == name)
}

/// The extractors that serve `kind`.
pub fn for_kind(kind: QuestionKind) -> Vec<&'static Extractor> {
    registry::REGISTRY
        .iter()
        .filter(|e| e.kinds.contains(&kind))
        .collect()
}

/// Check `params` against the extractor's declared parameters (names, presence and types),
/// without a trace: what can be known before anything runs.
pub fn check_params(name: &str, params: &Params) -> Result<&'static Extractor, ExtractError> {
    let ex = find(name).ok_or_else(|| ExtractError::UnknownExtractor {
        name: name.to_string(),
        known: registry::REGISTRY
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let wrap = |source| ExtractError::In {
        extractor: name.to_string(),
        source: Box::new(source),
    };
    for (key, value) in params.as_map() {
        let Some(doc) = ex.params.iter().find(|p| p.name == key) else {
            return Err(wrap(ExtractError::UnknownParam {
                param: key.to_string(),
                allowed: ex
                    .params
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }));
        };
        if !doc.ty.admits(value) {
            return Err(wrap(ExtractError::BadParamType {
                param: key.to_string(),
                expected: doc.ty.describe(),
                got: shape::short(value),
            }));
        }
    }
    for p in ex.params.iter().filter(|p| p.required) {
        if !params.contains(p.name) {
            return Err(wrap(ExtractError::MissingParam {
                param: p.name.to_string(),
            }));
        }
    }
    registry::check_combinations(ex, params).map_err(wrap)?;
    Ok(ex)
}

/// Run the extractor `name` on `trace`: check the parameters, refuse an incomplete trace, and
/// return the answer. Errors name the extractor.
pub fn extract(trace: &Trace, name: &str, params: &Params) -> Result<Value, ExtractError> {
    check_params(name, params)?;
    refuse_incomplete(trace)?;
    extract_indexed(&index(trace), name, params)
}

/// The index of `trace` the extractors read; with `FLUX_MEMLOG` set, one stderr line of what
/// it holds, beside the agent's stage notes (`flux_agent::run::memory_note`).
pub fn index(trace: &Trace) -> TraceIndex<'_> {
    let ix = TraceIndex::new(trace);
    if std::env::var_os("FLUX_MEMLOG").is_some() {
        eprintln!(
            "flux: the extractor's index holds {} MiB",
            ix.held_bytes() >> 20
        );
    }
    ix
}

fn refuse_incomplete(trace: &Trace) -> Result<(), ExtractError> {
    if trace.events.len() > flux_trace::MAX_EVENTS {
        return Err(ExtractError::NotObserved(format!(
            "a trace of {} events is past the {} an index holds",
            trace.events.len(),
            flux_trace::MAX_EVENTS
        )));
    }
    if trace.meta.complete {
        return Ok(());
    }
    let problems = if trace.meta.problems.is_empty() {
        "meta.complete is false".to_string()
    } else {
        trace.meta.problems.join("; ")
    };
    Err(ExtractError::Incomplete { problems })
}

/// [`extract`] over an index built once (many questions of one trace).
pub fn extract_indexed(
    ix: &TraceIndex<'_>,
    name: &str,
    params: &Params,
) -> Result<Value, ExtractError> {
    let ex = check_params(name, params)?;
    refuse_incomplete(ix.trace)?;
    let wrap = |source| ExtractError::In {
        extractor: name.to_string(),
        source: Box::new(source),
    };
    let out = (ex.run)(ix, params).map_err(wrap)?;
    // The declared shape is a contract with every instance template: check it on every answer.
    let shape = shape::Shape::parse((ex.shape)(params)).map_err(|e| {
        wrap(ExtractError::NotObserved(format!(
            "bad built-in shape: {e}"
        )))
    })?;
    shape.validate(&out).map_err(|e| {
        wrap(ExtractError::NotObserved(format!(
            "internal error: the output does not have the declared shape {e}"
        )))
    })?;
    Ok(out)
}

/// Parameters from a JSON object (convenience for callers holding a `serde_json::Value`).
pub fn params(v: Value) -> Result<Params, ExtractError> {
    match v {
        Value::Object(m) => Ok(Params::new(m)),
        other => Err(ExtractError::ParamsNotObject {
            got: other.to_string(),
        }),
    }
}

/// Empty parameters.
pub fn no_params() -> Params {
    Params::new(Map::new())
}

#[cfg(test)]
mod tests;
