//! Reading the question's prose: the phrases, lines, ordinals and names the rules look for.

/// The spans of the text between backticks.
pub(super) fn backticked(text: &str) -> Vec<&str> {
    let parts: Vec<&str> = text.split('`').collect();
    parts
        .iter()
        .enumerate()
        .filter(|(i, p)| i % 2 == 1 && !p.is_empty() && !p.contains('\n'))
        .map(|(_, p)| *p)
        .collect()
}

pub(crate) fn is_dotted_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|c| {
            !c.is_empty()
                && (c.chars().all(|x| x.is_alphanumeric() || x == '_')
                    && !c.starts_with(|x: char| x.is_ascii_digit())
                    || matches!(
                        c,
                        "<locals>"
                            | "<listcomp>"
                            | "<setcomp>"
                            | "<dictcomp>"
                            | "<genexpr>"
                            | "<lambda>"
                    ))
        })
}

/// The integers of `s` in order (`line 1039` → 1039).
pub(super) fn ints(s: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            if let Ok(n) = cur.parse() {
                out.push(n);
            }
            cur.clear();
        }
    }
    out
}

/// The number of the first `line N` within `window` characters after each occurrence of
/// `phrase` (case-insensitive), first occurrence first.
pub(super) fn line_after(text: &str, phrase: &str, window: usize) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(phrase) {
        let at = from + i + phrase.len();
        let end = floor_char(&lower, (at + window).min(lower.len()));
        let tail = &lower[at..end];
        if let Some(j) = tail.find("line ") {
            if let Some(n) = ints(&tail[j + 5..]).first() {
                if tail[j + 5..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit())
                {
                    return u32::try_from(*n).ok();
                }
            }
        }
        from = at;
    }
    None
}

pub(super) fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(super) const ORDINALS: &[(&str, u32)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
];

/// The question counts a line's executions over the whole test, not within one invocation: it
/// says so ("across all invocations", "across the complete execution of the named test",
/// "counts executions of line N rather than invocations"), or it asks for the Nth execution and
/// names no invocation to count it in.
pub(super) fn counts_across_invocations(
    text: &str,
    occurrence: Option<u32>,
    invocation: Option<u32>,
) -> bool {
    mentions(
        text,
        &[
            "across all invocations",
            "across invocations",
            "globally",
            "across the complete",
            "across the whole",
            "across the entire",
            "across the test",
            "rather than invocations",
            "rather than per invocation",
            "not per invocation",
            "regardless of invocation",
        ],
    ) || (occurrence.is_some() && invocation.is_none())
}

/// `N` of `the Nth <noun>` / `<noun> N` / `the second <noun>` in the text, the first found.
pub(super) fn ordinal_of(text: &str, noun: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase().replace(['*', '`'], "");
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        if !w.trim_end_matches(['.', ':']).starts_with(noun) {
            continue;
        }
        if i > 0 {
            let prev = words[i - 1];
            if let Some((_, n)) = ORDINALS.iter().find(|(o, _)| *o == prev) {
                return Some(*n);
            }
            let digits: String = prev.chars().take_while(char::is_ascii_digit).collect();
            let suffix = &prev[digits.len()..];
            if !digits.is_empty() && ["st", "nd", "rd", "th"].contains(&suffix) {
                return digits.parse().ok();
            }
        }
        if let Some(next) = words.get(i + 1) {
            let n = next
                .trim_start_matches('#')
                .trim_end_matches(['.', ':', '?', '!']);
            if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) {
                return n.parse().ok();
            }
        }
    }
    None
}

pub(super) fn mentions(text: &str, any: &[&str]) -> bool {
    let lower = text.to_ascii_lowercase();
    any.iter().any(|p| lower.contains(p))
}

/// The question asks for a value as `str()` gives it, not its repr ("`value` is the raw Python
/// `str` held by `name` …; do not return Python `repr()` quoting around that value").
pub(super) fn str_rendered(text: &str) -> bool {
    mentions(
        &text.replace('`', ""),
        &[
            "raw python str",
            "do not return python repr() quoting",
            "without repr() quoting",
            "without python repr() quoting",
            "not its repr()",
            "as str() gives",
            "as returned by str()",
        ],
    )
}

pub(super) const PY_KEYWORDS: &[&str] = &[
    "def", "for", "while", "if", "elif", "else", "return", "yield", "in", "is", "not", "and", "or",
    "try", "except", "raise", "with", "as", "lambda", "class", "import", "from", "pass", "break",
    "continue", "global", "nonlocal", "del", "assert", "async", "await", "None", "True", "False",
];

pub(super) fn is_identifier(b: &str) -> bool {
    b.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && b.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&b)
        // their tracer's event names, backticked in questions
        && !["line", "call", "return", "exception"].contains(&b)
}

