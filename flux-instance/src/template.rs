//! Answer templates, and how an instance's answer is cut from what its extractor computes.
//!
//! The shape of an answer belongs to the instance (SWE-Flux's questions choose their own keys
//! and layout), while an extractor computes a fixed record (`Extractor::shape`: every field an
//! instance may select, e.g. `executed_path` items carry `file`, `abs_file`, `func`, `module`,
//! `qualname` and `line`). An instance gives its `template` (the answer's shape with type names
//! as leaves, the grammar of [`flux_extract::shape`]) and, where its names differ from the
//! extractor's, `[extractor.answer]`: a map from template paths to paths of the extractor's
//! output. [`Projection::compile`] checks at load that every template node maps to a node of
//! the extractor's shape of a compatible type; [`Projection::apply`] cuts the answer at harvest.
//! No per-instance code.
//!
//! Paths are JSON-pointer-like: `/key`, `/*` for every item of a list (or value of a map), and
//! in source paths also `/N` for the Nth item of a list (from 0). Resolution of the source of a
//! template node, from the root down:
//! - a node bound in `[extractor.answer]` takes its source path from there;
//! - otherwise an object's key `k` reads `k` of its parent's source, and a list's items read
//!   `*` of the list's source: with no bindings, a template selects the extractor's fields of
//!   the same names (a template equal to the extractor's shape is the identity);
//! - the k-th `*` of a source path is the item that the k-th enclosing template list is at, so
//!   a source path's `*`-prefixes must be those lists' sources; fewer `*`s than enclosing lists
//!   repeat one value in every item (`{"file": ...}` of the function in every path item).
//!
//! Types: a template leaf accepts a source leaf whose every type it covers (`float` covers
//! `int`, `any` covers everything, also lists and objects); lists map to lists, maps to maps,
//! objects to objects or to nothing at all when each of their keys is bound.
use flux_extract::shape::{err, kind_of, short};
pub use flux_extract::shape::{Leaf, Shape as Template, ShapeError as TemplateError};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One segment of a source path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Star,
    Index(usize),
}

fn parse_path(p: &str) -> Vec<Seg> {
    p.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "*" => Seg::Star,
            _ => match s.parse::<usize>() {
                Ok(n) => Seg::Index(n),
                Err(_) => Seg::Key(s.to_string()),
            },
        })
        .collect()
}

fn show(path: &[Seg]) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.iter()
        .map(|s| match s {
            Seg::Key(k) => format!("/{k}"),
            Seg::Star => "/*".into(),
            Seg::Index(n) => format!("/{n}"),
        })
        .collect()
}

fn stars(path: &[Seg]) -> usize {
    path.iter().filter(|s| **s == Seg::Star).count()
}

/// How to build one node of the answer.
#[derive(Clone, Debug, PartialEq)]
enum Plan {
    /// Copy the value at `src`.
    Copy {
        src: Vec<Seg>,
    },
    /// For each item of the list (or value of the map) at `src`, build `item`.
    List {
        src: Vec<Seg>,
        item: Box<Plan>,
    },
    Map {
        src: Vec<Seg>,
        item: Box<Plan>,
    },
    Object(Vec<(String, Plan)>),
}

/// A compiled template: checked against an extractor's shape, ready to cut answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    plan: Plan,
    /// True when the answer is the extractor's output unchanged.
    identity: bool,
}

/// The shape node at `path` of `shape` (`*` and indices step into lists and maps).
fn shape_at<'s>(shape: &'s Template, path: &[Seg]) -> Result<&'s Template, String> {
    let mut t = shape;
    for (i, seg) in path.iter().enumerate() {
        t = match (t, seg) {
            (Template::List(item), Seg::Star | Seg::Index(_)) => item,
            (Template::Map(item), Seg::Star) => item,
            (Template::Object(fields), Seg::Key(k)) => match fields.iter().find(|(f, _)| f == k) {
                Some((_, x)) => x,
                None => {
                    let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
                    return Err(format!(
                        "the extractor computes no `{k}` at {} (it has: {})",
                        show(&path[..i]),
                        names.join(", ")
                    ));
                }
            },
            (other, seg) => {
                return Err(format!(
                    "{} is {} in the extractor's output, not {}",
                    show(&path[..i]),
                    describe(other),
                    match seg {
                        Seg::Key(k) => format!("an object with `{k}`"),
                        _ => "a list".to_string(),
                    }
                ))
            }
        };
    }
    Ok(t)
}

