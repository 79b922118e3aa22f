//! SWE-Flux's `eval.sh`, read (never run): the tracer's variables it exports, the test it runs,
//! and where its files live under `/testbed`.
//!
//! Their `eval.sh` follows one skeleton (their generation contract): plain assignments
//! (`INSTANCE_ID="…"`, `TEST_ID="<repo>_qa/<id>/files/testcase.py::Class::test"`,
//! `LOG_DIR="$ROOT_DIR/logs/…"`), `export TRACE_…="…"` lines, `cd "$ROOT_DIR"`, one
//! `pytest -rA -s "$TEST_ID"` and one `python <qa dir>/parser.py --trace-log … --out …`.
//! This reader understands assignments with double or single quotes or none, `$NAME`,
//! `${NAME}` and `${1:-default}` (the first argument: the root, `/testbed` by default), and
//! refuses a script that does not have the skeleton's parts, naming what is missing.
use std::collections::BTreeMap;

/// What an `eval.sh` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalSh {
    /// The directory it works in (`${1:-/testbed}` → `/testbed`).
    pub root: String,
    /// The pytest node id it runs (`flask_qa/<id>/files/testcase.py::C::test`).
    pub test_id: String,
    /// Every `export`ed variable, expanded, in order.
    pub exports: Vec<(String, String)>,
    /// The arguments of its `pytest` line after `pytest`, expanded.
    pub pytest_args: Vec<String>,
    /// The parser it runs, relative to the root (`flask_qa/<id>/files/parser.py`).
    pub parser: String,
    /// The parser line's words after the parser, expanded (`--trace-log`, `/testbed/logs/…`).
    pub parser_args: Vec<String>,
    /// Where the pytest line's output goes (`pytest … 2>&1 | tee "$PYTEST_LOG"`), expanded.
    pub pytest_output: Option<String>,
}

/// What the parser is given besides the log and `--out`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParserInputs {
    /// The option that receives pytest's output (kedro's `--pytest-log`: test ids in the
    /// order pytest ran them, read from its `-rA` summary).
    pub pytest_output: Option<String>,
}

