//! What the native mapping reads of an instance, structured evidence first.
//!
//! Their `parser.py` is the executable definition of the answer: its module-level constants
//! ([`crate::parser_facts`]) fix the target, lines, occurrence, invocation, variables, tracked
//! functions, line range and candidate predicates. Each *role* below is the set of constant
//! names their parsers use for it (matched on the name, checked on the value); the mapping
//! takes a role's value from the parser when one is there and from the question's prose only
//! when none is. The prose is read folded ([`fold`]: every run of whitespace, line breaks
//! included, is one space) and names in it are found with or without backticks
//! ([`dotted_tokens`]).
use crate::parser_facts::{Lit, ParserFacts};

/// Every run of whitespace (line breaks included) as one space, trimmed.
pub fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The dotted names of a text with or without backticks (`pkg.mod.f`, **`pkg.mod.f`**,
/// pkg.mod.f,, pkg.mod.f's): each whitespace-separated word with the punctuation around it (and a
/// possessive `'s`) trimmed, kept
/// when it has a dot and only identifier characters (and `<locals>`-style parts) between dots.
pub fn dotted_tokens(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || c == '`')
        .map(|w| {
            w.trim_matches(|c: char| {
                matches!(
                    c,
                    ',' | ';'
                        | ':'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '"'
                        | '\''
                        | '*'
                        | '?'
                        | '!'
                        | '.'
                )
            })
        })
        // a possessive: pkg.mod.f's lines
        .map(|w| {
            w.strip_suffix("'s")
                .or_else(|| w.strip_suffix("’s"))
                .unwrap_or(w)
        })
        .filter(|w| w.contains('.') && crate::native::is_dotted_name(w))
        .collect()
}

/// A role a parser constant plays, and the names that play it.
pub struct Role {
    pub name: &'static str,
    /// Whether a constant's (upper-cased) name plays the role.
    pub matches: fn(&str) -> bool,
}

fn has(n: &str, parts: &[&str]) -> bool {
    parts.iter().any(|p| n.contains(p))
}