fn describe(t: &Template) -> String {
    match t {
        Template::Leaf(_) => format!("a value {t}"),
        Template::List(_) => "a list".into(),
        Template::Map(_) => "a map".into(),
        Template::Object(_) => "an object".into(),
    }
}

struct Compiler<'a> {
    shape: &'a Template,
    bindings: BTreeMap<String, Vec<Seg>>,
    used: std::collections::BTreeSet<String>,
}

impl Compiler<'_> {
    /// Compile the template node `t` at template path `tpath`, whose default source is `src`,
    /// under the enclosing lists' sources `lists` (each ending in `*`).
    fn node(
        &mut self,
        t: &Template,
        tpath: &str,
        default_src: Vec<Seg>,
        lists: &[Vec<Seg>],
    ) -> Result<Plan, TemplateError> {
        let key = if tpath.is_empty() { "/" } else { tpath };
        let (src, bound) = match self.bindings.get(key) {
            Some(s) => {
                self.used.insert(key.to_string());
                (s.clone(), true)
            }
            None => (default_src, false),
        };
        let here = |p: &str| err(tpath, p.to_string());
        // The k-th `*` of the source must be the k-th enclosing list's item.
        let n = stars(&src);
        if n > lists.len() {
            return Err(here(&format!(
                "source {} steps into {n} list(s) but the template has only {} around this \
                 position",
                show(&src),
                lists.len()
            )));
        }
        let mut k = 0;
        for (i, seg) in src.iter().enumerate() {
            if *seg == Seg::Star {
                if src[..=i] != lists[k][..] {
                    return Err(here(&format!(
                        "source {}: its `*` at {} is not the list the template iterates here \
                         ({})",
                        show(&src),
                        show(&src[..=i]),
                        show(&lists[k])
                    )));
                }
                k += 1;
            }
        }
        match t {
            Template::Object(fields) => {
                // An object reads its keys under its source; it need not exist itself when
                // every key is bound elsewhere.
                let mut out = Vec::new();
                for (name, sub) in fields {
                    let mut child = src.clone();
                    child.push(Seg::Key(name.clone()));
                    let p = self.node(sub, &format!("{tpath}/{name}"), child, lists)?;
                    out.push((name.clone(), p));
                }
                if bound {
                    shape_at(self.shape, &src).map_err(|m| here(&m))?;
                }
                Ok(Plan::Object(out))
            }
            Template::List(item) | Template::Map(item) => {
                let s = shape_at(self.shape, &src).map_err(|m| here(&m))?;
                let is_list = matches!(t, Template::List(_));
                match (s, is_list) {
                    (Template::List(_), true) | (Template::Map(_), false) => {}
                    (other, _) => {
                        return Err(here(&format!(
                            "the template has {} but the extractor's {} is {}",
                            if is_list { "a list" } else { "a map" },
                            show(&src),
                            describe(other)
                        )))
                    }
                }
                let mut item_src = src.clone();
                item_src.push(Seg::Star);
                let mut inner = lists.to_vec();
                inner.push(item_src.clone());
                let p = self.node(item, &format!("{tpath}/*"), item_src, &inner)?;
                Ok(if is_list {
                    Plan::List {
                        src,
                        item: Box::new(p),
                    }
                } else {
                    Plan::Map {
                        src,
                        item: Box::new(p),
                    }
                })
            }
            Template::Leaf(want) => {
                let s = shape_at(self.shape, &src).map_err(|m| here(&m))?;
                let ok = match s {
                    Template::Leaf(have) => have.iter().all(|h| want.iter().any(|w| w.covers(*h))),
                    _ => want.contains(&Leaf::Any),
                };
                if !ok {
                    return Err(here(&format!(
                        "the template wants {t} but the extractor's {} is {}",
                        show(&src),
                        describe(s)
                    )));
                }
                Ok(Plan::Copy { src })
            }
        }
    }
}

impl Projection {
    /// The answer is the output unchanged (instances answered outside flux's extractors, and
    /// flux gen's call-graph runs).
    pub fn identity() -> Projection {
        Projection {
            plan: Plan::Copy { src: Vec::new() },
            identity: true,
        }
    }

