//! The one place the harvest talks to the tracer: plan the two witnesses for an interpreter,
//! put the hook into the run directory, and trace a launched program with both.
use anyhow::{Context, Result};
use flux_agent::hook::{HookCollector, HookServer};
use flux_agent::interp::Interpreter;
use flux_agent::merge::{CallsMode, Plan};
use flux_agent::run::Launched;
use flux_trace::{Trace, TracingConfig};
use std::path::Path;

/// The hook installed and listening, and the environment that turns it on.
pub(crate) struct Prepared {
    pub plan: Plan,
    pub env: Vec<(String, String)>,
    server: HookServer,
}

/// Plan for `interp`, install the hook in `<shared>/hook`, listen on `<shared>/hook.sock`.
/// `shared` is the run directory's part the traced program sees (read-only), at
/// `shared_seen` (`/flux/run` in a container); the program runs as `user` (`uid:gid`) when
/// that is not the owner of `shared` (it must not own what it only reads). Must be called
/// inside a tokio runtime.
pub(crate) fn prepare(
    interp: &Interpreter,
    config: &TracingConfig,
    shared: &Path,
    shared_seen: &str,
    calls: CallsMode,
    scope: Option<flux_trace::Scope>,
    user: Option<(u32, u32)>,
) -> Result<Prepared> {
    let mut config = config.clone();
    if let Some(s) = scope {
        config.scope = s;
    }
    let config = &config;
    // (No USDT `line` probe: `plan` leaves it out whenever the hook records lines.)
    let plan = flux_agent::merge::plan(interp, calls, config.scope)?;
    flux_agent::hook::install(&shared.join("hook"))
        .with_context(|| format!("installing the hook in {}", shared.display()))?;
    let mut server = HookServer::bind(&shared.join("hook.sock"))?;
    if let Some((uid, gid)) = user {
        server = server.for_user(uid, gid);
    }
    let mut env = flux_agent::hook::hook_env(
        interp,
        &plan,
        config,
        &format!("{shared_seen}/hook.sock"),
        &format!("{shared_seen}/hook"),
        None,
    );
    // The instance is read-only in a container; keep host runs from writing into it too.
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    Ok(Prepared { plan, env, server })
}

impl Prepared {
    /// Start accepting the hook's connections (after the program exists, before it runs).
    pub(crate) fn listen(self) -> (Plan, HookCollector) {
        (self.plan, self.server.spawn())
    }
}

/// Trace `launched` with both witnesses and merge them; the exit code of the program.
pub(crate) async fn trace<L: Launched>(
    launched: &mut L,
    interp: &Interpreter,
    plan: &Plan,
    collector: HookCollector,
    topts: &flux_agent::tracer::TracerOptions,
) -> Result<(Trace, i32, Option<String>)> {
    let t = flux_agent::run::trace_launched(launched, interp, plan, collector, topts).await?;
    Ok((t.trace, t.exit_code, t.whole_sha256))
}
