//! Naming USDT's entries from the hook's code definitions.
//!
//! USDT names code only by (file, name, line), and 3.15's entry line is that of the frame's
//! first instruction (0 when it has none: cell variables, closures, generator expressions).
//! The hook's `C` records give every code object it saw with its qualified name, first and
//! last line and traits. Rules:
//! - `generator-entries` (3.15, the hook reports generator starts): a USDT entry whose line
//!   lies in a generator code of that (file, name) is the generator's creation or resumption
//!   and is dropped (not merely one with the same name: `__iter__` as a generator in one class
//!   and a plain method in another). Every generator expression is one, whatever its line: the
//!   hook reports genexprs as every generator (USDT fires no entry when `throw()`/`close()`
//!   resumes one, and cannot tell its start from its resumptions).
//! - `target-entries` (scope `targets`): the hook reports every start of targeted code, so
//!   USDT's entries of it are dropped.
//! - `line0-naming`: a line-0 entry is one of the code objects of that (file, name) whose first
//!   instruction has no line. When the hook reports their starts the entry is dropped;
//!   otherwise (scope `targets`) it is named from the definitions — the one of them, or, when
//!   several share the name, the one whose lines hold the line of the activation's USDT return
//!   (`by-return`; an activation that never returns through the probe cannot be told apart: a
//!   problem). A name shared with a generator without a first line is a problem, never a guess.
//! - `shared-first-line`: two code objects of one (file, name, first line) — a lambda nested
//!   in a lambda on one line — cannot be told apart by an entry: it names neither (the name
//!   alone), until a hook record of the activation identifies it.
//! - `identify`: the first hook record of an activation USDT opened names its code object
//!   exactly: qualified name, and the first line where USDT said 0.
use super::Open;
use crate::plan::Plan;
use crate::protocol::{CodeDef, HookCapture, CODE_GEN, CODE_NO_FIRST_LINE, CODE_TARGET};
use flux_trace::{Event, Name, Scope};
use std::collections::{HashMap, HashSet};

type CodeKey = (u32, Name, Name);

/// The hook's code definitions, indexed the ways USDT's entries are named.
#[derive(Default)]
pub(super) struct CodeIndex {
    /// (pid, file, name) of code the hook traces lines for.
    pub hook_line_codes: HashSet<CodeKey>,
    /// Generator codes (3.15: calls = generators).
    gen_codes: HashMap<CodeKey, Vec<CodeDef>>,
    /// Non-generator codes whose first instruction has no line (3.15: USDT says line 0).
    lineless_codes: HashMap<CodeKey, Vec<CodeDef>>,
    /// Targeted codes (scope `targets`).
    target_codes: HashMap<CodeKey, Vec<CodeDef>>,
    /// (pid, file, name) of every targeted code the hook defined, whatever the scope.
    pub targeted: HashSet<CodeKey>,
    /// The qualified name of the code of (pid, file, name, first line); `None` where two codes
    /// share all four (`shared-first-line`).
    qualnames: HashMap<(u32, Name, Name, u32), Option<Name>>,
}

/// What becomes of a USDT entry.
pub(super) enum Entry {
    /// Dropped under the named rule.
    Drop(Dropped),
    /// Cannot be placed.
    Problem(String),
    /// Opens an activation with this name and line.
    Open {
        qualname: Name,
        line: u32,
        /// Which code object it is, is known at its USDT return only.
        by_return: bool,
        named: Option<Named>,
        /// `target-entries`: a line-0 entry of a name targeted code without a first line has;
        /// the hook's start of that code takes its place if it comes next, else it is the
        /// start of untargeted code of the same name (yt-dlp's `YoutubeDLError.__init__`
        /// under `ExtractorError.__init__`: both call `super()`).
        maybe_target: bool,
    },
}

pub(super) enum Dropped {
    Generator,
    Lineless,
    Target,
}

pub(super) enum Named {
    Lineless,
}

impl CodeIndex {
    pub(super) fn new(hook: &HookCapture, plan: &Plan) -> CodeIndex {
        let mut ix = CodeIndex::default();
        let gens = plan.hook_gen_starts();
        let targets = plan.scope == Scope::Targets;
        for s in &hook.streams {
            for code in &s.summary.line_codes {
                if let Some(c) = s.codes.get(code) {
                    ix.hook_line_codes
                        .insert((s.pid, c.file.clone(), c.name.clone()));
                }
            }
            for c in s.codes.values() {
                if gens && c.has(CODE_NO_FIRST_LINE) && !c.has(CODE_GEN) {
                    add_code(&mut ix.lineless_codes, s.pid, c);
                }
                // The hook defines every generator code it finds nested in code it saw (one
                // created and never started included).
                if gens && c.has(CODE_GEN) {
                    add_code(&mut ix.gen_codes, s.pid, c);
                }
                if targets && c.has(CODE_TARGET) {
                    add_code(&mut ix.target_codes, s.pid, c);
                }
                if c.has(CODE_TARGET) {
                    ix.targeted.insert((s.pid, c.file.clone(), c.name.clone()));
                }
                // `shared-first-line`: USDT cannot tell two codes of one (file, name, line)
                // apart (a lambda nested in a lambda on one line): an entry names neither.
                ix.qualnames
                    .entry((s.pid, c.file.clone(), c.name.clone(), c.firstlineno))
                    .and_modify(|q| {
                        if q.as_ref() != Some(&c.qualname) {
                            *q = None;
                        }
                    })
                    .or_insert_with(|| Some(c.qualname.clone()));
            }
        }
        ix
    }