    /// Check `template` against the extractor's `shape` with `bindings` (template path → source
    /// path; see the module doc). Errors name the template path and what does not fit.
    pub fn compile(
        template: &Template,
        shape: &Template,
        bindings: &BTreeMap<String, String>,
    ) -> Result<Projection, TemplateError> {
        let mut c = Compiler {
            shape,
            bindings: bindings
                .iter()
                .map(|(k, v)| {
                    let k = if k.is_empty() {
                        "/".to_string()
                    } else {
                        k.clone()
                    };
                    (k, parse_path(v))
                })
                .collect(),
            used: Default::default(),
        };
        for k in c.bindings.keys() {
            if template.at(k).is_none() {
                return Err(err(
                    k,
                    "is bound in [extractor.answer] but is not a path of the template (use /* \
                     to step into lists)",
                ));
            }
        }
        let plan = c.node(template, "", Vec::new(), &[])?;
        Ok(Projection {
            identity: bindings.is_empty() && template == shape,
            plan,
        })
    }

    /// Cut the answer from the extractor's output (which satisfies the shape it was compiled
    /// against). An error means the output does not have the shape the extractor declares.
    pub fn apply(&self, output: &Value) -> Result<Value, TemplateError> {
        if self.identity {
            return Ok(output.clone());
        }
        build(&self.plan, output, &[])
    }
}

/// The value at `path` of `root`, where the k-th `*` is `items[k]`.
fn fetch<'v>(
    root: &'v Value,
    path: &[Seg],
    items: &[&'v Value],
) -> Result<&'v Value, TemplateError> {
    let last_star = path.iter().rposition(|s| *s == Seg::Star);
    let (mut v, rest) = match last_star {
        Some(i) => {
            let k = stars(&path[..i]);
            (items[k], &path[i + 1..])
        }
        None => (root, path),
    };
    for seg in rest {
        v = match (v, seg) {
            (Value::Object(m), Seg::Key(k)) => m
                .get(k)
                .ok_or_else(|| err(&show(path), format!("the extractor's output has no `{k}`")))?,
            (Value::Array(a), Seg::Index(n)) => a.get(*n).ok_or_else(|| {
                err(
                    &show(path),
                    format!(
                        "the extractor's list has {} item(s), not {}",
                        a.len(),
                        n + 1
                    ),
                )
            })?,
            (other, _) => {
                return Err(err(
                    &show(path),
                    format!(
                        "expected a container, got {} {}",
                        kind_of(other),
                        short(other)
                    ),
                ))
            }
        };
    }
    Ok(v)
}

