# flux: helpers run inside an image by flux-container's builder (the image's own interpreter,
# stdlib only, Python 3.8+).
#
#   image_tools.py digest PATH...      JSON {PATH: {"sha256", "entries"} | null}
#   image_tools.py adopt DIST TREE     make DIST import from the unpacked source TREE
#
# Tree digest ("flux-tree-v1", the same algorithm as `images::source::tree_digest` in Rust):
# every entry under PATH except `__pycache__` directories and `*.pyc` files, as a line
#   D <rel>            directory
#   F <rel> <x|-> <sha256 of the content>
#   L <rel> <link target>
#   O <rel>            anything else
# (fields separated by a tab, <rel> the '/'-separated path below PATH, "." for PATH itself),
# sorted by <rel> as bytes; the digest is the sha256 of "flux-tree-v1\n" and the lines, each
# ending in "\n". Times, owners and permission bits other than "executable by anyone" are not
# part of it, so the same files give the same digest wherever and whenever they were written.
import hashlib
import json
import os
import stat
import subprocess
import sys


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def entry_line(path, rel):
    st = os.lstat(path)
    r = os.fsencode(rel)
    if stat.S_ISLNK(st.st_mode):
        return r, b"L\t" + r + b"\t" + os.fsencode(os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return r, b"D\t" + r
    if stat.S_ISREG(st.st_mode):
        x = b"x" if st.st_mode & 0o111 else b"-"
        return r, b"F\t" + r + b"\t" + x + b"\t" + file_sha(path).encode()
    return r, b"O\t" + r


def tree_digest(root):
    if not os.path.lexists(root):
        return None
    lines = [entry_line(root, ".")]
    stack = [("", root)] if stat.S_ISDIR(os.lstat(root).st_mode) else []
    while stack:
        rel_dir, d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.name == "__pycache__" and e.is_dir(follow_symlinks=False):
                    continue
                if e.name.endswith(".pyc") and not e.is_dir(follow_symlinks=False):
                    continue
                rel = rel_dir + "/" + e.name if rel_dir else e.name
                lines.append(entry_line(e.path, rel))
                if e.is_dir(follow_symlinks=False):
                    stack.append((rel, e.path))
    lines.sort(key=lambda t: t[0])
    h = hashlib.sha256(b"flux-tree-v1\n")
    for _, line in lines:
        h.update(line + b"\n")
    return {"sha256": h.hexdigest(), "entries": len(lines)}


def digest(paths):
    print(json.dumps({p: tree_digest(p) for p in paths}, sort_keys=True))


def fail(msg):
    sys.stderr.write("adopt: " + msg + "\n")
    sys.exit(1)


def adopt(dist_name, tree):
    """Remove DIST's importable files from site-packages, where its wheel put them, after
    checking that the unpacked source TREE holds the same files byte for byte at one import
    root (TREE or TREE/src); then a .pth puts that root on sys.path. The dist-info stays
    (metadata, entry points, `pip freeze`)."""
    from importlib.metadata import PackageNotFoundError, distribution

    # Python reports import origins with the path resolved (`a/../b` as `b`): compare the same.
    tree = os.path.realpath(tree)
    try:
        dist = distribution(dist_name)
    except PackageNotFoundError:
        fail(f"{dist_name} is not installed")
    site = os.path.abspath(str(dist.locate_file("")))
    own, compiled = [], []
    for f in dist.files or []:
        parts = f.parts
        if not parts or parts[0] == ".." or parts[0].endswith((".dist-info", ".data")):
            continue
        (compiled if "__pycache__" in parts or f.name.endswith(".pyc") else own).append("/".join(parts))
    if not own:
        fail(f"{dist_name}: its RECORD lists no importable files")
    roots = [tree, os.path.join(tree, "src")]
    problems = {}
    for root in roots:
        missing = [f for f in own if not os.path.isfile(os.path.join(root, f))]
        if missing:
            problems[root] = f"{len(missing)} of {len(own)} files missing, e.g. {missing[:3]}"
            continue
        differ = [f for f in own if file_sha(os.path.join(root, f)) != file_sha(os.path.join(site, f))]
        if differ:
            problems[root] = f"{len(differ)} files differ from the wheel's, e.g. {differ[:3]}"
            continue
        break
    else:
        fail(f"{dist_name}: the source tree does not hold the wheel's files: {problems}")
    tops = sorted({f.split("/", 1)[0] for f in own})
    for f in own + compiled:
        p = os.path.join(site, f)
        if os.path.lexists(p):
            os.unlink(p)
    for top in tops:
        top_dir = os.path.join(site, top)
        if os.path.isdir(top_dir):
            # Bottom-up: a directory is left once its subdirectories are gone.
            for d, _, _ in os.walk(top_dir, topdown=False):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
    canon = dist_name.lower().replace("-", "_").replace(".", "_")
    with open(os.path.join(site, f"flux-source-{canon}.pth"), "w") as f:
        f.write(root + "\n")
    modules = sorted({t[:-3] if t.endswith(".py") else t for t in tops if t.endswith(".py") or "." not in t})
    check = (
        "import importlib.util, json, sys\n"
        "out = {}\n"
        "for m in sys.argv[1:]:\n"
        "    s = importlib.util.find_spec(m)\n"
        "    out[m] = s.origin if s and s.origin else (list(s.submodule_search_locations) if s else None)\n"
        "print(json.dumps(out))\n"
    )
    found = json.loads(subprocess.check_output([sys.executable, "-c", check] + modules, cwd="/"))
    def inside(o):
        return isinstance(o, str) and o.startswith(root + "/") or isinstance(o, list) and any(inside(x) for x in o)

    wrong = {m: o for m, o in found.items() if not inside(o)}
    if wrong:
        fail(f"{dist_name}: after adoption these do not import from {root}: {wrong}")
    print(json.dumps({"import_root": root, "modules": modules, "files": len(own)}))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "digest":
        digest(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "adopt":
        adopt(sys.argv[2], sys.argv[3])
    else:
        fail("usage: image_tools.py digest PATH... | adopt DIST TREE")


main()
