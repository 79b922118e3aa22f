//! A static read of Python source, enough to choose a prompt's context around a target: where
//! each `def`/`class` starts and ends, what a function calls, what a module imports and which
//! module-level names it assigns. Nothing is run and nothing is imported.
//!
//! The reader works on *logical lines* (physical lines joined inside brackets, after a
//! backslash and inside triple-quoted strings), so a string or a multi-line call never opens a
//! block. A block ends at the first logical line indented no deeper than its header. Comments
//! and string contents never count as code (`f(x)` in a docstring is no call).
//!
//! Limits, on purpose: calls are resolved by name (`f`, `self.m`, `cls.m`, `Class.m`,
//! `module.f`, `Class(...)` → `Class.__init__`), never by type inference; a name bound twice in
//! one scope resolves to its first definition.

use std::collections::BTreeMap;

/// A `def` or `class`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    /// `Add.flatten`, `outer.<locals>.inner`, `f`.
    pub qualname: String,
    pub is_class: bool,
    /// First line of the definition (its first decorator), 1-based.
    pub start: usize,
    /// The `def`/`class` line.
    pub def_line: usize,
    /// Last line of its block (inclusive).
    pub end: usize,
    /// Base-class expressions (classes only), e.g. `["Expr", "AssocOp"]`.
    pub bases: Vec<String>,
}

/// `import a.b as c` → `{local: "c", module: "a.b", name: None}`;
/// `from ..x import y as z` → `{local: "z", module: "x", name: Some("y"), level: 2}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub local: String,
    pub module: String,
    pub name: Option<String>,
    /// Leading dots of a relative import.
    pub level: usize,
    pub line: usize,
}

/// One logical line: its first physical line, last physical line, indentation and code with
/// strings blanked (`"..."` → `""`) and comments removed.
#[derive(Debug, Clone)]
struct Logical {
    first: usize,
    last: usize,
    indent: usize,
    code: String,
}

/// A parsed module.
#[derive(Debug, Clone, Default)]
pub struct Module {
    pub defs: Vec<Def>,
    /// Imports anywhere at module level (not inside functions).
    pub imports: Vec<Import>,
    /// Module-level assignments: name → (first line, last line).
    pub assigns: BTreeMap<String, (usize, usize)>,
    logical: Vec<Logical>,
}

const KEYWORDS: &[&str] = &[
    "if", "elif", "while", "for", "return", "and", "or", "not", "in", "is", "def", "class",
    "lambda", "with", "assert", "yield", "await", "except", "raise", "del", "global", "nonlocal",
    "import", "from", "as", "pass", "else", "try", "finally", "async", "break", "continue",
    "match", "case", "print",
];

/// Split source into logical lines, blanking strings and dropping comments.
/// `(first line, last line, code)` of every logical line of `text` (1-based physical lines;
/// strings and comments blanked in `code`): a statement, or a compound statement's header.
pub fn logical_spans(text: &str) -> Vec<(usize, usize, String)> {
    logical_lines(text)
        .into_iter()
        .map(|l| (l.first, l.last, l.code))
        .collect()
}

