//! [`Name`]: the text of an event's name fields (`file`, `func`, `qualname`, `test`…), shared.
//!
//! Why: a trace repeats a handful of names millions of times (SymPy's whole suite: 110 M events
//! naming a few thousand functions and tests). As owned `String`s every event carried four to
//! six heap copies of them, ~1.5 KB of the agent's memory per event, which is what made a suite
//! part of 15 M events need 22 GB. A `Name` is a reference-counted `str`: cloning one is a
//! count increment, the empty name allocates nothing, and a reader that meets the same text
//! twice can keep one copy ([`Interner`]). It reads as a `&str` (`Deref`), compares and hashes
//! as one (so a `HashMap<Name, _>` is looked up with `&str`), and serialises as a JSON string.
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared, immutable name; empty when unknown (no allocation then). One pointer wide (8
/// bytes, where an `Arc<str>` is a fat 16): an event holds its test's and its code's five (in
/// one shared [`crate::Code`]), and a run's events are what the agent's memory is made of (test
/// `a_name_is_one_pointer`). The text sits behind two
/// pointers (the count, then the `str`), which only costs where a name is read, not copied.
#[derive(Clone, Default)]
pub struct Name(Option<Arc<Box<str>>>);

impl Name {
    /// The empty name.
    pub const EMPTY: Name = Name(None);

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Some(s) => s,
            None => "",
        }
    }

    fn new(s: Box<str>) -> Name {
        if s.is_empty() {
            Name(None)
        } else {
            Name(Some(Arc::new(s)))
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Make it the empty name.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// Where its text is stored (0 for the empty name): a key while the name is held.
    pub(crate) fn addr(&self) -> usize {
        self.0.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize)
    }

    /// Whether two names share their text's storage (both empty counts as shared).
    pub fn ptr_eq(&self, other: &Name) -> bool {
        self.addr() == other.addr()
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(Box::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::new(s.into_boxed_str())
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name::from(s.as_str())
    }
}

impl From<&Name> for Name {
    fn from(s: &Name) -> Name {
        s.clone()
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.as_str().to_string()
    }
}

impl From<&Name> for String {
    fn from(n: &Name) -> String {
        n.as_str().to_string()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.ptr_eq(other) || self.as_str() == other.as_str()
    }
}
impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // As `str` hashes, so `Borrow<str>` lookups find it.
        self.as_str().hash(h)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

macro_rules! eq_with {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Name {
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }
        impl PartialEq<Name> for $t {
            fn eq(&self, other: &Name) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}
eq_with!(str, String);

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name::from(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Name, E> {
                Ok(Name::from(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// Keeps one copy of each text: `intern` returns the name already held for equal text.
#[derive(Default)]
pub struct Interner(HashSet<Name>);

impl Interner {
    pub fn intern(&mut self, n: &Name) -> Name {
        if n.is_empty() {
            return Name::EMPTY;
        }
        if let Some(held) = self.0.get(n.as_str()) {
            return held.clone();
        }
        self.0.insert(n.clone());
        n.clone()
    }

    /// The name for `s`, allocating only text not seen before.
    pub fn name(&mut self, s: &str) -> Name {
        if let Some(held) = self.0.get(s) {
            return held.clone();
        }
        let n = Name::from(s);
        if !n.is_empty() {
            self.0.insert(n.clone());
        }
        n
    }

    /// How many distinct texts are held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_name_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Name>(), std::mem::size_of::<usize>());
        let a = Name::from("sympy/core/expr.py");
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        assert_eq!(&*b, "sympy/core/expr.py");
        assert!(Name::from("").is_empty() && Name::from(String::new()).is_empty());
    }

    #[test]
    fn a_name_reads_compares_and_hashes_as_its_text() {
        let n = Name::from("sympy/core/expr.py");
        assert_eq!(n, "sympy/core/expr.py");
        assert_eq!("sympy/core/expr.py", n);
        assert_eq!(n, String::from("sympy/core/expr.py"));
        assert!(n.ends_with("expr.py"));
        let mut m: HashMap<Name, u32> = HashMap::new();
        m.insert(n.clone(), 1);
        assert_eq!(m.get("sympy/core/expr.py"), Some(&1));
        assert_eq!(
            format!("{n} {n:?}"),
            "sympy/core/expr.py \"sympy/core/expr.py\""
        );
        assert!(Name::from(String::new()).is_empty());
        assert_eq!(Name::default(), "");
    }

    #[test]
    fn a_name_round_trips_through_json_as_a_string() {
        let n = Name::from("a\"b");
        let j = serde_json::to_string(&n).unwrap();
        assert_eq!(j, r#""a\"b""#);
        assert_eq!(serde_json::from_str::<Name>(&j).unwrap(), n);
        assert!(serde_json::from_str::<Name>("3").is_err());
    }

    #[test]
    fn the_interner_keeps_one_copy_of_each_text() {
        let mut i = Interner::default();
        let a = i.name("f");
        let b = i.intern(&Name::from("f"));
        assert!(a.ptr_eq(&b), "equal texts share storage once interned");
        assert!(!Name::from("f").ptr_eq(&a));
        assert_eq!(i.len(), 1);
        assert!(i.name("").is_empty());
        assert_eq!(i.len(), 1, "the empty name is not held");
    }
}
