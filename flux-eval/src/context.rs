//! The source a prompt shows: chosen around the target, not the top of each file.
//!
//! The targets are the functions the instance names (`[extractor] params.function`, with its
//! `file` when given, and `[tracing] functions`), looked up only in the files the instance
//! targets (`[tracing] files`, the extractor's `file`, files the question names) — never in a
//! same-named file elsewhere. Each is shown whole with its real line numbers, then, in this
//! order while the budget lasts:
//! 1. the header of the class a method belongs to (up to its first method),
//! 2. the definitions it calls directly (resolved statically, see [`crate::pysrc`]),
//! 3. the module-level names it reads (`LIMIT = 10`) and its file's imports,
//! 4. what the callees call (depth 2).
//!
//! Each file is rendered once, its chosen ranges merged in line order with `⋮` between them.
//! Nothing is silently dropped: a range that does not fit is cut or left out and the notes
//! say so. When no target can be found statically (no function named, or none found in the
//! targeted files) the targeted files are shown whole from their first line, as a fallback
//! the notes name.

use std::collections::BTreeMap;
use std::path::Path;

use crate::prompt::{list_py_files, mentioned_files, resolve_all};
use crate::pysrc::{import_target, module_file, Def, Module};
use flux_score::Instance;

/// What was chosen.
#[derive(Debug, Clone, Default)]
pub struct Chosen {
    /// Rendered sections (markdown), in order.
    pub text: String,
    /// Files shown, with the line ranges of each (`sympy/core/add.py:180-260`).
    pub files: Vec<String>,
    /// Targets found, as `file:qualname`.
    pub targets: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) file: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) label: String,
}

/// How many classes up [`Src::method`] looks for a method through a class's bases: more than
/// any real hierarchy, and the end of bases that cycle (a class deriving from one that derives
/// from it, in one module or through imports), which source that never ran can write.
const MAX_BASE_HOPS: usize = 32;

pub(crate) struct Src<'a> {
    root: &'a Path,
    pub(crate) files: Vec<String>,
    modules: BTreeMap<String, Option<(Module, Vec<String>)>>,
}

impl<'a> Src<'a> {
    /// The Python files under `root`, none read yet.
    pub(crate) fn new(root: &'a Path) -> Self {
        Src {
            root,
            files: list_py_files(root),
            modules: BTreeMap::new(),
        }
    }

    /// A file parsed, with its lines; `None` when it cannot be read.
    pub(crate) fn module(&mut self, file: &str) -> Option<&(Module, Vec<String>)> {
        if !self.modules.contains_key(file) {
            let parsed = std::fs::read(self.root.join(file)).ok().map(|b| {
                let text = String::from_utf8_lossy(&b).into_owned();
                let lines = text.lines().map(String::from).collect();
                (Module::parse(&text), lines)
            });
            self.modules.insert(file.to_string(), parsed);
        }
        self.modules.get(file).and_then(|m| m.as_ref())
    }

    pub(crate) fn defs(&mut self, file: &str, qual: &str) -> Vec<Def> {
        self.module(file)
            .map(|(m, _)| m.find(qual).into_iter().cloned().collect())
            .unwrap_or_default()
    }

    /// What `Class(...)` runs: its `__init__`, else its `__new__`, else (inherited or
    /// implicit) the class's header up to its first member, never the whole class.
    fn constructor(&mut self, file: &str, class: &Def) -> Def {
        let Some((m, _)) = self.module(file) else {
            return class.clone();
        };
        for name in ["__init__", "__new__"] {
            let q = format!("{}.{name}", class.qualname);
            if let Some(d) = m.defs.iter().find(|d| d.qualname == q) {
                return d.clone();
            }
        }
        let first_member = m
            .defs
            .iter()
            .filter(|x| x.start > class.def_line && x.end <= class.end)
            .map(|x| x.start)
            .min()
            .unwrap_or(class.end + 1);
        Def {
            end: (first_member - 1)
                .min(class.def_line + 40)
                .max(class.def_line),
            ..class.clone()
        }
    }

    /// Where an imported local name points: (file, qualname inside it) or (file, "") for a
    /// module.
    fn imported(&mut self, file: &str, local: &str) -> Option<(String, String)> {
        let imp = self
            .module(file)?
            .0
            .imports
            .iter()
            .find(|i| i.local == local)?
            .clone();
        let target = import_target(&imp, file);
        match &imp.name {
            None => module_file(&target, &self.files).map(|f| (f, String::new())),
            Some(name) => {
                // `from pkg import sub` (a module) or `from pkg.mod import f` (a name).
                if let Some(f) = module_file(&format!("{target}.{name}"), &self.files) {
                    return Some((f, String::new()));
                }
                module_file(&target, &self.files).map(|f| (f, name.clone()))
            }
        }
    }