/// The roles, in the order of the rule table (`docs/swe-flux-interop.md`).
pub const ROLES: &[Role] = &[
    Role {
        name: "target",
        // TARGET_FUNC, TARGET_QUALNAME, FUNC_NAME, TARGET (a `module.qualname` string)
        matches: |n| has(n, &["TARGET", "FUNC", "QUALNAME"]) && !has(n, &["FILE", "LINE"]),
    },
    Role {
        name: "header line",
        // HEADER_LINE, LOOP_HEADER_LINE, LOOP_LINE, FOR_LINE, WHILE_LINE
        matches: |n| {
            n.ends_with("LINE")
                && has(n, &["HEADER", "LOOP", "FOR_", "WHILE"])
                && !has(n, &["BODY", "END", "LAST"])
        },
    },
    Role {
        name: "observed line",
        // OBSERVED_LINE, OBSERVATION_LINE, TARGET_LINE, STATEMENT_LINE, STMT_LINE, AFTER_LINE
        matches: |n| {
            matches!(n, "LINE" | "LINENO" | "TARGET_LINENO")
                || (n.ends_with("LINE")
                    && has(
                        n,
                        &["OBSERV", "TARGET", "STATEMENT", "STMT", "AFTER", "ANCHOR"],
                    ))
        },
    },
    Role {
        name: "executed line",
        // PRECEDING_LINE, EXECUTED_LINE: the line whose execution the state follows (their
        // `OBSERVATION_EVENT_LINE` is the next line's event, which reads it)
        matches: |n| n.ends_with("LINE") && has(n, &["PRECEDING", "EXECUTED"]),
    },
    Role {
        name: "occurrence",
        // OCCURRENCE, TARGET_OCCURRENCE, NTH, NTH_EXECUTION, EXECUTION_INDEX (an iteration's
        // number is the role below)
        matches: |n| {
            (has(n, &["OCCURRENCE", "NTH"]) || n == "EXECUTION_INDEX") && !n.contains("ITERATION")
        },
    },
    Role {
        name: "body line",
        // LOOP_BODY_FIRST_LINE, BODY_FIRST_LINE, BODY_LINE, BODY_START_LINE
        matches: |n| n.contains("BODY") && n.ends_with("LINE") && !has(n, &["END", "LAST"]),
    },
    Role {
        name: "iteration",
        // REQUESTED_ITERATION, TARGET_ITERATION, ITERATION, NTH_ITERATION, ITERATION_INDEX
        matches: |n| {
            n.contains("ITERATION")
                && !has(n, &["ITERATIONS", "COUNT", "MIN", "MAX", "TOTAL", "LINE"])
        },
    },
    Role {
        name: "invocation",
        // INVOCATION, TARGET_INVOCATION, INVOCATION_INDEX
        matches: |n| n.contains("INVOCATION") && !has(n, &["COUNT", "MIN", "MAX"]),
    },
    Role {
        name: "variables",
        // VARIABLES, TRACKED_VARIABLES, TARGET_VARS, VARIABLE, VAR_NAME
        matches: |n| has(n, &["VARIABLE", "VARS", "VAR_NAME"]) || n == "VAR",
    },
    Role {
        name: "tracked functions",
        // TRACKED_FUNCS, TRACKED_FUNCTIONS, TRACKED, FUNCTIONS
        matches: |n| {
            has(n, &["TRACKED", "FUNCS", "FUNCTIONS"]) && !has(n, &["VAR", "LINE", "FILE", "CLASS"])
        },
    },
    Role {
        name: "classes",
        // TRACKED_CLASSES, CLASSES
        matches: |n| n.ends_with("CLASSES"),
    },
    Role {
        name: "range start",
        // START_LINE, FIRST_LINE, RANGE_START, BODY_START_LINE
        matches: |n| has(n, &["START", "FIRST", "BEGIN"]) && has(n, &["LINE", "RANGE"]),
    },
    Role {
        name: "range end",
        // END_LINE, LAST_LINE, RANGE_END, BODY_END_LINE
        matches: |n| has(n, &["END", "LAST", "STOP"]) && has(n, &["LINE", "RANGE"]),
    },
    Role {
        name: "predicates",
        // PREDICATES, CANDIDATES, CANDIDATE_PREDICATES, PREDICATE
        matches: |n| has(n, &["PREDICATE", "CANDIDATE"]),
    },
];

fn role(name: &str) -> &'static Role {
    ROLES
        .iter()
        .find(|r| r.name == name)
        .expect("a role of the table")
}

/// What the parser of one instance fixes.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    pub facts: ParserFacts,
    source: String,
}

impl Evidence {
    pub fn new(parser: Option<&str>) -> Evidence {
        Evidence {
            facts: parser.map(ParserFacts::read).unwrap_or_default(),
            source: parser.unwrap_or("").to_string(),
        }
    }

    /// The constants playing `role`, in name order.
    fn of(&self, role_name: &str) -> Vec<(&str, &Lit)> {
        let r = role(role_name);
        self.facts.named(|n| (r.matches)(&n.to_ascii_uppercase()))
    }

    /// The one positive integer that the constants of `role` agree on (none when they
    /// disagree: the prose decides then).
    fn one_int(&self, role_name: &str) -> Option<u32> {
        let mut vals: Vec<i64> = self
            .of(role_name)
            .iter()
            .filter_map(|(_, v)| v.as_int())
            .filter(|n| *n > 0)
            .collect();
        vals.dedup();
        match vals[..] {
            [n] => u32::try_from(n).ok(),
            _ => None,
        }
    }

