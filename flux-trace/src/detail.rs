//! What few events carry, boxed behind one pointer of [`Event`], and the event's JSON.
//!
//! A suite part's trace is tens of millions of calls and returns of untargeted code: none has
//! locals, a value, an exception, an outcome or a predicate, and seven inline fields for them
//! were 56 of an event's 160 bytes. The JSON stays one flat object with the keys in the order
//! they always had (a trace file written before reads the same, and writes back byte for byte).
use crate::{Event, ExcInfo, ExcOrigin, Kind, Name, Source, ThinVec, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::LazyLock;

/// The fields of an [`Event`] that few events have.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Detail {
    /// Locals that changed (line/return), or the arguments (call), in a targeted frame.
    pub locals: ThinVec<(String, Value)>,
    /// Locals that existed at the frame's previous event and no longer do (`del x`, the name of
    /// an `except ... as e` clause after it); reported with dialect `swe-flux` only.
    pub deleted: ThinVec<String>,
    /// Return value (normal return or yield); on an `exception` event of dialect `swe-flux`, the
    /// exception object; on a `check` event the predicate's truth.
    pub value: Option<Box<Value>>,
    /// Exception type (qualified, e.g. `ValueError`, `pkg.mod.Error`) and message.
    pub exc: Option<Box<ExcInfo>>,
    /// On `exception` events: where the exception was raised, read from the exception itself
    /// (the innermost entry of its traceback when the event happened), whether or not the
    /// frame that raised it was traced. With `outcome` (the event's kind, see
    /// [`crate::ExcKind`]) it says whether this frame raised it.
    pub origin: Option<Box<ExcOrigin>>,
    /// `test_end`: how the test ended (`passed|failed|skipped|error`). `exception`: the event's
    /// kind as the hook classified it (`raise|reraise|propagate|thrown`, see [`crate::ExcKind`]).
    /// `call`: `throw` when `gen.throw()`/`close()` opened the activation (dialect `swe-flux`).
    pub outcome: Name,
    /// For `check` events: the predicate's text.
    pub predicate: Name,
}

impl Detail {
    fn is_empty(&self) -> bool {
        self == &*EMPTY
    }
}

static EMPTY: LazyLock<Detail> = LazyLock::new(Detail::default);

/// An event's [`Detail`], absent when empty: an absent detail and an empty one are equal.
#[derive(Clone, Debug, Default)]
pub(crate) struct Extra(pub(crate) Option<Box<Detail>>);

impl Extra {
    pub(crate) fn get(&self) -> &Detail {
        self.0.as_deref().unwrap_or(&EMPTY)
    }

    pub(crate) fn get_mut(&mut self) -> &mut Detail {
        self.0.get_or_insert_with(Default::default)
    }

    pub(crate) fn of(d: Detail) -> Extra {
        Extra((!d.is_empty()).then(|| Box::new(d)))
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        self.get() == other.get()
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}
fn no_name(n: &&Name) -> bool {
    n.is_empty()
}
fn no_locals(v: &&ThinVec<(String, Value)>) -> bool {
    v.is_empty()
}
fn no_names(v: &&ThinVec<String>) -> bool {
    v.is_empty()
}
fn none<T>(v: &&Option<T>) -> bool {
    v.is_none()
}

/// An event as written: every key in its old place.
#[derive(Serialize)]
struct Out<'a> {
    ts: u64,
    pid: u32,
    tid: u32,
    ev: Kind,
    src: Source,
    #[serde(skip_serializing_if = "no_name")]
    file: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    func: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    qualname: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    module: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    sig: &'a Name,
    line: u32,
    #[serde(skip_serializing_if = "is_zero")]
    activation: u64,
    #[serde(skip_serializing_if = "is_zero")]
    frame: u64,
    #[serde(skip_serializing_if = "is_zero")]
    parent: u64,
    depth: u32,
    #[serde(skip_serializing_if = "no_locals")]
    locals: &'a ThinVec<(String, Value)>,
    #[serde(skip_serializing_if = "no_names")]
    deleted: &'a ThinVec<String>,
    #[serde(skip_serializing_if = "none")]
    value: &'a Option<Box<Value>>,
    #[serde(skip_serializing_if = "is_false")]
    suspended: bool,
    #[serde(skip_serializing_if = "is_false")]
    unwind: bool,
    #[serde(skip_serializing_if = "none")]
    exc: &'a Option<Box<ExcInfo>>,
    #[serde(skip_serializing_if = "none")]
    origin: &'a Option<Box<ExcOrigin>>,
    #[serde(skip_serializing_if = "no_name")]
    test: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    outcome: &'a Name,
    #[serde(skip_serializing_if = "no_name")]
    predicate: &'a Name,
}

/// An event as read: every key but the first five optional.
#[derive(Deserialize)]
struct In {
    ts: u64,
    pid: u32,
    tid: u32,
    ev: Kind,
    src: Source,
    #[serde(default)]
    file: Name,
    #[serde(default)]
    func: Name,
    #[serde(default)]
    qualname: Name,
    #[serde(default)]
    module: Name,
    #[serde(default)]
    sig: Name,
    #[serde(default)]
    line: u32,
    #[serde(default)]
    activation: u64,
    #[serde(default)]
    frame: u64,
    #[serde(default)]
    parent: u64,
    #[serde(default)]
    depth: u32,
    #[serde(default)]
    locals: ThinVec<(String, Value)>,
    #[serde(default)]
    deleted: ThinVec<String>,
    #[serde(default)]
    value: Option<Box<Value>>,
    #[serde(default)]
    suspended: bool,
    #[serde(default)]
    unwind: bool,
    #[serde(default)]
    exc: Option<Box<ExcInfo>>,
    #[serde(default)]
    origin: Option<Box<ExcOrigin>>,
    #[serde(default)]
    test: Name,
    #[serde(default)]
    outcome: Name,
    #[serde(default)]
    predicate: Name,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.detail();
        Out {
            ts: self.ts,
            pid: self.pid,
            tid: self.tid,
            ev: self.ev,
            src: self.src,
            file: &self.code.file,
            func: &self.code.func,
            qualname: &self.code.qualname,
            module: &self.code.module,
            sig: &self.code.sig,
            line: self.line,
            activation: self.activation,
            frame: self.frame,
            parent: self.parent,
            depth: self.depth,
            locals: &d.locals,
            deleted: &d.deleted,
            value: &d.value,
            suspended: self.suspended,
            unwind: self.unwind,
            exc: &d.exc,
            origin: &d.origin,
            test: &self.test,
            outcome: &d.outcome,
            predicate: &d.predicate,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        let i = In::deserialize(d)?;
        Ok(Event {
            ts: i.ts,
            pid: i.pid,
            tid: i.tid,
            ev: i.ev,
            src: i.src,
            code: crate::Code::new(crate::CodeNames {
                file: i.file,
                func: i.func,
                qualname: i.qualname,
                module: i.module,
                sig: i.sig,
            }),
            line: i.line,
            activation: i.activation,
            frame: i.frame,
            parent: i.parent,
            depth: i.depth,
            suspended: i.suspended,
            unwind: i.unwind,
            test: i.test,
            extra: Extra::of(Detail {
                locals: i.locals,
                deleted: i.deleted,
                value: i.value,
                exc: i.exc,
                origin: i.origin,
                outcome: i.outcome,
                predicate: i.predicate,
            }),
        })
    }
}
