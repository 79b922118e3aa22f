//! Each rule's parameters: what one extractor needs, read from the question (`Ctx`).
use super::*;

/// Where `unique_values` / `value_history` observe (`lines`, `at`, `event`, `line_mode`): "each
/// line event at L1 and each return event at L2", or one observed line (their parser's, "the
/// statement that begins on line N", "after line N", "line event for line N", "every execution
/// of line N"), read after it runs unless the prose says before, per execution of the statement
/// when the prose names the statement or normalises lines to statements.
pub(super) fn observation_point(
    text: &str,
    ev: &Evidence,
    p: &mut Map<String, Value>,
) -> Result<(), String> {
    let unquoted = text.replace('`', "");
    let at_line = line_after(&unquoted, "line event at", 20);
    let at_return = line_after(&unquoted, "return event at", 20);
    if let (Some(l), Some(r)) = (at_line, at_return) {
        // "each line event at L1 (the state it shows) and each return at L2"
        p.insert("lines".into(), json!([l, r]));
        p.insert("event".into(), json!("line_and_return"));
        p.insert("at".into(), json!("before"));
        return Ok(());
    }
    if ev.observed_line().is_none() {
        if let Some(lines) = listed_event_lines(&unquoted) {
            // "at each line event on (source) lines 134 and 136": the state each shows
            let before = lines.iter().any(|l| observed_before(text, *l));
            p.insert("lines".into(), json!(lines));
            p.insert("at".into(), json!(if before { "before" } else { "after" }));
            if statement_lines(text) {
                p.insert("line_mode".into(), json!("statement"));
            }
            return Ok(());
        }
    }
    let line = ev
        .observed_line()
        .or_else(|| statement_named(text))
        .or_else(|| line_after(text, "after", 60))
        .or_else(|| line_after(&unquoted, "line event for", 20))
        .or(at_line)
        .or_else(|| line_after(&unquoted, "every execution of", 40))
        .or_else(|| line_after(&unquoted, "each execution of", 40));
    let Some(line) = line else {
        if every_line_event(&unquoted) {
            // "at every (Python) line event in the target function's own frame": the state
            // each line event shows (before its line runs), no other event
            p.insert("event".into(), json!("line"));
            p.insert("at".into(), json!("before"));
            return Ok(());
        }
        if mentions(
            text,
            &[
                "every distinct value",
                "every value each",
                "each distinct value",
                "from the moment it is first assigned",
                "all observation points",
                "values taken by",
                "before every source line",
            ],
        ) {
            // no observation line: every value the locals hold, read wherever one changes
            p.insert("event".into(), json!("change"));
            return Ok(());
        }
        return Err("the question names no observation line".into());
    };
    p.insert("lines".into(), json!([line]));
    let before = observed_before(text, line);
    p.insert("at".into(), json!(if before { "before" } else { "after" }));
    if statement_named(text).is_some() || statement_lines(text) {
        // "after each execution of the statement that begins on line N and ends on line M":
        // one observation per run of the statement, read when it completes (its continuation
        // lines are not executions of their own)
        p.insert("line_mode".into(), json!("statement"));
    }
    Ok(())
}

/// The class scope's options from the prose: every code object when it asks for them ("every
/// code object", comprehensions not excluded), the nested classes' methods ("classes nested
/// within `C`").
pub(super) fn class_scope_options(text: &str, p: &mut Map<String, Value>) {
    let excluded = |word: &str| {
        near(
            text,
            word,
            &["exclude", "not counted", "are not", "do not count"],
        )
    };
    let comprehensions = ["comprehension", "generator expression", "genexpr"]
        .iter()
        .any(|w| mentions(text, &[w]) && !excluded(w));
    let every_code_object = mentions(
        text,
        &[
            "every code object",
            "all code objects",
            "each code object",
            "code objects defined",
            "code objects of",
            "code objects in",
        ],
    );
    if every_code_object || comprehensions {
        // "every code object of the class, comprehensions included" (not "exclude
        // ... comprehension frames")
        p.insert("code_objects".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "classes nested within",
            "nested classes",
            "classes nested in",
        ],
    ) {
        // "including definitions in classes nested within `C`"
        p.insert("methods".into(), json!(true));
    }
    excluded_dunders(text, p);
}

