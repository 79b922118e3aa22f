//! flux's kernel side: one program for every USDT site flux attaches (CPython's and HotSpot's),
//! and one empty program that measures the trap floor.
//!
//! The program does no policy. Per hit it:
//! 1. drops the hit unless the task is in the traced PID namespace (a uprobe lands on an inode
//!    and fires in every process that maps it: other containers, the host), asking the kernel
//!    once per task (a cache remembers the answer until the task exits);
//! 2. finds the site's spec through the BPF cookie userspace attached with it and reads the
//!    probe's arguments exactly as the decoded note says, in the site's layout: CPython's
//!    (filename, funcname, lineno), or HotSpot's (thread id, then class, method and signature
//!    as pointer and length), where a class-name prefix filter given as data may drop the hit;
//! 3. names each string by (process, pointer, fingerprint) and copies its bytes only the first
//!    time this process names it (a per-CPU direct-mapped cache remembers what was sent);
//! 4. submits a fixed record (CPython's: 56 bytes, one cache line with its header) without
//!    waking userspace unless a lot is pending.
//!
//! Every reservation that fails is counted: userspace turns a non-zero count into an
//! incomplete trace.
#![no_std]
#![no_main]
#![feature(asm_experimental_arch)]

use aya_ebpf::{
    bindings::{bpf_pidns_info, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::{
            bpf_get_attach_cookie, bpf_get_current_task, bpf_get_ns_current_pid_tgid,
            bpf_probe_read_user_str,
        },
    },
    macros::{map, raw_tracepoint, uprobe},
    maps::{Array, PerCpuArray, RingBuf},
    programs::{ProbeContext, RawTracePointContext},
    EbpfContext,
};
use flux_common::{
    ClassFilter, Config, Event, MethodEvent, SiteSpec, StrDef, UsdtArg, ARG_CONST, ARG_REG,
    ARG_REG_DEREF, CNT_CLASS_FILTERED, CNT_EVENTS, CNT_FILTERED, CNT_LOST, CNT_NO_SPEC,
    CNT_READ_ERR, CNT_STRDEFS, FILTER_KEEP, LAYOUT_METHOD, MAX_PREFIXES, MAX_SITES, NUM_COUNTERS,
    PREFIX_WORDS, STR_COUNTED, STR_MAX, STR_TRUNCATED, TAG_METHOD_CALL, TAG_METHOD_RETURN,
};

/// Userspace sets the real size at load time.
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 20, 0);

#[map]
static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

#[map]
static SITES: Array<SiteSpec> = Array::with_max_entries(MAX_SITES, 0);

