//! What a given runtime build lets flux trace, and how: a runtime is described by its probes.
//!
//! Two families, told apart by the notes they carry (never by a file name):
//! - CPython (provider `python`, in the executable or its libpython). The facts (see
//!   ARCHITECTURE.md and shared notes): bookworm's 3.11 has `function__return` and `line`, and a
//!   `function__entry` that does not fire for Python-to-Python calls (cpython#98894); 3.12–3.14
//!   have no function or line probes (PEP 669 removed them); 3.15 restored
//!   `function__entry/__return` but has no `line`. Decided from the notes and the version.
//! - HotSpot (provider `hotspot`, in the JVM library `libjvm.so` that the `java` launcher loads
//!   as its JDK's `lib/jvm.cfg` says): `method__entry/__return` with seven arguments (thread
//!   id, class, method, signature as pointer + length); they fire only in a JVM started with
//!   `-XX:+DTraceMethodProbes` (JDK 17 also takes `-XX:+ExtendedDTraceProbes`; JDK 25 only the
//!   former), which the agent adds through `JAVA_TOOL_OPTIONS`. They have no semaphore. Entries
//!   fire for every call, interpreted or compiled, inlined or not; a return fires for every
//!   exit but one: a method the JIT (C1 or C2) inlined fires none when an exception leaves it
//!   (measured on the fixture: 581 of 2,000 unwinds of two inlined frames missing), so the agent
//!   also turns inlining off (`-XX:-Inline`); with it every exit fires, interpreted or compiled.
use crate::usdt::{read_binary, Binary, UsdtError};
use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::Endianness;
use std::path::{Path, PathBuf};

/// How an event kind is obtained with this interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// From the USDT probe.
    Usdt,
    /// The probe exists but cannot be trusted; the hook supplies the events.
    Unreliable(&'static str),
    /// No such probe: the hook supplies the events.
    Absent,
}

impl Support {
    pub fn usable(&self) -> bool {
        matches!(self, Support::Usdt)
    }
    pub fn describe(&self) -> String {
        match self {
            Support::Usdt => "usdt".into(),
            Support::Unreliable(why) => format!("hook (probe present but unreliable: {why})"),
            Support::Absent => "hook (no probe)".into(),
        }
    }
}

/// Which runtime family a build is, from its probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    CPython,
    HotSpot,
}

/// The JVM flags flux traces a JVM with (JDK 17 and 25 alike): its method probes on, and
/// inlining off, without which an exception leaving an inlined method fires no return.
pub const JVM_TRACE_FLAGS: &str = "-XX:+DTraceMethodProbes -XX:-Inline";

/// The interpreter as flux sees it.
#[derive(Clone, Debug)]
pub struct Interpreter {
    /// The executable named by the user.
    pub exe: PathBuf,
    pub family: Family,
    /// The file that carries the probes (the executable, its libpython, or the JVM library).
    pub probes: Binary,
    pub version: Option<(u8, u8, u8)>,
    pub entry: Support,
    pub ret: Support,
    pub line: Support,
}

impl Interpreter {
    /// Inspect `exe`. `root` is the filesystem root it lives in (a container's rootfs), used to
    /// find its libpython; `/` on the host.
    pub fn inspect(exe: &Path, root: &Path) -> Result<Interpreter, UsdtError> {
        let main = read_binary(exe)?;
        if !main.sites.iter().any(|s| s.provider == "python") {
            if let Some(jvm) = find_libjvm(exe) {
                let lib = read_binary(&jvm)?;
                if lib.has("hotspot", "method__entry") || lib.has("hotspot", "method__return") {
                    return Ok(Interpreter::hotspot(exe, lib));
                }
            }
        }
        let mut probes = main.clone();
        if !main.sites.iter().any(|s| s.provider == "python") {
            if let Some(lib) = find_libpython(exe, root) {
                let libbin = read_binary(&lib)?;
                if libbin.sites.iter().any(|s| s.provider == "python") {
                    probes = libbin;
                }
            }
        }
        let version = main.py_version().or(probes.py_version());
        let has = |n: &str| probes.has("python", n);
        let entry = if !has("function__entry") {
            Support::Absent
        } else if version.is_some_and(|(ma, mi, _)| (ma, mi) == (3, 11)) {
            Support::Unreliable(
                "3.11 does not fire function__entry for Python-to-Python calls (cpython#98894)",
            )
        } else {
            Support::Usdt
        };
        let ret = if has("function__return") {
            Support::Usdt
        } else {
            Support::Absent
        };
        let line = if has("line") {
            Support::Usdt
        } else {
            Support::Absent
        };
        Ok(Interpreter {
            exe: exe.to_path_buf(),
            family: Family::CPython,
            probes,
            version,
            entry,
            ret,
            line,
        })
    }

