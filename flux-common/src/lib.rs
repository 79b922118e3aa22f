//! The plain `#[repr(C)]` ABI shared by flux's eBPF programs (`flux-ebpf`) and its userspace
//! agent (`flux-agent`).
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

/// Maximum number of arguments a USDT probe site may have that we decode (CPython's have ≤ 3;
/// the SystemTap note format allows 12).
pub const MAX_USDT_ARGS: usize = 3;
/// Maximum number of probe sites (across all probes and binaries) one agent attaches.
pub const MAX_SITES: u32 = 512;
/// Bytes of a string copied into a [`StrDef`] record (including the NUL).
pub const STR_MAX: usize = 256;

/// Record tags: the first `u32` of every ring-buffer record.
pub const TAG_CALL: u32 = 1;
pub const TAG_RETURN: u32 = 2;
pub const TAG_LINE: u32 = 3;
pub const TAG_STR: u32 = 4;

/// What a probe site reports; stored in [`SiteSpec::kind`] and echoed as the record tag.
pub const KIND_CALL: u32 = TAG_CALL;
pub const KIND_RETURN: u32 = TAG_RETURN;
pub const KIND_LINE: u32 = TAG_LINE;

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

/// A string definition: emitted before the first event (of a process) that names the string
/// at `ptr` with fingerprint `fp`, and again whenever the kernel-side cache forgets it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StrDef {
    /// `TAG_STR`.
    pub tag: u32,
    /// Bytes copied including the terminating NUL (as `bpf_probe_read_user_str` returns), or a
    /// negative error.
    pub len: i32,
    pub host_tgid: u32,
    pub _pad: u32,
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
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::mem::size_of;

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(size_of::<UsdtArg>(), 16);
        assert_eq!(size_of::<SiteSpec>(), 8 + 3 * 16);
        assert_eq!(size_of::<Config>(), 8 + 4 * 8);
        assert_eq!(size_of::<Event>(), 56);
        assert_eq!(size_of::<StrDef>(), 32 + STR_MAX);
        assert_eq!(size_of::<StrKey>(), 16);
    }
}