    /// The definition a call by `name` from `caller` (in `file`) runs, when it can be told.
    pub(crate) fn resolve(
        &mut self,
        file: &str,
        caller: &Def,
        name: &str,
        hops: usize,
    ) -> Option<(String, Def)> {
        if hops > 3 {
            return None;
        }
        let parts: Vec<&str> = name.split('.').collect();
        let module = self.module(file)?.0.clone();
        let top = |q: &str| module.defs.iter().find(|d| d.qualname == q).cloned();
        if parts.len() == 2 && (parts[0] == "self" || parts[0] == "cls") {
            let class = caller
                .qualname
                .rsplit_once('.')
                .map(|(c, _)| c.to_string())?;
            if class.ends_with("<locals>") {
                return None;
            }
            return self.method(file, &class, parts[1], hops);
        }
        if parts.len() == 1 {
            let n = parts[0];
            let nested = format!("{}.<locals>.{n}", caller.qualname);
            if let Some(d) = top(&nested).or_else(|| top(n)) {
                let d = if d.is_class {
                    self.constructor(file, &d)
                } else {
                    d
                };
                return Some((file.to_string(), d));
            }
            let (f, q) = self.imported(file, n)?;
            if q.is_empty() {
                return None;
            }
            let d = self.defs(&f, &q).into_iter().find(|d| d.qualname == q)?;
            let d = if d.is_class {
                self.constructor(&f, &d)
            } else {
                d
            };
            return Some((f, d));
        }
        // `Class.m`, `module.f`, `module.Class.m`.
        let head = parts[0];
        let rest = parts[1..].join(".");
        if top(head).is_some_and(|d| d.is_class) {
            return self.method(file, head, &rest, hops);
        }
        let (f, q) = self.imported(file, head)?;
        let qual = if q.is_empty() {
            rest
        } else {
            format!("{q}.{rest}")
        };
        let d = self
            .defs(&f, &qual)
            .into_iter()
            .find(|d| d.qualname == qual)?;
        let d = if d.is_class {
            self.constructor(&f, &d)
        } else {
            d
        };
        Some((f, d))
    }

    /// `class.m` in `file`, else in its bases (same module or imported), at most
    /// [`MAX_BASE_HOPS`] classes up.
    pub(crate) fn method(
        &mut self,
        file: &str,
        class: &str,
        m: &str,
        hops: usize,
    ) -> Option<(String, Def)> {
        if hops > MAX_BASE_HOPS {
            return None;
        }
        let qual = format!("{class}.{m}");
        let module = self.module(file)?.0.clone();
        if let Some(d) = module.defs.iter().find(|d| d.qualname == qual) {
            return Some((file.to_string(), d.clone()));
        }
        let cdef = module.defs.iter().find(|d| d.qualname == class)?.clone();
        for base in &cdef.bases {
            let b = base.trim();
            if module.defs.iter().any(|d| d.qualname == b && d.is_class) {
                if let Some(r) = self.method(file, b, m, hops + 1) {
                    return Some(r);
                }
            } else if let Some((f, q)) = self.imported(file, b.split('.').next().unwrap_or(b)) {
                let bq = if q.is_empty() {
                    b.split_once('.')
                        .map(|(_, r)| r.to_string())
                        .unwrap_or_default()
                } else {
                    q
                };
                if !bq.is_empty() {
                    if let Some(r) = self.method(&f, &bq, m, hops + 1) {
                        return Some(r);
                    }
                }
            }
        }
        None
    }
}

/// The definition a call by `name` (as written: `f`, `self.m`, `mod.f`) from the function
/// `caller` (a qualname) of `file` runs, resolved statically as the context's callees are:
/// `(file, qualname)` under `root`, when it can be told. A class call is its constructor.
pub fn resolve_call(root: &Path, file: &str, caller: &str, name: &str) -> Option<(String, String)> {
    let mut src = Src {
        root,
        files: list_py_files(root),
        modules: BTreeMap::new(),
    };
    resolve_in(&mut src, file, caller, name)
}

/// [`resolve_call`] for many calls of one caller, reading the tree once.
pub fn resolve_calls(
    root: &Path,
    file: &str,
    caller: &str,
    names: &[String],
) -> Vec<Option<(String, String)>> {
    let mut src = Src {
        root,
        files: list_py_files(root),
        modules: BTreeMap::new(),
    };
    names
        .iter()
        .map(|n| resolve_in(&mut src, file, caller, n))
        .collect()
}

