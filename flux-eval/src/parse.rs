//! Turning model text into an answer: strip code fences, take the first balanced JSON object,
//! and check it against the template's shape. Garbage is normal input here: every failure is
//! an `Err(String)` that is sent back to the model in a repair round.

use serde_json::Value;

/// Extract the first balanced JSON object from model output that parses.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let t = strip_fences(text);
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(t.trim()) {
        return Ok(v);
    }
    let bytes = t.as_bytes();
    let mut start = 0;
    let mut last_err = None;
    while let Some(off) = t[start..].find('{') {
        let s = start + off;
        match balanced_end(&bytes[s..]) {
            Some(len) => match serde_json::from_str::<Value>(&t[s..s + len]) {
                Ok(v) => return Ok(v),
                Err(e) => last_err = Some(e.to_string()),
            },
            None => {
                last_err.get_or_insert_with(|| {
                    "unbalanced braces: the JSON object is not closed".into()
                });
            }
        }
        start = s + 1;
    }
    Err(match last_err {
        Some(e) => format!("no valid JSON object in the reply ({e})"),
        None => "no JSON object in the reply".to_string(),
    })
}

/// The text inside the first ```…``` fence when there is one, else the text.
fn strip_fences(text: &str) -> &str {
    let Some(open) = text.find("```") else {
        return text;
    };
    let after = &text[open + 3..];
    // Skip a language tag up to the end of the line.
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let body = &after[body_start..];
    match body.find("```") {
        Some(close) if body[..close].contains('{') => &body[..close],
        _ => text,
    }
}

/// Length of the balanced `{…}` starting at `b[0] == b'{'`, honouring JSON strings.
fn balanced_end(b: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Check that `v` has the template's shape: the same keys (extra keys allowed), lists whose
/// elements all match the template's first element, and leaves of the named types
/// (`int`, `float`, `str`, `bool`, `any`, unions like `int|str`). Returns the first problem.
pub fn validate_shape(template: &Value, v: &Value) -> Result<(), String> {
    let mut path = String::new();
    check(template, v, &mut path)
}

fn at(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

fn type_name(v: &Value) -> &'static str {
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

/// Leaves are checked as leniently as the scorer compares them: a scalar where a string is
/// expected is fine (`3` for `"3"`), and so is a string that spells the expected scalar
/// (`"3"` for an int, `"True"` for a bool). Structure is checked strictly.
fn leaf_ok(ty: &str, v: &Value) -> Option<bool> {
    let s = v.as_str().map(str::trim);
    let ok = match ty.trim().to_ascii_lowercase().as_str() {
        "any" | "" => true,
        "int" | "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => s.is_some_and(|s| s.parse::<i64>().is_ok()),
        },
        "float" | "number" => v.is_number() || s.is_some_and(|s| s.parse::<f64>().is_ok()),
        "str" | "string" => !v.is_array() && !v.is_object(),
        "bool" | "boolean" => {
            v.is_boolean()
                || s.is_some_and(|s| matches!(s.to_ascii_lowercase().as_str(), "true" | "false"))
        }
        "null" | "none" => v.is_null(),
        "list" | "array" => v.is_array(),
        "dict" | "object" => v.is_object(),
        _ => return None,
    };
    Some(ok)
}

fn check(t: &Value, v: &Value, path: &mut String) -> Result<(), String> {
    match t {
        Value::Object(tm) => {
            let Value::Object(vm) = v else {
                return Err(format!(
                    "at {}: expected an object, got {}",
                    at(path),
                    type_name(v)
                ));
            };
            // `{"*": T}` is a map: any keys, every value matching T.
            if let (1, Some(inner)) = (tm.len(), tm.get("*")) {
                for (k, x) in vm {
                    let len = path.len();
                    path.push('/');
                    path.push_str(k);
                    let r = check(inner, x, path);
                    path.truncate(len);
                    r?;
                }
                return Ok(());
            }
            for (k, tv) in tm {
                let len = path.len();
                path.push('/');
                path.push_str(k);
                let r = match vm.get(k) {
                    Some(x) => check(tv, x, path),
                    None => Err(format!("missing key {:?} at {}", k, at(&path[..len]))),
                };
                path.truncate(len);
                r?;
            }
            Ok(())
        }
        Value::Array(ta) => {
            let Value::Array(va) = v else {
                return Err(format!(
                    "at {}: expected a list, got {}",
                    at(path),
                    type_name(v)
                ));
            };
            if let Some(et) = ta.first() {
                for (i, x) in va.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    let r = check(et, x, path);
                    path.truncate(len);
                    r?;
                }
            }
            Ok(())
        }
        Value::String(ty) => {
            let alts: Vec<Option<bool>> = ty.split('|').map(|a| leaf_ok(a, v)).collect();
            if alts.iter().all(|a| a.is_none()) {
                // Not a type name: an example string; any string (or scalar) will do.
                return Ok(());
            }
            if alts.contains(&Some(true)) {
                Ok(())
            } else {
                Err(format!(
                    "at {}: expected {ty}, got {} ({})",
                    at(path),
                    type_name(v),
                    v
                ))
            }
        }
        Value::Null => Ok(()),
        Value::Bool(_) if !v.is_boolean() => Err(format!(
            "at {}: expected bool, got {}",
            at(path),
            type_name(v)
        )),
        Value::Number(_) if !v.is_number() => Err(format!(
            "at {}: expected a number, got {}",
            at(path),
            type_name(v)
        )),
        _ => Ok(()),
    }
}
