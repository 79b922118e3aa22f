//! The plain `#[repr(C)]` ABI shared by flux's eBPF programs (`flux-ebpf`) and its userspace
//! agent (`flux-agent`).
//!
//! Two argument layouts are read (see [`SiteSpec::layout`]): CPython's `(file, function, line)`
//! with NUL-terminated strings, recorded as [`Event`]s, and HotSpot's `(thread id, class,
//! method, signature)` with each string a (pointer, length) pair, recorded as
//! [`MethodEvent`]s. Strings of both travel once per process as [`StrDef`]s.
//!
//! Why a crate of its own: the kernel side and userspace must agree byte for byte on the records
//! in the ring buffer and on the configuration maps. Keeping every such type here, `no_std` and
//! free of logic, makes a mismatch a compile error rather than a silent misparse.
//!
//! Invariants:
//! - Every type is `#[repr(C)]`, `Copy`, has no implicit padding the two sides could disagree on
//!   (padding is spelled out as `_pad` fields), and is valid for any bit pattern.
//! - The kernel code does no policy: it reads the probe's arguments as [`UsdtArg`] says, filters
//!   by PID namespace as [`Config`] says, and emits. Userspace decides everything else.
#![no_std]

/// Maximum number of arguments a USDT probe site may have that we decode (CPython's have 3,
/// HotSpot's method probes 7; the SystemTap note format allows 12).
pub const MAX_USDT_ARGS: usize = 8;
/// Maximum number of probe sites (across all probes and binaries) one agent attaches.
pub const MAX_SITES: u32 = 512;
/// Bytes of a string copied into a [`StrDef`] record (including the NUL).
pub const STR_MAX: usize = 256;

/// Record tags: the first `u32` of every ring-buffer record.
pub const TAG_CALL: u32 = 1;
pub const TAG_RETURN: u32 = 2;
pub const TAG_LINE: u32 = 3;
pub const TAG_STR: u32 = 4;
/// A [`MethodEvent`] of a call / return probe site of [`LAYOUT_METHOD`].
pub const TAG_METHOD_CALL: u32 = 5;
pub const TAG_METHOD_RETURN: u32 = 6;

/// What a probe site reports; stored in [`SiteSpec::kind`] and echoed as the record tag.
pub const KIND_CALL: u32 = TAG_CALL;
pub const KIND_RETURN: u32 = TAG_RETURN;
pub const KIND_LINE: u32 = TAG_LINE;

/// How a site's arguments are laid out ([`SiteSpec::layout`]).
///
/// CPython's `function__entry/__return/line`: `(const char *file, const char *func, int line)`,
/// both strings NUL-terminated; recorded as an [`Event`].
pub const LAYOUT_FILE_FUNC_LINE: u32 = 0;
/// HotSpot's `method__entry/__return`: `(thread id, class, class length, method, method length,
/// signature, signature length)`, each string a pointer and a length (not NUL-terminated);
/// recorded as a [`MethodEvent`] with the strings in that order.
pub const LAYOUT_METHOD: u32 = 1;

/// How one USDT argument is fetched (decoded by userspace from the note's argument string,
/// e.g. `8@%rbp`, `-4@%eax`, `8@16(%rsp)`, `4@$5`).
pub const ARG_NONE: u8 = 0;
/// The value is the constant in `val_off`.
pub const ARG_CONST: u8 = 1;
/// The value is in the register at `reg_off` bytes into `struct pt_regs`.
pub const ARG_REG: u8 = 2;
/// The value is in user memory at (register at `reg_off`) + `val_off`.
pub const ARG_REG_DEREF: u8 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtArg {
    /// One of `ARG_*`.
    pub kind: u8,
    /// Non-zero when the value is signed (the note's size is negative): sign-extend.
    pub signed: u8,
    /// Size of the value in bytes (1, 2, 4 or 8).
    pub size: u8,
    pub _pad0: u8,
    /// Offset of the register in `struct pt_regs`.
    pub reg_off: u32,
    /// Constant value (`ARG_CONST`) or memory offset from the register (`ARG_REG_DEREF`).
    pub val_off: i64,
}