    /// The `module.qualname` strings of the target role — constants named `TARGET…` before
    /// others of the role (`IS_ASYNC_FUNC` names a tracked callee, `TARGET_FUNC` the target) —
    /// then of every other constant (in sequences too).
    pub fn target_names(&self) -> Vec<&str> {
        let mut first = self.of("target");
        first.sort_by_key(|(n, _)| !n.to_ascii_uppercase().contains("TARGET"));
        let rest: Vec<(&str, &Lit)> = self.facts.named(|_| true);
        first
            .into_iter()
            .chain(rest)
            .flat_map(|(_, v)| v.strs())
            .filter(|s| s.contains('.') && crate::native::is_dotted_name(s))
            .collect()
    }

    pub fn header_line(&self) -> Option<u32> {
        self.one_int("header line")
    }

    pub fn observed_line(&self) -> Option<u32> {
        self.one_int("observed line")
    }

    /// The line whose execution a state question follows (`PRECEDING_LINE`).
    pub fn executed_line(&self) -> Option<u32> {
        self.one_int("executed line")
    }

    pub fn occurrence(&self) -> Option<u32> {
        self.one_int("occurrence")
    }

    /// The loop body's line whose executions count its iterations (`LOOP_BODY_FIRST_LINE`).
    pub fn body_line(&self) -> Option<u32> {
        self.one_int("body line")
    }

    /// Which iteration of a loop the question asks about (`REQUESTED_ITERATION = 73`).
    pub fn iteration(&self) -> Option<u32> {
        self.one_int("iteration")
    }

    pub fn invocation(&self) -> Option<u32> {
        self.one_int("invocation")
    }

    /// The variables: the identifier strings of the first `variables` constant holding any.
    pub fn variables(&self) -> Vec<String> {
        self.of("variables")
            .iter()
            .map(|(_, v)| v.strs())
            .find(|s| !s.is_empty() && s.iter().all(|x| is_identifier_text(x)))
            .map(|s| s.iter().map(|x| x.to_string()).collect())
            .unwrap_or_default()
    }

    /// The tracked functions (dotted names), in the parser's order.
    pub fn tracked(&self) -> Vec<String> {
        self.of("tracked functions")
            .iter()
            .map(|(_, v)| {
                // (file, function) pairs too: the files' paths are not names
                v.strs()
                    .into_iter()
                    .filter(|x| !x.contains('/') && !x.ends_with(".py"))
                    .collect::<Vec<_>>()
            })
            .find(|s| s.len() > 1 && s.iter().all(|x| crate::native::is_dotted_name(x)))
            .map(|s| s.iter().map(|x| x.to_string()).collect())
            .unwrap_or_default()
    }

    /// The classes a call-count question scopes (`TRACKED_CLASSES = ("Slot", "Downloader")`):
    /// identifiers, at least two.
    pub fn classes(&self) -> Vec<String> {
        self.of("classes")
            .iter()
            .map(|(_, v)| v.strs())
            .find(|s| s.len() > 1 && s.iter().all(|x| crate::native::is_dotted_name(x)))
            .map(|s| s.iter().map(|x| x.to_string()).collect())
            .unwrap_or_default()
    }

    /// The inclusive line range: a start and an end constant, or one two-int sequence.
    pub fn range(&self) -> Option<(u32, u32)> {
        if let (Some(a), Some(b)) = (self.one_int("range start"), self.one_int("range end")) {
            return (a <= b).then_some((a, b));
        }
        self.facts
            .named(|n| n.to_ascii_uppercase().contains("RANGE"))
            .iter()
            .find_map(|(_, v)| match v.ints()[..] {
                [a, b] if 0 < a && a <= b => Some((a as u32, b as u32)),
                _ => None,
            })
    }

    /// Candidate predicates: a list of strings, or of (predicate, line) pairs.
    pub fn predicates(&self) -> Vec<(String, Option<u32>)> {
        for (_, v) in self.of("predicates") {
            let Lit::Seq(items) = v else { continue };
            let mut out = Vec::new();
            for it in items {
                match it {
                    Lit::Str(s) => out.push((s.clone(), None)),
                    Lit::Seq(pair) => {
                        let s = pair.iter().find_map(Lit::as_str);
                        let l = pair.iter().find_map(Lit::as_int);
                        if let Some(s) = s {
                            out.push((s.to_string(), l.and_then(|l| u32::try_from(l).ok())));
                        }
                    }
                    _ => {}
                }
            }
            if !out.is_empty() {
                return out;
            }
        }
        Vec::new()
    }