fn resolve_in(src: &mut Src, file: &str, caller: &str, name: &str) -> Option<(String, String)> {
    let def = src.defs(file, caller).into_iter().find(|d| !d.is_class)?;
    let (f, d) = src.resolve(file, &def, name, 0)?;
    Some((f, d.qualname))
}

/// Qualname candidates for a configured name: `pkg.mod:Class.f` / `pkg.mod.Class.f` → itself,
/// then without leading components (`mod.Class.f`, `Class.f`, `f`).
fn name_forms(name: &str) -> Vec<String> {
    let n = name
        .rsplit(':')
        .next()
        .unwrap_or(name)
        .trim()
        .trim_end_matches("()");
    let parts: Vec<&str> = n.split('.').collect();
    (0..parts.len()).map(|i| parts[i..].join(".")).collect()
}

/// The functions an instance asks about, each with the file it is said to be in: the
/// extractor's `function` (with its `file`), then `[tracing] functions`, each once.
pub(crate) fn target_names(inst: &Instance) -> Vec<(String, Option<String>)> {
    let mut names: Vec<(String, Option<String>)> = Vec::new();
    if let Some(f) = &inst.extractor_function {
        names.push((f.clone(), inst.extractor_file.clone()));
    }
    for f in &inst.tracing_functions {
        if !names.iter().any(|(n, _)| n == f) {
            names.push((f.clone(), None));
        }
    }
    names
}

