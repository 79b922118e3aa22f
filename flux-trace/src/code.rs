//! [`Code`]: the five names of an event's code, behind one shared pointer.
//!
//! Why: an event names its code five ways (`file`, `func`, `qualname`, `module`, `sig`), and a
//! call, its return and its lines all name the same code. As five [`Name`]s they were 40 of an
//! event's 112 bytes, and a run's events are most of the agent's memory (docs/performance.md:
//! the merged trace ~70 % of the 3.15 slice's peak). A `Code` is one pointer to the five,
//! shared by every event of the code: [`Codes`] keeps one per distinct five, and an event reads
//! them with [`crate::Event::file`] and its siblings (or `event.code.file`: a `Code` reads as
//! its [`CodeNames`]). Writing one name of one event (`event.code_mut().qualname = …`) gives
//! that event a code of its own (copy on write); builders of many events intern instead.
use crate::{Interner, Name};
use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// What names an event's code. Empty names are unknown (a USDT event knows no `qualname`
/// until the hook's record identifies it; `module` and `sig` are of some dialects only).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodeNames {
    /// `co_filename` (a JVM method: its class's source file, when known).
    pub file: Name,
    /// `co_name`.
    pub func: Name,
    /// `co_qualname`.
    pub qualname: Name,
    /// `__name__` of the code's globals (its module), when the hook reported it (dialect
    /// `swe-flux`); a JVM method's package (`org.apache.commons.lang3`); empty when unknown.
    pub module: Name,
    /// A JVM method's descriptor (`(Ljava/lang/CharSequence;)Z`), which tells overloads apart;
    /// empty for Python.
    pub sig: Name,
}

static NO_NAMES: CodeNames = CodeNames {
    file: Name::EMPTY,
    func: Name::EMPTY,
    qualname: Name::EMPTY,
    module: Name::EMPTY,
    sig: Name::EMPTY,
};

/// A shared, immutable [`CodeNames`]; no allocation when every name is empty. Compares and
/// hashes as its names (two codes with equal names are equal whether or not they share).
#[derive(Clone, Default)]
pub struct Code(Option<Arc<CodeNames>>);

impl Code {
    /// The code with no names.
    pub const NONE: Code = Code(None);

    /// A code of its own for `names` (use [`Codes::intern`] where many events name it).
    pub fn new(names: CodeNames) -> Code {
        if names == NO_NAMES {
            Code(None)
        } else {
            Code(Some(Arc::new(names)))
        }
    }

    pub fn names(&self) -> &CodeNames {
        self.0.as_deref().unwrap_or(&NO_NAMES)
    }

    /// The names, to change: copied first when other events share them.
    pub fn names_mut(&mut self) -> &mut CodeNames {
        Arc::make_mut(self.0.get_or_insert_with(Default::default))
    }

    /// Whether two codes share their storage (both without names counts as shared).
    pub fn ptr_eq(&self, other: &Code) -> bool {
        self.addr() == other.addr()
    }

    /// Where its names are stored (0 for none): a key while the code is held.
    fn addr(&self) -> usize {
        self.0.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize)
    }
}

/// Which name [`Codes::edit`] puts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Qualname,
    Module,
}

impl Deref for Code {
    type Target = CodeNames;
    fn deref(&self) -> &CodeNames {
        self.names()
    }
}

impl Borrow<CodeNames> for Code {
    fn borrow(&self) -> &CodeNames {
        self.names()
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Code) -> bool {
        self.ptr_eq(other) || self.names() == other.names()
    }
}

impl Eq for Code {}

impl Hash for Code {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.names().hash(h)
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.names().fmt(f)
    }
}

impl From<CodeNames> for Code {
    fn from(n: CodeNames) -> Code {
        Code::new(n)
    }
}

/// Keeps one [`Code`] per distinct names (and one copy of each name's text): what a builder
/// of many events (the merge, a trace reader) gives its events.
#[derive(Default)]
pub struct Codes {
    codes: HashSet<Code>,
    /// (code, name, which) → the code with that name put in: what the merge asks once per
    /// event, answered without hashing texts. The key's code and name are held in the value,
    /// so their addresses cannot be reused while they key it.
    edits: HashMap<(usize, usize, Slot), (Code, Name, Code)>,
    /// The names' texts, one copy each (also for the names of events that are not code:
    /// tests, outcomes).
    pub names: Interner,
}

impl Codes {
    /// The code held for `names`, made (its names interned) the first time.
    pub fn intern(&mut self, names: CodeNames) -> Code {
        if let Some(held) = self.codes.get(&names) {
            return held.clone();
        }
        let mut names = names;
        for n in [
            &mut names.file,
            &mut names.func,
            &mut names.qualname,
            &mut names.module,
            &mut names.sig,
        ] {
            *n = self.names.intern(n);
        }
        let c = Code::new(names);
        self.codes.insert(c.clone());
        c
    }

    /// The held code equal to `c` (held from now on if none was).
    pub fn share(&mut self, c: &Code) -> Code {
        match self.codes.get(c.names()) {
            Some(held) => held.clone(),
            None => self.intern(c.names().clone()),
        }
    }

    /// `c` with its `qualname` made `q` (held).
    pub fn with_qualname(&mut self, c: &Code, q: &Name) -> Code {
        self.edit(c, q, Slot::Qualname)
    }

    /// `c` with its `module` made `m` (held).
    pub fn with_module(&mut self, c: &Code, m: &Name) -> Code {
        self.edit(c, m, Slot::Module)
    }

    fn edit(&mut self, c: &Code, n: &Name, slot: Slot) -> Code {
        let key = (c.addr(), n.addr(), slot);
        if let Some((_, _, held)) = self.edits.get(&key) {
            return held.clone();
        }
        let mut names = c.names().clone();
        match slot {
            Slot::Qualname => names.qualname = n.clone(),
            Slot::Module => names.module = n.clone(),
        }
        let made = self.intern(names);
        self.edits.insert(key, (c.clone(), n.clone(), made.clone()));
        made
    }

    /// How many distinct codes are held.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(file: &str, func: &str, qualname: &str) -> CodeNames {
        CodeNames {
            file: file.into(),
            func: func.into(),
            qualname: qualname.into(),
            ..CodeNames::default()
        }
    }

    #[test]
    fn a_code_is_one_pointer_and_no_names_allocate_nothing() {
        assert_eq!(std::mem::size_of::<Code>(), 8);
        assert!(Code::new(CodeNames::default()).ptr_eq(&Code::NONE));
        assert_eq!(Code::NONE.file, "");
    }

    /// Equal names give the code already held; writing one event's copy leaves the held one.
    #[test]
    fn codes_keep_one_code_per_names_and_writes_copy() {
        let mut codes = Codes::default();
        let a = codes.intern(names("/m.py", "f", "C.f"));
        let b = codes.intern(names("/m.py", "f", "C.f"));
        let c = codes.intern(names("/m.py", "f", ""));
        assert!(a.ptr_eq(&b) && !a.ptr_eq(&c) && a != c);
        assert!(a.file.ptr_eq(&c.file), "the names' texts are shared too");
        assert_eq!(codes.len(), 2);
        let mut mine = a.clone();
        mine.names_mut().qualname = "C.g".into();
        assert_eq!(
            (a.qualname.as_str(), mine.qualname.as_str()),
            ("C.f", "C.g")
        );
        assert!(codes
            .share(&Code::new(names("/m.py", "f", "C.f")))
            .ptr_eq(&a));
    }
}