fn logical_lines(text: &str) -> Vec<Logical> {
    let mut out = Vec::new();
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;
    // Current logical line.
    let mut code = String::new();
    let mut first = 0usize;
    let mut indent = 0usize;
    let mut depth = 0i32;
    let mut at_start = true;
    let mut continued = false;
    while i < b.len() {
        let c = b[i];
        if at_start {
            // Measure indentation of a fresh logical line.
            let mut w = 0;
            let mut j = i;
            while j < b.len() && (b[j] == ' ' || b[j] == '\t') {
                w += if b[j] == '\t' { 8 - w % 8 } else { 1 };
                j += 1;
            }
            if j >= b.len() {
                break;
            }
            if b[j] == '\n' || b[j] == '#' || b[j] == '\r' {
                // Blank or comment-only line.
                while j < b.len() && b[j] != '\n' {
                    j += 1;
                }
                i = j + 1;
                line += 1;
                continue;
            }
            indent = w;
            first = line;
            at_start = false;
            i = j;
            continue;
        }
        match c {
            '#' => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            '\\' if b.get(i + 1) == Some(&'\n') => {
                continued = true;
                i += 2;
                line += 1;
                code.push(' ');
            }
            '\n' => {
                line += 1;
                i += 1;
                if depth > 0 || continued {
                    continued = false;
                    code.push(' ');
                    continue;
                }
                out.push(Logical {
                    first,
                    last: line - 1,
                    indent,
                    code: std::mem::take(&mut code),
                });
                at_start = true;
            }
            '"' | '\'' => {
                // A string, maybe with a prefix already in `code` (r, b, f, u).
                let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
                let q = if triple { 3 } else { 1 };
                let raw = code
                    .chars()
                    .rev()
                    .take_while(|x| x.is_ascii_alphabetic())
                    .any(|x| x == 'r' || x == 'R');
                i += q;
                loop {
                    if i >= b.len() {
                        break;
                    }
                    if b[i] == '\\' && !raw {
                        if b.get(i + 1) == Some(&'\n') {
                            line += 1;
                        }
                        i += 2;
                        continue;
                    }
                    if b[i] == '\\' && raw {
                        i += 2.min(b.len() - i);
                        continue;
                    }
                    if b[i] == '\n' {
                        if !triple {
                            break; // unterminated: let the newline end the line
                        }
                        line += 1;
                    }
                    if b[i] == c
                        && (!triple || (b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c)))
                    {
                        i += q;
                        break;
                    }
                    i += 1;
                }
                code.push_str("\"\"");
            }
            '(' | '[' | '{' => {
                depth += 1;
                code.push(c);
                i += 1;
            }
            ')' | ']' | '}' => {
                depth = (depth - 1).max(0);
                code.push(c);
                i += 1;
            }
            '\r' => i += 1,
            _ => {
                code.push(c);
                i += 1;
            }
        }
    }
    if !at_start && !code.trim().is_empty() {
        out.push(Logical {
            first,
            last: line,
            indent,
            code,
        });
    }
    out
}

fn ident_at(s: &str) -> Option<&str> {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let id = &s[..end];
    (!id.is_empty() && !id.starts_with(|c: char| c.is_ascii_digit())).then_some(id)
}

/// `def NAME` / `async def NAME` / `class NAME` at the start of `code`.
fn header(code: &str) -> Option<(bool, &str, &str)> {
    let t = code.trim_start();
    let t = t.strip_prefix("async ").map(str::trim_start).unwrap_or(t);
    let (is_class, rest) = if let Some(r) = t.strip_prefix("def ") {
        (false, r)
    } else if let Some(r) = t.strip_prefix("class ") {
        (true, r)
    } else {
        return None;
    };
    let rest = rest.trim_start();
    let name = ident_at(rest)?;
    Some((is_class, name, &rest[name.len()..]))
}

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn parse_import(code: &str, line: usize, out: &mut Vec<Import>) {
    let t = code.trim();
    if let Some(rest) = t.strip_prefix("import ") {
        for part in split_top(rest) {
            let (module, local) = match part.split_once(" as ") {
                Some((m, l)) => (m.trim().to_string(), l.trim().to_string()),
                // `import a.b` binds `a`.
                None => (
                    part.clone(),
                    part.split('.').next().unwrap_or("").to_string(),
                ),
            };
            out.push(Import {
                local,
                module,
                name: None,
                level: 0,
                line,
            });
        }
    } else if let Some(rest) = t.strip_prefix("from ") {
        let Some((m, names)) = rest.split_once(" import ") else {
            return;
        };
        let m = m.trim();
        let level = m.chars().take_while(|c| *c == '.').count();
        let module = m[level..].to_string();
        let names = names.trim().trim_start_matches('(').trim_end_matches(')');
        for part in split_top(names) {
            let (name, local) = match part.split_once(" as ") {
                Some((n, l)) => (n.trim().to_string(), l.trim().to_string()),
                None => (part.clone(), part.clone()),
            };
            if name == "*" {
                continue;
            }
            out.push(Import {
                local,
                module: module.clone(),
                name: Some(name),
                level,
                line,
            });
        }
    }
}

