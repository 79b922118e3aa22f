# flux: fetch a package's source distribution at a pinned version and unpack it safely.
#
# Run on the host by flux-container's image builder (`python3 -c <this file> ...`):
#   fetch_source.py NAME VERSION ARCHIVE_DIR DEST
# Looks NAME up in the package index's JSON simple API (PEP 691; $PIP_INDEX_URL or PyPI),
# takes the sdist of exactly VERSION (else a pure-Python wheel of it), downloads it into
# ARCHIVE_DIR unless a file of the same name and sha256 is already there, checks the index's
# sha256, and unpacks it into DEST (which must not exist): the sdist's single top directory
# becomes DEST; of a wheel, everything but its .dist-info/.data directories. Top-level
# `*.egg-info` directories (build metadata, not source) are left out. Members that would
# escape DEST, links, devices and setuid bits are refused (tarfile's "data" filter). Prints
# one JSON object: {"kind", "file", "url", "sha256", "size"}.
import hashlib
import json
import os
import re
import shutil
import ssl
import sys
import tarfile
import urllib.request
import zipfile


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def fail(msg):
    sys.stderr.write("fetch_source: " + msg + "\n")
    sys.exit(1)


def context():
    cafile = os.environ.get("PIP_CERT") or None
    return ssl.create_default_context(cafile=cafile)


def index_files(name):
    base = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    url = f"{base}/{canon(name)}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, context=context(), timeout=120) as r:
            body = json.load(r)
    except Exception as e:  # noqa: BLE001 - reported with the URL
        fail(f"cannot read the index page {url}: {e}")
    return [(f["filename"], f["url"], f.get("hashes", {}).get("sha256")) for f in body.get("files", [])]


def split_sdist(filename):
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            if "-" in stem:
                n, v = stem.rsplit("-", 1)
                return n, v, ext
    return None


def choose(name, version, files):
    sdists, wheels = [], []
    for fn, url, sha in files:
        s = split_sdist(fn)
        if s and canon(s[0]) == canon(name) and s[1] == version:
            sdists.append((0 if s[2] == ".tar.gz" else 1, "sdist", fn, url, sha))
        elif fn.endswith(".whl"):
            parts = fn[:-4].split("-")
            if len(parts) >= 5 and canon(parts[0]) == canon(name) and parts[1] == version:
                pure = parts[-1] == "any" and parts[-3].startswith("py")
                wheels.append((0 if pure else 1, "wheel", fn, url, sha))
    for group in (sorted(sdists), sorted(wheels)):
        if group:
            return group[0][1:]
    fail(f"the index has no sdist or wheel of {name}=={version}")


def download(url, path, sha):
    with urllib.request.urlopen(url, context=context(), timeout=600) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if sha and got != sha:
        fail(f"{url}: sha256 {got} is not the index's {sha}")
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return got


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def safe_name(n):
    parts = n.replace("\\", "/").split("/")
    return not n.startswith("/") and ".." not in parts


def unpack_sdist(path, work):
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for n in z.namelist():
                if not safe_name(n):
                    fail(f"{path}: member {n!r} escapes the tree")
            z.extractall(work)
    else:
        if not hasattr(tarfile, "data_filter"):
            fail("unpacking safely needs Python >= 3.11.4 (tarfile filters); set settings.host_python")
        with tarfile.open(path) as t:
            try:
                t.extractall(work, filter="data")
            except tarfile.FilterError as e:
                fail(f"{path}: refused member: {e}")
    tops = os.listdir(work)
    if len(tops) != 1 or not os.path.isdir(os.path.join(work, tops[0])):
        fail(f"{path}: expected one top directory, found {sorted(tops)}")
    return os.path.join(work, tops[0])


def unpack_wheel(path, work):
    root = os.path.join(work, "tree")
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            if not safe_name(n):
                fail(f"{path}: member {n!r} escapes the tree")
            top = n.split("/", 1)[0]
            if top.endswith(".dist-info") or top.endswith(".data"):
                continue
            z.extract(n, root)
    return root


def main():
    if len(sys.argv) != 5:
        fail("usage: fetch_source.py NAME VERSION ARCHIVE_DIR DEST")
    name, version, archive_dir, dest = sys.argv[1:]
    if os.path.exists(dest):
        fail(f"{dest} exists")
    os.makedirs(archive_dir, exist_ok=True)
    kind, fn, url, sha = choose(name, version, index_files(name))
    path = os.path.join(archive_dir, fn)
    if os.path.exists(path) and sha and sha256_of(path) == sha:
        got = sha
    else:
        got = download(url, path, sha)
    work = dest + ".unpack"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    top = unpack_sdist(path, work) if kind == "sdist" else unpack_wheel(path, work)
    for entry in os.listdir(top):
        if entry.endswith(".egg-info") and os.path.isdir(os.path.join(top, entry)):
            shutil.rmtree(os.path.join(top, entry))
    os.replace(top, dest)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"kind": kind, "file": fn, "url": url, "sha256": got, "size": os.path.getsize(path)}))


main()