fn build<'v>(plan: &Plan, root: &'v Value, items: &[&'v Value]) -> Result<Value, TemplateError> {
    match plan {
        Plan::Copy { src } => Ok(fetch(root, src, items)?.clone()),
        Plan::Object(fields) => {
            let mut m = Map::new();
            for (k, p) in fields {
                m.insert(k.clone(), build(p, root, items)?);
            }
            Ok(Value::Object(m))
        }
        Plan::List { src, item } => {
            let v = fetch(root, src, items)?;
            let Value::Array(xs) = v else {
                return Err(err(
                    &show(src),
                    format!("expected a list, got {}", kind_of(v)),
                ));
            };
            let mut out = Vec::with_capacity(xs.len());
            for x in xs {
                let mut inner = items.to_vec();
                inner.push(x);
                out.push(build(item, root, &inner)?);
            }
            Ok(Value::Array(out))
        }
        Plan::Map { src, item } => {
            let v = fetch(root, src, items)?;
            let Value::Object(xs) = v else {
                return Err(err(
                    &show(src),
                    format!("expected a map, got {}", kind_of(v)),
                ));
            };
            let mut out = Map::new();
            for (k, x) in xs {
                let mut inner = items.to_vec();
                inner.push(x);
                out.insert(k.clone(), build(item, root, &inner)?);
            }
            Ok(Value::Object(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> Template {
        Template::parse(s).unwrap()
    }

    fn binds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    const PATH_SHAPE: &str = r#"{"executed_path": [{"file": "str", "func": "str", "line": "int", "qualname": "str"}], "function": "str"}"#;

    fn path_output() -> Value {
        json!({"executed_path": [
            {"file": "pkg/m.py", "func": "pkg.m.f", "line": 3, "qualname": "f"},
            {"file": "pkg/m.py", "func": "pkg.m.f", "line": 4, "qualname": "f"}],
            "function": "f"})
    }

    #[test]
    fn same_names_select_fields() {
        let p = Projection::compile(
            &t(r#"{"executed_path": [{"line": "int"}]}"#),
            &t(PATH_SHAPE),
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(
            p.apply(&path_output()).unwrap(),
            json!({"executed_path": [{"line": 3}, {"line": 4}]})
        );
        let id = Projection::compile(&t(PATH_SHAPE), &t(PATH_SHAPE), &BTreeMap::new()).unwrap();
        assert_eq!(id.apply(&path_output()).unwrap(), path_output());
    }

    #[test]
    fn bindings_rename_flatten_and_repeat() {
        // A flat list of lines, a renamed list with renamed fields, and the function's name
        // repeated in every item (fewer stars than enclosing lists).
        let p = Projection::compile(
            &t(r#"{"lines": ["int"], "calls": [{"name": "str", "at": "int", "of": "str"}], "first": "int"}"#),
            &t(PATH_SHAPE),
            &binds(&[
                ("/lines", "/executed_path"),
                ("/lines/*", "/executed_path/*/line"),
                ("/calls", "/executed_path"),
                ("/calls/*/name", "/executed_path/*/func"),
                ("/calls/*/at", "/executed_path/*/line"),
                ("/calls/*/of", "/function"),
                ("/first", "/executed_path/0/line"),
            ]),
        )
        .unwrap();
        assert_eq!(
            p.apply(&path_output()).unwrap(),
            json!({"lines": [3, 4], "first": 3,
                   "calls": [{"name": "pkg.m.f", "at": 3, "of": "f"},
                             {"name": "pkg.m.f", "at": 4, "of": "f"}]})
        );
        // Flat keys at the root from a nested record.
        let shape = t(r#"{"exception": {"type": "str", "message": "str", "line": "int|null"}}"#);
        let p = Projection::compile(
            &t(r#"{"exception_type": "str", "exception_message": "str"}"#),
            &shape,
            &binds(&[
                ("/exception_type", "/exception/type"),
                ("/exception_message", "/exception/message"),
            ]),
        )
        .unwrap();
        assert_eq!(
            p.apply(&json!({"exception": {"type": "KeyError", "message": "'k'", "line": null}}))
                .unwrap(),
            json!({"exception_type": "KeyError", "exception_message": "'k'"})
        );
    }

    #[test]
    fn mismatches_are_errors_at_load() {
        let shape = t(PATH_SHAPE);
        let e = |tmpl: &str, b: &[(&str, &str)]| {
            Projection::compile(&t(tmpl), &shape, &binds(b))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(r#"{"executed_path": [{"lines": "int"}]}"#, &[]),
            "at /executed_path/*/lines: the extractor computes no `lines` at /executed_path/* \
             (it has: file, func, line, qualname)"
        );
        assert!(e(r#"{"executed_path": [{"line": "str"}]}"#, &[])
            .contains("the template wants \"str\" but the extractor's /executed_path/*/line is a value \"int\""));
        assert!(e(r#"{"executed_path": {"line": "int"}}"#, &[])
            .contains("/executed_path is a list in the extractor's output"));
        assert!(e(r#"{"function": ["str"]}"#, &[]).contains("the template has a list"));
        assert!(e(r#"{"x": "int"}"#, &[("/x", "/executed_path/*/line")])
            .contains("steps into 1 list(s) but the template has only 0"));
        // No star inside a list: the same value in every item.
        Projection::compile(
            &t(r#"{"l": [{"a": "int"}]}"#),
            &shape,
            &binds(&[
                ("/l", "/executed_path"),
                ("/l/*/a", "/executed_path/0/line"),
            ]),
        )
        .unwrap();
        assert!(e(r#"{"x": "int"}"#, &[("/y", "/function")]).contains("not a path of the template"));
        // A float position accepts an int; an int position does not accept a str.
        Projection::compile(
            &t(r#"{"executed_path": [{"line": "float"}]}"#),
            &shape,
            &BTreeMap::new(),
        )
        .unwrap();
        Projection::compile(&t(r#"{"executed_path": "any"}"#), &shape, &BTreeMap::new()).unwrap();
    }

    #[test]
    fn a_star_must_be_the_list_being_iterated() {
        let shape = t(r#"{"a": [{"x": "int"}], "b": [{"y": "int"}]}"#);
        let err = Projection::compile(
            &t(r#"{"a": [{"x": "int", "y": "int"}]}"#),
            &shape,
            &binds(&[("/a/*/y", "/b/*/y")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("its `*` at /b/* is not the list the template iterates here (/a/*)"),
            "{err}"
        );
    }
}