impl Module {
    /// Read a module's source.
    pub fn parse(text: &str) -> Module {
        let logical = logical_lines(text);
        let mut m = Module::default();
        // (indent, qualname, is_class, index into defs)
        let mut stack: Vec<(usize, String, bool, usize)> = Vec::new();
        let mut decorators_from: Option<usize> = None;
        for l in &logical {
            while stack.last().is_some_and(|(ind, ..)| l.indent <= *ind) {
                stack.pop();
            }
            // Every open block extends to here.
            for (_, _, _, idx) in &stack {
                m.defs[*idx].end = l.last;
            }
            let code = l.code.trim_start();
            if code.starts_with('@') {
                decorators_from.get_or_insert(l.first);
                continue;
            }
            let start = decorators_from.take().unwrap_or(l.first);
            if let Some((is_class, name, rest)) = header(code) {
                let qual = match stack.last() {
                    None => name.to_string(),
                    Some((_, q, true, _)) => format!("{q}.{name}"),
                    Some((_, q, false, _)) => format!("{q}.<locals>.{name}"),
                };
                let bases = if is_class {
                    rest.trim_start()
                        .strip_prefix('(')
                        .and_then(|r| r.rsplit_once(')'))
                        .map(|(inner, _)| {
                            split_top(inner)
                                .into_iter()
                                .filter(|b| !b.contains('='))
                                .collect()
                        })
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                m.defs.push(Def {
                    qualname: qual.clone(),
                    is_class,
                    start,
                    def_line: l.first,
                    end: l.last,
                    bases,
                });
                // A one-line body (`def f(): return 1`) closes at once.
                let after_colon = rest.rsplit_once(':').map(|(_, a)| a.trim()).unwrap_or("");
                if after_colon.is_empty() {
                    stack.push((l.indent, qual, is_class, m.defs.len() - 1));
                }
                continue;
            }
            if stack.is_empty() {
                if code.starts_with("import ") || code.starts_with("from ") {
                    parse_import(code, l.first, &mut m.imports);
                } else if let Some(name) = assigned_name(code) {
                    m.assigns
                        .entry(name.to_string())
                        .or_insert((l.first, l.last));
                }
            }
        }
        m.logical = logical;
        m
    }

    /// Every definition whose qualname is `qual` or ends with `.qual` at a component boundary
    /// (`flatten` finds `Add.flatten` and `Mul.flatten`; `Add.flatten` finds only the first).
    pub fn find(&self, qual: &str) -> Vec<&Def> {
        let q = qual.trim().trim_end_matches("()");
        let exact: Vec<&Def> = self.defs.iter().filter(|d| d.qualname == q).collect();
        if !exact.is_empty() {
            return exact;
        }
        self.defs
            .iter()
            .filter(|d| d.qualname.strip_suffix(q).is_some_and(|h| h.ends_with('.')))
            .collect()
    }

    /// The innermost definition enclosing `line`.
    pub fn enclosing(&self, line: usize) -> Option<&Def> {
        self.defs
            .iter()
            .filter(|d| d.start <= line && line <= d.end)
            .min_by_key(|d| d.end - d.start)
    }

    /// Names called inside `def` (`f`, `self.m`, `a.b.c`), in textual order, without repeats.
    /// Calls inside nested definitions count (they are part of its span).
    pub fn calls_in(&self, def: &Def) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in self
            .logical
            .iter()
            .filter(|l| l.first > def.def_line && l.last <= def.end)
        {
            for n in calls_in_code(&l.code) {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        // Default values and decorators are evaluated outside; only the header's own line
        // holds nothing called by the function itself.
        out
    }

    /// The last physical line of the logical line that starts at `line` (a parenthesized
    /// import, a call spanning lines); `line` itself when none starts there.
    pub fn logical_end(&self, line: usize) -> usize {
        self.logical
            .iter()
            .find(|l| l.first == line)
            .map_or(line, |l| l.last)
    }

    /// The parameter names of a function (`def f(self, a: int = 1, *args, **kw)` → `self`, `a`,
    /// `args`, `kw`), read from its header; a test's are the fixtures pytest passes it.
    pub fn params(&self, def: &Def) -> Vec<String> {
        let Some(l) = self.logical.iter().find(|l| l.first == def.def_line) else {
            return Vec::new();
        };
        let Some((_, _, rest)) = header(&l.code) else {
            return Vec::new();
        };
        let Some(inner) = rest
            .trim_start()
            .strip_prefix('(')
            .and_then(|r| r.rsplit_once(')'))
            .map(|(inner, _)| inner)
        else {
            return Vec::new();
        };
        split_top(inner)
            .iter()
            .filter_map(|p| ident_at(p.trim_start_matches('*').trim_start()))
            .map(String::from)
            .collect()
    }

    /// The loops of `def`'s own body (not of definitions nested in it): `(header, last line)`
    /// of each `for`/`async for`/`while` statement, its header's first line and the last line
    /// of its block (its `else:` included), in textual order.
    pub fn loops_in(&self, def: &Def) -> Vec<(usize, usize)> {
        let own = |line: usize| {
            self.enclosing(line)
                .is_some_and(|d| d.def_line == def.def_line && d.qualname == def.qualname)
        };
        let mut out = Vec::new();
        for (i, l) in self.logical.iter().enumerate() {
            if l.first <= def.def_line || l.last > def.end || !own(l.first) {
                continue;
            }
            let code = l.code.trim_start();
            let code = code.strip_prefix("async ").unwrap_or(code).trim_start();
            let is_loop = ["for", "while"].iter().any(|kw| {
                code.strip_prefix(kw)
                    .and_then(|r| r.chars().next())
                    .is_some_and(|c| !(c.is_alphanumeric() || c == '_'))
            });
            if !is_loop {
                continue;
            }
            // The block runs to the last line before the next logical line indented no deeper
            // (an `else:` at the loop's own indentation belongs to it).
            let mut end = l.last;
            for next in &self.logical[i + 1..] {
                let t = next.code.trim_start();
                let own_else = next.indent == l.indent
                    && t.strip_prefix("else")
                        .is_some_and(|r| r.trim_start().starts_with(':'));
                if (next.indent <= l.indent && !own_else) || next.last > def.end {
                    break;
                }
                end = next.last;
            }
            out.push((l.first, end));
        }
        out
    }

    /// Does the identifier `name` occur as code (not as an attribute after `.`, not in a string
    /// or comment) anywhere in `def`, its header (parameters) included?
    pub fn mentions(&self, def: &Def, name: &str) -> bool {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        self.logical
            .iter()
            .filter(|l| l.first >= def.def_line && l.last <= def.end)
            .any(|l| {
                l.code.match_indices(name).any(|(at, _)| {
                    let before = l.code[..at].chars().next_back();
                    let after = l.code[at + name.len()..].chars().next();
                    !before.is_some_and(|c| word(c) || c == '.') && !after.is_some_and(word)
                })
            })
    }

    /// Identifiers read inside `def` (for module-level constants it uses).
    pub fn names_in(&self, def: &Def) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in self
            .logical
            .iter()
            .filter(|l| l.first >= def.def_line && l.last <= def.end)
        {
            let cs: Vec<char> = l.code.chars().collect();
            let mut i = 0;
            while i < cs.len() {
                if (cs[i].is_alphabetic() || cs[i] == '_')
                    && (i == 0
                        || !(cs[i - 1].is_alphanumeric() || cs[i - 1] == '_' || cs[i - 1] == '.'))
                {
                    let s = i;
                    while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                        i += 1;
                    }
                    let w: String = cs[s..i].iter().collect();
                    if !KEYWORDS.contains(&w.as_str()) && !out.contains(&w) {
                        out.push(w);
                    }
                    continue;
                }
                i += 1;
            }
        }
        out
    }
}

