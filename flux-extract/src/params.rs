//! Extractor parameters: a JSON object with typed accessors whose errors name the parameter.
use crate::ExtractError;
use serde_json::{Map, Value};

/// The type of a parameter's value, checked when an instance loads (before any container
/// starts) and again by the accessors when an extractor runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A string.
    Str,
    /// An integer >= 1 (`invocation`, `occurrence`, `entry`).
    Pos,
    /// An integer >= 0.
    Nat,
    /// A source line (an integer >= 1 that fits 32 bits).
    Line,
    Bool,
    /// A list of strings.
    StrList,
    /// A list of source lines.
    LineList,
    /// One of the listed strings.
    Choice(&'static [&'static str]),
    /// An object mapping source lines (as strings) to lists of names (`uses`).
    LineNames,
    /// An object mapping strings to source lines (`predicates`: expression -> line).
    StrLines,
}

impl ParamType {
    /// What a value of this type looks like, for messages and `flux extractors`.
    pub fn describe(self) -> String {
        match self {
            ParamType::Str => "a string".into(),
            ParamType::Pos => "an integer >= 1".into(),
            ParamType::Nat => "an integer >= 0".into(),
            ParamType::Line => "a line number".into(),
            ParamType::Bool => "true or false".into(),
            ParamType::StrList => "a list of strings".into(),
            ParamType::LineList => "a list of line numbers".into(),
            ParamType::Choice(c) => {
                let q: Vec<String> = c.iter().map(|x| format!("\"{x}\"")).collect();
                format!("one of {}", q.join(", "))
            }
            ParamType::LineNames => "an object mapping line numbers to lists of names".into(),
            ParamType::StrLines => "an object mapping strings to line numbers".into(),
        }
    }

    /// Does `v` have this type?
    pub fn admits(self, v: &Value) -> bool {
        let line = |v: &Value| {
            v.as_u64()
                .is_some_and(|n| n >= 1 && n <= u64::from(u32::MAX))
        };
        match self {
            ParamType::Str => v.is_string(),
            ParamType::Pos => v.as_u64().is_some_and(|n| n >= 1),
            ParamType::Nat => v.as_u64().is_some(),
            ParamType::Line => line(v),
            ParamType::Bool => v.is_boolean(),
            ParamType::StrList => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            ParamType::LineList => v.as_array().is_some_and(|a| a.iter().all(line)),
            ParamType::Choice(c) => v.as_str().is_some_and(|s| c.contains(&s)),
            ParamType::LineNames => v.as_object().is_some_and(|m| {
                m.iter().all(|(k, names)| {
                    k.parse::<u32>().is_ok_and(|n| n >= 1)
                        && names
                            .as_array()
                            .is_some_and(|a| a.iter().all(Value::is_string))
                })
            }),
            ParamType::StrLines => v.as_object().is_some_and(|m| m.values().all(line)),
        }
    }
}

/// The parameters of one extractor run (`[extractor] params` of an instance).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params(Map<String, Value>);

fn bad(param: &str, expected: &'static str, got: &Value) -> ExtractError {
    ExtractError::BadParam {
        param: param.to_string(),
        expected,
        got: got.to_string(),
    }
}

impl Params {
    pub fn new(map: Map<String, Value>) -> Params {
        Params(map)
    }

    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&str, ExtractError> {
        self.opt_str(key)?
            .ok_or_else(|| ExtractError::MissingParam {
                param: key.to_string(),
            })
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ExtractError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(bad(key, "a string", v)),
        }
    }

    /// An optional positive integer (≥ 1).
    pub fn opt_pos(&self, key: &str) -> Result<Option<u64>, ExtractError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => Err(bad(key, "an integer >= 1", v)),
            },
        }
    }

    /// A required positive integer.
    pub fn pos(&self, key: &str) -> Result<u64, ExtractError> {
        self.opt_pos(key)?
            .ok_or_else(|| ExtractError::MissingParam {
                param: key.to_string(),
            })
    }

    /// A required line number.
    pub fn line(&self, key: &str) -> Result<u32, ExtractError> {
        let n = self.pos(key)?;
        u32::try_from(n).map_err(|_| bad(key, "a line number", &Value::from(n)))
    }

    pub fn opt_line(&self, key: &str) -> Result<Option<u32>, ExtractError> {
        match self.opt_pos(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n)
                .map(Some)
                .map_err(|_| bad(key, "a line number", &Value::from(n))),
        }
    }

    /// A positive count with a default (`invocation`, `occurrence`).
    pub fn index_or(&self, key: &str, default: usize) -> Result<usize, ExtractError> {
        Ok(self
            .opt_pos(key)?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .unwrap_or(default))
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, ExtractError> {
        match self.0.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(bad(key, "true or false", v)),
        }
    }

    /// A string that must be one of `choices`, with a default.
    pub fn choice_or(
        &self,
        key: &str,
        choices: &'static [&'static str],
        default: &'static str,
    ) -> Result<&str, ExtractError> {
        match self.opt_str(key)? {
            None => Ok(default),
            Some(s) if choices.contains(&s) => Ok(s),
            Some(s) => Err(ExtractError::BadParam {
                param: key.to_string(),
                expected: "one of the documented choices",
                got: format!("{s:?} (choices: {})", choices.join(", ")),
            }),
        }
    }

    /// An optional list of line numbers.
    pub fn opt_line_list(&self, key: &str) -> Result<Option<Vec<u32>>, ExtractError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) if ParamType::LineList.admits(v) => Ok(Some(
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            Some(v) => Err(bad(key, "a list of line numbers", v)),
        }
    }

    /// An optional list of strings.
    pub fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>, ExtractError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(bad(key, "a list of strings", &Value::Array(items.clone()))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(bad(key, "a list of strings", v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn accessors_name_the_parameter_in_errors() {
        let p = crate::params(json!({"f": 3, "n": 0, "b": "yes", "l": ["a", 1]})).unwrap();
        assert_eq!(
            p.str("f").unwrap_err().to_string(),
            "parameter `f`: expected a string, got 3"
        );
        assert_eq!(
            p.index_or("n", 1).unwrap_err().to_string(),
            "parameter `n`: expected an integer >= 1, got 0"
        );
        assert!(p
            .bool_or("b", false)
            .unwrap_err()
            .to_string()
            .contains("`b`"));
        assert!(p.opt_str_list("l").is_err());
        assert_eq!(p.index_or("missing", 7).unwrap(), 7);
        assert_eq!(
            p.str("x").unwrap_err().to_string(),
            "missing required parameter `x`"
        );
    }
}
