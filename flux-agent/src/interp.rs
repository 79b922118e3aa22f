//! What a given CPython build lets flux trace, and how.
//!
//! The facts (see ARCHITECTURE.md and shared notes): bookworm's 3.11 has `function__return` and
//! `line`, and a `function__entry` that does not fire for Python-to-Python calls (cpython#98894);
//! 3.12–3.14 have no function or line probes (PEP 669 removed them); 3.15 restored
//! `function__entry/__return` but has no `line`. flux decides from the ELF notes and the
//! interpreter version, never from the file name.
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

/// The interpreter as flux sees it.
#[derive(Clone, Debug)]
pub struct Interpreter {
    /// The executable named by the user.
    pub exe: PathBuf,
    /// The file that carries the probes (the executable, or its libpython).
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
            probes,
            version,
            entry,
            ret,
            line,
        })
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
        match self.version {
            Some((3, minor, _)) if minor >= 12 => -24,
            Some((3, minor, _)) if minor >= 3 => -32,
            _ => 0,
        }
    }
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