/// The backticked identifiers of `text`, in order, once each.
pub(super) fn names_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in backticked(text) {
        if is_identifier(b) && !out.iter().any(|x| x == b) {
            out.push(b.to_string());
        }
    }
    out
}

/// `text` with its parenthesised asides (nested too) left out.
/// Parentheses inside backticks are code, not asides: `` `repr((a, b))` `` is left whole.
pub(super) fn without_asides(text: &str) -> String {
    let mut depth = 0usize;
    let mut code = false;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '`' if depth == 0 => {
                code = !code;
                out.push(c);
            }
            _ if code => out.push(c),
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Two or more observation lines listed after the line events they name ("each Python
/// executed-line event on absolute, 1-based source lines 134 and 136", "line events at lines
/// 10, 12 or 15", "line events … for which the current absolute line is 108 or 109"); a range
/// ("between lines 12 and 30", "from line 12") is not a list.
pub(super) fn listed_event_lines(unquoted: &str) -> Option<Vec<u32>> {
    let lower = unquoted.to_ascii_lowercase();
    lower.match_indices("line event").find_map(|(i, _)| {
        let end = floor_char(&lower, (i + 160).min(lower.len()));
        let words: Vec<&str> = lower[i + "line event".len()..end]
            .split_whitespace()
            .collect();
        words.iter().enumerate().find_map(|(k, w)| {
            let range = k > 0 && ["between", "from", "through"].contains(&words[k - 1]);
            if !matches!(*w, "line" | "lines") || range {
                return None;
            }
            let mut out: Vec<u32> = Vec::new();
            for w in words[k + 1..]
                .iter()
                .skip_while(|w| matches!(**w, "is" | "are"))
            {
                let w = w.trim_end_matches([',', '.', ';', ':', ')']);
                match w {
                    "and" | "or" => continue,
                    _ if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) => {
                        out.push(w.parse().ok()?)
                    }
                    _ => break,
                }
            }
            (out.len() >= 2).then_some(out)
        })
    })
}

/// The question observes the frame at every `line` event, wherever it is ("at every Python line
/// event in the target function's own frame", "on each line event of the frame", "all line
/// events of the target's frame"), named by no line.
pub(super) fn every_line_event(unquoted: &str) -> bool {
    let lower = unquoted.to_ascii_lowercase();
    // "the state of the target function's own frame immediately before each executed source
    // line begins"
    if [
        "before each executed source line",
        "before every executed source line",
        "before an executed source line",
    ]
    .iter()
    .any(|p| lower.contains(p))
    {
        return true;
    }
    ["every", "each", "all"].iter().any(|q| {
        lower.match_indices(q).any(|(i, _)| {
            if lower[..i].ends_with(|c: char| c.is_alphanumeric()) {
                return false;
            }
            let end = floor_char(&lower, (i + 40).min(lower.len()));
            let tail = &lower[i + q.len()..end];
            let words: Vec<&str> = tail.split_whitespace().take(3).collect();
            let event_at = words.iter().position(|w| w.starts_with("line"));
            match event_at {
                Some(k) => {
                    words.get(k + 1).is_some_and(|w| w.starts_with("event"))
                        && words[..k].iter().all(|w| *w == "python")
                }
                None => false,
            }
        })
    })
}

/// The question observes line `line`'s state *before* it runs ("on each `line` event for line
/// 384, immediately before the return statement beginning there executes", "just before line
/// 384 executes"), not after it ("after line N", "just before line N+1 executes" observes N
/// after it ran).
pub(super) fn observed_before(text: &str, line: u32) -> bool {
    let lower = text.to_ascii_lowercase().replace('`', "");
    let there = lower.match_indices("before the").any(|(i, _)| {
        let end = floor_char(&lower, (i + 80).min(lower.len()));
        let tail = &lower[i..end];
        [
            "beginning there",
            "there executes",
            "on that line",
            "at that line",
            "on the reported line",
        ]
        .iter()
        .any(|p| tail.contains(p))
    });
    there
        || [
            format!("before line {line} executes"),
            format!("before line {line} runs"),
            format!("before line {line} is executed"),
        ]
        .iter()
        .any(|p| lower.contains(p.as_str()))
}

/// The line of "the statement beginning on / that begins on / starting on line N" (the
/// statement whose first line is N), the first the prose names.
pub(super) fn statement_named(text: &str) -> Option<u32> {
    [
        "statement beginning on",
        "statement begins on",
        "statement that begins",
        "statement which begins",
        "statement starting on",
        "statement starting at",
        "statement that starts",
    ]
    .iter()
    .find_map(|phrase| line_after(text, phrase, 30))
}

/// The question normalises lines to their statement's first line (not the physical line a
/// sub-expression starts on).
pub(super) fn statement_lines(text: &str) -> bool {
    mentions(
        text,
        &[
            "enclosing python statement",
            "innermost enclosing",
            "where the statement begins",
            "where its innermost",
            "statement begins",
            "statement or expression begins",
            "statement's starting line",
            "starting line of its statement",
            "starting line of the statement",
            "statement starts",
        ],
    ) && !raw_lines(text)
}

/// Whether the prose keeps each event's own line where statement words would otherwise
/// normalise it ("report the line where the particular executed statement or expression
/// begins, rather than a later closing or continuation-only line", "do not normalize an event
/// on an executable continuation line back to the statement's first line").
pub(super) fn raw_lines(text: &str) -> bool {
    mentions(
        text,
        &[
            "sub-expression or statement begins",
            "physical line",
            "do not normalize",
            "do not normalise",
            "continuation-only line",
        ],
    )
}

/// Whether one of `bs` is said within 60 characters before or 120 after an occurrence of `a`
/// (case-insensitive).
pub(super) fn near(text: &str, a: &str, bs: &[&str]) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices(a).any(|(i, _)| {
        let end = floor_char(&lower, (i + a.len() + 120).min(lower.len()));
        let start = floor_char(&lower, i.saturating_sub(60));
        bs.iter().any(|b| lower[start..end].contains(b))
    })
}

