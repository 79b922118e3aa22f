"""flux-hook: the in-process tracing witness of flux.

Injected with PYTHONPATH=<dir with flux_hook/ and sitecustomize.py>; `install()` reads the
FLUX_HOOK_* environment and streams JSON-line records to the agent's Unix socket.
See README.md next to this package for the protocol.
"""

__all__ = ["install"]


def install():
    """Install the hook if FLUX_HOOK_SOCKET is set; returns the hook object or None."""
    from ._core import install_hook

    return install_hook()