/// `NAME = ...`, `NAME: T = ...`, `NAME += ...` at the start of a statement.
fn assigned_name(code: &str) -> Option<&str> {
    let name = ident_at(code)?;
    if KEYWORDS.contains(&name) {
        return None;
    }
    let rest = code[name.len()..].trim_start();
    let is_assign = (rest.starts_with('=') && !rest.starts_with("=="))
        || rest.starts_with(':')
        || ["+=", "-=", "|=", "*="]
            .iter()
            .any(|op| rest.starts_with(op));
    is_assign.then_some(name)
}

/// The code of each logical line of `text`, strings blanked and comments dropped.
pub fn code_of(text: &str) -> Vec<String> {
    logical_lines(text).into_iter().map(|l| l.code).collect()
}

/// The last line of class `c`'s header as prompts show it: the line before its first member
/// definition, at most 40 lines past `class …:` (without its module: the class up to that cap).
pub fn class_header_end(module: Option<&Module>, c: &Def) -> usize {
    let first_member = module
        .and_then(|m| {
            m.defs
                .iter()
                .filter(|x| x.start > c.def_line && x.end <= c.end)
                .map(|x| x.start)
                .min()
        })
        .unwrap_or(c.end + 1);
    (first_member - 1).min(c.def_line + 40).max(c.def_line)
}