/// `raising_tests`: the tests in which an exception propagates out of the target ("raises an
/// exception out of `f`", "propagates out of the target function"), sorted by id when the
/// prose sorts them; each crashing test with its type when their rows are objects.
pub(super) fn raising_params(c: &Ctx, p: &mut Map<String, Value>, answer: &mut Answer) {
    p.insert("escapes".into(), json!(c.t.qualname));
    if mentions(
        c.text,
        &["lexicographic", "sorted()", "ascending order by test id"],
    ) {
        p.insert("order".into(), json!("sorted"));
    }
    if c.q
        .template
        .pointer("/crashing_tests/0")
        .is_some_and(Value::is_object)
    {
        answer.insert("/crashing_tests".into(), "/crashes".into());
    }
}

/// `caught_types`: one handler's catches when the prose names its line ("caught by the
/// function's `except InvalidTokenError` clause whose `except` keyword begins at absolute,
/// 1-based line 104", "the `except` clause at line N", "the handler on line N").
pub(super) fn caught_params(c: &Ctx, p: &mut Map<String, Value>) {
    let line = [
        "keyword begins at",
        "except clause at",
        "except clause on",
        "handler at",
        "handler on",
    ]
    .iter()
    .find_map(|ph| any_line_after(c.text, ph, 40));
    if let Some(l) = line {
        p.insert("line".into(), json!(l));
    }
}

/// the loop rules (`loop_iterations`, `loop_stats`): the header, what counts.
pub(super) fn loop_params(c: &Ctx, name: &str, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        ev,
        text,
        invocation,
        ..
    } = *c;
    let header = loop_header(ev, text)?;
    p.insert("header".into(), json!(header));
    p.insert("count".into(), json!("body_line"));
    if name == "loop_stats" {
        if mentions(text, &["loop activation"]) {
            // "a loop activation is one complete execution of that `for` statement"
            p.insert("per".into(), json!("entry"));
        } else if mentions(text, &["as a separate invocation", "each resumption"]) {
            // a generator's every `call` event is an invocation of its own
            p.insert("per".into(), json!("call"));
        }
    }
    if name == "loop_iterations" {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    } else {
        p.insert("invocations".into(), json!("all"));
    }
    Ok(())
}

/// The loop's header line: their parser's, or "header … line N".
pub(super) fn loop_header(ev: &Evidence, text: &str) -> Result<u32, String> {
    ev.header_line()
        .or_else(|| line_after(text, "header", 60))
        .ok_or_else(|| "the question names no loop header line".to_string())
}

/// `iteration_value`: the loop (its header), which iteration (their parser's
/// `REQUESTED_ITERATION`, or "at iteration N" / "the Nth iteration"), counted by executions of
/// the body's first line (the body line the prose names, else the first), the loop variable,
/// read before that iteration's first body line runs unless the prose reads it at the end.
pub(super) fn iteration_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        ..
    } = *c;
    let header = loop_header(ev, text)?;
    p.insert("header".into(), json!(header));
    p.insert("count".into(), json!("body_line"));
    let body = ev.body_line().or_else(|| {
        [
            "body's first line",
            "first line of the loop body",
            "first body line",
        ]
        .iter()
        .find_map(|ph| line_after(&text.replace('`', ""), ph, 20))
    });
    if let Some(b) = body.filter(|b| *b > header) {
        p.insert("body_line".into(), json!(b));
    }
    let nth = ev
        .iteration()
        .or_else(|| ordinal_of(text, "iteration"))
        .ok_or("the question names no iteration")?;
    p.insert("iteration".into(), json!(nth));
    p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    if str_rendered(text) {
        p.insert("render".into(), json!("str"));
    }
    let vars = variables(q, ev);
    let [var] = &vars[..] else {
        return Err(format!(
            "the question names {} loop variables, not one: {vars:?}",
            vars.len()
        ));
    };
    p.insert("variable".into(), json!(var));
    if mentions(
        text,
        &[
            "at the end of the iteration",
            "at the end of that iteration",
            "at the end of iteration",
            "after the iteration completes",
        ],
    ) {
        p.insert("at".into(), json!("after"));
    }
    Ok(())
}

