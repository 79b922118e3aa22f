//! Candidate predicates of their invariant questions: listed with their lines, quoted, at
//! numbered observation points, or in prose compiled to Python where unambiguous.
use super::*;

/// A candidate predicate written in prose, as the Python expression it unambiguously means
/// (`None` when it is not one of these forms, or is Python already):
/// - `A occurs in B` / `A appears in B` / `A is contained in B` → `(A) in (B)`;
/// - `A does not occur in B` → `(A) not in (B)`;
/// - `A is at least B` → `(A) >= (B)`, `at most` → `<=`, `is greater than` → `>`, `is less
///   than` → `<`, `equals` / `is equal to` → `==`, `is not equal to` / `differs from` → `!=`;
/// - `A is non-negative` → `(A) >= 0`, `is positive` → `(A) > 0`, `is empty` → `len(A) == 0`,
///   `is non-empty` / `is not empty` → `len(A) > 0`.
///
/// The operands are taken verbatim (backticks dropped); an operand holding another of these
/// phrases is ambiguous and left alone.
pub fn prose_predicate(text: &str) -> Option<String> {
    let t = fold(&text.replace('`', ""));
    const BINARY: &[(&str, &str)] = &[
        (" does not occur in ", "not in"),
        (" does not appear in ", "not in"),
        (" occurs in ", "in"),
        (" appears in ", "in"),
        (" is contained in ", "in"),
        (" is at least ", ">="),
        (" is at most ", "<="),
        (" is greater than or equal to ", ">="),
        (" is less than or equal to ", "<="),
        (" is strictly greater than ", ">"),
        (" is strictly less than ", "<"),
        (" is greater than ", ">"),
        (" is less than ", "<"),
        (" is not equal to ", "!="),
        (" differs from ", "!="),
        (" is equal to ", "=="),
        (" equals ", "=="),
    ];
    const UNARY: &[(&str, &str)] = &[
        (" is non-negative", "({}) >= 0"),
        (" is nonnegative", "({}) >= 0"),
        (" is positive", "({}) > 0"),
        (" is non-empty", "len({}) > 0"),
        (" is nonempty", "len({}) > 0"),
        (" is not empty", "len({}) > 0"),
        (" is empty", "len({}) == 0"),
    ];
    let found: Vec<(usize, &str, &str)> = BINARY
        .iter()
        .filter_map(|(ph, op)| t.find(ph).map(|i| (i, *ph, *op)))
        .collect();
    if let [(i, ph, op)] = found[..] {
        let (a, b) = (
            t[..i].trim(),
            t[i + ph.len()..].trim().trim_end_matches('.'),
        );
        if !a.is_empty() && !b.is_empty() {
            return Some(format!("({a}) {op} ({b})"));
        }
        return None;
    }
    if !found.is_empty() {
        // " is greater than or equal to " also holds " is greater than ": the longest wins.
        let (i, ph, op) = found.iter().max_by_key(|(_, ph, _)| ph.len())?;
        let (a, b) = (
            t[..*i].trim(),
            t[i + ph.len()..].trim().trim_end_matches('.'),
        );
        let others = BINARY
            .iter()
            .filter(|(p2, _)| {
                !ph.contains(p2.trim()) && (a.contains(p2.trim()) || b.contains(p2.trim()))
            })
            .count();
        return (others == 0 && !a.is_empty() && !b.is_empty())
            .then(|| format!("({a}) {op} ({b})"));
    }
    for (ph, form) in UNARY {
        if let Some(a) = t.trim_end_matches('.').strip_suffix(ph) {
            let a = a.trim();
            if !a.is_empty() {
                return Some(form.replace("{}", a));
            }
        }
    }
    None
}

