//! What their `parser.py` fixes: its module-level constants, read (never run).
//!
//! Their parser is the executable definition of an instance's answer, and its authors name
//! what it fixes at the top: `TARGET_FUNC = "flask.sansio.app.App.add_url_rule"`,
//! `OBSERVED_LINE = 650`, `OCCURRENCE = 19`, `VARIABLES = ("endpoint", "options")`. The
//! native mapping reads those first and the question's prose only where they say nothing
//! ([`crate::native`]). This module reads every module-level `NAME = <literal>` (or `NAME:
//! type = <literal>`) whose value is a Python literal: an integer, a string (any quoting, the
//! usual escapes), `True`/`False`/`None`, or a tuple, list, set or `frozenset(...)` of
//! literals. Anything else (a call, a comprehension, an expression) is left out, never
//! guessed at. It is a reader of third-party text: it never fails, it only finds less.
use std::collections::BTreeMap;

/// A Python literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Int(i64),
    Str(String),
    Bool(bool),
    None,
    Seq(Vec<Lit>),
}

impl Lit {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Lit::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Lit::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The strings of a sequence (or a one-string sequence of a string).
    pub fn strs(&self) -> Vec<&str> {
        match self {
            Lit::Str(s) => vec![s.as_str()],
            Lit::Seq(v) => v.iter().filter_map(Lit::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The integers of a sequence.
    pub fn ints(&self) -> Vec<i64> {
        match self {
            Lit::Int(n) => vec![*n],
            Lit::Seq(v) => v.iter().filter_map(Lit::as_int).collect(),
            _ => Vec::new(),
        }
    }
}

/// The module-level literal constants of a parser, by name (the last assignment wins).
#[derive(Clone, Debug, Default)]
pub struct ParserFacts {
    pub constants: BTreeMap<String, Lit>,
}

impl ParserFacts {
    /// Read `source` (a parser's text).
    pub fn read(source: &str) -> ParserFacts {
        let mut constants = BTreeMap::new();
        let bytes: Vec<char> = source.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            // At the start of a line: a module-level statement starts at column 0.
            let line_end = bytes[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(bytes.len(), |p| i + p);
            if let Some((name, at)) = assignment_head(&bytes[i..line_end]) {
                let mut p = Parser {
                    s: &bytes,
                    i: i + at,
                };
                if let Some(v) = p.value() {
                    p.skip_inline_space();
                    if p.at_statement_end() {
                        constants.insert(name, v);
                        // Continue after the value (it may span lines).
                        i = p.i;
                    }
                }
            }
            // Skip a triple-quoted string that starts on this line and is no assignment (a
            // docstring), so that its lines are not read as statements.
            i = skip_line(&bytes, i);
        }
        ParserFacts { constants }
    }

    /// The constants whose names satisfy `pred`, in name order.
    pub fn named(&self, pred: impl Fn(&str) -> bool) -> Vec<(&str, &Lit)> {
        self.constants
            .iter()
            .filter(|(k, _)| pred(k))
            .map(|(k, v)| (k.as_str(), v))
            .collect()
    }

    /// The first integer constant whose name is one of `names` (in their order).
    pub fn int(&self, names: &[&str]) -> Option<i64> {
        names
            .iter()
            .find_map(|n| self.constants.get(*n).and_then(Lit::as_int))
    }
}

/// `NAME = ` / `NAME: annotation = ` at column 0 of `line`: the name and where the value
/// starts (relative to the line).
fn assignment_head(line: &[char]) -> Option<(String, usize)> {
    let first = *line.first()?;
    if !(first.is_ascii_uppercase() || first == '_' || first.is_ascii_lowercase()) {
        return None;
    }
    let name_len = line
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
        .count();
    let name: String = line[..name_len].iter().collect();
    let mut j = name_len;
    while j < line.len() && line[j] == ' ' {
        j += 1;
    }
    if j < line.len() && line[j] == ':' {
        // An annotation: up to the `=` (not `==`).
        j += 1;
        while j < line.len() && line[j] != '=' {
            j += 1;
        }
    }
    if j >= line.len() || line[j] != '=' || line.get(j + 1) == Some(&'=') {
        return None;
    }
    j += 1;
    while j < line.len() && line[j] == ' ' {
        j += 1;
    }
    (j < line.len()).then_some((name, j))
}

/// The start of the line after the one at `i`, past any triple-quoted string opened on it.
fn skip_line(s: &[char], mut i: usize) -> usize {
    let mut quote: Option<[char; 3]> = None;
    while i < s.len() {
        let c = s[i];
        if let Some(q) = quote {
            if c == '\\' {
                i += 2;
                continue;
            }
            if s[i..].starts_with(&q) {
                quote = None;
                i += 3;
                continue;
            }
            i += 1;
            continue;
        }
        if c == '\n' {
            return i + 1;
        }
        if c == '#' {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '"' || c == '\'' {
            if s[i..].starts_with(&[c, c, c]) {
                quote = Some([c, c, c]);
                i += 3;
                continue;
            }
            // A one-line string.
            i += 1;
            while i < s.len() && s[i] != c && s[i] != '\n' {
                if s[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
        }
        i += 1;
    }
    s.len()
}

struct Parser<'s> {
    s: &'s [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn skip_inline_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
        if self.peek() == Some('#') {
            while !matches!(self.peek(), None | Some('\n')) {
                self.i += 1;
            }
        }
    }

    /// Whitespace, newlines and comments (inside brackets).
    fn skip_space(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\n' | '\r') => self.i += 1,
                Some('\\') if self.s.get(self.i + 1) == Some(&'\n') => self.i += 2,
                Some('#') => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.i += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn at_statement_end(&self) -> bool {
        matches!(self.peek(), None | Some('\n' | '\r' | ';'))
    }

    fn value(&mut self) -> Option<Lit> {
        let v = self.atom()?;
        // Adjacent string literals concatenate (`"a" "b"`), inside brackets across lines.
        if let Lit::Str(mut s) = v {
            loop {
                let save = self.i;
                self.skip_inline_space();
                match self.peek() {
                    Some('"' | '\'') => match self.atom() {
                        Some(Lit::Str(t)) => s.push_str(&t),
                        _ => {
                            self.i = save;
                            break;
                        }
                    },
                    _ => {
                        self.i = save;
                        break;
                    }
                }
            }
            return Some(Lit::Str(s));
        }
        Some(v)
    }

    fn atom(&mut self) -> Option<Lit> {
        let c = self.peek()?;
        match c {
            '(' | '[' | '{' => self.seq(c),
            '"' | '\'' => self.string(false),
            'r' | 'R' if matches!(self.s.get(self.i + 1), Some('"' | '\'')) => {
                self.i += 1;
                self.string(true)
            }
            '-' | '0'..='9' => self.int(),
            _ => {
                let word: String = self.s[self.i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                match word.as_str() {
                    "True" | "False" | "None" => {
                        self.i += word.len();
                        Some(match word.as_str() {
                            "True" => Lit::Bool(true),
                            "False" => Lit::Bool(false),
                            _ => Lit::None,
                        })
                    }
                    "frozenset" | "set" | "tuple" | "list" => {
                        self.i += word.len();
                        if self.peek() != Some('(') {
                            return None;
                        }
                        self.i += 1;
                        self.skip_space();
                        if self.peek() == Some(')') {
                            self.i += 1;
                            return Some(Lit::Seq(Vec::new()));
                        }
                        let inner = self.atom()?;
                        self.skip_space();
                        if self.peek() != Some(')') {
                            return None;
                        }
                        self.i += 1;
                        Some(inner)
                    }
                    _ => None,
                }
            }
        }
    }

    fn seq(&mut self, open: char) -> Option<Lit> {
        let close = match open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        };
        self.i += 1;
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            self.skip_space();
            if self.peek() == Some(close) {
                self.i += 1;
                // `(x)` is x, not a tuple.
                if open == '(' && items.len() == 1 && !comma {
                    return items.pop();
                }
                return Some(Lit::Seq(items));
            }
            let mut v = self.value()?;
            self.skip_space();
            // Adjacent strings across lines inside brackets concatenate.
            while let (Lit::Str(s), Some('"' | '\'')) = (&mut v, self.peek()) {
                let Some(Lit::Str(t)) = self.atom() else {
                    return None;
                };
                s.push_str(&t);
                self.skip_space();
            }
            items.push(v);
            // A dict (`:`) is not a literal this reader keeps.
            match self.peek() {
                Some(',') => {
                    comma = true;
                    self.i += 1;
                }
                Some(c) if c == close => {}
                _ => return None,
            }
        }
    }

    fn int(&mut self) -> Option<Lit> {
        let neg = self.peek() == Some('-');
        if neg {
            self.i += 1;
        }
        let digits: String = self.s[self.i..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == '_')
            .collect();
        if digits.is_empty() {
            return None;
        }
        self.i += digits.len();
        if matches!(self.peek(), Some('.' | 'e' | 'E' | 'x' | 'j')) {
            return None;
        }
        let n: i64 = digits.replace('_', "").parse().ok()?;
        Some(Lit::Int(if neg { -n } else { n }))
    }

    fn string(&mut self, raw: bool) -> Option<Lit> {
        let q = self.peek()?;
        let triple = self.s[self.i..].starts_with(&[q, q, q]);
        self.i += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            if triple && self.s[self.i..].starts_with(&[q, q, q]) {
                self.i += 3;
                return Some(Lit::Str(out));
            }
            if !triple && c == q {
                self.i += 1;
                return Some(Lit::Str(out));
            }
            if !triple && c == '\n' {
                return None;
            }
            if c == '\\' {
                let n = *self.s.get(self.i + 1)?;
                self.i += 2;
                if raw {
                    out.push('\\');
                    out.push(n);
                    continue;
                }
                match n {
                    '\n' => {}
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '\'' | '"' => out.push(n),
                    _ => {
                        out.push('\\');
                        out.push(n);
                    }
                }
                continue;
            }
            out.push(c);
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_level_literals_are_read_and_everything_else_left_out() {
        // A parser in their style, written for this test.
        let src = r#"#!/usr/bin/env python3
"""Parse the trace.

TARGET_FUNC = "not.a.constant"  (inside the docstring)
"""
import re

TARGET_FILE = "src/pkg/mod.py"
TARGET_FUNC: str = 'pkg.mod.C.run'  # the target
OBSERVED_LINE = 650
OCCURRENCE = 1_9
VARIABLES = (
    "endpoint",  # first
    "options",
)
LINES = [12, 13]
TRACKED = frozenset({"pkg.mod.a", "pkg.mod.b"})
QUESTION = """Run the test.
Twice."""
PATTERN = re.compile(r"x")
FLAG = True
SUM = 1 + 2
MSG = ("a "
       "b")


def main():
    INNER = 3
"#;
        let f = ParserFacts::read(src);
        let c = &f.constants;
        assert_eq!(c["TARGET_FILE"], Lit::Str("src/pkg/mod.py".into()));
        assert_eq!(c["TARGET_FUNC"], Lit::Str("pkg.mod.C.run".into()));
        assert_eq!(c["OBSERVED_LINE"], Lit::Int(650));
        assert_eq!(c["OCCURRENCE"], Lit::Int(19));
        assert_eq!(c["VARIABLES"].strs(), ["endpoint", "options"]);
        assert_eq!(c["LINES"].ints(), [12, 13]);
        assert_eq!(c["TRACKED"].strs().len(), 2);
        assert_eq!(c["QUESTION"], Lit::Str("Run the test.\nTwice.".into()));
        assert_eq!(c["FLAG"], Lit::Bool(true));
        assert_eq!(c["MSG"], Lit::Str("a b".into()));
        for absent in ["PATTERN", "SUM", "INNER"] {
            assert!(!c.contains_key(absent), "{absent}");
        }
        assert_eq!(f.int(&["NOPE", "OBSERVED_LINE"]), Some(650));
        assert_eq!(f.named(|n| n.ends_with("_LINE")).len(), 1);
    }
}