/// The def-use conventions a question's prose fixes beyond flux's defaults, as extractor
/// parameters: reads inside comprehensions and generator expressions out of the outer frame's
/// uses ("excluded", "do not count", "are not uses"), nested-function reads of outer locals in
/// or out, uses counted per load ("each load", "every occurrence ... counts"), and a `for`
/// header's iterable used once per entry into the loop.
pub(super) fn def_use_conventions(text: &str) -> Vec<(&'static str, bool_or_str::V)> {
    use bool_or_str::V;
    let mut out = Vec::new();
    let near = |a: &str, bs: &[&str]| near(text, a, bs);
    const OUT: &[&str] = &[
        "excluded",
        "exclude",
        "are not uses",
        "do not count",
        "does not count",
        "don't count",
        "not counted",
        "ignored",
        "ignore",
    ];
    // "Names bound locally by a … comprehension … are excluded as defs and uses; reads of
    // tracked outer locals in a comprehension's iterable or other expressions still count":
    // what is excluded is the comprehension's own names, its reads of the function's locals
    // stay uses.
    let outer_reads_count = near("comprehension", &["still count", "still are uses"])
        && near("outer local", &["still count", "still are uses"]);
    if (near("comprehension", OUT) || near("generator expression", OUT)) && !outer_reads_count {
        out.push(("comprehension_uses", V::B(false)));
    }
    const IN: &[&str] = &[
        "included",
        "count as uses",
        "counts as a use",
        "are uses",
        "include",
    ];
    if near("nested function", IN) || near("closure", IN) || near("inner function", IN) {
        out.push(("closure_uses", V::B(true)));
    } else if near("nested function", OUT) || near("lambda", OUT) || near("closure", OUT) {
        out.push(("closure_uses", V::B(false)));
    }
    if mentions(
        text,
        &[
            "each load",
            "every load",
            "per load",
            "each occurrence of the name",
            "every occurrence of the name",
            "each read counts",
            "each syntactic read",
            "each ast load",
        ],
    ) {
        out.push(("use_count", V::S("load")));
    }
    // "for `for item in collection`, the iterable expression uses `collection` once when the
    // loop is entered" (not at every iteration's return to the header)
    if near(
        "iterable",
        &[
            " once when",
            " once per",
            " once at",
            " once on",
            " only once",
        ],
    ) || mentions(
        text,
        &["once per loop entry", "once when the loop is entered"],
    ) {
        out.push(("iterable_uses", V::S("entry")));
    }
    // "For a multiline statement, a definition uses the line where the defining statement
    // begins; a use uses the line containing the read identifier" (uses not normalised)
    if mentions(
        text,
        &[
            "line containing the read identifier",
            "line on which the identifier is read",
            "line where the identifier is read",
        ],
    ) {
        out.push(("use_lines", V::S("reported")));
    }
    out
}

pub(super) mod bool_or_str {
    /// A parameter value the prose sets.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum V {
        B(bool),
        S(&'static str),
    }

    impl serde::Serialize for V {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                V::B(b) => s.serialize_bool(*b),
                V::S(x) => s.serialize_str(x),
            }
        }
    }
}