    /// The parser reads a function's names from its AST by name, nested scopes and all: it
    /// visits `ast.Name` nodes (`visit_Name`, or `ast.walk` over the function) by their
    /// `Load`/`Store` context and never tells a comprehension, generator expression or lambda
    /// apart, so their own names count as the function's (`scopes = "flat"`).
    pub fn walks_names_flat(&self) -> bool {
        let s = &self.source;
        let visits_names = (s.contains("visit_Name") || s.contains("ast.walk"))
            && s.contains("ast.Name")
            && s.contains("Load");
        const SCOPES: &[&str] = &[
            "ListComp",
            "SetComp",
            "DictComp",
            "GeneratorExp",
            "comprehension",
            "Lambda",
            "symtable",
        ];
        visits_names && !SCOPES.iter().any(|k| s.contains(k))
    }

    /// The parser normalises lines to their statement's first line: it maps lines through
    /// the AST's statements (`ast.stmt` with `lineno`/`end_lineno`).
    pub fn normalises_statements(&self) -> bool {
        let s = &self.source;
        s.contains("ast.stmt") && s.contains("end_lineno")
    }
}

fn is_identifier_text(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_folded_and_names_are_found_with_or_without_backticks() {
        assert_eq!(
            fold("innermost\n   enclosing\tstatement "),
            "innermost enclosing statement"
        );
        assert_eq!(
            dotted_tokens("Consider pkg.mod.C.run, then `pkg.mod.f` and **pkg.mod.g**. End."),
            ["pkg.mod.C.run", "pkg.mod.f", "pkg.mod.g"]
        );
        assert!(dotted_tokens("Line 3.5 is e.g. odd")
            .iter()
            .all(|t| *t != "3.5"));
    }

    #[test]
    fn each_role_is_read_from_the_constants_their_parsers_use() {
        // Constants in their style, written for this test.
        let e = Evidence::new(Some(
            "TARGET_FILE = \"src/pkg/mod.py\"\nTARGET_FUNC = \"pkg.mod.C.run\"\n\
             LOOP_HEADER_LINE = 40\nBODY_LINE = 41\nOBSERVED_LINE = 650\nOCCURRENCE = 19\n\
             TARGET_INVOCATION = 2\nTRACKED_VARIABLES = (\"b\", \"a\")\n\
             TRACKED_FUNCS = [\"pkg.mod.f\", \"pkg.mod.g\"]\nSTART_LINE = 12\nEND_LINE = 30\n\
             PREDICATES = [(\"len(x) > 0\", 91), (\"y is None\", 95)]\n",
        ));
        assert_eq!(e.target_names()[0], "pkg.mod.C.run");
        assert_eq!(e.header_line(), Some(40));
        assert_eq!(e.observed_line(), Some(650));
        assert_eq!(e.occurrence(), Some(19));
        assert_eq!(e.invocation(), Some(2));
        assert_eq!(e.variables(), ["b", "a"]);
        assert_eq!(e.tracked(), ["pkg.mod.f", "pkg.mod.g"]);
        assert_eq!(e.range(), Some((12, 30)));
        assert_eq!(
            e.predicates(),
            [
                ("len(x) > 0".to_string(), Some(91)),
                ("y is None".to_string(), Some(95))
            ]
        );
        // Constants that disagree say nothing: the prose decides.
        let e = Evidence::new(Some("OBSERVED_LINE = 5\nTARGET_LINE = 6\n"));
        assert_eq!(e.observed_line(), None);
        let e = Evidence::new(Some("LINE_RANGE = (7, 9)\n"));
        assert_eq!(e.range(), Some((7, 9)));
        assert!(Evidence::new(None).variables().is_empty());
    }
}