/// `state_snapshots`: the locals, where they are observed ("at the return point" / "reaches a
/// normal return" → each normal return, else as `unique_values`), one row per variable when
/// their rows are `{invocation, variable, value}`.
pub(super) fn snapshot_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        ..
    } = *c;
    let vars = variables(q, ev);
    if vars.is_empty() {
        return Err("the question names no variable".into());
    }
    p.insert("variables".into(), json!(vars));
    let labelled = q
        .template
        .pointer("/state_snapshots/0/point")
        .is_some()
        .then(|| labelled_points(text))
        .flatten();
    if let Some((label, line, nths)) = labelled {
        // "Define program points `line_58_exec_1` and `line_58_exec_3` as the first and third
        // executions of line 58": the executions of that line in each invocation, named so
        p.insert("lines".into(), json!([line]));
        p.insert("occurrences".into(), json!(nths));
        p.insert("point_label".into(), json!(label));
    } else if at_the_return(text) {
        p.insert("event".into(), json!("return"));
    } else {
        observation_point(text, ev, p)?;
    }
    let row = q.template.pointer("/state_snapshots/0");
    if row.is_some_and(|r| r.get("variable").is_some() && r.get("value").is_some()) {
        p.insert("rows".into(), json!("variables"));
    }
    if let (Some(n), false) = (invocation, every_invocation(text)) {
        p.insert("invocation".into(), json!(n));
    }
    Ok(())
}

/// Program points the question names by a line and an execution of it (`line_58_exec_1`,
/// `line_58_exec_3`): every backticked name with two numbers and the same words around them,
/// the first number one line for all. The label with `{line}` and `{nth}` in their places, the
/// line, and the executions.
fn labelled_points(text: &str) -> Option<(String, u32, Vec<u32>)> {
    // (the words around the numbers, the numbers)
    let split = |b: &str| -> Option<(Vec<String>, Vec<u32>)> {
        let (mut words, mut nums, mut cur, mut digits) =
            (Vec::new(), Vec::new(), String::new(), String::new());
        for c in b.chars() {
            if c.is_ascii_digit() {
                if digits.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                digits.push(c);
            } else {
                if !digits.is_empty() {
                    nums.push(std::mem::take(&mut digits).parse().ok()?);
                }
                if !(c.is_alphanumeric() || c == '_') {
                    return None;
                }
                cur.push(c);
            }
        }
        if !digits.is_empty() {
            nums.push(digits.parse().ok()?);
        }
        words.push(cur);
        (nums.len() == 2).then_some((words, nums))
    };
    let points: Vec<(Vec<String>, Vec<u32>)> =
        backticked(text).iter().filter_map(|b| split(b)).collect();
    let (words, first) = points.first()?;
    if points
        .iter()
        .any(|(w, n)| w != words || n[0] != first[0] || n[1] == 0)
    {
        return None;
    }
    let label = format!("{}{{line}}{}{{nth}}{}", words[0], words[1], words[2]);
    let mut nths: Vec<u32> = points.iter().map(|(_, n)| n[1]).collect();
    nths.sort_unstable();
    nths.dedup();
    Some((label, first[0], nths))
}

/// `line_classes`: over the function's invocations when the prose classifies lines by them
/// ("seen in every invocation", "in at least one but not all invocations"), else over the
/// tests (those running it when it says so); statement lines when it normalises.
pub(super) fn line_classes_params(c: &Ctx, p: &mut Map<String, Value>) {
    let text = c.text;
    if mentions(
        text,
        &[
            "in every invocation",
            "in each invocation",
            "all invocations",
            "every invocation of",
        ],
    ) && !mentions(text, &["in every test", "in all tests", "every test that"])
    {
        p.insert("over".into(), json!("invocations"));
    } else if mentions(
        text,
        &["tests in which", "tests that run", "tests that call"],
    ) {
        p.insert("tests".into(), json!("running"));
    }
    if c.statements {
        p.insert("line_mode".into(), json!("statement"));
    }
}

