//! A readable difference between two JSON values, one line per differing JSON path.
use serde_json::Value;

const MAX_LINES: usize = 40;

/// Lines `  at <path>: <a_name> <value>, <b_name> <value>` for every place `a` and `b` differ
/// (object keys on one side only, list lengths, scalars), at most 40 of them.
pub fn json_diff(a: &Value, b: &Value, a_name: &str, b_name: &str) -> String {
    let mut out = Vec::new();
    walk(a, b, String::new(), a_name, b_name, &mut out);
    if out.is_empty() {
        return "  (no difference)".into();
    }
    let more = out.len().saturating_sub(MAX_LINES);
    out.truncate(MAX_LINES);
    if more > 0 {
        out.push(format!("  … and {more} more differences"));
    }
    out.join("\n")
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn walk(a: &Value, b: &Value, path: String, an: &str, bn: &str, out: &mut Vec<String>) {
    if out.len() > MAX_LINES {
        out.push(String::new());
        return;
    }
    let at = if path.is_empty() { "/" } else { &path };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = format!("{path}/{k}");
                match y.get(k) {
                    Some(vb) => walk(va, vb, p, an, bn, out),
                    None => out.push(format!("  at {p}: only {an} has it: {}", short(va))),
                }
            }
            for (k, vb) in y {
                if !x.contains_key(k) {
                    out.push(format!("  at {path}/{k}: only {bn} has it: {}", short(vb)));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!(
                    "  at {at}: {an} has {} items, {bn} has {}",
                    x.len(),
                    y.len()
                ));
            }
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                walk(va, vb, format!("{path}/{i}"), an, bn, out);
            }
            for (i, v) in x.iter().enumerate().skip(y.len()) {
                out.push(format!("  at {path}/{i}: only {an} has {}", short(v)));
            }
            for (i, v) in y.iter().enumerate().skip(x.len()) {
                out.push(format!("  at {path}/{i}: only {bn} has {}", short(v)));
            }
        }
        _ if a != b => out.push(format!("  at {at}: {an} {}, {bn} {}", short(a), short(b))),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_each_differing_path() {
        let a = json!({"executed_path": [{"line": 1}, {"line": 2}], "k": "x"});
        let b = json!({"executed_path": [{"line": 1}, {"line": 3}, {"line": 4}], "n": 1});
        let d = json_diff(&a, &b, "stored", "harvested");
        assert_eq!(
            d,
            "  at /executed_path: stored has 2 items, harvested has 3\n\
             \x20 at /executed_path/1/line: stored 2, harvested 3\n\
             \x20 at /executed_path/2: only harvested has {\"line\":4}\n\
             \x20 at /k: only stored has it: \"x\"\n\
             \x20 at /n: only harvested has it: 1"
        );
        assert_eq!(json_diff(&a, &a, "a", "b"), "  (no difference)");
        assert_eq!(
            json_diff(&json!(1), &json!(2), "a", "b"),
            "  at /: a 1, b 2"
        );
    }
}