#[map]
static FILTER: Array<ClassFilter> = Array::with_max_entries(1, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(NUM_COUNTERS, 0);

/// Slots of the per-CPU string cache (a power of two).
const STR_SLOTS: u32 = 4096;

/// One slot of the string cache: this CPU last sent a definition of (process, pointer,
/// fingerprint).
#[repr(C)]
#[derive(Clone, Copy)]
struct StrSlot {
    host_tgid: u32,
    fp: u32,
    ptr: u64,
}

/// Direct-mapped, per-CPU "already sent" cache: slot = hash(process, pointer). A collision or a
/// migration to another CPU only costs a repeated definition (userspace keeps every definition
/// for the whole run and tolerates repeats); a hit never names a string userspace lacks, since
/// a slot is written only after its definition was submitted.
#[map]
static STRINGS: PerCpuArray<StrSlot> = PerCpuArray::with_max_entries(STR_SLOTS, 0);

#[inline(always)]
fn str_slot(host_tgid: u32, ptr: u64) -> u32 {
    let h = (ptr ^ ((host_tgid as u64) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 52) as u32 & (STR_SLOTS - 1)
}

/// Slots of the PID-namespace cache (a power of two).
const NS_SLOTS: u32 = 8192;

/// What the kernel said of one task: its thread and process IDs in the traced namespace, or
/// that it is outside it (`ns_tid` 0: no task of a namespace has ID 0). Asking costs ~65 ns a
/// hit (`bpf_get_ns_current_pid_tgid`), the most of any step after the string reads; a task's
/// namespace never changes while it lives, so the answer is kept until it exits.
///
/// Slots are shared by every CPU and written without a lock, so each of the three words names
/// the task it belongs to (its host thread ID, its `task_struct`), and a slot is trusted only
/// when all three name the running task. A task's slot is written only in that task's own
/// context (here, and when it exits: `flux_task_exit`), so its writes never interleave; another
/// task hashing to the same slot can only make it miss.
#[repr(C)]
#[derive(Clone, Copy)]
struct NsSlot {
    /// host thread ID << 32 | thread ID in the namespace (0: outside it).
    tid_ns: u64,
    /// host thread ID << 32 | process ID in the namespace.
    tid_tgid: u64,
    /// The task's `task_struct` address.
    task: u64,
}

#[map]
static NSCACHE: Array<NsSlot> = Array::with_max_entries(NS_SLOTS, 0);

#[inline(always)]
fn ns_slot(host_tid: u32) -> u32 {
    (host_tid.wrapping_mul(0x9e37_79b1) >> 19) & (NS_SLOTS - 1)
}

/// A task exits: forget what the namespace cache says of it, before its thread ID can be given
/// to another task (attached to the raw tracepoint `sched_process_exit`, which runs in the
/// exiting task; raw, so no tracefs is needed).
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn flux_task_exit(_ctx: RawTracePointContext) -> i32 {
    let host_tid = bpf_get_current_pid_tgid() as u32;
    if let Some(p) = NSCACHE.get_ptr_mut(ns_slot(host_tid)) {
        // SAFETY: an 8-byte-aligned slot of a map value; see NsSlot for the concurrency.
        unsafe {
            if ((*p).tid_ns >> 32) as u32 == host_tid {
                core::ptr::write_volatile(
                    p,
                    NsSlot {
                        tid_ns: 0,
                        tid_tgid: 0,
                        task: 0,
                    },
                );
            }
        }
    }
    0
}

/// The running task's (thread, process) IDs in the traced namespace, or `None` outside it.
#[inline(always)]
fn ns_ids(cfg: &Config, host: u64) -> Option<(u32, u32)> {
    let host_tid = host as u32;
    let slot: *mut NsSlot = if cfg.ns_cache != 0 {
        NSCACHE
            .get_ptr_mut(ns_slot(host_tid))
            .unwrap_or(core::ptr::null_mut())
    } else {
        core::ptr::null_mut()
    };
    // (Only read with the cache on: it names the slot's task.)
    let task = if slot.is_null() {
        0
    } else {
        // SAFETY: a helper without arguments; the pointer is only compared, never dereferenced.
        unsafe { bpf_get_current_task() }
    };
    if !slot.is_null() {
        // SAFETY: as in flux_task_exit; a torn read fails the check below.
        let s = unsafe { core::ptr::read_volatile(slot) };
        if (s.tid_ns >> 32) as u32 == host_tid
            && (s.tid_tgid >> 32) as u32 == host_tid
            && s.task == task
        {
            let tid = s.tid_ns as u32;
            return (tid != 0).then_some((tid, s.tid_tgid as u32));
        }
    }
    let mut ns = bpf_pidns_info { pid: 0, tgid: 0 };
    // SAFETY: `ns` is a live, correctly sized bpf_pidns_info on this program's stack.
    let rc = unsafe {
        bpf_get_ns_current_pid_tgid(
            cfg.pidns_dev,
            cfg.pidns_ino,
            &mut ns as *mut _,
            core::mem::size_of::<bpf_pidns_info>() as u32,
        )
    };
    let (tid, pid) = if rc == 0 { (ns.pid, ns.tgid) } else { (0, 0) };
    if !slot.is_null() {
        let hi = (host_tid as u64) << 32;
        // SAFETY: as above.
        unsafe {
            core::ptr::write_volatile(
                slot,
                NsSlot {
                    tid_ns: hi | tid as u64,
                    tid_tgid: hi | pid as u64,
                    task,
                },
            )
        };
    }
    (tid != 0).then_some((tid, pid))
}

/// Events between two looks at how much the ring buffer holds (a power of two).
const WAKEUP_CHECK_EVERY: u64 = 64;

#[inline(always)]
fn bump(idx: u32) {
    if let Some(p) = COUNTERS.get_ptr_mut(idx) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *p += 1 };
    }
}

/// The trap floor: attached to the same sites as `flux_usdt` by `cargo xtask bench`.
#[uprobe]
pub fn flux_empty(_ctx: ProbeContext) -> u32 {
    0
}

#[uprobe]
pub fn flux_usdt(ctx: ProbeContext) -> u32 {
    match try_flux_usdt(&ctx) {
        Ok(()) => 0,
        Err(()) => 0,
    }
}