/// `executed_path`: the invocation and the line mode.
pub(super) fn path_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        statements,
        ..
    } = *c;
    // A cross-function path: the lines of the tracked functions' frames while the target runs.
    let fs = tracked(q, ev);
    if fs.len() > 1 {
        p.insert("functions".into(), json!(fs));
    }
    match invocation {
        // "whenever at least one wrapper frame is active … across the entire pytest run"
        None if every_invocation(text) => {
            p.insert("all_invocations".into(), json!(true));
        }
        _ => {
            p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
        }
    }
    if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    c.located(p);
    Ok(())
}

/// `covered_lines`: nested frames and the line mode.
pub(super) fn covered_lines_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        t,
        text,
        statements,
        ..
    } = *c;
    if text.contains(&format!("{}.{}.<locals>.", t.module, t.qualname)) {
        // "frames of local functions lexically defined inside that method"
        p.insert("nested".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "own lines of",
            "own lines are",
            "its own lines",
            "statement-based coverage",
        ],
    ) {
        // "a physical line counts as covered iff it is one of the own lines of at least one
        // statement that counts as executed": every own line of an executed statement
        p.insert("coverage".into(), json!("own_lines"));
    } else if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    Ok(())
}

/// `state_at`: the observed line, its Nth execution and where it is counted, the locals.
pub(super) fn state_at_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        invocation,
        occurrence,
        ..
    } = *c;
    // The line whose Nth execution is asked: their parser's executed line (`PRECEDING_LINE =
    // 394` beside `OBSERVATION_EVENT_LINE = 395`, the event that reads the state after it) before
    // the observed one.
    let line = ev
        .executed_line()
        .or_else(|| ev.observed_line())
        .or_else(|| statement_named(text))
        .or_else(|| line_after(text, "after", 40))
        .ok_or("the question names no observed line")?;
    p.insert("line".into(), json!(line));
    if str_rendered(text) {
        p.insert("render".into(), json!("str"));
    }
    if counts_across_invocations(text, occurrence, invocation) {
        p.insert("across_invocations".into(), json!(true));
    } else {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    }
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    if statement_lines(text) || mentions(text, &["multi-line assignment", "count it once"]) {
        // one execution per run of the statement, read when it completes
        p.insert("line_mode".into(), json!("statement"));
    }
    let mut vars = variables(q, ev);
    // sorted by name, unless the answer keeps the order the question lists them in
    if !mentions(
        text,
        &[
            "in the variable order listed",
            "in the order listed",
            "in the listed order",
            "in the order given",
            "in the order they are listed",
            "in the same order as listed",
            "in exactly that order",
            "in that order",
            "in this order",
        ],
    ) {
        vars.sort();
    }
    p.insert("variables".into(), json!(vars));
    Ok(())
}

/// `unique_values` / `value_history`: the locals, where they are observed, which invocations.
pub(super) fn values_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        key,
        text,
        invocation,
        occurrence,
        ..
    } = *c;
    if let Some(expr) = computed_value(text) {
        return Err(format!(
            "the question records `{expr}`, a value computed from locals, not a local's repr"
        ));
    }
    let vars = variables(q, ev);
    let Some(var) = vars.first() else {
        return Err("the question names no variable".into());
    };
    if vars.len() > 1 && key == "unique_values" {
        // the unique values of a tuple of locals: the repr of `(a, b)`; or, "combined
        // into one set", the values each of them holds
        p.insert("variables".into(), json!(vars));
        if mentions(
            text,
            &[
                "combined into one",
                "pooled",
                "union of",
                "taken by either",
                "across both variables",
            ],
        ) {
            p.insert("combine".into(), json!("union"));
        }
    } else {
        p.insert("variable".into(), json!(var));
    }
    observation_point(text, ev, p)?;
    let every = mentions(
        text,
        &[
            "for each invocation",
            "every invocation",
            "all invocations",
            "across all",
        ],
    );
    if !every {
        if let Some(n) = invocation {
            p.insert("invocation".into(), json!(n));
        }
    }
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    if key == "value_history"
        && c.q
            .template
            .pointer("/value_history/0")
            .is_some_and(Value::is_string)
    {
        // their history as bare values: each entry's value
        answer.insert("/value_history/*".into(), "/value_history/*/value".into());
    }
    if key == "temporal_value_history" {
        answer.insert("/temporal_value_history".into(), "/value_history".into());
        answer.insert(
            "/temporal_value_history/*".into(),
            "/value_history/*/value".into(),
        );
    }
    Ok(())
}

