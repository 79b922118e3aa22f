"""flux-hook bootstrap: installs the hook when FLUX_HOOK_SOCKET is set, then chains to the
sitecustomize that this file shadows (if any), so the program under test behaves as usual."""
import os
import sys


def _flux_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import importlib.machinery
        import importlib.util

        path = []
        for p in sys.path:
            try:
                if os.path.abspath(p or os.curdir) == here:
                    continue
            except Exception:
                pass
            path.append(p)
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
            return
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = mod
        spec.loader.exec_module(mod)
    except Exception as err:
        sys.stderr.write("Error in sitecustomize (chained by flux-hook); set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(err).__name__, err))


if os.environ.get("FLUX_HOOK_SOCKET"):
    import flux_hook

    flux_hook.install()
_flux_chain()