/// The register at byte offset `off` of `struct pt_regs`, loaded straight from the context.
///
/// The verifier only accepts context loads at constant offsets from the unmodified context
/// pointer, so each of the 21 x86-64 `pt_regs` slots gets its own arm whose load is written in
/// BPF assembly (plain Rust lets LLVM fold the arms into pointer arithmetic on the context,
/// which the verifier rejects). No helper call: a few instructions instead of a
/// `bpf_probe_read_kernel` per register.
#[inline(always)]
fn ctx_reg(ctx: &ProbeContext, off: u32) -> Result<u64, ()> {
    let p = ctx.as_ptr();
    macro_rules! at {
        ($off:literal) => {{
            let v: u64;
            // SAFETY: a read of 8 bytes at a constant offset inside the probe's pt_regs.
            unsafe {
                core::arch::asm!(
                    concat!("{v} = *(u64 *)({p} + ", $off, ")"),
                    v = out(reg) v,
                    p = in(reg) p,
                    options(readonly, nostack, preserves_flags)
                )
            };
            v
        }};
    }
    Ok(match off {
        0 => at!(0),
        8 => at!(8),
        16 => at!(16),
        24 => at!(24),
        32 => at!(32),
        40 => at!(40),
        48 => at!(48),
        56 => at!(56),
        64 => at!(64),
        72 => at!(72),
        80 => at!(80),
        88 => at!(88),
        96 => at!(96),
        104 => at!(104),
        112 => at!(112),
        120 => at!(120),
        128 => at!(128),
        136 => at!(136),
        144 => at!(144),
        152 => at!(152),
        160 => at!(160),
        _ => return Err(()),
    })
}

#[inline(always)]
fn read_arg(ctx: &ProbeContext, arg: &UsdtArg) -> Result<u64, ()> {
    let raw: u64 = match arg.kind {
        ARG_CONST => arg.val_off as u64,
        ARG_REG => ctx_reg(ctx, arg.reg_off)?,
        ARG_REG_DEREF => {
            let reg = ctx_reg(ctx, arg.reg_off)?;
            let addr = reg.wrapping_add(arg.val_off as u64) as *const u64;
            // SAFETY: the helper reads user memory fault-tolerantly (a bad address is an error).
            unsafe { bpf_probe_read_user(addr) }.map_err(|_| ())?
        }
        _ => return Err(()),
    };
    // Keep the low `size` bytes, sign-extending when the note says the value is signed.
    let size = arg.size as u32;
    if size == 0 || size >= 8 {
        return Ok(raw);
    }
    let shift = 64 - size * 8;
    let v = raw << shift;
    Ok(if arg.signed != 0 {
        ((v as i64) >> shift) as u64
    } else {
        v >> shift
    })
}

/// 32-bit fingerprint of the string whose data is at `ptr`: the two words at `fp_off` from it,
/// masked by `fp_mask`, folded (0 when there is nothing to read). CPython: a compact string's
/// length and hash; HotSpot: a `Symbol`'s hash, length and first bytes.
#[inline(always)]
fn fingerprint(ptr: u64, fp_off: i64, fp_mask: &[u64; 2]) -> u32 {
    if fp_off == 0 || ptr == 0 {
        return 0;
    }
    let at = ptr.wrapping_add(fp_off as u64) as *const [u64; 2];
    // SAFETY: the helper reads user memory fault-tolerantly (a bad address is an error).
    match unsafe { bpf_probe_read_user(at) } {
        Ok([len, hash]) => {
            let x =
                (len & fp_mask[0]) ^ (hash & fp_mask[1]).rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
            (x ^ (x >> 32)) as u32
        }
        Err(_) => 0,
    }
}