/// One attached probe site: what it reports and how to read its arguments. Indexed by the
/// BPF cookie attached with the site, so the program never guesses which site fired.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteSpec {
    /// One of `KIND_*`.
    pub kind: u32,
    pub nargs: u32,
    /// One of `LAYOUT_*`: which argument is what.
    pub layout: u32,
    pub _pad: u32,
    pub args: [UsdtArg; MAX_USDT_ARGS],
}

/// Global configuration written by userspace before any probe is attached.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Non-zero: only tasks whose active PID namespace is (`pidns_dev`, `pidns_ino`) emit.
    pub filter_pidns: u32,
    /// Non-zero: remember per task what the PID-namespace filter found (userspace attached
    /// the program that forgets it when the task exits).
    pub ns_cache: u32,
    pub pidns_dev: u64,
    pub pidns_ino: u64,
    /// Offset (from the UTF-8 data pointer the probe passes) of the 16 bytes that fingerprint a
    /// CPython compact string: its `length` and `hash` fields. Zero disables caching: every
    /// event is then preceded by its string definitions.
    pub fp_off: i64,
    /// Submit with a forced wakeup only when this many bytes are pending in the ring buffer;
    /// userspace also polls on a timer, so nothing waits forever.
    pub wakeup_bytes: u64,
    /// Masks of the two words the fingerprint reads at `fp_off`: the bits that never change
    /// while the string lives (CPython's length and hash: all; HotSpot's `Symbol` keeps a
    /// reference count in the low half of its hash word, which is masked off).
    pub fp_mask: [u64; 2],
}

/// Class names a [`LAYOUT_METHOD`] site keeps: a class-name prefix filter, decided in
/// userspace and passed as data (HotSpot fires its method probes for every method, the JDK's
/// included: most of the hits of a test are not the project's).
pub const MAX_PREFIXES: usize = 8;
/// Bytes of a class name the filter compares (in 8-byte words).
pub const PREFIX_WORDS: usize = 8;
/// [`ClassFilter::mode`]: no filter.
pub const FILTER_OFF: u32 = 0;
/// Keep only classes whose internal name (`org/apache/commons/lang3/StringUtils`) starts with
/// one of the prefixes.
pub const FILTER_KEEP: u32 = 1;

/// One prefix: the class name's first `8 * PREFIX_WORDS` bytes (zero past its end), masked
/// word by word, must equal `words`, and the name must be at least `len` bytes long.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassPrefix {
    pub len: u32,
    pub _pad: u32,
    pub mask: [u64; PREFIX_WORDS],
    pub words: [u64; PREFIX_WORDS],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassFilter {
    /// `FILTER_OFF` or `FILTER_KEEP`.
    pub mode: u32,
    /// Prefixes in use (at most [`MAX_PREFIXES`]).
    pub count: u32,
    pub prefixes: [ClassPrefix; MAX_PREFIXES],
}

/// A call, return or line event: fixed size, names its strings by (process, pointer,
/// fingerprint) instead of copying them.
///
/// 56 bytes, so that with the ring buffer's 8-byte record header every event is exactly one
/// 64-byte cache line (records never straddle two lines). Fingerprints are 32-bit here and in
/// [`StrDef::fp`] (zero-extended there).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// `TAG_CALL`, `TAG_RETURN` or `TAG_LINE`.
    pub tag: u32,
    /// The line number argument of the probe.
    pub lineno: i32,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub ts: u64,
    /// Host-level thread-group id (the string cache's process key).
    pub host_tgid: u32,
    /// Process and thread id as seen inside the traced PID namespace (what the program itself
    /// sees as `os.getpid()` / `threading.get_native_id()`). Equal to the host ids when not
    /// filtering by namespace.
    pub pid: u32,
    pub tid: u32,
    pub file_fp: u32,
    pub file_ptr: u64,
    pub func_ptr: u64,
    pub func_fp: u32,
    pub _pad: u32,
}

