//! USDT discovery: read SystemTap SDT notes (`.note.stapsdt`) from an ELF file and turn each
//! probe site into what the kernel needs to attach it (file offsets of the site and of its
//! semaphore) and what our BPF program needs to read its arguments ([`flux_common::UsdtArg`]).
//!
//! Why our own: aya has no USDT support. The model is libbpf's `usdt.c`, re-derived from the
//! SystemTap note format:
//! - each note's descriptor is `pc, base, semaphore` (three addresses) then `provider\0name\0args\0`;
//! - if the file has a `.stapsdt.base` section whose address differs from the note's `base`
//!   (the file was prelinked), the site address moves by the difference;
//! - addresses are virtual; the kernel wants file offsets, found through the PT_LOAD segment
//!   that contains the address (this is what makes PIE, non-PIE and shared libpython alike);
//! - the argument string is `SIZE@LOCATION ...` with x86-64 AT&T locations: `%reg`,
//!   `OFF(%reg)`, `$IMM`. Anything else is reported as unsupported, never guessed.
use flux_common::{UsdtArg, ARG_CONST, ARG_REG, ARG_REG_DEREF, MAX_USDT_ARGS};
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym};
use object::{Endian, Endianness, StringTable};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum UsdtError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a 64-bit ELF file we can parse: {msg}")]
    Elf { path: PathBuf, msg: String },
    #[error("{path}: probe {probe} at {pc:#x}: argument {index} `{spec}`: {msg}")]
    Arg {
        path: PathBuf,
        /// `provider:name`.
        probe: String,
        pc: u64,
        index: usize,
        spec: String,
        msg: String,
    },
    #[error("{path}: address {addr:#x} of probe {name} is in no loadable segment")]
    NoSegment {
        path: PathBuf,
        name: String,
        addr: u64,
    },
}

/// One argument as written in the note, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The note's text for this argument, e.g. `-4@%eax`.
    pub text: String,
    pub spec: UsdtArg,
}

/// One site of one probe (a probe can have several sites).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub provider: String,
    pub name: String,
    /// Virtual address of the site after the `.stapsdt.base` adjustment.
    pub addr: u64,
    /// File offset of the site: what a uprobe is attached at.
    pub offset: u64,
    /// Virtual address of the semaphore (0 when the probe has none).
    pub semaphore_addr: u64,
    /// File offset of the semaphore (the uprobe's `ref_ctr_offset`), 0 when none.
    pub semaphore_offset: u64,
    pub args: Vec<Arg>,
}

/// Everything flux learns from one ELF file.
#[derive(Clone, Debug)]
pub struct Binary {
    pub path: PathBuf,
    pub sites: Vec<Site>,
    /// `PY_VERSION_HEX` read from the exported `Py_Version` symbol (3.11+), if present.
    pub py_version_hex: Option<u32>,
    /// True for ET_DYN (PIE executables and shared libraries).
    pub position_independent: bool,
}

impl Binary {
    pub fn sites_of<'a>(
        &'a self,
        provider: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Site> {
        self.sites
            .iter()
            .filter(move |s| s.provider == provider && s.name == name)
    }

    pub fn has(&self, provider: &str, name: &str) -> bool {
        self.sites_of(provider, name).next().is_some()
    }

    /// `(major, minor, micro)` of the interpreter, if the file is (or embeds) CPython.
    pub fn py_version(&self) -> Option<(u8, u8, u8)> {
        self.py_version_hex
            .map(|h| ((h >> 24) as u8, (h >> 16) as u8, (h >> 8) as u8))
    }
}