/// `def_use_pairs`: every invocation, their conventions.
pub(super) fn def_use_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        text,
        statements,
        ..
    } = *c;
    p.insert("all_invocations".into(), json!(true));
    p.insert("definitions".into(), json!("ast"));
    if ev.walks_names_flat() {
        // their parser's definition: every name node of the function, nested scopes' too
        p.insert("scopes".into(), json!("flat"));
    }
    if statements {
        p.insert("line_mode".into(), json!("statement"));
    }
    let vars = variables(q, ev);
    if !vars.is_empty() {
        p.insert("variables".into(), json!(vars));
    }
    for (param, value) in def_use_conventions(text) {
        p.insert(param.into(), json!(value));
    }
    Ok(())
}

/// `def_use_pairs` per invocation (their `invocation_def_use_pairs` + `invocation_dead_defs` +
/// `tracked_variables`): the def-use parameters, and each top-level key bound by its items'
/// keys: records with a `use_line` are the pairs, records with only a `def_line` the dead
/// definitions, a list of strings the variables; an item's `…index` is the invocation.
pub(super) fn def_use_per_invocation(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    def_use_params(c, p)?;
    let top =
        c.q.template
            .as_object()
            .ok_or("the template is not an object")?;
    for (key, v) in top {
        let from = match v.get(0) {
            Some(Value::Object(item)) if item.contains_key("use_line") => "per_invocation_pairs",
            Some(Value::Object(item)) if item.contains_key("def_line") => {
                "per_invocation_dead_defs"
            }
            Some(Value::String(_)) => "variables",
            _ => return Err(format!("no per-invocation def-use part reads as `{key}`")),
        };
        answer.insert(format!("/{key}"), format!("/{from}"));
        if let Some(Value::Object(item)) = v.get(0) {
            for k in item
                .keys()
                .filter(|k| k.ends_with("index") || *k == "invocation")
            {
                answer.insert(format!("/{key}/*/{k}"), format!("/{from}/*/invocation"));
            }
        }
    }
    Ok(())
}

/// `exception_counts`: their tracer's events, the order of `exception_types`.
pub(super) fn exception_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { key, text, .. } = *c;
    // their answer counts their tracer's `exception` events (settrace's): a bare
    // `raise`, which CPython re-raises without calling the tracer and flux infers, is
    // not one ("a bare re-raise ... does not count as another observation")
    p.insert("events".into(), json!("reported"));
    if key == "exception_types"
        && mentions(
            text,
            &[
                "first-occurrence order",
                "first occurrence order",
                "order of first occurrence",
                "order of their first",
                "do not sort",
                "not sorted",
            ],
        )
    {
        // "emit the list in chronological first-occurrence order; do not sort it"
        p.insert("order".into(), json!("first_seen"));
    }
    Ok(())
}

/// `exception_events`: each exception event of the target's frames, as their tracer's log has
/// them (settrace's: `events = "reported"`), builtins named `builtins.X` where their question
/// or parser names types fully qualified.
pub(super) fn exception_events_params(c: &Ctx, p: &mut Map<String, Value>) {
    let Ctx { q, text, .. } = *c;
    p.insert("events".into(), json!("reported"));
    let bare = mentions(
        text,
        &[
            "never `builtins.",
            "never builtins.",
            "bare `type(exc)",
            "bare type name",
        ],
    );
    let qualified = mentions(
        text,
        &[
            "fully qualified exception type",
            "fully-qualified exception type",
            "`builtins.",
        ],
    ) || q
        .parser
        .is_some_and(|src| src.contains("\"builtins.") || src.contains("f\"builtins."));
    if qualified && !bare {
        p.insert("type_names".into(), json!("qualified"));
    }
}

