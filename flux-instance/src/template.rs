//! Answer templates: the JSON shape of an answer with type names as leaves.
//!
//! Grammar (a template is JSON):
//! - a string leaf names the type of the value there: `int`, `float` (any number), `str`,
//!   `bool`, `null`, `any`, or alternatives joined by `|` (`"int|null"`);
//! - a list of exactly one template: every item of the answer's list matches it (any length);
//! - an object: the answer has exactly these keys, each matching its template; an object with
//!   the single key `"*"` is a map: any keys, every value matching the template under `"*"`.
//!
//! Paths in errors and in `order_insensitive` are JSON-pointer-like: `/executed_path/3/line` in
//! errors; in templates, `/*` steps into list items or map values (`/coverage/*/lines`).
use serde_json::Value;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    Int,
    Float,
    Str,
    Bool,
    Null,
    Any,
}

impl Leaf {
    fn parse(s: &str) -> Option<Leaf> {
        Some(match s {
            "int" => Leaf::Int,
            "float" => Leaf::Float,
            "str" => Leaf::Str,
            "bool" => Leaf::Bool,
            "null" => Leaf::Null,
            "any" => Leaf::Any,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Leaf::Int => "int",
            Leaf::Float => "float",
            Leaf::Str => "str",
            Leaf::Bool => "bool",
            Leaf::Null => "null",
            Leaf::Any => "any",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Leaf::Int => v.is_i64() || v.is_u64(),
            Leaf::Float => v.is_number(),
            Leaf::Str => v.is_string(),
            Leaf::Bool => v.is_boolean(),
            Leaf::Null => v.is_null(),
            Leaf::Any => true,
        }
    }
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub enum Template {
    Leaf(Vec<Leaf>),
    List(Box<Template>),
    Map(Box<Template>),
    Object(Vec<(String, Template)>),
}

/// What is wrong, and where (a JSON-pointer-like path; `/` is the root).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at {path}: {problem}")]
pub struct TemplateError {
    pub path: String,
    pub problem: String,
}

fn err(path: &str, problem: impl Into<String>) -> TemplateError {
    TemplateError {
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
        problem: problem.into(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

impl Template {
    /// Parse template JSON text.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| err("", format!("not valid JSON: {e}")))?;
        Template::from_value(&v)
    }

    /// Parse an already-decoded template.
    pub fn from_value(v: &Value) -> Result<Template, TemplateError> {
        Self::build(v, "")
    }

    fn build(v: &Value, path: &str) -> Result<Template, TemplateError> {
        match v {
            Value::String(s) => {
                let mut leaves = Vec::new();
                for part in s.split('|') {
                    let leaf = Leaf::parse(part.trim()).ok_or_else(|| {
                        err(
                            path,
                            format!(
                                "unknown type name {part:?}; expected int, float, str, bool, \
                                 null or any (alternatives joined by |)"
                            ),
                        )
                    })?;
                    leaves.push(leaf);
                }
                Ok(Template::Leaf(leaves))
            }
            Value::Array(items) => match items.as_slice() {
                [one] => Ok(Template::List(Box::new(Self::build(
                    one,
                    &format!("{path}/0"),
                )?))),
                _ => Err(err(
                    path,
                    format!(
                        "a list template has exactly one element (the item template), got {}",
                        items.len()
                    ),
                )),
            },
            Value::Object(map) => {
                if map.len() == 1 {
                    if let Some(inner) = map.get("*") {
                        return Ok(Template::Map(Box::new(Self::build(
                            inner,
                            &format!("{path}/*"),
                        )?)));
                    }
                }
                if map.is_empty() {
                    return Err(err(path, "an object template needs at least one key"));
                }
                let mut fields = Vec::new();
                for (k, v) in map {
                    fields.push((k.clone(), Self::build(v, &format!("{path}/{k}"))?));
                }
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Template::Object(fields))
            }
            other => Err(err(
                path,
                format!(
                    "template leaves are type names (strings), got {}",
                    short(other)
                ),
            )),
        }
    }

    /// Check that `answer` has this template's shape and leaf types.
    pub fn validate(&self, answer: &Value) -> Result<(), TemplateError> {
        self.check(answer, "")
    }

    fn check(&self, v: &Value, path: &str) -> Result<(), TemplateError> {
        match self {
            Template::Leaf(leaves) => {
                if leaves.iter().any(|l| l.accepts(v)) {
                    Ok(())
                } else {
                    let want: Vec<&str> = leaves.iter().map(|l| l.name()).collect();
                    Err(err(
                        path,
                        format!(
                            "expected {}, got {} {}",
                            want.join(" or "),
                            kind_of(v),
                            short(v)
                        ),
                    ))
                }
            }
            Template::List(item) => {
                let Value::Array(items) = v else {
                    return Err(err(
                        path,
                        format!("expected a list, got {} {}", kind_of(v), short(v)),
                    ));
                };
                for (i, x) in items.iter().enumerate() {
                    item.check(x, &format!("{path}/{i}"))?;
                }
                Ok(())
            }
            Template::Map(inner) => {
                let Value::Object(map) = v else {
                    return Err(err(
                        path,
                        format!("expected an object, got {} {}", kind_of(v), short(v)),
                    ));
                };
                for (k, x) in map {
                    inner.check(x, &format!("{path}/{k}"))?;
                }
                Ok(())
            }
            Template::Object(fields) => {
                let Value::Object(map) = v else {
                    return Err(err(
                        path,
                        format!("expected an object, got {} {}", kind_of(v), short(v)),
                    ));
                };
                for (k, t) in fields {
                    match map.get(k) {
                        Some(x) => t.check(x, &format!("{path}/{k}"))?,
                        None => return Err(err(path, format!("missing key `{k}`"))),
                    }
                }
                if let Some(extra) = map.keys().find(|k| !fields.iter().any(|(f, _)| f == *k)) {
                    return Err(err(path, format!("unexpected key `{extra}`")));
                }
                Ok(())
            }
        }
    }

    /// The template at a path such as `/coverage/*/lines` (`*` steps into lists and maps).
    pub fn at(&self, pointer: &str) -> Option<&Template> {
        let mut t = self;
        for seg in pointer.split('/').filter(|s| !s.is_empty()) {
            t = match (t, seg) {
                (Template::List(item), "*") | (Template::Map(item), "*") => item,
                (Template::Object(fields), key) => &fields.iter().find(|(k, _)| k == key)?.1,
                _ => return None,
            };
        }
        Some(t)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Strings as JSON writes them (not Rust's `{:?}`, whose `\u{7f}` is no JSON): the
            // text shown in an error parses back as the same template.
            Template::Leaf(ls) => {
                let names: Vec<&str> = ls.iter().map(|l| l.name()).collect();
                f.write_str(&Value::String(names.join("|")).to_string())
            }
            Template::List(item) => write!(f, "[{item}]"),
            Template::Map(item) => write!(f, "{{\"*\": {item}}}"),
            Template::Object(fields) => {
                f.write_str("{")?;
                for (i, (k, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {t}", Value::String(k.clone()))?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_answers_pass() {
        let t = Template::parse(r#"{"executed_path": [{"line": "int"}]}"#).unwrap();
        t.validate(&json!({"executed_path": [{"line": 3}, {"line": 4}]}))
            .unwrap();
        t.validate(&json!({"executed_path": []})).unwrap();
        let t =
            Template::parse(r#"{"g": {"*": ["str"]}, "x": "int|null", "f": "float", "a": "any"}"#)
                .unwrap();
        t.validate(&json!({"g": {"f": ["g", "h"]}, "x": null, "f": 1, "a": [1]}))
            .unwrap();
    }

    #[test]
    fn errors_name_the_path_and_the_problem() {
        let t = Template::parse(r#"{"executed_path": [{"line": "int"}]}"#).unwrap();
        let e = t
            .validate(&json!({"executed_path": [{"line": 3}, {"line": "4"}]}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "at /executed_path/1/line: expected int, got str \"4\""
        );
        let e = t.validate(&json!({})).unwrap_err();
        assert_eq!(e.to_string(), "at /: missing key `executed_path`");
        let e = t
            .validate(&json!({"executed_path": [], "extra": 1}))
            .unwrap_err();
        assert_eq!(e.to_string(), "at /: unexpected key `extra`");
        let e = t
            .validate(&json!({"executed_path": {"line": 1}}))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("at /executed_path: expected a list"),
            "{e}"
        );
        let e = Template::parse(r#"{"a": ["int", "str"]}"#).unwrap_err();
        assert_eq!(e.path, "/a");
        let e = Template::parse(r#"{"a": "integer"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("at /a: unknown type name \"integer\""),
            "{e}"
        );
        assert!(Template::parse(r#"{"a": 3}"#).is_err());
        assert!(Template::parse("{")
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
    }

    #[test]
    fn pointers_find_lists() {
        let t = Template::parse(r#"{"coverage": [{"test": "str", "lines": ["int"]}]}"#).unwrap();
        assert!(matches!(t.at("/coverage/*/lines"), Some(Template::List(_))));
        assert!(matches!(t.at("/coverage"), Some(Template::List(_))));
        assert!(t.at("/coverage/lines").is_none());
        assert_eq!(
            t.to_string(),
            r#"{"coverage": [{"lines": ["int"], "test": "str"}]}"#
        );
    }
}