/// `(name)` of every call in one logical line's code (strings already blanked).
pub fn calls_in_code(code: &str) -> Vec<String> {
    let cs: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if (c.is_alphabetic() || c == '_')
            && (i == 0 || !(cs[i - 1].is_alphanumeric() || cs[i - 1] == '_'))
        {
            // `x.f(` after `)` or `]` (`a().f(`) is a call of an unknown object: skip it.
            let after_expr = i > 0 && cs[i - 1] == '.';
            let s = i;
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_' || cs[i] == '.') {
                i += 1;
            }
            let w: String = cs[s..i].iter().collect();
            let mut k = i;
            while k < cs.len() && cs[k] == ' ' {
                k += 1;
            }
            let head = w.split('.').next().unwrap_or("");
            if !after_expr
                && k < cs.len()
                && cs[k] == '('
                && !KEYWORDS.contains(&head)
                && !w.ends_with('.')
                && !defines(&cs[..s])
            {
                out.push(w);
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Whether the code before a name (`before`) ends with `def` or `class`: the name is defined
/// there, not called.
fn defines(before: &[char]) -> bool {
    let before: String = before.iter().collect();
    let before = before.trim_end();
    before.ends_with("def") || before.ends_with("class")
}

/// The file of a dotted module among `files` (source-relative paths): `a/b.py` or
/// `a/b/__init__.py`, matched at any path ending (the source root may sit above the package).
pub fn module_file(module: &str, files: &[String]) -> Option<String> {
    if module.is_empty() {
        return None;
    }
    let p = module.replace('.', "/");
    let cands = [format!("{p}.py"), format!("{p}/__init__.py")];
    for c in &cands {
        if let Some(f) = files
            .iter()
            .filter(|f| *f == c || f.ends_with(&format!("/{c}")))
            .min_by_key(|f| f.len())
        {
            return Some(f.clone());
        }
    }
    None
}

/// The dotted package of a file (`sympy/core/add.py` → `sympy.core`; `pkg/__init__.py` → `pkg`).
pub fn package_of(file: &str) -> String {
    let parts: Vec<&str> = file.split('/').collect();
    parts[..parts.len().saturating_sub(1)].join(".")
}

/// The absolute dotted module an import refers to, from the importing file.
pub fn import_target(imp: &Import, file: &str) -> String {
    if imp.level == 0 {
        return imp.module.clone();
    }
    let pkg = package_of(file);
    let mut parts: Vec<&str> = if pkg.is_empty() {
        Vec::new()
    } else {
        pkg.split('.').collect()
    };
    for _ in 1..imp.level {
        parts.pop();
    }
    if !imp.module.is_empty() {
        parts.push(&imp.module);
    }
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"import os
from .mul import Mul, _keep as keep
from ..core import numbers

LIMIT = 10
text = """
def not_a_function(x):
    return f(x)
"""

class Add(Expr, AssocOp, metaclass=M):
    """Sum."""

    @classmethod
    @cacheit
    def flatten(cls,
                seq):
        terms = {}  # a comment with g(y)
        for o in seq:
            terms[o] = cls._coeff(o, LIMIT)
        s = "h(z)"
        return sorted(terms), Mul(keep(s))

    def _coeff(self, o, n): return helper(o)

def helper(x):
    def inner(y):
        return os.path.join(y)
    return inner(x) + numbers.one(
        x,
    )
"#;

    #[test]
    fn spans_and_qualnames() {
        let m = Module::parse(SRC);
        let d = |q: &str| m.find(q)[0].clone();
        let add = d("Add");
        assert_eq!((add.def_line, add.end), (11, 24));
        assert_eq!(add.bases, vec!["Expr", "AssocOp"]);
        let f = d("Add.flatten");
        assert_eq!((f.start, f.def_line, f.end), (14, 16, 22));
        assert_eq!(d("_coeff").qualname, "Add._coeff");
        assert_eq!((d("_coeff").def_line, d("_coeff").end), (24, 24));
        assert_eq!(d("helper.<locals>.inner").def_line, 27);
        assert_eq!(d("helper").end, 31);
        assert!(m.find("not_a_function").is_empty(), "inside a string");
        assert_eq!(m.assigns.get("LIMIT"), Some(&(5, 5)));
        assert_eq!(m.assigns.get("text"), Some(&(6, 9)));
        assert_eq!(m.calls_in(&f), vec!["cls._coeff", "sorted", "Mul", "keep"]);
        assert_eq!(
            m.calls_in(&d("helper")),
            vec!["os.path.join", "inner", "numbers.one"]
        );
        assert!(m.names_in(&f).contains(&"LIMIT".to_string()));
        let imp: Vec<(&str, &str, Option<&str>, usize)> = m
            .imports
            .iter()
            .map(|i| {
                (
                    i.local.as_str(),
                    i.module.as_str(),
                    i.name.as_deref(),
                    i.level,
                )
            })
            .collect();
        assert_eq!(
            imp,
            vec![
                ("os", "os", None, 0),
                ("Mul", "mul", Some("Mul"), 1),
                ("keep", "mul", Some("_keep"), 1),
                ("numbers", "core", Some("numbers"), 2)
            ]
        );
        assert_eq!(
            import_target(&m.imports[1], "sympy/core/add.py"),
            "sympy.core.mul"
        );
        assert_eq!(
            import_target(&m.imports[3], "sympy/core/add.py"),
            "sympy.core"
        );
        assert_eq!(m.enclosing(20).unwrap().qualname, "Add.flatten");
    }

    #[test]
    fn module_files() {
        let files: Vec<String> = [
            "sympy/core/mul.py",
            "sympy/core/__init__.py",
            "x/sympy/core/mul.py",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            module_file("sympy.core.mul", &files).as_deref(),
            Some("sympy/core/mul.py")
        );
        assert_eq!(
            module_file("sympy.core", &files).as_deref(),
            Some("sympy/core/__init__.py")
        );
        assert_eq!(module_file("sympy.nope", &files), None);
    }

    #[test]
    fn loops_of_a_function_and_the_names_it_mentions() {
        let src = "def f(xs, n):\n    total = 0\n    for x in xs:\n        while n:\n            n -= 1\n    else:\n        pass\n    def g():\n        for y in (1,):\n            pass\n    s = \"for z in q\"  # while w\n    return total.real\n";
        let m = Module::parse(src);
        let f = &m.find("f")[0];
        assert_eq!(m.loops_in(f), vec![(3, 7), (4, 5)]);
        let g = &m.find("f.<locals>.g")[0];
        assert_eq!(m.loops_in(g), vec![(9, 10)]);
        assert!(m.mentions(f, "n") && m.mentions(f, "total") && m.mentions(f, "xs"));
        assert!(!m.mentions(f, "z") && !m.mentions(f, "w") && !m.mentions(f, "real"));
    }
}