/// Make sure userspace knows the string at `ptr` in this process: a cache hit costs one inlined
/// array lookup and a compare; a miss copies the string into the ring buffer first. `counted`
/// is the string's length when the probe gives it (HotSpot), negative for a NUL-terminated one.
#[inline(always)]
fn define_string(host_tgid: u32, ptr: u64, fp: u32, always: bool, counted: i64) -> Result<(), ()> {
    // A null pointer (rather than an Option) for "no slot": LLVM may otherwise spill the
    // undefined payload of a None, which the verifier rejects.
    let slot: *mut StrSlot = if always {
        core::ptr::null_mut()
    } else {
        STRINGS
            .get_ptr_mut(str_slot(host_tgid, ptr))
            .unwrap_or(core::ptr::null_mut())
    };
    if !slot.is_null() {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        let s = unsafe { &*slot };
        if s.ptr == ptr && s.fp == fp && s.host_tgid == host_tgid {
            return Ok(());
        }
    }
    let Some(mut entry) = EVENTS.reserve::<StrDef>(0) else {
        bump(CNT_LOST);
        return Err(());
    };
    let def = entry.as_mut_ptr();
    // SAFETY: `def` points to the reserved, exclusively owned ring-buffer record (a StrDef);
    // the helper copies at most STR_MAX bytes into its `data` and reads user memory safely.
    let n = unsafe {
        (*def).tag = flux_common::TAG_STR;
        (*def).host_tgid = host_tgid;
        (*def).ptr = ptr;
        (*def).fp = fp as u64;
        let n = if counted < 0 {
            (*def).flags = 0;
            bpf_probe_read_user_str(
                (*def).data.as_mut_ptr() as *mut _,
                STR_MAX as u32,
                ptr as *const _,
            )
        } else {
            let full = counted as u64;
            let mut take = full & (2 * STR_MAX as u64 - 1);
            if full > STR_MAX as u64 {
                take = STR_MAX as u64;
            }
            if take > STR_MAX as u64 {
                take = STR_MAX as u64;
            }
            (*def).flags = if full > STR_MAX as u64 {
                STR_COUNTED | STR_TRUNCATED
            } else {
                STR_COUNTED
            };
            let rc = aya_ebpf::helpers::generated::bpf_probe_read_user(
                (*def).data.as_mut_ptr() as *mut _,
                take as u32,
                ptr as *const _,
            );
            // The bytes copied, or the helper's error.
            if rc < 0 {
                rc
            } else {
                take as i64
            }
        };
        (*def).len = n as i32;
        n
    };
    entry.submit(BPF_RB_NO_WAKEUP as u64);
    bump(CNT_STRDEFS);
    // Remember only a definition that carries the string: a failed copy is retried next time.
    if !slot.is_null() && n > 0 {
        // SAFETY: as above.
        unsafe {
            *slot = StrSlot { host_tgid, fp, ptr };
        }
    }
    Ok(())
}

#[inline(always)]
fn try_flux_usdt(ctx: &ProbeContext) -> Result<(), ()> {
    let Some(cfg) = CONFIG.get(0) else {
        return Err(());
    };
    let host = bpf_get_current_pid_tgid();
    let host_tgid = (host >> 32) as u32;
    let (mut pid, mut tid) = (host_tgid, host as u32);
    if cfg.filter_pidns != 0 {
        let Some((t, p)) = ns_ids(cfg, host) else {
            bump(CNT_FILTERED);
            return Ok(());
        };
        tid = t;
        pid = p;
    }
    // SAFETY: `ctx` is this program's own probe context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    let Some(spec) = SITES.get(cookie) else {
        bump(CNT_NO_SPEC);
        return Err(());
    };
    if spec.layout == LAYOUT_METHOD {
        return method_event(ctx, cfg, spec, host_tgid, pid, tid);
    }
    if spec.kind == 0 || spec.nargs < 3 {
        bump(CNT_NO_SPEC);
        return Err(());
    }
    // SAFETY: a helper without arguments.
    let ts = unsafe { bpf_ktime_get_ns() };
    let mut read_err = false;
    let file_ptr = read_arg(ctx, &spec.args[0]).unwrap_or_else(|_| {
        read_err = true;
        0
    });
    let func_ptr = read_arg(ctx, &spec.args[1]).unwrap_or_else(|_| {
        read_err = true;
        0
    });
    let lineno = read_arg(ctx, &spec.args[2]).unwrap_or_else(|_| {
        read_err = true;
        0
    }) as i32;
    if read_err {
        bump(CNT_READ_ERR);
    }
    let fp_off = cfg.fp_off;
    let file_fp = fingerprint(file_ptr, fp_off, &cfg.fp_mask);
    let func_fp = fingerprint(func_ptr, fp_off, &cfg.fp_mask);
    let always = fp_off == 0;
    // A lost definition is already counted; the event still goes out so counts stay honest.
    let _ = define_string(host_tgid, file_ptr, file_fp, always, -1);
    let _ = define_string(host_tgid, func_ptr, func_fp, always, -1);

    let Some(mut entry) = EVENTS.reserve::<Event>(0) else {
        bump(CNT_LOST);
        return Err(());
    };
    entry.write(Event {
        tag: spec.kind,
        lineno,
        ts,
        host_tgid,
        pid,
        tid,
        file_fp,
        file_ptr,
        func_ptr,
        func_fp,
        _pad: 0,
    });
    // How much is pending is asked only every WAKEUP_CHECK_EVERY events of this CPU (a helper
    // call and a read of the consumer's cache line saved on the others): the wakeup threshold
    // is a latency hint on top of userspace's poll timer, so checking it a few events late
    // changes nothing else.
    entry.submit(wakeup_flags(cfg) as u64);
    Ok(())
}