/// Read and decode every USDT site of `path`.
pub fn read_binary(path: &Path) -> Result<Binary, UsdtError> {
    let data = std::fs::read(path).map_err(|source| UsdtError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_binary(path, &data)
}

/// Like [`read_binary`], on bytes already in memory (`path` names them in errors).
pub fn parse_binary(path: &Path, data: &[u8]) -> Result<Binary, UsdtError> {
    let elf_err = |msg: String| UsdtError::Elf {
        path: path.to_path_buf(),
        msg,
    };
    let header =
        elf::FileHeader64::<Endianness>::parse(data).map_err(|e| elf_err(e.to_string()))?;
    let endian = header.endian().map_err(|e| elf_err(e.to_string()))?;
    let sections = header
        .sections(endian, data)
        .map_err(|e| elf_err(e.to_string()))?;
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| elf_err(e.to_string()))?;
    let loads: Vec<(u64, u64, u64)> = segments
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .map(|p| (p.p_vaddr(endian), p.p_memsz(endian), p.p_offset(endian)))
        .collect();
    let to_offset = |addr: u64| -> Option<u64> {
        loads
            .iter()
            .find(|(vaddr, memsz, _)| addr >= *vaddr && addr < vaddr + memsz)
            .map(|(vaddr, _, off)| addr - vaddr + off)
    };

    let mut stapsdt_base = None;
    for section in sections.iter() {
        let name = sections
            .section_name(endian, section)
            .map_err(|e| elf_err(e.to_string()))?;
        if name == b".stapsdt.base" {
            stapsdt_base = Some(section.sh_addr(endian));
        }
    }

    let mut sites = Vec::new();
    for section in sections.iter() {
        if section.sh_type(endian) != elf::SHT_NOTE {
            continue;
        }
        let name = sections
            .section_name(endian, section)
            .map_err(|e| elf_err(e.to_string()))?;
        if name != b".note.stapsdt" {
            continue;
        }
        let Some(mut notes) = section
            .notes(endian, data)
            .map_err(|e| elf_err(e.to_string()))?
        else {
            continue;
        };
        while let Some(note) = notes.next().map_err(|e| elf_err(e.to_string()))? {
            if note.name() != b"stapsdt" || note.n_type(endian) != 3 {
                continue;
            }
            let desc = note.desc();
            if desc.len() < 24 {
                return Err(elf_err(format!(
                    "stapsdt note of {} bytes is too short",
                    desc.len()
                )));
            }
            let word = |i: usize| -> u64 {
                let b: [u8; 8] = desc[i * 8..i * 8 + 8].try_into().expect("8 bytes");
                if endian.is_little_endian() {
                    u64::from_le_bytes(b)
                } else {
                    u64::from_be_bytes(b)
                }
            };
            let (pc, note_base, sema) = (word(0), word(1), word(2));
            let mut strings = desc[24..].split(|b| *b == 0);
            let provider = String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();
            let pname = String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();
            let args_text =
                String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();

            let addr = match stapsdt_base {
                Some(actual) if note_base != 0 => pc.wrapping_add(actual).wrapping_sub(note_base),
                _ => pc,
            };
            let offset = to_offset(addr).ok_or_else(|| UsdtError::NoSegment {
                path: path.to_path_buf(),
                name: pname.clone(),
                addr,
            })?;
            let semaphore_offset = if sema == 0 {
                0
            } else {
                to_offset(sema).ok_or_else(|| UsdtError::NoSegment {
                    path: path.to_path_buf(),
                    name: format!("{pname} (semaphore)"),
                    addr: sema,
                })?
            };
            let mut args = Vec::new();
            for (index, text) in args_text.split_whitespace().enumerate() {
                let spec = parse_arg(text).map_err(|msg| UsdtError::Arg {
                    path: path.to_path_buf(),
                    probe: format!("{provider}:{pname}"),
                    pc,
                    index,
                    spec: text.to_string(),
                    msg,
                })?;
                args.push(Arg {
                    text: text.to_string(),
                    spec,
                });
            }
            sites.push(Site {
                provider,
                name: pname,
                addr,
                offset,
                semaphore_addr: sema,
                semaphore_offset,
                args,
            });
        }
    }

    let py_version_hex = read_py_version(endian, data, &sections, &to_offset);
    Ok(Binary {
        path: path.to_path_buf(),
        sites,
        py_version_hex,
        position_independent: header.e_type(endian) == elf::ET_DYN,
    })
}

/// Find the `Py_Version` data symbol (exported since 3.11) and read the u32 it holds.
fn read_py_version(
    endian: Endianness,
    data: &[u8],
    sections: &object::read::elf::SectionTable<'_, elf::FileHeader64<Endianness>>,
    to_offset: &dyn Fn(u64) -> Option<u64>,
) -> Option<u32> {
    for kind in [elf::SHT_DYNSYM, elf::SHT_SYMTAB] {
        let Ok(symbols) = sections.symbols(endian, data, kind) else {
            continue;
        };
        let strings: StringTable<'_> = symbols.strings();
        for sym in symbols.iter() {
            if sym.name(endian, strings).ok() != Some(b"Py_Version".as_slice()) {
                continue;
            }
            let off = to_offset(sym.st_value(endian))? as usize;
            let bytes: [u8; 4] = data.get(off..off + 4)?.try_into().ok()?;
            return Some(if endian.is_little_endian() {
                u32::from_le_bytes(bytes)
            } else {
                u32::from_be_bytes(bytes)
            });
        }
    }
    None
}