/// A method call or return of a [`LAYOUT_METHOD`] site (HotSpot): names its class, method and
/// signature by (process, pointer, fingerprint) like [`Event`]. 64 bytes (72 with the ring
/// buffer's header).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MethodEvent {
    /// `TAG_METHOD_CALL` or `TAG_METHOD_RETURN`.
    pub tag: u32,
    /// The probe's thread-id argument (HotSpot: the Java thread's id), low 32 bits.
    pub jtid: u32,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub ts: u64,
    pub host_tgid: u32,
    /// Process and thread id in the traced PID namespace (as in [`Event`]).
    pub pid: u32,
    pub tid: u32,
    /// Fingerprints of class, method and signature.
    pub fp: [u32; 3],
    /// Pointers of class, method and signature.
    pub ptr: [u64; 3],
}

/// [`StrDef::flags`]: the probe gave the string's length (no NUL); `len` bytes were copied.
pub const STR_COUNTED: u32 = 1;
/// [`StrDef::flags`]: the string is longer than [`STR_MAX`] bytes; only its start was copied.
pub const STR_TRUNCATED: u32 = 2;

/// A string definition: emitted before the first event (of a process) that names the string
/// at `ptr` with fingerprint `fp`, and again whenever the kernel-side cache forgets it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StrDef {
    /// `TAG_STR`.
    pub tag: u32,
    /// Bytes copied including the terminating NUL (as `bpf_probe_read_user_str` returns), or a
    /// negative error; with `STR_COUNTED`, the bytes copied (no NUL).
    pub len: i32,
    pub host_tgid: u32,
    /// `STR_*` bits; 0 for a NUL-terminated string.
    pub flags: u32,
    pub ptr: u64,
    pub fp: u64,
    pub data: [u8; STR_MAX],
}

/// Key of the kernel-side string cache.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StrKey {
    pub host_tgid: u32,
    pub _pad: u32,
    pub ptr: u64,
}

/// Indices into the per-CPU counter array.
pub const CNT_EVENTS: u32 = 0;
/// Ring-buffer reservations that failed: lost events (or lost string definitions).
pub const CNT_LOST: u32 = 1;
/// Argument reads that failed: the event was emitted with what could be read and flagged.
pub const CNT_READ_ERR: u32 = 2;
/// Events from tasks outside the traced PID namespace, dropped on purpose.
pub const CNT_FILTERED: u32 = 3;
/// Probe hits whose cookie named no configured site.
pub const CNT_NO_SPEC: u32 = 4;
pub const CNT_STRDEFS: u32 = 5;
/// Hits of a [`LAYOUT_METHOD`] site whose class the [`ClassFilter`] left out, on purpose.
pub const CNT_CLASS_FILTERED: u32 = 6;
pub const NUM_COUNTERS: u32 = 8;

#[cfg(feature = "user")]
mod user {
    // SAFETY: all these types are repr(C), Copy, with explicit padding and valid for any bit
    // pattern, which is what aya::Pod requires.
    unsafe impl aya::Pod for super::UsdtArg {}
    unsafe impl aya::Pod for super::SiteSpec {}
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::Event {}
    unsafe impl aya::Pod for super::StrKey {}
    unsafe impl aya::Pod for super::MethodEvent {}
    unsafe impl aya::Pod for super::ClassPrefix {}
    unsafe impl aya::Pod for super::ClassFilter {}
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::mem::size_of;

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(size_of::<UsdtArg>(), 16);
        assert_eq!(size_of::<SiteSpec>(), 16 + MAX_USDT_ARGS * 16);
        assert_eq!(size_of::<Config>(), 8 + 4 * 8 + 16);
        assert_eq!(size_of::<Event>(), 56);
        assert_eq!(size_of::<MethodEvent>(), 64);
        assert_eq!(size_of::<ClassPrefix>(), 8 + 16 * PREFIX_WORDS);
        assert_eq!(
            size_of::<ClassFilter>(),
            8 + MAX_PREFIXES * size_of::<ClassPrefix>()
        );
        assert_eq!(size_of::<StrDef>(), 32 + STR_MAX);
        assert_eq!(size_of::<StrKey>(), 16);
    }
}