    /// The lineless codes of (pid, file, name) whose lines hold `line`.
    pub(super) fn lineless_holding(&self, pid: u32, o: &Open, line: u32) -> Vec<&CodeDef> {
        self.lineless_codes
            .get(&(pid, o.file.clone(), o.func.clone()))
            .map(|v| v.iter().filter(|d| d.holds_line(line)).collect())
            .unwrap_or_default()
    }

    /// What becomes of the USDT entry `e` (see the module doc).
    pub(super) fn entry(&self, plan: &Plan, e: &Event) -> Entry {
        let (pid, tid) = (e.pid, e.tid);
        let key = (pid, e.file().clone(), e.func().clone());
        let reported = plan.hook_lineless_starts();
        if e.line == 0
            && !reported
            && self.lineless_codes.contains_key(&key)
            && self.gen_codes.get(&key).is_some_and(|gs| {
                gs.iter()
                    .any(|g| g.has(CODE_NO_FIRST_LINE) && g.has(CODE_GEN))
            })
        {
            return Entry::Problem(format!(
                "a line-0 USDT entry of {} ({}) in thread {pid}/{tid} is the creation of a generator or the start of another code of that name, neither with a first line: scope \"targets\" cannot tell which",
                e.func(), e.file()
            ));
        }
        let targeted = || {
            self.target_codes
                .get(&key)
                .is_some_and(|ts| ts.iter().any(|t| t.may_enter_at(e.line)))
        };
        let is_gen = (plan.hook_gen_starts() && e.func() == "<genexpr>")
            || self
                .gen_codes
                .get(&key)
                .is_some_and(|gs| gs.iter().any(|g| g.may_enter_at(e.line)));
        if is_gen {
            return Entry::Drop(Dropped::Generator);
        }
        if targeted() {
            if e.line == 0 {
                return self.maybe_target(&key);
            }
            return Entry::Drop(Dropped::Target);
        }
        if e.line == 0 && reported && self.lineless_codes.contains_key(&key) {
            return Entry::Drop(Dropped::Lineless);
        }
        let mut qualname = self
            .qualnames
            .get(&(pid, e.file().clone(), e.func().clone(), e.line))
            .cloned()
            .flatten()
            .unwrap_or_default();
        let (mut line, mut by_return, mut named) = (e.line, false, None);
        if e.line == 0 {
            if let Some(v) = self.lineless_codes.get(&key) {
                match one_identity(v.iter()) {
                    Some(only) => {
                        qualname = only.qualname.clone();
                        line = only.firstlineno;
                        named = Some(Named::Lineless);
                    }
                    None => by_return = true,
                }
            }
        }
        // 3.15 reports line 0 for a module's entry; its code starts at line 1.
        if line == 0 && e.func() == "<module>" {
            line = 1;
        }
        Entry::Open {
            qualname,
            line,
            by_return,
            named,
            maybe_target: false,
        }
    }

    /// A line-0 entry of `key` whose targeted code has no first line: the target's start
    /// (the hook's start replaces it: `target-entries`) or untargeted code of the same name,
    /// named from the untargeted definitions the hook has (`line0-naming`), by its return's
    /// line when several share the name, else left unnamed as any untargeted entry is.
    fn maybe_target(&self, key: &CodeKey) -> Entry {
        let others: Vec<&CodeDef> = self
            .lineless_codes
            .get(key)
            .map(|v| v.iter().filter(|d| !d.has(CODE_TARGET)).collect())
            .unwrap_or_default();
        let (mut qualname, mut line, mut by_return, mut named) = (Name::default(), 0, false, None);
        match one_identity(others.iter().copied()) {
            Some(only) => {
                qualname = only.qualname.clone();
                line = only.firstlineno;
                named = Some(Named::Lineless);
            }
            None => by_return = !others.is_empty(),
        }
        Entry::Open {
            qualname,
            line,
            by_return,
            named,
            maybe_target: true,
        }
    }
}

/// Add a code definition to a per-(pid, file, name) map, once.
fn add_code(map: &mut HashMap<CodeKey, Vec<CodeDef>>, pid: u32, c: &CodeDef) {
    let v = map
        .entry((pid, c.file.clone(), c.name.clone()))
        .or_default();
    if !v.contains(c) {
        v.push(c.clone());
    }
}

/// The code of these candidates if they all name the same function (qualname and first line:
/// what a trace records of a call; e.g. the `__create_fn__` each dataclass `exec`s), else None.
pub(super) fn one_identity<'a>(
    mut cands: impl Iterator<Item = &'a CodeDef>,
) -> Option<&'a CodeDef> {
    let first = cands.next()?;
    cands
        .all(|d| d.qualname == first.qualname && d.firstlineno == first.firstlineno)
        .then_some(first)
}

/// `identify`: a hook record of an activation USDT opened names its code object exactly.
pub(super) fn identify(
    o: &mut Open,
    cd: &CodeDef,
    out: &mut [Event],
    interned: &mut flux_trace::Codes,
) {
    if o.identified {
        return;
    }
    o.identified = true;
    o.qualname = cd.qualname.clone();
    if let Some(e) = o.call_idx.and_then(|i| out.get_mut(i)) {
        e.code = interned.with_qualname(&e.code, &cd.qualname);
        if e.line == 0 {
            e.line = cd.firstlineno;
        }
    }
}

/// The problem of an activation opened by a line-0 entry that nothing identified.
pub(super) fn unnamed(o: &Open, ret: Option<(u32, usize)>, pid: u32, tid: u32) -> String {
    let how = match ret {
        Some((line, n)) => format!("its USDT return at line {line} lies in {n} of them"),
        None => "it ended without a USDT return".to_string(),
    };
    format!(
        "cannot tell which code object named {} in {} ran in thread {pid}/{tid}: its USDT entry says line 0, several such code objects share the name, and {how}",
        o.func, o.file
    )
}