/// Choose the context of `inst` from the source at `root` within `budget` characters.
pub fn choose(inst: &Instance, root: &Path, budget: usize) -> Chosen {
    let mut out = Chosen::default();
    let mut src = Src {
        root,
        files: list_py_files(root),
        modules: BTreeMap::new(),
    };
    // The targeted files.
    let mut named: Vec<String> = inst.tracing_files.clone();
    named.extend(inst.extractor_file.iter().cloned());
    // Files the question names, except the tests' (the instance's own are shown whole, the
    // repository's named tests by [`crate::testsrc`]).
    let tests = crate::testsrc::named_tests(inst);
    named.extend(mentioned_files(&inst.question).into_iter().filter(|m| {
        let ends = |t: &str| t == m || t.ends_with(&format!("/{m}"));
        !inst.test_files.iter().any(|t| ends(t))
            && !inst.test_image_files.iter().any(|t| ends(t))
            && !tests.iter().any(|t| ends(&t.file))
    }));
    let mut targeted: Vec<String> = Vec::new();
    for n in &named {
        let found = resolve_all(n, &src.files);
        if found.is_empty() {
            out.notes
                .push(format!("named file {n} not found in the source"));
        }
        for f in found {
            if !targeted.contains(&f) {
                targeted.push(f);
            }
        }
    }
    // The target functions, looked up in the targeted files only.
    let names = target_names(inst);
    let mut targets: Vec<(String, Def)> = Vec::new();
    for (name, file) in &names {
        let files: Vec<String> = match file {
            Some(f) => resolve_all(f, &targeted),
            None => targeted.clone(),
        };
        let mut found: Vec<(String, Def)> = Vec::new();
        for form in name_forms(name) {
            for f in &files {
                for d in src.defs(f, &form) {
                    if !d.is_class && !found.iter().any(|(ff, dd)| ff == f && dd == &d) {
                        found.push((f.clone(), d));
                    }
                }
            }
            if !found.is_empty() {
                break;
            }
        }
        if found.is_empty() {
            out.notes
                .push(format!("target `{name}` not found in the targeted files"));
        } else if found.len() > 1 {
            out.notes.push(format!(
                "target `{name}` matches {} definitions; all are shown: {}",
                found.len(),
                found
                    .iter()
                    .map(|(f, d)| format!("{f}:{} {}", d.def_line, d.qualname))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for t in found {
            if !targets.iter().any(|x| x.0 == t.0 && x.1 == t.1) {
                targets.push(t);
            }
        }
    }
    if targets.is_empty() {
        return whole_files(&mut src, &targeted, budget, out);
    }
    out.targets = targets
        .iter()
        .map(|(f, d)| format!("{f}:{}", d.qualname))
        .collect();

    // Items in priority order.
    let mut items: Vec<Item> = Vec::new();
    for (f, d) in &targets {
        items.push(Item {
            file: f.clone(),
            start: d.start,
            end: d.end,
            label: format!("`{}` (the target)", d.qualname),
        });
    }
    let mut class_items = Vec::new();
    let mut callee_items = Vec::new();
    let mut near_items = Vec::new();
    let mut depth2 = Vec::new();
    let mut seen: Vec<(String, usize)> = targets
        .iter()
        .map(|(f, d)| (f.clone(), d.def_line))
        .collect();
    for (f, d) in &targets {
        // The class of a method: its header up to its first member definition.
        if let Some((class_q, _)) = d.qualname.rsplit_once('.') {
            if let Some(c) = src
                .defs(f, class_q)
                .into_iter()
                .find(|c| c.is_class && c.qualname == class_q)
            {
                let end = crate::pysrc::class_header_end(src.module(f).map(|(m, _)| m), &c);
                class_items.push(Item {
                    file: f.clone(),
                    start: c.start,
                    end,
                    label: format!("class `{}`", c.qualname),
                });
            }
        }
        let calls = src
            .module(f)
            .map(|(m, _)| m.calls_in(d))
            .unwrap_or_default();
        for call in calls {
            let Some((cf, cd)) = src.resolve(f, d, &call, 0) else {
                continue;
            };
            if seen.contains(&(cf.clone(), cd.def_line)) {
                continue;
            }
            seen.push((cf.clone(), cd.def_line));
            callee_items.push(Item {
                file: cf.clone(),
                start: cd.start,
                end: cd.end,
                label: format!("`{}` (called by `{}`)", cd.qualname, d.qualname),
            });
            // Depth 2.
            let calls2 = src
                .module(&cf)
                .map(|(m, _)| m.calls_in(&cd))
                .unwrap_or_default();
            for c2 in calls2 {
                if let Some((f2, d2)) = src.resolve(&cf, &cd, &c2, 0) {
                    if !seen.contains(&(f2.clone(), d2.def_line)) {
                        seen.push((f2.clone(), d2.def_line));
                        depth2.push(Item {
                            file: f2,
                            start: d2.start,
                            end: d2.end,
                            label: format!("`{}` (called by `{}`)", d2.qualname, cd.qualname),
                        });
                    }
                }
            }
        }
        // Module-level names it reads, and the file's imports.
        if let Some((m, _)) = src.module(f) {
            for n in m.names_in(d) {
                if let Some(&(a, b)) = m.assigns.get(&n) {
                    if b - a < 30 {
                        near_items.push(Item {
                            file: f.clone(),
                            start: a,
                            end: b,
                            label: format!("`{n}`"),
                        });
                    }
                }
            }
            if let (Some(a), Some(b)) = (
                m.imports.iter().map(|i| i.line).min(),
                m.imports.iter().map(|i| i.line).max(),
            ) {
                // The import block (from the first to the last module-level import, that
                // one's continuation lines included), when it is one block.
                let b = m.logical_end(b);
                if b - a < 60 {
                    near_items.push(Item {
                        file: f.clone(),
                        start: a,
                        end: b,
                        label: "imports".into(),
                    });
                }
            }
        }
    }
    items.extend(class_items);
    items.extend(callee_items);
    items.extend(near_items);
    items.extend(depth2);
    render(&mut src, items, budget, out)
}

fn whole_files(src: &mut Src, files: &[String], budget: usize, mut out: Chosen) -> Chosen {
    if files.is_empty() {
        out.notes
            .push("no targeted file found in the source; none is shown".into());
        return out;
    }
    out.notes.push(
        "no target function could be located statically; the targeted files are shown from their first line".into(),
    );
    let mut items = Vec::new();
    for f in files {
        if let Some((_, lines)) = src.module(f) {
            items.push(Item {
                file: f.clone(),
                start: 1,
                end: lines.len().max(1),
                label: "whole file".into(),
            });
        }
    }
    render(src, items, budget, out)
}

fn line_cost(l: &str) -> usize {
    l.len() + 8
}

/// Line ranges of one file, `(first, last)` each, inclusive.
type Ranges = Vec<(usize, usize)>;

pub(crate) fn render(src: &mut Src, items: Vec<Item>, budget: usize, mut out: Chosen) -> Chosen {
    let mut remaining = budget;
    // file → (ranges, labels), files in order of first appearance.
    let mut order: Vec<String> = Vec::new();
    let mut chosen: BTreeMap<String, (Ranges, Vec<String>)> = BTreeMap::new();
    let mut left_out = Vec::new();
    for it in items {
        let Some((_, lines)) = src.module(&it.file) else {
            out.notes
                .push(format!("source file {} could not be read", it.file));
            continue;
        };
        let n = lines.len();
        let (a, b) = (it.start.max(1), it.end.min(n));
        if a > b {
            continue;
        }
        let entry = chosen.entry(it.file.clone()).or_default();
        // Lines not already chosen cost; chosen ones are free.
        let new: Vec<usize> = (a..=b)
            .filter(|l| !entry.0.iter().any(|(x, y)| x <= l && l <= y))
            .collect();
        let cost: usize = new.iter().map(|l| line_cost(&lines[l - 1])).sum::<usize>() + 80;
        let mut end = b;
        if cost > remaining {
            // Cut: keep the lines from the start that fit.
            let mut acc = 80;
            let mut last = None;
            for l in a..=b {
                acc += line_cost(&lines[l - 1]);
                if acc > remaining {
                    break;
                }
                last = Some(l);
            }
            match last {
                Some(l) if l >= a + 5 || l == b => {
                    out.notes.push(format!(
                        "{} in {} cut for the context budget: lines {a}-{l} of {a}-{b} shown",
                        it.label, it.file
                    ));
                    end = l;
                }
                _ => {
                    left_out.push(format!("{} ({}:{a}-{b})", it.label, it.file));
                    if entry.0.is_empty() {
                        chosen.remove(&it.file);
                    }
                    continue;
                }
            }
        }
        let entry = chosen.entry(it.file.clone()).or_default();
        remaining = remaining.saturating_sub(
            (a..=end)
                .filter(|l| !entry.0.iter().any(|(x, y)| x <= l && l <= y))
                .map(|l| line_cost(&lines[l - 1]))
                .sum::<usize>()
                + 80,
        );
        entry.0.push((a, end));
        if !entry.1.contains(&it.label) {
            entry.1.push(it.label.clone());
        }
        if !order.contains(&it.file) {
            order.push(it.file.clone());
        }
    }
    if !left_out.is_empty() {
        out.notes.push(format!(
            "{} definition(s) left out for the context budget: {}",
            left_out.len(),
            left_out.join(", ")
        ));
    }
    for f in &order {
        let Some((mut ranges, labels)) = chosen.remove(f) else {
            continue;
        };
        let Some((_, lines)) = src.module(f) else {
            continue;
        };
        ranges.sort();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (a, b) in ranges {
            match merged.last_mut() {
                Some((_, y)) if a <= *y + 2 => *y = (*y).max(b),
                _ => merged.push((a, b)),
            }
        }
        let spans = merged
            .iter()
            .map(|(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.files.push(format!("{f}:{spans}"));
        let lang = if f.ends_with(".java") {
            "java"
        } else {
            "python"
        };
        out.text.push_str(&format!(
            "\n### {f} (lines {spans}): {}\n```{lang}\n",
            labels.join("; ")
        ));
        for (k, (a, b)) in merged.iter().enumerate() {
            if k > 0 || *a > 1 {
                out.text.push_str("     ⋮\n");
            }
            for l in *a..=*b {
                out.text.push_str(&format!("{l:>5}  {}\n", lines[l - 1]));
            }
        }
        if merged.last().is_some_and(|(_, b)| *b < lines.len()) {
            out.text.push_str("     ⋮\n");
        }
        out.text.push_str("```\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::resolve_call;

    /// A method looked up through bases that cycle (`class A(B)` where `B` derives from `A`)
    /// recursed until the stack overflowed: the process aborted.
    #[test]
    fn a_method_lookup_through_cyclic_bases_ends() {
        let tmp = tempfile::tempdir().unwrap();
        let w = |f: &str, s: &str| std::fs::write(tmp.path().join(f), s).unwrap();
        w(
            "a.py",
            "from b import B\n\nclass A(B):\n    def f(self):\n        return self.m()\n",
        );
        w("b.py", "from a import A\n\nclass B(A):\n    pass\n");
        w(
            "c.py",
            "class C(D):\n    def f(self):\n        return self.m()\n\nclass D(C):\n    pass\n",
        );
        assert_eq!(resolve_call(tmp.path(), "a.py", "A.f", "self.m"), None);
        assert_eq!(resolve_call(tmp.path(), "c.py", "C.f", "self.m"), None);
        // What the walk is for still works: a method found two classes up.
        w(
            "d.py",
            "class E:\n    def m(self):\n        pass\n\nclass F(E):\n    pass\n\n\
             class G(F):\n    def f(self):\n        return self.m()\n",
        );
        assert_eq!(
            resolve_call(tmp.path(), "d.py", "G.f", "self.m"),
            Some(("d.py".into(), "E.m".into()))
        );
    }
}
