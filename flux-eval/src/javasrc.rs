//! The Java code a prompt shows for an instance of a JVM repository (`flux-java-v1`): the
//! JUnit test methods the question names and the target method with what it calls, read from
//! the repository's source tree (the Debian source package the image was built from) with the
//! files' own line numbers.
//!
//! Questions name tests by id (`org/x/FooTest.java::FooTest::testBar`) and targets by Java's
//! qualified names (`Foo.bar`, the extractor's `file` relative to the package root:
//! `org/x/Foo.java`, found by its ending under `src/main/java/`). A light scanner reads the
//! files: comments, string, text-block and char literals blanked, then each `{` that opens a
//! method (`name(…) [throws …] {`, not after `new`, not a keyword) or a class
//! (`class|interface|enum|record Name … {`) is matched with its `}`. Shown, in this order while
//! the budget lasts: each named test method (with its annotations), its class's header, fields
//! and set-up methods (`@Before…`, `setUp`), the test class's methods it calls; then each target
//! method (every overload of the name in its class), its class's header, and the methods it
//! calls directly: its class's own and `Type.m(…)` of a class whose file is in the tree. What
//! is not found or does not fit is said in the notes.

use std::path::Path;

use crate::context::{render, Chosen, Item, Src};
use crate::prompt::{list_files_ending, resolve};
use flux_score::Instance;

/// Is this an instance of a JVM repository (its tests are `.java` files, its image a JDK's)?
pub fn is_java(inst: &Instance) -> bool {
    inst.test_image_files.iter().any(|f| f.ends_with(".java"))
        || inst.test_files.iter().any(|f| f.ends_with(".java"))
        || inst.image.as_deref().is_some_and(|i| i.contains("-jdk"))
}

/// A method or class declaration of a file, lines 1-based and inclusive.
#[derive(Debug, Clone, PartialEq)]
struct Decl {
    /// `Outer.Inner.method` (methods) or `Outer.Inner` (classes).
    qualname: String,
    name: String,
    is_class: bool,
    /// First line shown: the annotations above the declaration included.
    start: usize,
    /// The line of the name.
    line: usize,
    end: usize,
    /// Byte range of the body, braces included (in the blanked text).
    body: (usize, usize),
}

/// `text` with comments and literals blanked to spaces (same offsets; newlines kept).
fn blank(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let clear = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            i + 2 + find(&rest[2..], b"*/").map_or(rest.len() - 2, |p| p + 2)
        } else if rest.starts_with(b"\"\"\"") {
            i + 3 + find(&rest[3..], b"\"\"\"").map_or(rest.len() - 3, |p| p + 3)
        } else if rest[0] == b'"' || rest[0] == b'\'' {
            let q = rest[0];
            let mut j = 1;
            while j < rest.len() && rest[j] != q && rest[j] != b'\n' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            i + (j + 1).min(rest.len())
        } else {
            i += 1;
            continue;
        };
        clear(&mut out, i, end);
        i = end.max(i + 1);
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// The identifier ending just before `at` (whitespace skipped), with its start.
fn ident_before(code: &[u8], at: usize) -> Option<(usize, String)> {
    let mut e = at;
    while e > 0 && code[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    let mut s = e;
    while s > 0 && is_ident(code[s - 1]) {
        s -= 1;
    }
    (s < e).then(|| (s, String::from_utf8_lossy(&code[s..e]).into_owned()))
}

const NOT_METHODS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "synchronized",
    "try",
    "return",
    "new",
    "else",
    "do",
    "throw",
    "case",
    "assert",
    "super",
    "this",
];