impl EvalSh {
    /// The options of an exported `PYTEST_ADDOPTS` (kedro's eval.sh exports `--no-cov`: its
    /// pytest-cov config fails under a tracer otherwise), as words: flux's test command carries
    /// no environment of theirs, and pytest reads that variable as options before its own.
    pub fn pytest_addopts(&self) -> Vec<String> {
        self.exports
            .iter()
            .rev()
            .find(|(k, _)| k == "PYTEST_ADDOPTS")
            .map(|(_, v)| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The TRACE_* variables among the exports.
    pub fn trace_vars(&self) -> Vec<(String, String)> {
        self.exports
            .iter()
            .filter(|(k, _)| k.starts_with("TRACE_"))
            .cloned()
            .collect()
    }

    /// The directory of the test file under the root (`flask_qa/<id>/files`).
    pub fn qa_dir(&self) -> &str {
        let file = self.test_id.split("::").next().unwrap_or("");
        file.rsplit_once('/').map_or("", |(d, _)| d)
    }

    /// The test file's name (`testcase.py`).
    pub fn test_file(&self) -> &str {
        let file = self.test_id.split("::").next().unwrap_or("");
        file.rsplit('/').next().unwrap_or(file)
    }
    /// The parser's options, each read from where its value comes from: the trace log
    /// (`TRACE_OUT`), `--out`, or the file the pytest line's output is teed to. Any other
    /// option is refused by name: flux could not give it what their harness gave it.
    pub fn parser_inputs(&self) -> Result<ParserInputs, String> {
        let trace_out = self
            .exports
            .iter()
            .rev()
            .find(|(k, _)| k == "TRACE_OUT")
            .map(|(_, v)| v.as_str());
        let mut inputs = ParserInputs::default();
        let mut args = self.parser_args.iter();
        while let Some(a) = args.next() {
            let (opt, value) = match a.split_once('=') {
                Some((o, v)) if o.starts_with("--") => (o.to_string(), v.to_string()),
                _ if a.starts_with('-') => (a.clone(), args.next().cloned().unwrap_or_default()),
                _ => return Err(format!("the parser's argument `{a}` is not an option")),
            };
            match opt.as_str() {
                "--trace-log" | "--out" => {}
                _ if Some(value.as_str()) == trace_out => {
                    return Err(format!(
                        "the parser reads the trace log through `{opt}`, flux gives it as                          `--trace-log`"
                    ))
                }
                _ if Some(&value) == self.pytest_output.as_ref() => {
                    inputs.pytest_output = Some(opt)
                }
                _ => {
                    return Err(format!(
                        "the parser's option `{opt} {value}` names nothing flux can give it                          (only the trace log, `--out` and the pytest line's output)"
                    ))
                }
            }
        }
        Ok(inputs)
    }
}

/// Shell words of one line (quotes removed, variables expanded from `vars`); `#` starts a
/// comment outside quotes.
fn words(line: &str, vars: &BTreeMap<String, String>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unterminated '".into()),
                    }
                }
            }
            '"' => {
                has = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => {
                            if let Some(x) = chars.next() {
                                if !matches!(x, '"' | '\\' | '$' | '`') {
                                    cur.push('\\');
                                }
                                cur.push(x);
                            }
                        }
                        Some('$') => cur.push_str(&expand(&mut chars, vars)?),
                        Some(x) => cur.push(x),
                        None => return Err("unterminated \"".into()),
                    }
                }
            }
            '\\' => {
                has = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            '$' => {
                has = true;
                cur.push_str(&expand(&mut chars, vars)?);
            }
            '#' if !has && cur.is_empty() => break,
            c if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// After a `$`: `NAME`, `{NAME}`, `{1:-default}`, `1`.
fn expand(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    vars: &BTreeMap<String, String>,
) -> Result<String, String> {
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if chars.peek() == Some(&'{') {
        chars.next();
        let mut inner = String::new();
        loop {
            match chars.next() {
                Some('}') => break,
                Some(c) => inner.push(c),
                None => return Err("unterminated ${".into()),
            }
        }
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n.to_string(), Some(d.to_string())),
            None => (inner.clone(), None),
        };
        return match (vars.get(&name), default) {
            (Some(v), _) if !v.is_empty() => Ok(v.clone()),
            (_, Some(d)) => Ok(d),
            (Some(v), None) => Ok(v.clone()),
            (None, None) => Err(format!("${{{name}}} is not set")),
        };
    }
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        if !name_char(c) {
            break;
        }
        name.push(c);
        chars.next();
        if name.chars().all(|c| c.is_ascii_digit()) {
            break; // $1 is one digit
        }
    }
    if name.is_empty() {
        return Ok("$".into());
    }
    vars.get(&name)
        .cloned()
        .ok_or_else(|| format!("${name} is not set"))
}

