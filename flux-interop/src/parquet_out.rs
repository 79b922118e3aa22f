//! A Parquet file of rows whose columns are strings, nullable strings or lists of strings: what
//! a dataset row of [`crate::hf`] holds (values of varying shape are JSON text).
//!
//! Written with the `parquet` crate's column writer, without its Arrow layer (the `arrow`
//! feature brings the Arrow column machinery, minutes of build on a small machine, for files of
//! a few thousand rows). One row group, Snappy pages, the schema's strings marked `UTF8` and
//! lists in the standard three-level `LIST` layout, so Arrow readers (`pyarrow`, `datasets`)
//! read `string` and `list<string>` columns.

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// A string in every row.
    Str,
    /// A string or null.
    OptStr,
    /// A list of strings (possibly empty) in every row.
    List,
}

impl Col {
    /// The Hugging Face feature type (`dataset_info.features` of a card).
    pub fn hf_yaml(self, name: &str) -> String {
        match self {
            Col::Str | Col::OptStr => format!("  - name: {name}\n    dtype: string\n"),
            Col::List => format!("  - name: {name}\n    sequence: string\n"),
        }
    }

    fn schema(self, name: &str) -> String {
        match self {
            Col::Str => format!("  REQUIRED BYTE_ARRAY {name} (UTF8);\n"),
            Col::OptStr => format!("  OPTIONAL BYTE_ARRAY {name} (UTF8);\n"),
            Col::List => format!(
                "  REQUIRED group {name} (LIST) {{\n    REPEATED group list {{\n      REQUIRED BYTE_ARRAY element (UTF8);\n    }}\n  }}\n"
            ),
        }
    }
}

/// One column's values and levels, from the rows.
struct Column {
    values: Vec<ByteArray>,
    def: Vec<i16>,
    rep: Vec<i16>,
}

fn column(name: &str, col: Col, rows: &[Value]) -> Result<Column, String> {
    let mut c = Column {
        values: Vec::new(),
        def: Vec::new(),
        rep: Vec::new(),
    };
    for (i, row) in rows.iter().enumerate() {
        let v = row.get(name).unwrap_or(&Value::Null);
        let bad = |what: &str| {
            format!(
                "row {} ({}): `{name}` is not {what}",
                i + 1,
                row["instance_id"]
            )
        };
        match (col, v) {
            (Col::Str, Value::String(s)) => c.values.push(ByteArray::from(s.as_bytes().to_vec())),
            (Col::Str, _) => return Err(bad("a string")),
            (Col::OptStr, Value::String(s)) => {
                c.values.push(ByteArray::from(s.as_bytes().to_vec()));
                c.def.push(1);
            }
            (Col::OptStr, Value::Null) => c.def.push(0),
            (Col::OptStr, _) => return Err(bad("a string or null")),
            (Col::List, Value::Array(items)) => {
                if items.is_empty() {
                    c.def.push(0);
                    c.rep.push(0);
                }
                for (k, item) in items.iter().enumerate() {
                    let s = item.as_str().ok_or_else(|| bad("a list of strings"))?;
                    c.values.push(ByteArray::from(s.as_bytes().to_vec()));
                    c.def.push(1);
                    c.rep.push(i16::from(k > 0));
                }
            }
            (Col::List, _) => return Err(bad("a list of strings")),
        }
    }
    Ok(c)
}

/// Write `rows` (JSON objects) as the Parquet file `path` with these columns, in this order.
pub fn write(path: &Path, columns: &[(&str, Col)], rows: &[Value]) -> Result<(), String> {
    let mut msg = String::from("message flux {\n");
    for (name, col) in columns {
        msg.push_str(&col.schema(name));
    }
    msg.push_str("}\n");
    let schema = Arc::new(parse_message_type(&msg).map_err(|e| format!("schema: {e}"))?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("flux {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let at = |e: parquet::errors::ParquetError| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = SerializedFileWriter::new(file, schema, props).map_err(at)?;
    let mut rg = w.next_row_group().map_err(at)?;
    let mut next = columns.iter();
    while let Some(mut cw) = rg.next_column().map_err(at)? {
        let (name, col) = next.next().ok_or("more columns written than declared")?;
        let c = column(name, *col, rows)?;
        let def = (*col != Col::Str).then_some(&c.def[..]);
        let rep = (*col == Col::List).then_some(&c.rep[..]);
        cw.typed::<ByteArrayType>()
            .write_batch(&c.values, def, rep)
            .map_err(at)?;
        cw.close().map_err(at)?;
    }
    rg.close().map_err(at)?;
    w.close().map_err(at)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    use serde_json::json;

    fn to_json(f: &Field) -> Value {
        match f {
            Field::Str(s) => Value::String(s.clone()),
            Field::Null => Value::Null,
            Field::ListInternal(l) => Value::Array(l.elements().iter().map(to_json).collect()),
            other => panic!("unexpected field {other:?}"),
        }
    }

    /// Strings, nulls and lists (empty, one, several) read back as written, row by row.
    #[test]
    fn rows_read_back_as_written() {
        let cols = [
            ("instance_id", Col::Str),
            ("note", Col::OptStr),
            ("tags", Col::List),
        ];
        let rows = vec![
            json!({"instance_id": "r/a", "note": "é ✓", "tags": []}),
            json!({"instance_id": "r/b", "note": null, "tags": ["x"]}),
            json!({"instance_id": "r/c", "note": "", "tags": ["x", "", "z"]}),
        ];
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        write(&p, &cols, &rows).unwrap();
        let r = SerializedFileReader::new(std::fs::File::open(&p).unwrap()).unwrap();
        let back: Vec<Value> = r
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                let row = row.unwrap();
                Value::Object(
                    row.get_column_iter()
                        .map(|(k, f)| (k.clone(), to_json(f)))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(back, rows);
    }

    /// A row whose value does not fit its column is an error naming the row and column.
    #[test]
    fn a_value_of_the_wrong_type_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![json!({"instance_id": "r/a", "tags": "x"})];
        let e = write(
            &dir.path().join("t.parquet"),
            &[("instance_id", Col::Str), ("tags", Col::List)],
            &rows,
        )
        .unwrap_err();
        assert!(e.contains("row 1") && e.contains("`tags`"), "{e}");
    }
}