/// The class whose directly defined methods a call-count question tracks (`... defined
/// directly in the body of class \`RFC2616Policy\``), as a qualname.
pub(super) fn class_scope(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = [
        "directly in the body of class",
        "defined directly in class",
        "contained in the body of class",
        "in the body of class",
    ]
    .iter()
    .find_map(|p| lower.find(p).map(|i| i + p.len()))?;
    let rest = &text[at..];
    let open = rest.find('`')?;
    if open > 4 {
        return None;
    }
    let close = rest[open + 1..].find('`')?;
    let name = &rest[open + 1..open + 1 + close];
    is_dotted_name(name).then(|| name.to_string())
}

/// The inclusive line range a question names: `from 365 through 389`, `lines 12 to 30`,
/// `from line 7 through line 9` (the first such pair).
pub(super) fn line_range(text: &str) -> Option<(u32, u32)> {
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let num = |w: &str| w.trim_end_matches(['.', ';', ':']).parse::<u32>().ok();
    for (i, w) in words.iter().enumerate() {
        if !["through", "to", "thru"].contains(w) || i == 0 {
            continue;
        }
        let from = num(words[i - 1]);
        let to = words.get(i + 1).and_then(|x| num(x)).or_else(|| {
            (words.get(i + 1) == Some(&"line"))
                .then(|| words.get(i + 2).and_then(|x| num(x)))
                .flatten()
        });
        if let (Some(a), Some(b)) = (from, to) {
            if a <= b {
                return Some((a, b));
            }
        }
    }
    None
}

/// The line of "the line-373 `if …` statement" (the first `line-N` the text names).
pub(super) fn hyphenated_line(text: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    lower.match_indices("line-").find_map(|(i, _)| {
        let digits: String = lower[i + 5..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// The number of the first `line N` within `window` characters after the first occurrence of
/// `phrase` (case-insensitive), passing `line` words not followed by a number ("one Python line
/// event ... at absolute line 667").
pub(super) fn any_line_after(text: &str, phrase: &str, window: usize) -> Option<u32> {
    let lower = text.to_ascii_lowercase().replace('`', "");
    let at = lower.find(phrase)? + phrase.len();
    let tail = &lower[at..floor_char(&lower, (at + window).min(lower.len()))];
    tail.match_indices("line ").find_map(|(j, _)| {
        let after = &tail[j + 5..];
        after
            .starts_with(|c: char| c.is_ascii_digit())
            .then(|| ints(after).first().and_then(|n| u32::try_from(*n).ok()))
            .flatten()
    })
}

/// The question observes the frame at its return ("at the return point", "the program point
/// at function return", "reaches a normal return").
pub(super) fn at_the_return(text: &str) -> bool {
    mentions(
        text,
        &[
            "at the return point",
            "at function return",
            "normal return",
            "at each return",
        ],
    )
}

/// What a values question records when it is not a local's own repr: a call in a sentence that
/// records or constructs it ("record Python `repr(async_func.__name__)`", "construct this
/// five-item Python tuple: `(invocation_number, …, len(html), …)`"), `repr(name)` of a bare
/// name being the local's repr itself.
pub(super) fn computed_value(text: &str) -> Option<&str> {
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    for sentence in lower.split_inclusive(". ") {
        let (from, to) = (at, at + sentence.len());
        at = to;
        if !["record", "construct"].iter().any(|w| sentence.contains(w)) {
            continue;
        }
        let found = backticked(&text[from..to]).into_iter().find(|b| {
            // `repr(x)`, and `repr((a, b))` (the repr of a tuple of locals, what flux's
            // `variables` observe), are the locals' own reprs
            let own_repr = b
                .strip_prefix("repr(")
                .and_then(|r| r.strip_suffix(')'))
                .is_some_and(|r| is_identifier(r) || is_tuple_of_names(r));
            let call = b.char_indices().any(|(i, c)| {
                c == '(' && b[..i].ends_with(|p: char| p.is_alphanumeric() || p == '_')
            });
            // `repr()`, `str()`: the function named, not an expression of locals
            let mention = b.ends_with("()") && is_identifier(&b[..b.len() - 2]);
            call && !own_repr && !mention
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `(a, b)`, `(a,)`: a tuple display of plain names.
pub(super) fn is_tuple_of_names(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return false;
    };
    let names: Vec<&str> = inner.split(',').map(str::trim).collect();
    let names = match names.split_last() {
        Some((last, rest)) if last.is_empty() && !rest.is_empty() => rest,
        _ => &names[..],
    };
    inner.contains(',') && names.iter().all(|n| is_identifier(n))
}

/// Whether a question that names no invocation asks about every one of them ("across the
/// entire pytest run", "whenever at least one … frame is active", "around every invocation …
/// this question aggregates all of them").
pub(super) fn every_invocation(text: &str) -> bool {
    mentions(
        text,
        &[
            "across the entire",
            "whenever at least one",
            "every invocation",
            "all invocations",
            "aggregates all of them",
        ],
    )
}