/// What the `{` at `open` opens: a method `(name, false)`, a class `(name, true)`, or neither.
fn opener(code: &[u8], open: usize) -> Option<(usize, String, bool)> {
    // The statement before the brace, back to the previous `;`, `{` or `}`.
    let from = code[..open]
        .iter()
        .rposition(|&c| c == b';' || c == b'{' || c == b'}')
        .map_or(0, |p| p + 1);
    // Words outside parentheses (annotation arguments), not after a `.` (`Foo.class`).
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut i = from;
    while i < open {
        let c = code[i];
        if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth = depth.saturating_sub(1);
        } else if is_ident(c) {
            let s = i;
            while i < open && is_ident(code[i]) {
                i += 1;
            }
            let dotted = code[from..s]
                .iter()
                .rev()
                .find(|c| !c.is_ascii_whitespace())
                == Some(&b'.');
            if depth == 0 && !dotted {
                words.push((s, String::from_utf8_lossy(&code[s..i]).into_owned()));
            }
            continue;
        }
        i += 1;
    }
    for kw in ["class", "interface", "enum", "record"] {
        if let Some(k) = words.iter().position(|(_, w)| w == kw) {
            if let Some((at, name)) = words.get(k + 1) {
                return Some((*at, name.clone(), true));
            }
        }
    }
    // `name(…) [throws A, B] {`: the `)` before the brace, past a throws clause.
    let mut e = open;
    while e > from && code[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    if e == from {
        return None;
    }
    if code[e - 1] != b')' {
        let close = code[from..e].iter().rposition(|&c| c == b')')? + from;
        let between = String::from_utf8_lossy(&code[close + 1..e]).into_owned();
        if !between.trim_start().starts_with("throws ") {
            return None;
        }
        e = close + 1;
    }
    // Match the `)` back to its `(`.
    let mut depth = 0usize;
    let mut p = e;
    while p > from {
        p -= 1;
        match code[p] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    let (s, name) = ident_before(code, p)?;
    if NOT_METHODS.contains(&name.as_str()) || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if ident_before(code, s).is_some_and(|(_, w)| w == "new") {
        return None; // an anonymous class
    }
    Some((s, name, false))
}

/// The declarations of a file's text.
fn declarations(text: &str) -> Vec<Decl> {
    let code = blank(text);
    let line_of = |at: usize| 1 + code[..at].iter().filter(|&&c| c == b'\n').count();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // Open braces: (offset, index into out of the declaration it opens).
    let mut stack: Vec<(usize, Option<usize>)> = Vec::new();
    for (i, &c) in code.iter().enumerate() {
        match c {
            b'{' => {
                let decl = opener(&code, i).map(|(at, name, is_class)| {
                    let outer: Vec<&str> = stack
                        .iter()
                        .filter_map(|(_, d)| *d)
                        .filter(|&d| out.get(d).is_some_and(|x: &Decl| x.is_class))
                        .map(|d| out[d].name.as_str())
                        .collect();
                    let mut qualname = outer.join(".");
                    if !qualname.is_empty() {
                        qualname.push('.');
                    }
                    qualname.push_str(&name);
                    let line = line_of(at);
                    let mut start = line;
                    while start > 1 && lines[start - 2].trim_start().starts_with('@') {
                        start -= 1;
                    }
                    out.push(Decl {
                        qualname,
                        name,
                        is_class,
                        start,
                        line,
                        end: line,
                        body: (i, i),
                    });
                    out.len() - 1
                });
                stack.push((i, decl));
            }
            b'}' => {
                if let Some((_, Some(d))) = stack.pop() {
                    out[d].end = line_of(i);
                    out[d].body.1 = i + 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// A parsed file of the tree.
struct JavaFile {
    rel: String,
    text: String,
    decls: Vec<Decl>,
}

impl JavaFile {
    fn read(root: &Path, rel: &str) -> Option<JavaFile> {
        let text = String::from_utf8_lossy(&std::fs::read(root.join(rel)).ok()?).into_owned();
        let decls = declarations(&text);
        Some(JavaFile {
            rel: rel.to_string(),
            text,
            decls,
        })
    }

    /// Methods named by `qual` (`Class.m`, `Outer.Inner.m`, or `m`): the qualname ends with it;
    /// failing that, every method of the last name.
    fn methods(&self, qual: &str) -> Vec<&Decl> {
        let name = qual.rsplit('.').next().unwrap_or(qual);
        let ms = || self.decls.iter().filter(|d| !d.is_class && d.name == name);
        let exact: Vec<&Decl> = ms()
            .filter(|d| d.qualname == qual || d.qualname.ends_with(&format!(".{qual}")))
            .collect();
        if exact.is_empty() {
            ms().collect()
        } else {
            exact
        }
    }

    fn class_of(&self, m: &Decl) -> Option<&Decl> {
        let (class, _) = m.qualname.rsplit_once('.')?;
        self.decls
            .iter()
            .find(|d| d.is_class && d.qualname == class)
    }

    /// The class's header (annotations through its declaration line) and its fields: lines of
    /// its body outside every member with code on them.
    fn class_items(&self, class: &Decl, label: &str) -> Vec<Item> {
        let mut items = vec![self.item(class.start, class.line, &format!("class `{label}`"))];
        let members: Vec<(usize, usize)> = self
            .decls
            .iter()
            .filter(|d| d.start > class.line && d.end < class.end && d.qualname != class.qualname)
            .map(|d| (d.start, d.end))
            .collect();
        let lines: Vec<&str> = self.text.lines().collect();
        for l in class.line + 1..class.end {
            let t = lines.get(l - 1).map_or("", |s| s.trim());
            let code = !t.is_empty() && !t.starts_with("//") && !t.starts_with('*');
            let code = code && !t.starts_with("/*") && t != "}";
            if code && !members.iter().any(|&(a, b)| a <= l && l <= b) {
                items.push(self.item(l, l, &format!("fields of `{label}`")));
            }
        }
        items
    }

    fn item(&self, start: usize, end: usize, label: &str) -> Item {
        Item {
            file: self.rel.clone(),
            start,
            end,
            label: label.to_string(),
        }
    }

    /// The calls in a method's body: `(None, m)` for `m(…)`/`this.m(…)`, `(Some(T), m)` for
    /// `T.m(…)` with `T` capitalised (a class).
    fn calls(&self, m: &Decl) -> Vec<(Option<String>, String)> {
        let code = blank(&self.text);
        let body = &code[m.body.0..m.body.1.min(code.len())];
        let mut out: Vec<(Option<String>, String)> = Vec::new();
        for (p, _) in body.iter().enumerate().filter(|(_, &c)| c == b'(') {
            let Some((s, name)) = ident_before(body, p) else {
                continue;
            };
            if NOT_METHODS.contains(&name.as_str())
                || ident_before(body, s).is_some_and(|(_, w)| w == "new")
                || declares(body, p)
            {
                continue;
            }
            let dotted = s > 0 && body[s - 1] == b'.';
            let qualifier = if dotted {
                match ident_before(body, s - 1) {
                    Some((_, q)) => Some(q),
                    None => continue, // `f(x).m(…)`: a method of a value
                }
            } else {
                None
            };
            let call = match qualifier {
                None => (None, name),
                Some(q) if q == "this" => (None, name),
                Some(q) if q.starts_with(|c: char| c.is_ascii_uppercase()) => (Some(q), name),
                Some(_) => continue,
            };
            if !out.contains(&call) {
                out.push(call);
            }
        }
        out
    }
}

/// Is the `(` at `open` a declaration's parameter list (its `)` followed by `{` or `throws`)?
fn declares(code: &[u8], open: usize) -> bool {
    let mut depth = 0usize;
    for (i, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    let rest = String::from_utf8_lossy(&code[i + 1..]);
                    let rest = rest.trim_start();
                    return rest.starts_with('{') || rest.starts_with("throws ");
                }
            }
            _ => {}
        }
    }
    false
}

/// A test the question names: `file.java::Class::method`.
fn named_tests(inst: &Instance) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for span in inst.question.split('`').skip(1).step_by(2) {
        let id: String = span.split_whitespace().collect();
        let parts: Vec<&str> = id.split("::").collect();
        if let [file, class, method] = parts[..] {
            if file.ends_with(".java") {
                let t = (file.to_string(), class.to_string(), method.to_string());
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// The tests' code: each named test method, its class's header, fields and set-up methods, and
/// the test class's own methods it calls.
pub fn choose_tests(inst: &Instance, root: &Path, budget: usize) -> Chosen {
    let mut out = Chosen::default();
    let files = list_files_ending(root, ".java");
    let mut items = Vec::new();
    for (file, class, method) in named_tests(inst) {
        let Some(f) = resolve(&file, &files).and_then(|r| JavaFile::read(root, &r)) else {
            out.notes
                .push(format!("test file {file} not found in the source"));
            continue;
        };
        let found = f.methods(&format!("{class}.{method}"));
        if found.is_empty() {
            out.notes.push(format!(
                "test `{class}.{method}` not found in {} (inherited?)",
                f.rel
            ));
            continue;
        }
        for m in &found {
            items.push(f.item(m.start, m.end, &format!("test `{class}.{method}`")));
        }
        if let Some(c) = f.class_of(found[0]) {
            items.extend(f.class_items(c, &c.qualname));
            let setup = f.decls.iter().filter(|d| {
                !d.is_class
                    && d.qualname
                        .rsplit_once('.')
                        .is_some_and(|(k, _)| k == c.qualname)
                    && (d.name.starts_with("setUp")
                        || f.text
                            .lines()
                            .skip(d.start - 1)
                            .take(d.line - d.start)
                            .any(|l| {
                                let l = l.trim();
                                l.starts_with("@Before") || l.starts_with("@After")
                            }))
            });
            for d in setup {
                items.push(f.item(d.start, d.end, &format!("set-up `{}`", d.qualname)));
            }
        }
        for (qualifier, name) in f.calls(found[0]) {
            if qualifier.is_some() {
                continue;
            }
            for d in f.methods(&format!("{class}.{name}")) {
                if d.qualname.starts_with(&class) && !found.contains(&d) {
                    items.push(f.item(d.start, d.end, &format!("helper `{}`", d.qualname)));
                }
            }
        }
    }
    let mut src = Src::new(root);
    render(&mut src, items, budget, out)
}

/// The target method(s) and what they call directly.
pub fn choose_source(inst: &Instance, root: &Path, budget: usize) -> Chosen {
    let mut out = Chosen::default();
    let files = list_files_ending(root, ".java");
    let names = crate::context::target_names(inst);
    let mut items = Vec::new();
    let mut callees = Vec::new();
    for (name, file) in &names {
        let class = name.rsplit_once('.').map_or("", |(c, _)| c);
        let top = class.split('.').next().unwrap_or(class);
        let rel = file
            .as_deref()
            .and_then(|f| resolve(f, &files))
            .or_else(|| resolve(&format!("{top}.java"), &files));
        let Some(f) = rel.and_then(|r| JavaFile::read(root, &r)) else {
            out.notes.push(format!(
                "the file of `{name}` ({}) not found in the source",
                file.as_deref().unwrap_or("no file given")
            ));
            continue;
        };
        let found = f.methods(name);
        if found.is_empty() {
            out.notes
                .push(format!("target `{name}` not found in {}", f.rel));
            continue;
        }
        if found.len() > 1 {
            out.notes.push(format!(
                "`{name}` has {} overloads in {}; all are shown",
                found.len(),
                f.rel
            ));
        }
        for m in &found {
            items.push(f.item(m.start, m.end, &format!("`{}` (the target)", m.qualname)));
            out.targets.push(format!("{}:{}", f.rel, m.qualname));
        }
        if let Some(c) = f.class_of(found[0]) {
            items.push(f.item(c.start, c.line, &format!("class `{}`", c.qualname)));
        }
        for m in &found {
            for (qualifier, callee) in f.calls(m) {
                let (cf, qual) = match &qualifier {
                    None => (None, format!("{class}.{callee}")),
                    Some(t) => (
                        resolve(&format!("{t}.java"), &files)
                            .filter(|r| *r != f.rel)
                            .and_then(|r| JavaFile::read(root, &r)),
                        format!("{t}.{callee}"),
                    ),
                };
                let target = cf.as_ref().unwrap_or(&f);
                if qualifier.is_some() && cf.is_none() && qualifier.as_deref() != Some(top) {
                    continue;
                }
                for d in target.methods(&qual) {
                    if qual.ends_with(&format!(".{}", d.name))
                        && d.qualname.ends_with(&qual)
                        && !found.contains(&d)
                    {
                        callees.push(target.item(
                            d.start,
                            d.end,
                            &format!("callee `{}`", d.qualname),
                        ));
                    }
                }
            }
        }
    }
    items.extend(callees);
    let mut src = Src::new(root);
    render(&mut src, items, budget, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOO: &str = r#"package org.x;

/** Doc with a { brace and a method() call. */
public class Foo extends Base {
    private static final String S = "a { b";
    private int n;

    @Deprecated
    public Foo(int n) { this.n = n; }

    public int bar(String s) throws java.io.IOException, IllegalStateException {
        if (s == null) { return 0; }
        Runnable r = new Runnable() { public void run() { baz(); } };
        return baz() + Util.twice(n) + s.length() + Util.make().size();
    }

    @Test(expected = IllegalArgumentException.class)
    int bar(int k) { return k; }

    private int baz() {
        char c = '}';
        return 1;
    }

    static class Inner {
        void bar() {}
    }
}
"#;

    #[test]
    fn the_scanner_finds_methods_classes_and_their_ends_past_a_class_literal() {
        let d = declarations(FOO);
        let got: Vec<(String, bool, usize, usize, usize)> = d
            .iter()
            .map(|d| (d.qualname.clone(), d.is_class, d.start, d.line, d.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("Foo".into(), true, 4, 4, 28),
                ("Foo.Foo".into(), false, 8, 9, 9),
                ("Foo.bar".into(), false, 11, 11, 15),
                ("Foo.run".into(), false, 13, 13, 13),
                ("Foo.bar".into(), false, 17, 18, 18),
                ("Foo.baz".into(), false, 20, 20, 23),
                ("Foo.Inner".into(), true, 25, 25, 27),
                ("Foo.Inner.bar".into(), false, 26, 26, 26),
            ]
        );
        let f = JavaFile {
            rel: "Foo.java".into(),
            text: FOO.into(),
            decls: d,
        };
        assert_eq!(f.methods("Foo.bar").len(), 2, "both overloads, not Inner's");
        assert_eq!(f.methods("Inner.bar").len(), 1);
        let bar = f.methods("Foo.bar")[0].clone();
        assert_eq!(
            f.calls(&bar),
            vec![
                (None, "baz".to_string()),
                (Some("Util".to_string()), "twice".to_string()),
                (Some("Util".to_string()), "make".to_string()),
            ],
            "not s.length() nor .size() of a value"
        );
    }
}