/// Offset of an x86-64 register in the kernel's `struct pt_regs`, and the width its name
/// implies.
fn x86_64_reg(name: &str) -> Option<u32> {
    const TABLE: &[(&[&str], u32)] = &[
        (&["rax", "eax", "ax", "al"], 80),
        (&["rbx", "ebx", "bx", "bl"], 40),
        (&["rcx", "ecx", "cx", "cl"], 88),
        (&["rdx", "edx", "dx", "dl"], 96),
        (&["rsi", "esi", "si", "sil"], 104),
        (&["rdi", "edi", "di", "dil"], 112),
        (&["rbp", "ebp", "bp", "bpl"], 32),
        (&["rsp", "esp", "sp", "spl"], 152),
        (&["r8", "r8d", "r8w", "r8b"], 72),
        (&["r9", "r9d", "r9w", "r9b"], 64),
        (&["r10", "r10d", "r10w", "r10b"], 56),
        (&["r11", "r11d", "r11w", "r11b"], 48),
        (&["r12", "r12d", "r12w", "r12b"], 24),
        (&["r13", "r13d", "r13w", "r13b"], 16),
        (&["r14", "r14d", "r14w", "r14b"], 8),
        (&["r15", "r15d", "r15w", "r15b"], 0),
        (&["rip", "eip"], 128),
    ];
    TABLE
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, off)| *off)
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()?
    } else {
        s.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Decode one `SIZE@LOCATION` argument (x86-64 AT&T syntax).
pub fn parse_arg(text: &str) -> Result<UsdtArg, String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("USDT argument decoding is implemented for x86-64 only".into());
    }
    let (size, loc) = text
        .split_once('@')
        .ok_or_else(|| "expected SIZE@LOCATION".to_string())?;
    let size = parse_int(size).ok_or_else(|| format!("bad size `{size}`"))?;
    let signed = size < 0;
    let width = size.unsigned_abs();
    if ![1, 2, 4, 8].contains(&width) {
        return Err(format!("unsupported size {size}"));
    }
    let mut arg = UsdtArg {
        kind: 0,
        signed: signed as u8,
        size: width as u8,
        _pad0: 0,
        reg_off: 0,
        val_off: 0,
    };
    if let Some(imm) = loc.strip_prefix('$') {
        arg.kind = ARG_CONST;
        arg.val_off = parse_int(imm).ok_or_else(|| format!("bad constant `{imm}`"))?;
    } else if let Some(reg) = loc.strip_prefix('%') {
        arg.kind = ARG_REG;
        arg.reg_off = x86_64_reg(reg).ok_or_else(|| format!("unknown register `%{reg}`"))?;
    } else if let Some(open) = loc.find('(') {
        let inner = loc[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| "unbalanced parenthesis".to_string())?;
        if inner.contains(',') {
            return Err("indexed addressing (base,index,scale) is not supported".into());
        }
        let reg = inner
            .strip_prefix('%')
            .ok_or_else(|| format!("expected a register in `({inner})`"))?;
        if reg == "rip" {
            return Err("rip-relative (global variable) arguments are not supported".into());
        }
        arg.kind = ARG_REG_DEREF;
        arg.reg_off = x86_64_reg(reg).ok_or_else(|| format!("unknown register `%{reg}`"))?;
        let off = &loc[..open];
        arg.val_off = if off.is_empty() {
            0
        } else {
            parse_int(off).ok_or_else(|| format!("bad offset `{off}`"))?
        };
    } else {
        return Err("unrecognised location".into());
    }
    Ok(arg)
}

/// Pack a site's arguments into the fixed array the BPF program reads.
pub fn arg_array(site: &Site) -> ([UsdtArg; MAX_USDT_ARGS], u32) {
    let mut out = [UsdtArg::default(); MAX_USDT_ARGS];
    for (slot, arg) in out.iter_mut().zip(&site.args) {
        *slot = arg.spec;
    }
    (out, site.args.len().min(MAX_USDT_ARGS) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_register_memory_and_constant_arguments() {
        let a = parse_arg("8@%rbp").unwrap();
        assert_eq!((a.kind, a.size, a.signed, a.reg_off), (ARG_REG, 8, 0, 32));
        let a = parse_arg("-4@%eax").unwrap();
        assert_eq!((a.kind, a.size, a.signed, a.reg_off), (ARG_REG, 4, 1, 80));
        let a = parse_arg("-4@112(%rsp)").unwrap();
        assert_eq!(
            (a.kind, a.size, a.signed, a.reg_off, a.val_off),
            (ARG_REG_DEREF, 4, 1, 152, 112)
        );
        let a = parse_arg("8@-16(%rbp)").unwrap();
        assert_eq!((a.kind, a.val_off), (ARG_REG_DEREF, -16));
        let a = parse_arg("8@(%r12)").unwrap();
        assert_eq!((a.kind, a.reg_off, a.val_off), (ARG_REG_DEREF, 24, 0));
        let a = parse_arg("4@$-5").unwrap();
        assert_eq!((a.kind, a.val_off), (ARG_CONST, -5));
        let a = parse_arg("2@$0x10").unwrap();
        assert_eq!((a.kind, a.val_off, a.size), (ARG_CONST, 16, 2));
        let a = parse_arg("1@%r9b").unwrap();
        assert_eq!((a.reg_off, a.size), (64, 1));
    }

    #[test]
    fn rejects_what_it_cannot_read_with_a_reason() {
        assert!(parse_arg("8@(%rax,%rbx,8)")
            .unwrap_err()
            .contains("indexed"));
        assert!(parse_arg("8@foo(%rip)")
            .unwrap_err()
            .contains("rip-relative"));
        assert!(parse_arg("3@%rax").unwrap_err().contains("size"));
        assert!(parse_arg("8@%xmm0")
            .unwrap_err()
            .contains("unknown register"));
        assert!(parse_arg("8").unwrap_err().contains("SIZE@LOCATION"));
    }

    #[test]
    fn not_an_elf_file_is_an_error_naming_it() {
        let err = parse_binary(Path::new("/x/notelf"), b"hello").unwrap_err();
        assert!(err.to_string().starts_with("/x/notelf:"), "{err}");
    }
}