/// Read an `eval.sh` in SWE-Flux's skeleton.
pub fn parse(text: &str) -> Result<EvalSh, String> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut exports = Vec::new();
    let mut pytest_args = None;
    let mut parser = None;
    let mut parser_args = Vec::new();
    let mut pytest_output = None;
    let mut root = None;
    // Join continuation lines first.
    let mut lines = Vec::new();
    let mut acc = String::new();
    for l in text.lines() {
        if let Some(head) = l.strip_suffix('\\') {
            acc.push_str(head);
            acc.push(' ');
            continue;
        }
        acc.push_str(l);
        lines.push(std::mem::take(&mut acc));
    }
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ctx = |e: String| format!("eval.sh line {}: {e}: {t}", n + 1);
        // The first pipeline stage only (`pytest … | tee …`).
        let head = t.split(" | ").next().unwrap_or(t);
        let (is_export, rest) = match head.strip_prefix("export ") {
            Some(r) => (true, r.trim()),
            None => (false, head),
        };
        if let Some((name, value)) = rest.split_once('=') {
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                let w = words(value, &vars).map_err(ctx)?;
                let v = w.join(" ");
                if name == "ROOT_DIR" {
                    root = Some(v.clone());
                }
                vars.insert(name.to_string(), v.clone());
                if is_export {
                    exports.push((name.to_string(), v));
                }
                continue;
            }
        }
        let w = match words(head, &vars) {
            Ok(w) => w,
            Err(_) => continue, // a line of no interest that uses an unset variable
        };
        match w.first().map(String::as_str) {
            Some("pytest") => {
                // Without redirections (`2>&1`).
                let redirect = |a: &str| {
                    let a = a.trim_start_matches(|c: char| c.is_ascii_digit());
                    a.starts_with('>') || a.starts_with('<')
                };
                pytest_args = Some(w[1..].iter().filter(|a| !redirect(a)).cloned().collect());
                // `… 2>&1 | tee FILE`: the file their parser may read pytest's output from.
                pytest_output = t
                    .split(" | ")
                    .nth(1)
                    .and_then(|tail| words(tail, &vars).ok())
                    .filter(|w| w.first().is_some_and(|c| c == "tee"))
                    .and_then(|w| w.into_iter().skip(1).rfind(|a| !a.starts_with('-')));
            }
            Some(p)
                if p.starts_with("python")
                    && w.get(1).is_some_and(|a| a.ends_with("parser.py")) =>
            {
                parser = Some(w[1].clone());
                parser_args = w[2..].to_vec();
            }
            _ => {}
        }
    }
    let test_id = vars
        .get("TEST_ID")
        .cloned()
        .ok_or("eval.sh sets no TEST_ID")?;
    Ok(EvalSh {
        root: root.unwrap_or_else(|| "/testbed".into()),
        test_id,
        exports,
        pytest_args: pytest_args.ok_or("eval.sh runs no `pytest` line")?,
        parser: parser.ok_or("eval.sh runs no `python …/parser.py` line")?,
        parser_args,
        pytest_output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An eval.sh in their skeleton, written for this test.
    pub const SAMPLE: &str = r#"#!/bin/bash
set -euo pipefail

ROOT_DIR="${1:-/testbed}"
INSTANCE_ID="pkg_f_s2_loops"
TEST_ID="pkg_qa/pkg_f_s2_loops/files/testcase.py::TestF::test_loop"
LOG_DIR="$ROOT_DIR/logs/pkg_qa/$INSTANCE_ID"

TRACE_LOG="$LOG_DIR/trace.log"

mkdir -p "$LOG_DIR"
cd "$ROOT_DIR"

export TRACE_ON="1"
export TRACE_FILE="src/pkg/mod.py"
export TRACE_FUNC='f,C.g'
export TRACE_EVENTS="line,call,return,exception"
export TRACE_LOG_ALL_LINES=1
export TRACE_OUT="$TRACE_LOG"

pytest -rA -s "$TEST_ID" 2>&1 | tee "$LOG_DIR/pytest.log"

python pkg_qa/pkg_f_s2_loops/files/parser.py \
  --trace-log "$TRACE_LOG" \
  --out "$LOG_DIR/oracle.json" | tee "$LOG_DIR/oracle.log"
"#;

    /// kedro session_run_s5_exceptions (dev) exports `PYTEST_ADDOPTS="--no-cov"`; without it
    /// the test failed in pytest-cov's start under both twins.
    #[test]
    fn exported_pytest_addopts_become_options() {
        let e = parse(&SAMPLE.replace(
            "export TRACE_OUT=\"$TRACE_LOG\"\n",
            "export TRACE_OUT=\"$TRACE_LOG\"\nexport PYTEST_ADDOPTS=\"--no-cov -p no:cacheprovider\"\n",
        ))
        .unwrap();
        assert_eq!(e.pytest_addopts(), ["--no-cov", "-p", "no:cacheprovider"]);
        assert!(parse(SAMPLE).unwrap().pytest_addopts().is_empty());
    }

    #[test]
    fn the_skeleton_is_read_and_expanded() {
        let e = parse(SAMPLE).unwrap();
        assert_eq!(e.root, "/testbed");
        assert_eq!(
            e.test_id,
            "pkg_qa/pkg_f_s2_loops/files/testcase.py::TestF::test_loop"
        );
        assert_eq!(e.qa_dir(), "pkg_qa/pkg_f_s2_loops/files");
        assert_eq!(e.test_file(), "testcase.py");
        assert_eq!(e.parser, "pkg_qa/pkg_f_s2_loops/files/parser.py");
        assert_eq!(e.pytest_args, ["-rA", "-s", e.test_id.as_str()]);
        let vars = e.trace_vars();
        assert_eq!(vars.len(), 6);
        assert_eq!(vars[2], ("TRACE_FUNC".into(), "f,C.g".into()));
        assert_eq!(vars[4], ("TRACE_LOG_ALL_LINES".into(), "1".into()));
        assert_eq!(
            vars[5],
            (
                "TRACE_OUT".into(),
                "/testbed/logs/pkg_qa/pkg_f_s2_loops/trace.log".into()
            )
        );
    }

    /// kedro pipeline_validate_inputs_outputs_m5_exceptions (dev): their parser also takes
    /// `--pytest-log "$PYTEST_LOG"` (test ids from pytest's `-rA` summary); flux ran it with
    /// `--trace-log` and `--out` only, so it failed with "the following arguments are
    /// required: --pytest-log".
    #[test]
    fn a_parser_reading_pytest_output_is_given_it() {
        let plain = parse(SAMPLE).unwrap();
        assert_eq!(
            plain.pytest_output.as_deref(),
            Some("/testbed/logs/pkg_qa/pkg_f_s2_loops/pytest.log")
        );
        assert_eq!(plain.parser_inputs().unwrap(), ParserInputs::default());
        let with = SAMPLE.replace(
            "  --out \"$LOG_DIR/oracle.json\"",
            "  --pytest-log \"$LOG_DIR/pytest.log\" \\\n  --out \"$LOG_DIR/oracle.json\"",
        );
        let e = parse(&with).unwrap();
        assert_eq!(
            e.parser_args,
            [
                "--trace-log",
                "/testbed/logs/pkg_qa/pkg_f_s2_loops/trace.log",
                "--pytest-log",
                "/testbed/logs/pkg_qa/pkg_f_s2_loops/pytest.log",
                "--out",
                "/testbed/logs/pkg_qa/pkg_f_s2_loops/oracle.json"
            ]
        );
        assert_eq!(
            e.parser_inputs().unwrap().pytest_output.as_deref(),
            Some("--pytest-log")
        );
        // `--opt=value` too; an option flux cannot serve is refused by name.
        let eq = with.replace("--pytest-log \"", "--pytest-log=\"");
        assert_eq!(
            parse(&eq)
                .unwrap()
                .parser_inputs()
                .unwrap()
                .pytest_output
                .as_deref(),
            Some("--pytest-log")
        );
        let other = with.replace(
            "--pytest-log \"$LOG_DIR/pytest.log\"",
            "--coverage \"$LOG_DIR/cov.xml\"",
        );
        let why = parse(&other).unwrap().parser_inputs().unwrap_err();
        assert!(
            why.contains("`--coverage /testbed/logs/pkg_qa/pkg_f_s2_loops/cov.xml`"),
            "{why}"
        );
    }

    #[test]
    fn a_script_without_the_skeleton_is_refused_naming_what_is_missing() {
        let no_parser = SAMPLE.replace("python pkg_qa", "echo pkg_qa");
        assert!(parse(&no_parser).unwrap_err().contains("parser.py"));
        let no_test = SAMPLE.replace("TEST_ID=", "TEST=");
        assert!(parse(&no_test).unwrap_err().contains("TEST_ID"));
        assert!(parse("export TRACE_ON=\"1")
            .unwrap_err()
            .contains("unterminated"));
    }
}
