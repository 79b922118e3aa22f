//! Instances read from an exported dataset (`flux export --format hf`): `data/<split>.jsonl`,
//! one row an instance. A scoring run then needs no instance directories: `flux score
//! --instances data/test.jsonl` (or the dataset directory) scores against the rows' gold with
//! the same rules, and the set digest is the same as the directories' (each row carries its
//! `oracle.json` verbatim).
//!
//! A row reads as the instance it was exported from ([`row_instance`]): `instance_id` (the
//! `repo/id` key of answers and predictions), `id`, `repository`, `kind`, `question`,
//! `template` and `gold` (JSON text), `order_insensitive`, `split`, and when present `set`,
//! `preamble_id`, `package`, `image` and `oracle`. A line that is not such a row is an invalid instance naming
//! the file and line; the others are still read.

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::{Discovered, Instance, InvalidInstance, ScoreError};

/// True when `root` is a dataset to read rows from: a `.jsonl` file, or a directory holding
/// `data/*.jsonl` (an exported dataset) and no `instance.toml` below it.
pub fn is_dataset(root: &Path) -> bool {
    if root.is_file() {
        return root.extension().is_some_and(|e| e == "jsonl");
    }
    !jsonl_files(root).is_empty() && !root.join("instance.toml").exists()
}

/// The `data/*.jsonl` files of a dataset directory, sorted.
fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir.join("data")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}

/// Read every row of the dataset `root` (a `.jsonl` file or a dataset directory).
pub fn read(root: &Path) -> Result<Discovered, ScoreError> {
    let files = if root.is_file() {
        vec![root.to_path_buf()]
    } else {
        jsonl_files(root)
    };
    let mut out = Discovered::default();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| ScoreError::Io(f.clone(), e))?;
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{}:{}", f.display(), n + 1);
            let row = serde_json::from_str::<Value>(line)
                .map_err(|e| e.to_string())
                .and_then(|v| row_instance(&v, &f));
            match row {
                Ok(i) => out.instances.push(i),
                Err(error) => out.invalid.push(InvalidInstance { path: at, error }),
            }
        }
    }
    Ok(out)
}

fn field<'a>(row: &'a Value, k: &str) -> Result<&'a str, String> {
    row.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the row has no string field `{k}`"))
}

fn opt(row: &Value, k: &str) -> Option<String> {
    row.get(k).and_then(Value::as_str).map(String::from)
}

fn json_text(row: &Value, k: &str) -> Result<Option<Value>, String> {
    match row.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| format!("field `{k}` is not JSON text: {e}")),
        Some(_) => Err(format!("field `{k}` is not a string of JSON text")),
    }
}

fn strings(row: &Value, k: &str) -> Vec<String> {
    row.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// One exported row as the instance it came from (`file`: the JSONL file, its `dir`).
pub fn row_instance(row: &Value, file: &Path) -> Result<Instance, String> {
    let key = field(row, "instance_id")?;
    if !key.contains('/') || key.split('/').any(str::is_empty) {
        return Err(format!("`instance_id` {key:?} is not `repository/id`"));
    }
    let params = json_text(row, "extractor_params")?.unwrap_or(Value::Null);
    let tracing = json_text(row, "tracing")?.unwrap_or(Value::Null);
    let tracing_list = |k: &str| strings(&tracing, k);
    Ok(Instance {
        id: field(row, "id")?.to_string(),
        repository: field(row, "repository")?.to_string(),
        kind: field(row, "kind")?.to_string(),
        question: field(row, "question")?.to_string(),
        preamble: opt(row, "preamble_id"),
        template: json_text(row, "template")?.ok_or("the row has no `template`")?,
        order_insensitive: strings(row, "order_insensitive"),
        package: opt(row, "package"),
        image: opt(row, "image"),
        test_files: Vec::new(),
        test_image_files: strings(row, "test_image_files"),
        test_command: strings(row, "test_command"),
        tracing_files: tracing_list("files"),
        tracing_functions: tracing_list("functions"),
        extractor_function: params
            .get("function")
            .and_then(Value::as_str)
            .map(String::from),
        extractor_file: params.get("file").and_then(Value::as_str).map(String::from),
        extractor_name: opt(row, "extractor"),
        extractor_params: params,
        split: field(row, "split")?.to_string(),
        set: opt(row, "set"),
        released: opt(row, "released"),
        oracle: json_text(row, "gold")?,
        oracle_json: opt(row, "oracle"),
        dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
        rel: PathBuf::from(key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> Value {
        json!({
            "instance_id": "demo/demo-loop", "id": "demo-loop", "repository": "demo",
            "kind": "S2_Loop", "question": "How often?", "split": "test", "set": null,
            "template": "{\"iterations\": \"int\"}", "gold": "{\"iterations\": 3}",
            "order_insensitive": ["/calls"], "package": "demo==1.0",
            "extractor": "loop_count", "extractor_params": "{\"function\": \"count\"}",
            "tracing": "{\"files\": [\"demo/core.py\"], \"functions\": [\"count\"]}",
            "oracle": "{\"oracle_answer\": {\"iterations\": 3}}",
        })
    }

    /// A row reads as the instance it was exported from; a bad line is an invalid instance
    /// naming the file and line, and the other rows are still read.
    #[test]
    fn rows_read_as_instances_and_bad_lines_are_named() {
        let dir = std::env::temp_dir().join(format!("flux-score-ds-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let f = dir.join("data/test.jsonl");
        let mut bad = row();
        bad["instance_id"] = json!("no-slash");
        std::fs::write(&f, format!("{}\n\nnot json\n{bad}\n", row())).unwrap();
        assert!(is_dataset(&f) && is_dataset(&dir));
        let found = read(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found.instances.len(), 1);
        let i = &found.instances[0];
        assert_eq!(i.key(), "demo/demo-loop");
        assert_eq!(i.template, json!({"iterations": "int"}));
        assert_eq!(i.oracle, Some(json!({"iterations": 3})));
        assert_eq!(i.extractor_function.as_deref(), Some("count"));
        assert_eq!(i.tracing_files, vec!["demo/core.py".to_string()]);
        assert_eq!(i.order_insensitive, vec!["/calls".to_string()]);
        assert_eq!(i.set, None);
        let lines: Vec<&str> = found.invalid.iter().map(|e| e.path.as_str()).collect();
        assert!(
            lines[0].ends_with("test.jsonl:3") && lines[1].ends_with("test.jsonl:4"),
            "{lines:?}"
        );
        assert!(
            found.invalid[1].error.contains("repository/id"),
            "{:?}",
            found.invalid
        );
    }
}