    /// A HotSpot JVM whose library `lib` carries its probes.
    fn hotspot(exe: &Path, lib: Binary) -> Interpreter {
        // Seven arguments each: thread id, then class, method, signature as (pointer, length).
        let usable = |name: &str| {
            let sites: Vec<_> = lib.sites_of("hotspot", name).collect();
            if sites.is_empty() {
                Support::Absent
            } else if sites.iter().all(|s| s.args.len() == 7) {
                Support::Usdt
            } else {
                Support::Unreliable("not the seven arguments of HotSpot's method probes")
            }
        };
        let (entry, ret) = (usable("method__entry"), usable("method__return"));
        let version = java_home(exe).and_then(|h| jdk_version(&h));
        Interpreter {
            exe: exe.to_path_buf(),
            family: Family::HotSpot,
            probes: lib,
            version,
            entry,
            ret,
            line: Support::Absent,
        }
    }

    /// The probe provider and the (probe, kind, layout) of each probe flux attaches for it.
    pub fn probe_names(&self) -> (&'static str, [(&'static str, u32, u32); 3]) {
        use flux_common::{
            KIND_CALL, KIND_LINE, KIND_RETURN, LAYOUT_FILE_FUNC_LINE, LAYOUT_METHOD,
        };
        match self.family {
            Family::CPython => (
                "python",
                [
                    ("function__entry", KIND_CALL, LAYOUT_FILE_FUNC_LINE),
                    ("function__return", KIND_RETURN, LAYOUT_FILE_FUNC_LINE),
                    ("line", KIND_LINE, LAYOUT_FILE_FUNC_LINE),
                ],
            ),
            Family::HotSpot => (
                "hotspot",
                [
                    ("method__entry", KIND_CALL, LAYOUT_METHOD),
                    ("method__return", KIND_RETURN, LAYOUT_METHOD),
                    // No line probe: never attached (`line` is Absent).
                    ("", KIND_LINE, LAYOUT_METHOD),
                ],
            ),
        }
    }

    /// What the family is called in messages.
    pub fn family_name(&self) -> &'static str {
        match self.family {
            Family::CPython => "CPython",
            Family::HotSpot => "HotSpot JVM",
        }
    }

    pub fn version_string(&self) -> String {
        match self.version {
            Some((a, b, c)) => format!("{a}.{b}.{c}"),
            None => "unknown".into(),
        }
    }

    /// Offset from a compact string's UTF-8 data to its `length` and `hash` fields (the BPF
    /// string-cache fingerprint): `PyASCIIObject` lost its `wstr` pointer in 3.12. Zero (no
    /// caching, strings copied with every event) when the version is unknown.
    pub fn fingerprint_offset(&self) -> i64 {
        self.fingerprint().0
    }

    /// The string-cache fingerprint: the offset of the two words it reads from a string's data
    /// and their masks (see `flux_common::Config::fp_mask`).
    ///
    /// CPython: a compact string's `length` and `hash` (`PyASCIIObject` lost its `wstr` pointer
    /// in 3.12). HotSpot (JDK 11 and later): a `Symbol` is `{u4 hash_and_refcount; u2 length;
    /// u1 body[]}` and the probe passes `body`, so 6 bytes before it start the word of the
    /// hash (high 16 bits), the reference count (low 16 bits, masked off: it changes while
    /// the symbol lives), the length and the first two bytes; the second word is not used (it
    /// runs past short names). Zero (no caching, strings copied with every event) when the
    /// version is unknown.
    pub fn fingerprint(&self) -> (i64, [u64; 2]) {
        match (self.family, self.version) {
            (Family::CPython, Some((3, minor, _))) if minor >= 12 => (-24, [!0, !0]),
            (Family::CPython, Some((3, minor, _))) if minor >= 3 => (-32, [!0, !0]),
            (Family::HotSpot, Some((major, _, _))) if major >= 11 => (-6, [!0xffff, 0]),
            _ => (0, [!0, !0]),
        }
    }
}