/// `exception_events` grouped per invocation (their `invocations`: per invocation an index, a
/// flag "the caller saw an exception", and the list of its exception events), bound by the
/// item's keys: the `…index` key, the flag (the other boolean), the list, and within the list
/// the `…message` and `handled…` keys.
pub(super) fn exceptions_per_invocation(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    exception_events_params(c, p);
    let item = c.q.template["invocations"][0]
        .as_object()
        .ok_or("`invocations` is not a list of objects")?;
    let Some((list, events)) = item
        .iter()
        .find_map(|(k, v)| Some((k, v.get(0)?.as_object()?)))
    else {
        return Err("`invocations` items hold no list of exception records".into());
    };
    if !events.contains_key("exception_type") {
        return Err(format!(
            "`invocations/*/{list}` is no list of exception records (no `exception_type`)"
        ));
    }
    answer.insert("/invocations".into(), "/per_invocation".into());
    answer.insert(
        format!("/invocations/*/{list}"),
        "/per_invocation/*/exceptions".into(),
    );
    for (k, v) in item {
        if k.ends_with("index") || k == "invocation" {
            answer.insert(
                format!("/invocations/*/{k}"),
                "/per_invocation/*/invocation".into(),
            );
        } else if v == "bool" {
            answer.insert(
                format!("/invocations/*/{k}"),
                "/per_invocation/*/raised".into(),
            );
        }
    }
    for (k, v) in events {
        let from = if k.contains("message") {
            "message"
        } else if k.starts_with("handled") && v == "bool" {
            "handled"
        } else if k.starts_with("handled") {
            "handled_where"
        } else {
            continue;
        };
        answer.insert(
            format!("/invocations/*/{list}/*/{k}"),
            format!("/per_invocation/*/exceptions/*/{from}"),
        );
    }
    Ok(())
}

/// `exception_info`: the exception that propagates out of the target.
pub(super) fn exception_info_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx { t, occurrence, .. } = *c;
    // their flat shape: the exception that propagates out of the target, wherever it was
    // raised (their tracer sees only the target's frames)
    p.remove("function");
    p.insert("escapes".into(), json!(t.qualname));
    p.insert("origins".into(), json!("any"));
    if let Some(n) = occurrence {
        p.insert("occurrence".into(), json!(n));
    }
    answer.insert("/exception_type".into(), "/exception/type".into());
    answer.insert("/exception_message".into(), "/exception/message".into());
    Ok(())
}

/// `call_sequence`: the tracked functions and which calls are entries.
pub(super) fn call_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx {
        q,
        ev,
        t,
        text,
        invocation,
        ..
    } = *c;
    let mut fs = tracked(q, ev);
    // "Do not include `call` events for `main` itself": their parser tracks the target to find
    // the invocation, the answer leaves its own call out.
    let short = t.qualname.rsplit('.').next().unwrap_or(&t.qualname);
    let without_self = [
        format!("do not include `call` events for `{short}` itself"),
        format!("do not include call events for {short} itself"),
        format!("do not include `{short}` itself"),
        format!("excluding `{short}` itself"),
    ]
    .iter()
    .any(|ph| mentions(text, &[ph.to_ascii_lowercase().as_str()]));
    if without_self {
        fs.retain(|f| *f != t.qualname);
    }
    // Callees named in full in other modules than the target's ("restricted to callees whose
    // qualified names are exactly one of: - `src.pkg.util.f` …"): kept as `module.qualname`,
    // matched against the module each frame runs as (`module_names = "runtime"`).
    if fs.is_empty() {
        fs = callees_named_in_full(c);
    }
    if fs.is_empty() {
        return Err("the question lists no tracked functions".into());
    }
    p.insert("functions".into(), json!(fs));
    if invocation.is_none() && every_invocation(text) {
        // "around every invocation of `Command.run` … this question aggregates all of them"
        p.insert("all_invocations".into(), json!(true));
    } else {
        p.insert("invocation".into(), json!(invocation.unwrap_or(1)));
    }
    if mentions(text, &["nested", "transitive"]) {
        p.insert("transitive".into(), json!(true));
    }
    if !without_self
        && (fs.contains(&t.qualname)
            || mentions(
                text,
                &[
                    "invocation itself",
                    "itself.",
                    "target's initial entry",
                    "target's own call",
                ],
            ))
    {
        // the target is one of the tracked functions: its own call is the first entry
        p.insert("include_self".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "each resumption",
            "every resumption",
            "resumptions count",
            "resumption counts",
            "its resumptions",
            "frame resumes",
        ],
    ) {
        // a generator's every `call` event, its own resumptions too
        p.insert("resumptions".into(), json!(true));
    }
    if mentions(
        text,
        &[
            "during that lifetime",
            "during its lifetime",
            "even when the target frame is suspended",
            "while the target frame is suspended",
            "while it is suspended",
        ],
    ) {
        // every call from the invocation's start to its completion, wherever made from
        // (callbacks run while a coroutine awaits)
        p.insert("lifetime".into(), json!(true));
    }
    p.remove("file");
    c.located(p);
    if c.key == "callee_sequence" {
        // a bare list of the callees' dotted names
        answer.insert("/callee_sequence".into(), "/call_sequence".into());
        answer.insert("/callee_sequence/*".into(), "/call_sequence/*/func".into());
    } else {
        answer.insert("/function_call_order".into(), "/call_sequence".into());
    }
    Ok(())
}

