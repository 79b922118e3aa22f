"""python -m flux_hook.symbols FILE...: the code objects of source files, as JSON lines.

Each file is compiled by the running interpreter; every code object (recursively through
co_consts, the module itself included) is printed as
{"file", "name", "qualname", "firstlineno", "lines"} so that events that only know a function's
name and a line (USDT) can be given its qualified name.
"""
import json
import os
import sys


def code_objects(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from code_objects(c)


def symbols(path):
    path = os.path.abspath(path)
    with open(path, "rb") as fh:
        src = fh.read()
    top = compile(src, path, "exec", dont_inherit=True)
    for co in code_objects(top):
        lines = sorted({ln for _, _, ln in co.co_lines() if ln is not None})
        yield {
            "file": path,
            "name": co.co_name,
            "qualname": getattr(co, "co_qualname", co.co_name),
            "firstlineno": co.co_firstlineno,
            "lines": lines,
        }


def main(argv):
    if not argv:
        sys.stderr.write("usage: python -m flux_hook.symbols FILE...\n")
        return 2
    status = 0
    out = sys.stdout
    for path in argv:
        try:
            for rec in symbols(path):
                out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        except (OSError, SyntaxError, ValueError) as e:
            sys.stderr.write("flux_hook.symbols: %s: %s\n" % (path, e))
            status = 1
    out.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
