//! What each witness reports for one interpreter and scope, decided once, here.
//!
//! The hook is told the result ([`Plan::hook_calls`] as `FLUX_HOOK_CALLS`, [`Plan::leave`] as
//! `FLUX_HOOK_LEAVE`) and echoes it in its hello; the merge reads the same [`Plan`], so the two
//! sides never derive policy from strings on their own. A stream whose hello disagrees with the
//! plan is a problem.
use flux_trace::{Keep, Scope};
use serde::{Deserialize, Serialize};

/// Where calls come from (`flux trace --calls`, which takes it with feature `clap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum CallsMode {
    /// USDT where the interpreter reports returns, else the hook.
    Auto,
    /// Calls and returns from USDT; the hook adds what the interpreter lacks.
    Usdt,
    /// Everything from the in-process hook (the reference witness).
    Hook,
}

/// What the hook reports about calls (`FLUX_HOOK_CALLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookCalls {
    /// Every activation start and end: the pure in-process witness.
    All,
    /// Every activation start (3.11, whose entry probe misses Python-to-Python calls).
    Entries,
    /// Starts of generator/coroutine activations only (3.15, whose entry probe cannot tell a
    /// generator's creation from its first resumption).
    Generators,
    /// None: USDT has both ends.
    None,
}

impl HookCalls {
    pub fn as_str(self) -> &'static str {
        match self {
            HookCalls::All => "all",
            HookCalls::Entries => "entries",
            HookCalls::Generators => "generators",
            HookCalls::None => "none",
        }
    }
}

/// Which probes to attach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSet {
    pub entry: bool,
    pub ret: bool,
    pub line: bool,
}

/// Starts the hook leaves to USDT with `calls = generators` (`FLUX_HOOK_LEAVE`): it only
/// defines such code (its `C` record) and the merge names USDT's entries of it.
///
/// Generator expressions are never left (issue 28): USDT's entry fires at a genexpr's creation
/// and at each resumption by `next`, but not at a resumption by `throw()`/`close()` (whose
/// return it reports), and it cannot tell a genexpr's start from its resumptions — every
/// resumption read as a fresh call. The hook reports their starts as it does every
/// generator's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leave {
    /// Starts of non-generator code whose first instruction has no line (USDT says line 0).
    pub lineless: bool,
}

impl Leave {
    /// As the hook reads and echoes it: `lineless`.
    pub fn as_list(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.lineless {
            v.push("lineless");
        }
        v
    }
}

/// What the USDT probes of an interpreter can be trusted with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub entry: bool,
    pub ret: bool,
    pub line: bool,
}

/// What to attach and what to ask of the hook for one interpreter and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// `Usdt` or `Hook` (never `Auto`).
    pub mode: CallsMode,
    pub probes: ProbeSet,
    pub hook_calls: HookCalls,
    pub leave: Leave,
    pub scope: Scope,
    /// What of the trace the run keeps (rule `keep`): with scope `targets`, a run asked only an
    /// answer whose extractor reads no deeper than the targets' direct calls keeps those
    /// ([`Keep::TargetCalls`]); anything else keeps every event. Not the hook's business.
    #[serde(default, skip_serializing_if = "Keep::is_all")]
    pub keep: Keep,
}

impl Plan {
    /// Calls and returns come from USDT (the hook adds what the interpreter lacks).
    pub fn merged(&self) -> bool {
        self.mode != CallsMode::Hook
    }
    /// The hook reports every start (3.11: USDT's entry probe misses Python-to-Python calls).
    pub fn hook_entries(&self) -> bool {
        self.merged() && self.hook_calls == HookCalls::Entries
    }
    /// The hook reports generator starts; USDT's entries of generator code are dropped (3.15).
    pub fn hook_gen_starts(&self) -> bool {
        self.merged() && self.hook_calls == HookCalls::Generators
    }
    /// The hook reports the starts of code without a first line (USDT's line-0 entries of it
    /// are then dropped; otherwise the merge names them).
    pub fn hook_lineless_starts(&self) -> bool {
        self.hook_gen_starts() && !self.leave.lineless
    }
    /// Whether rule `keep` cuts each extent to the targets' direct calls.
    pub fn keeps_target_calls(&self) -> bool {
        self.keep == Keep::TargetCalls && self.scope == Scope::Targets
    }
    /// The label of the trace's `calls`.
    pub fn calls_label(&self) -> String {
        match self.mode {
            CallsMode::Hook => "hook".into(),
            _ => format!("usdt+hook({})", self.hook_calls.as_str()),
        }
    }
}

/// `mode` was `Usdt` but the interpreter has no usable return probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoUsdtReturns;

/// The plan for an interpreter with `caps`, asked for `mode`, tracing with `scope`.
pub fn plan(caps: Capabilities, mode: CallsMode, scope: Scope) -> Result<Plan, NoUsdtReturns> {
    let mode = match mode {
        CallsMode::Auto if caps.ret => CallsMode::Usdt,
        CallsMode::Auto => CallsMode::Hook,
        CallsMode::Usdt if !caps.ret => return Err(NoUsdtReturns),
        m => m,
    };
    if mode == CallsMode::Hook {
        return Ok(Plan {
            mode,
            probes: ProbeSet::default(),
            hook_calls: HookCalls::All,
            leave: Leave::default(),
            scope,
            keep: Keep::All,
        });
    }
    let hook_calls = if caps.entry {
        HookCalls::Generators
    } else {
        HookCalls::Entries
    };
    // Scope "targets" (3.15): starts of code without a first line are left to USDT, for their
    // callbacks outside the extents were most of the cost (every call of a closure in a SymPy
    // suite: a quarter of the run).
    let leave = if hook_calls == HookCalls::Generators && scope == Scope::Targets {
        Leave { lineless: true }
    } else {
        Leave::default()
    };
    Ok(Plan {
        mode,
        // No USDT `line` probe with the hook: lines come from the hook in targeted code (with
        // values), and 3.11's line probe fires on every line of every frame, the hook's own
        // included (one small sympy test: 16 M events), for no answer's benefit. `flux trace
        // --no-hook` still attaches it.
        probes: ProbeSet {
            entry: caps.entry,
            ret: caps.ret,
            line: false,
        },
        hook_calls,
        leave,
        scope,
        keep: Keep::All,
    })
}
