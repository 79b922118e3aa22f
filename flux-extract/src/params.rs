//! Extractor parameters: a JSON object with typed accessors whose errors name the parameter.
use crate::ExtractError;
use serde_json::{Map, Value};

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