/// Whether `name` (a class name of `len` bytes at a user pointer) passes the class filter.
#[inline(always)]
fn class_kept(f: &ClassFilter, name: u64, len: u64) -> Result<bool, ()> {
    let mut buf = [0u64; PREFIX_WORDS];
    let mut take = len & (2 * 8 * PREFIX_WORDS as u64 - 1);
    if take > 8 * PREFIX_WORDS as u64 {
        take = 8 * PREFIX_WORDS as u64;
    }
    // SAFETY: the helper copies at most the buffer's size (`take` is bounded above) and reads
    // user memory fault-tolerantly.
    let rc = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            buf.as_mut_ptr() as *mut _,
            take as u32,
            name as *const _,
        )
    };
    if rc < 0 {
        return Err(());
    }
    for p in 0..MAX_PREFIXES {
        if p as u32 >= f.count {
            break;
        }
        let pre = &f.prefixes[p];
        if (pre.len as u64) > len {
            continue;
        }
        let mut same = true;
        for w in 0..PREFIX_WORDS {
            if buf[w] & pre.mask[w] != pre.words[w] {
                same = false;
            }
        }
        if same {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A hit of a [`LAYOUT_METHOD`] site (HotSpot's `method__entry/__return`): the thread id, then
/// class, method and signature as (pointer, length); the class filter may drop it.
#[inline(always)]
fn method_event(
    ctx: &ProbeContext,
    cfg: &Config,
    spec: &SiteSpec,
    host_tgid: u32,
    pid: u32,
    tid: u32,
) -> Result<(), ()> {
    if spec.kind == 0 || spec.nargs < 7 {
        bump(CNT_NO_SPEC);
        return Err(());
    }
    let mut read_err = false;
    let mut arg = |i: usize| {
        read_arg(ctx, &spec.args[i]).unwrap_or_else(|_| {
            read_err = true;
            0
        })
    };
    let jtid = arg(0);
    let ptr = [arg(1), arg(3), arg(5)];
    let len = [
        arg(2) & 0xffff_ffff,
        arg(4) & 0xffff_ffff,
        arg(6) & 0xffff_ffff,
    ];
    if let Some(f) = FILTER.get(0) {
        if f.mode == FILTER_KEEP {
            match class_kept(f, ptr[0], len[0]) {
                Ok(true) => {}
                Ok(false) => {
                    bump(CNT_CLASS_FILTERED);
                    return Ok(());
                }
                Err(()) => read_err = true,
            }
        }
    }
    if read_err {
        bump(CNT_READ_ERR);
    }
    // SAFETY: a helper without arguments.
    let ts = unsafe { bpf_ktime_get_ns() };
    let always = cfg.fp_off == 0;
    let mut fp = [0u32; 3];
    for i in 0..3 {
        // The length folded in: a fingerprint names the string's extent too.
        fp[i] = fingerprint(ptr[i], cfg.fp_off, &cfg.fp_mask)
            ^ (len[i] as u32).wrapping_mul(0x9e37_79b1);
        let _ = define_string(host_tgid, ptr[i], fp[i], always, len[i] as i64);
    }
    let Some(mut entry) = EVENTS.reserve::<MethodEvent>(0) else {
        bump(CNT_LOST);
        return Err(());
    };
    entry.write(MethodEvent {
        tag: if spec.kind == flux_common::KIND_CALL {
            TAG_METHOD_CALL
        } else {
            TAG_METHOD_RETURN
        },
        jtid: jtid as u32,
        ts,
        host_tgid,
        pid,
        tid,
        fp,
        ptr,
    });
    entry.submit(wakeup_flags(cfg) as u64);
    Ok(())
}

/// Counts the event and says how to submit it: a forced wakeup only when much is pending.
#[inline(always)]
fn wakeup_flags(cfg: &Config) -> u32 {
    let mut flags = BPF_RB_NO_WAKEUP;
    if let Some(n) = COUNTERS.get_ptr_mut(CNT_EVENTS) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        let seen = unsafe {
            *n += 1;
            *n
        };
        if seen % WAKEUP_CHECK_EVERY == 0
            && EVENTS.query(BPF_RB_AVAIL_DATA as u64) >= cfg.wakeup_bytes
        {
            flags = BPF_RB_FORCE_WAKEUP;
        }
    }
    flags
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
