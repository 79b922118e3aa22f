//! The hook's own work, which USDT sees and the hook never reports.
//!
//! Code the hook runs (its callbacks, and what they call: a local's `__repr__`, the stdlib
//! behind `fnmatch`) fires the probes like any other. Rule `hook-own-work`: in one thread,
//! - every USDT event of the hook's own files (`flux_hook/`, its `sitecustomize.py`) is dropped;
//! - with USDT entries (3.15) everything from an entry into the hook's files to that frame's
//!   return is dropped (the bracket counts only that code's own calls and returns: a generator
//!   created in there fires an entry and no return, so a plain depth count would never come
//!   back to zero);
//!   a return of other code in there is the hook's only if that code's entry came inside the
//!   bracket too (`bracket-returns`): the program's return never runs inside a callback, and
//!   dropping it would let the hook's record of that end stand in unchecked;
//! - without (3.11), everything inside a span the hook reports as its own work (`hx`) is dropped.
//!
//! Nothing else is the hook's: an event this module does not claim is the program's, and the
//! merge must place it or report it.
use flux_trace::{Event, Kind, Name};
use std::collections::HashMap;

/// The state of one thread's bracket.
#[derive(Default)]
pub(super) struct HookWork {
    /// (file, func, nesting) of the outermost hook frame USDT is inside (3.15).
    frame: Option<(Name, Name, u32)>,
    /// (file, func) of the frames of other code USDT entered inside the bracket (3.15), in
    /// order: a return of other code in there is the hook's only if it closes one of them.
    inner: Vec<(Name, Name)>,
    /// (file, func) of the entries of other code inside a bracket that had not returned when
    /// it closed, with how many (`bracket-returns`).
    escaped: HashMap<(Name, Name), u32>,
    /// The end of the latest span the hook reported as its own work (`hx`, 3.11).
    busy_until: u64,
    /// The open bracket took events of other code (3.15).
    took_other: bool,
}

impl HookWork {
    /// USDT is inside a frame of the hook's (or what it called).
    pub(super) fn inside(&self) -> bool {
        self.frame.is_some()
    }

    /// (file, func) of the hook's frame whose bracket is open and took events of other code
    /// (3.15). (One open at a test window's edge that took none is the hook's pytest plugin
    /// resumed as the window closed: its return lies outside.)
    pub(super) fn open_bracket(&self) -> Option<(&str, &str)> {
        let h = self.frame.as_ref().filter(|_| self.took_other)?;
        Some((h.0.as_str(), h.1.as_str()))
    }

    /// `ts` lies in (or before the end of) the latest span of the hook's own work.
    pub(super) fn busy_at(&self, ts: u64) -> bool {
        ts <= self.busy_until
    }

    /// An `hx` record: the hook's work ran until `until`.
    pub(super) fn busy(&mut self, until: u64) {
        self.busy_until = self.busy_until.max(until);
    }

    /// The probes went on or off (an extent's edge) inside the hook's own frames: USDT saw
    /// their returns (entries) only, so no bracket crosses an edge.
    pub(super) fn reset_bracket(&mut self) {
        self.frame = None;
        self.inner.clear();
        self.took_other = false;
    }

    /// `e` is an event of the hook's own files that [`HookWork::claims`] drops without reading
    /// it: not the entry or return of the bracket's outermost frame (nor, outside a bracket,
    /// an entry that opens one). A fixture may leave such events out.
    pub(super) fn inert(&self, e: &Event) -> bool {
        is_hook_file(e.file())
            && match &self.frame {
                None => e.ev != Kind::Call,
                Some(h) => !(h.0 == *e.file() && h.1 == *e.func()),
            }
    }

    /// Whether `e` is the hook's own work; if so the bracket is updated and it must be
    /// dropped.
    pub(super) fn claims(&mut self, e: &Event) -> bool {
        if self.busy_at(e.ts) {
            return true;
        }
        if self.frame.is_none() && !is_hook_file(e.file()) {
            return false;
        }
        let same = |h: &(Name, Name, u32)| h.0 == *e.file() && h.1 == *e.func();
        match (&mut self.frame, e.ev) {
            // (Without USDT entries, 3.11, the hook's own returns are dropped here one by one,
            // and what its trace functions run is bracketed by its `hx` records.)
            (None, Kind::Call) => self.frame = Some((e.file().clone(), e.func().clone(), 1)),
            (Some(h), Kind::Call) if same(h) => h.2 += 1,
            (Some(h), Kind::Return) if same(h) => {
                h.2 -= 1;
                if h.2 == 0 {
                    for k in self.inner.drain(..) {
                        *self.escaped.entry(k).or_default() += 1;
                    }
                    self.reset_bracket();
                }
            }
            (Some(_), Kind::Call) if !is_hook_file(e.file()) => {
                self.took_other = true;
                self.inner.push((e.file().clone(), e.func().clone()))
            }
            (Some(_), Kind::Return) if !is_hook_file(e.file()) && !is_entryless_shim(e) => {
                // `bracket-returns`: a return of other code is the hook's only if its entry
                // came inside the bracket too; any other is the program's (a frame that
                // returned across the hook's callback would otherwise vanish, and the hook's
                // record of its end stand in for it unchecked).
                let Some(pos) = self
                    .inner
                    .iter()
                    .rposition(|(f, n)| *f == *e.file() && *n == *e.func())
                else {
                    return false;
                };
                self.inner.truncate(pos);
                self.took_other = true;
            }
            _ => {}
        }
        true
    }
}

impl HookWork {
    /// `bracket-returns`: a return no activation matches, of code that entered inside the
    /// hook's bracket and had not returned when it closed: that entry was the program's (taken
    /// for the hook's work), its activation is missing. Consumes one such entry.
    pub(super) fn escaped_entry(&mut self, e: &Event) -> bool {
        let k = (e.file().clone(), e.func().clone());
        match self.escaped.get_mut(&k) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

/// The hook's own files (the `flux_hook` package and its `sitecustomize`).
pub(crate) fn is_hook_file(file: &str) -> bool {
    file.contains("/flux_hook/") || file.ends_with("/hook/sitecustomize.py")
}

/// The interpreter's frame that fires a return probe and no entry (3.13+: the `__init__`
/// cleanup shim, whose code has the file name `__init__` and line 0).
pub(super) fn is_entryless_shim(e: &Event) -> bool {
    e.file() == "__init__" && e.func() == "__init__"
}