/// The candidate predicates of an invariant question and the line each is observed at, in the
/// question's order: every backticked span followed, before the next span that is not an event
/// name, by `line N` (`- \`len(x) > 0\` — a \`line\` event at line 91.`, `\`bool(a)\` at line
/// 67;`). Spans naming the target, its file or an event are not candidates.
pub(super) fn candidate_predicates(text: &str) -> Vec<(String, u32)> {
    let quoted = quoted_candidates(text);
    if !quoted.is_empty() {
        return quoted;
    }
    let points = numbered_points(text);
    let parts: Vec<&str> = text.split('`').collect();
    let mut out: Vec<(String, u32)> = Vec::new();
    let mut i = 1;
    while i < parts.len() {
        let span = parts[i];
        if span.is_empty()
            || span.contains('\n')
            || span.ends_with(".py")
            || PY_KEYWORDS.contains(&span)
            || ["line", "call", "return", "exception"].contains(&span)
        {
            i += 2;
            continue;
        }
        // The prose after the span, through event-name spans (`a \`line\` event at line 91`).
        let mut after = String::new();
        let mut j = i + 1;
        while j < parts.len() {
            after.push_str(parts[j]);
            match parts.get(j + 1) {
                Some(next) if ["line", "call", "return", "exception"].contains(next) => {
                    after.push_str(next);
                    j += 2;
                }
                _ => break,
            }
        }
        let head = after.trim_start_matches([' ', '\u{2014}', '-', ':', ',']);
        let window = &head[..floor_char(head, head.len().min(40))];
        // "`p` — at observation point 1 only" (the points numbered in a list of their own)
        if let Some(k) = window.find("observation point ") {
            let n = ints(&window[k..]).first().copied();
            let named = is_dotted_name(span) && span.contains('.');
            if let (false, Some(l)) = (named, n.and_then(|n| points.get(&n))) {
                out.push((span.to_string(), *l));
                i += 2;
                continue;
            }
        }
        // "`p` — a `line` event at line 91", "`p` at line 67;", "- `p`: line 176."
        let at = window
            .find("at line ")
            .map(|k| (k, k + 8))
            .or_else(|| window.starts_with("line ").then_some((0, 5)));
        if let Some((k, from)) = at {
            let digits: String = window[from..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            // Not a sentence away, and not the target's dotted name.
            let near = !window[..k].contains(['.', ';', '?']);
            let named = is_dotted_name(span) && span.contains('.');
            if let (true, false, Ok(n)) = (near, named, digits.parse::<u32>()) {
                out.push((span.to_string(), n));
            }
        }
        i += 2;
    }
    out
}

/// Candidates listed as quoted strings with their line (`- "len(value) > 0" observed at line
/// 795 (\`event=line\`)`, jinja filters_do_urlize_m7_invariants, dev): the text between the
/// item's opening quote and the quote before "observed at line" / "at line" (a candidate may
/// hold quotes of its own: `"nofollow is False or "nofollow" in rel_parts"`).
pub(super) fn quoted_candidates(text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for ph in ["\" observed at line ", "\" at line "] {
        for (k, _) in text.match_indices(ph) {
            let Some(start) = text[..k].rfind("- \"") else {
                continue;
            };
            let expr = &text[start + 3..k];
            let line = ints(&text[k + ph.len()..]).first().copied();
            if let (false, Some(l)) = (expr.is_empty() || expr.contains("- \""), line) {
                if let Ok(l) = u32::try_from(l) {
                    out.push((expr.to_string(), l));
                }
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

/// Observation points numbered in a list of their own (`1. **Line 150, \`line\` event** —
/// …`, `2. Line 167 …`): number → line.
pub(super) fn numbered_points(text: &str) -> BTreeMap<u64, u32> {
    let mut out = BTreeMap::new();
    for (k, _) in text.match_indices(". ") {
        let num: String = text[..k]
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        let Ok(n) = num.chars().rev().collect::<String>().parse::<u64>() else {
            continue;
        };
        let after = text[k + 2..].trim_start_matches(['*', ' ']);
        if let Some(rest) = after
            .strip_prefix("Line ")
            .or_else(|| after.strip_prefix("line "))
        {
            if let Some(l) = ints(rest).first().and_then(|l| u32::try_from(*l).ok()) {
                out.entry(n).or_insert(l);
            }
        }
    }
    out
}

/// Whether a candidate reads as Python rather than prose: no two words side by side that are
/// not keywords or operators (`name starts with l underscore` is prose; `x is not None`,
/// `a in b` are Python). Strings are skipped.
pub(super) fn reads_as_python(expr: &str) -> bool {
    const OPS: &[&str] = &[
        "and", "or", "not", "in", "is", "if", "else", "for", "lambda",
    ];
    let mut plain = String::new();
    let mut quote: Option<char> = None;
    for c in expr.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                plain.push_str(" 0 ");
            }
            None => plain.push(c),
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    let word = |w: &str| w.chars().all(|c| c.is_alphanumeric() || c == '_') && !OPS.contains(&w);
    !words.windows(2).any(|p| word(p[0]) && word(p[1]))
}

/// The one candidate of a single-predicate question (`did the candidate predicate \`p\` hold
/// at every iteration? ... An iteration is one execution ... at line 39`): the first backticked
/// span after "candidate predicate", observed at the first `line N` after "an iteration is".
pub(super) fn single_predicate(text: &str, ev: &Evidence) -> Option<(String, u32)> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("candidate predicate")? + "candidate predicate".len();
    let rest = &text[at..];
    let open = rest.find('`')?;
    // The span must follow the phrase in its sentence ("the candidate predicate `p`", "evaluate
    // this one candidate predicate verbatim against the target frame's locals: `p`").
    if rest[..open].contains(['.', '?']) || open > 200 {
        return None;
    }
    let close = rest[open + 1..].find('`')?;
    let expr = rest[open + 1..open + 1 + close].trim();
    if PY_KEYWORDS.contains(&expr) {
        return None;
    }
    // "An iteration is one execution ... at line 39", "An iteration observation is one Python
    // line event ... at absolute line 667", "Observe the target frame at each Python `line`
    // execution event for absolute, 1-based source line 134"
    // "An outer-loop observation is each execution of the line event for absolute, 1-based
    // source line 171", "For every execution of absolute, 1-based line 110", "at every
    // execution of the line-373 `if …` statement"; else their parser's observed line
    let line = line_after(text, "an iteration is", 300)
        .or_else(|| line_after(text, "observation point", 300))
        .or_else(|| any_line_after(text, "iteration observation is", 120))
        .or_else(|| any_line_after(text, "execution event for", 80))
        .or_else(|| any_line_after(text, "observation is", 120))
        .or_else(|| any_line_after(text, "every execution of", 40))
        .or_else(|| hyphenated_line(text))
        .or_else(|| ev.observed_line())?;
    (!expr.is_empty() && !expr.contains('\n')).then(|| (expr.to_string(), line))
}

/// The `[tracing] predicates` a native invariant instance needs: each candidate of the question
/// at its observation lines, in frames of the target only (their question excludes nested
/// functions, comprehensions and callees).
pub fn predicates(q: &Question) -> Result<Vec<flux_trace::config::Predicate>, String> {
    Ok(labelled_predicates(q)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// [`predicates`], each with the question's own text of it (what its answer reports it as).
pub fn labelled_predicates(
    q: &Question,
) -> Result<Vec<(flux_trace::config::Predicate, String)>, String> {
    let folded = fold(q.text);
    let ev = Evidence::new(q.parser);
    let q = &Question {
        text: &folded,
        ..*q
    };
    let t = target(q, &ev)?;
    let mut found = candidate_predicates(q.text);
    if found.is_empty() {
        found.extend(single_predicate(q.text, &ev));
    }
    // Their parser's candidates (its constants) decide which predicates; the prose gives the
    // line of one whose constant has none.
    let theirs = ev.predicates();
    if !theirs.is_empty() {
        let prose = std::mem::take(&mut found);
        for (expr, line) in theirs {
            let line = line.or_else(|| prose.iter().find(|(e, _)| *e == expr).map(|(_, l)| *l));
            match line {
                Some(l) => found.push((expr, l)),
                None => {
                    return Err(format!(
                        "their parser's candidate `{expr}` has no observation line"
                    ))
                }
            }
        }
    }
    let mut out: Vec<(flux_trace::config::Predicate, String)> = Vec::new();
    for (text, line) in found {
        let expr = prose_predicate(&text).unwrap_or_else(|| text.clone());
        if !reads_as_python(&expr) {
            return Err(format!(
                "the candidate `{text}` is prose flux does not compile to Python"
            ));
        }
        match out.iter_mut().find(|(p, _)| p.expr == expr) {
            Some((p, _)) if !p.lines.contains(&line) => p.lines.push(line),
            Some(_) => {}
            None => out.push((
                flux_trace::config::Predicate {
                    expr,
                    lines: vec![line],
                    function: Some(t.qualname.clone()),
                },
                text,
            )),
        }
    }
    if out.is_empty() {
        return Err("the question lists no candidate predicates with observation lines".into());
    }
    Ok(out)
}