/// The dotted names of the passage that introduces the callees to keep ("callees whose
/// qualified names are exactly one of: …"), each of a module under `TRACE_FILE`'s directory
/// (`src/pkg` → `src.pkg.…` or `pkg.…`), in order, once each.
fn callees_named_in_full(c: &Ctx) -> Vec<String> {
    const PHRASES: &[&str] = &[
        "callees whose qualified names are",
        "callees whose names are",
        "restricted to callees",
        "exactly one of",
    ];
    let text = c.text;
    let lower = text.to_ascii_lowercase();
    let Some(at) = PHRASES.iter().filter_map(|ph| lower.find(ph)).min() else {
        return Vec::new();
    };
    let dir = trace_var(c.q.eval, "TRACE_FILE")
        .trim_start_matches("./")
        .trim_end_matches('/');
    let dir = dir
        .strip_suffix(".py")
        .map_or(dir, |f| f.rsplit_once('/').map_or(f, |d| d.0));
    let pkg = dir.replace('/', ".");
    let prefixes = [
        format!("{pkg}."),
        format!("{}.", pkg.trim_start_matches("src.")),
    ];
    let mut out: Vec<String> = Vec::new();
    for n in crate::evidence::dotted_tokens(&text[at..]) {
        if prefixes
            .iter()
            .any(|p| p != "." && n.starts_with(p.as_str()))
            && is_dotted_name(n)
            && !out.iter().any(|x| x == n)
        {
            out.push(n.to_string());
        }
    }
    out
}

/// `invocation_counts` over a class.
pub(super) fn class_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { text, .. } = *c;
    // "every function defined directly in the body of class `C`"
    p.remove("function");
    p.insert("class".into(), json!(class_scope(text)));
    p.insert("count".into(), json!("calls"));
    class_scope_options(text, p);
    c.located(p);
    Ok(())
}