/// The JDK home of a `java` launcher: the directory above its `bin/`.
pub fn java_home(exe: &Path) -> Option<PathBuf> {
    let bin = exe.parent()?;
    (bin.file_name()? == "bin").then(|| bin.parent().map(Path::to_path_buf))?
}

/// The JVM library a `java` launcher loads: `lib/<vm>/libjvm.so` of its JDK, `<vm>` being the
/// first VM its `lib/jvm.cfg` lists as KNOWN (`-server KNOWN`).
fn find_libjvm(exe: &Path) -> Option<PathBuf> {
    let home = java_home(exe)?;
    let cfg = std::fs::read_to_string(home.join("lib/jvm.cfg")).ok()?;
    let vm = cfg.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let name = w.next()?.strip_prefix('-')?;
        (w.next() == Some("KNOWN")).then(|| name.to_string())
    })?;
    let lib = home.join("lib").join(vm).join("libjvm.so");
    lib.is_file().then_some(lib)
}

/// `JAVA_VERSION="17.0.15"` of the JDK's `release` file, as (feature, interim, update).
fn jdk_version(home: &Path) -> Option<(u8, u8, u8)> {
    let text = std::fs::read_to_string(home.join("release")).ok()?;
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))?
        .trim()
        .trim_matches('"');
    let mut parts = v.split(['.', '+', '-']).map(|p| p.parse::<u8>().ok());
    let major = parts.next()??;
    Some((
        major,
        parts.next().flatten().unwrap_or(0),
        parts.next().flatten().unwrap_or(0),
    ))
}

/// `libpython3.X.so…` named in the executable's DT_NEEDED, looked up under `root`.
fn find_libpython(exe: &Path, root: &Path) -> Option<PathBuf> {
    let data = std::fs::read(exe).ok()?;
    let header = elf::FileHeader64::<Endianness>::parse(&*data).ok()?;
    let endian = header.endian().ok()?;
    let segments = header.program_headers(endian, &*data).ok()?;
    let mut needed = Vec::new();
    let mut strtab_addr = None;
    for seg in segments {
        if let Ok(Some(dyns)) = seg.dynamic(endian, &*data) {
            for d in dyns {
                let tag = d.d_tag(endian) as i64;
                if tag == elf::DT_NEEDED {
                    needed.push(d.d_val(endian));
                } else if tag == elf::DT_STRTAB {
                    strtab_addr = Some(d.d_val(endian));
                }
            }
        }
    }
    let strtab_addr = strtab_addr?;
    let off = segments.iter().find_map(|p| {
        let (va, sz, fo) = (p.p_vaddr(endian), p.p_filesz(endian), p.p_offset(endian));
        (p.p_type(endian) == elf::PT_LOAD && strtab_addr >= va && strtab_addr < va + sz)
            .then(|| strtab_addr - va + fo)
    })? as usize;
    for n in needed {
        let start = off + n as usize;
        let end = data.get(start..)?.iter().position(|b| *b == 0)? + start;
        let name = std::str::from_utf8(&data[start..end]).ok()?;
        if name.starts_with("libpython") {
            for dir in [
                "usr/lib/x86_64-linux-gnu",
                "usr/lib",
                "usr/local/lib",
                "lib/x86_64-linux-gnu",
                "lib",
            ] {
                let p = root.join(dir).join(name);
                if p.is_file() {
                    return Some(p);
                }
            }
            // Next to the executable (pyenv / relocatable builds).
            if let Some(parent) = exe.parent().and_then(|p| p.parent()) {
                let p = parent.join("lib").join(name);
                if p.is_file() {
                    return Some(p);
                }
            }
        }
    }
    None
}