/// The classes whose bodies a call-count question scopes ("an immediate child of either the
/// `Slot` class body or the `Downloader` class body"), or their parser's `TRACKED_CLASSES`.
pub(super) fn class_bodies(text: &str, ev: &Evidence) -> Vec<String> {
    let theirs = ev.classes();
    if !theirs.is_empty() {
        return theirs;
    }
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices("` class body") {
        let Some(open) = text[..i].rfind('`') else {
            continue;
        };
        let name = &text[open + 1..i];
        if is_dotted_name(name) && !out.iter().any(|x| x == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// `invocation_counts` over the methods of several classes.
pub(super) fn classes_counts_params(c: &Ctx, p: &mut Map<String, Value>, classes: Vec<String>) {
    p.remove("function");
    p.insert("classes".into(), json!(classes));
    p.insert("count".into(), json!("calls"));
    excluded_dunders(c.text, p);
    c.located(p);
}

/// `invocation_counts` over the module.
pub(super) fn module_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { text, .. } = *c;
    p.remove("function");
    p.insert("module".into(), json!(true));
    p.insert("count".into(), json!("calls"));
    if mentions(
        text,
        &["methods of every class", "all methods", "every method"],
    ) {
        p.insert("methods".into(), json!(true));
    }
    if mentions(text, &["properties"]) {
        p.insert(
            "exclude_decorated".into(),
            json!(["property", "setter", "deleter"]),
        );
    }
    excluded_dunders(text, p);
    c.located(p);
    Ok(())
}

/// Dunder methods are left out of a call-count question's members when a sentence naming
/// them excludes them ("Exclude nested functions, closures, …, `__init__`, dunder methods").
pub(super) fn excluded_dunders(text: &str, p: &mut Map<String, Value>) {
    let lower = text.to_ascii_lowercase();
    let excludes = lower.split(". ").any(|sentence| {
        (sentence.contains("dunder") || sentence.contains("magic method"))
            && ["exclud", "not count", "ignor", "leave out"]
                .iter()
                .any(|w| sentence.contains(w))
    });
    if excludes {
        p.insert("exclude_dunder".into(), json!(true));
    }
}

/// `covered_functions`: the tracked functions.
pub(super) fn covered_functions_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx { q, ev, .. } = *c;
    p.remove("function");
    let fs = tracked(q, ev);
    if fs.is_empty() {
        return Err("the question lists no tracked functions".into());
    }
    p.insert("functions".into(), json!(fs));
    c.located(p);
    Ok(())
}

/// `line_counts`: the range, the line mode, the invocation.
pub(super) fn line_counts_params(c: &Ctx, p: &mut Map<String, Value>) -> Result<(), String> {
    let Ctx {
        text, invocation, ..
    } = *c;
    match line_range(text) {
        Some((from, to)) => {
            p.insert("from".into(), json!(from));
            p.insert("to".into(), json!(to));
        }
        // "from the first AST body statement (the docstring) through the function's
        // `end_lineno`": line_counts' own `body` range
        None if mentions(
            text,
            &[
                "first ast body statement",
                "function body",
                "the body of",
                "body scope",
            ],
        ) => {}
        None => return Err("the question names no line range".into()),
    }
    if mentions(text, &["innermost enclosing"])
        || mentions(text, &["statement begins"]) && !raw_lines(text)
    {
        // "attribute an event on a continuation line to ... where its innermost
        // enclosing statement begins"
        p.insert("line_mode".into(), json!("statement"));
    }
    if !mentions(
        text,
        &["every invocation", "all invocations", "across every"],
    ) {
        if let Some(n) = invocation {
            p.insert("invocation".into(), json!(n));
        }
    }
    Ok(())
}

/// `predicate_report`: the candidates, flattened for their one-predicate shape.
pub(super) fn predicate_params(
    c: &Ctx,
    p: &mut Map<String, Value>,
    answer: &mut Answer,
) -> Result<(), String> {
    let Ctx { q, key, .. } = *c;
    let (exprs, labels): (Vec<String>, Vec<String>) = labelled_predicates(q)?
        .into_iter()
        .map(|(p, text)| (p.expr, text))
        .unzip();
    if key != "invariant_report" {
        // their one-predicate shape: the report's only item, flattened
        if exprs.len() != 1 {
            return Err("the question does not name exactly one candidate predicate".into());
        }
        for (to, from) in [
            (
                "/is_invariant_always_held",
                "/invariant_report/0/held_always",
            ),
            (
                "/total_iterations_observed",
                "/invariant_report/0/observations",
            ),
            (
                "/violating_iteration_count",
                "/invariant_report/0/violations",
            ),
        ] {
            answer.insert(to.into(), from.into());
        }
    }
    if exprs != labels {
        // a candidate given in prose is reported in the question's words
        p.insert("labels".into(), json!(labels));
    }
    p.insert("predicates".into(), json!(exprs));
    Ok(())
}
