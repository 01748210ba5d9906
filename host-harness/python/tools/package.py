"""The steps of `scripts/python --package` that are not a tool's own (stdlib only):

  package.py sdist SDIST EPOCH      rewrite the sdist in place so two builds are byte-identical
                                    (setuptools keeps each file's own mtime and gzip's clock)
  package.py wheel WHEEL            refuse a wheel without the component, its digest or the
                                    license, or whose component is not the digest beside it
  package.py licenses DENY SBOM...  every license in each CycloneDX SBOM against deny.toml's
                                    [licenses] allow (plus EXTRA below); `# pass 1`/`# fail 1`
                                    per SBOM
"""

import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import zipfile

# Licenses the Python trees need beyond deny.toml's allow-list (which is the Rust tree's), each
# permissive; only the test tree (pytest, the official SDK) carries them.
EXTRA = {
    "BSD-2-Clause": "Pygments (pytest's output)",
    "MIT-0": "cffi (cryptography, through the SDK's PyJWT)",
    "PSF-2.0": "typing_extensions (pydantic, anyio)",
}


def sdist(path: str, epoch: str) -> None:
    when = int(epoch)
    with tarfile.open(path, "r:gz") as src:
        members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as out:
        for m, data in sorted(members, key=lambda x: x[0].name):
            m.mtime = when
            m.uid = m.gid = 0
            m.uname = m.gname = "root"
            m.pax_headers = {}
            out.addfile(m, io.BytesIO(data) if data is not None else None)
    packed = io.BytesIO()
    # No file name, the epoch as the stamp: gzip's header is otherwise the build's.
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=when, compresslevel=9) as z:
        z.write(raw.getvalue())
    with open(path, "wb") as f:
        f.write(packed.getvalue())


def wheel(path: str) -> int:
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        wanted = ["mrtr_gate/gate.wasm", "mrtr_gate/gate.wasm.sha256"]
        licenses = [n for n in names if re.fullmatch(r"mrtr_gate-[^/]+\.dist-info/licenses/LICENSE", n)]
        missing = [n for n in wanted if n not in names] + ([] if licenses else ["*.dist-info/licenses/LICENSE"])
        if missing:
            print(f"{path}: refused, the wheel lacks {', '.join(missing)}", file=sys.stderr)
            return 1
        actual = hashlib.sha256(z.read("mrtr_gate/gate.wasm")).hexdigest()
        shipped = z.read("mrtr_gate/gate.wasm.sha256").decode("ascii", "replace").split()
        if shipped[:1] != [actual]:
            print(f"{path}: refused, gate.wasm is {actual}, gate.wasm.sha256 says {shipped[:1]}", file=sys.stderr)
            return 1
    return 0


def _tokens(expr: str) -> list:
    return re.findall(r"\(|\)|[A-Za-z0-9.+\-]+", expr)


def allowed(expr: str, allow: set) -> bool:
    """An SPDX expression is allowed when some choice (OR) of it is made of allowed licenses
    (AND); `X WITH E` counts as one license, as deny.toml lists it."""
    toks = _tokens(expr)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def disjunction():
        ok = conjunction()
        while peek() == "OR":
            take()
            ok = conjunction() or ok
        return ok

    def conjunction():
        ok = atom()
        while peek() == "AND":
            take()
            ok = atom() and ok
        return ok

    def atom():
        t = take() if peek() is not None else None
        if t == "(":
            ok = disjunction()
            if take() != ")":
                raise ValueError(expr)
            return ok
        if t is None or t in ("AND", "OR", "WITH", ")"):
            raise ValueError(expr)
        if peek() == "WITH":
            take()
            t = f"{t} WITH {take()}"
        return t in allow

    try:
        ok = disjunction()
        return ok and pos == len(toks)
    except (ValueError, IndexError):
        return False


def deny_allow(path: str) -> set:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the list is flat strings, read them as such.
        text = open(path, encoding="utf-8").read()
        block = re.search(r"\[licenses\].*?allow\s*=\s*\[(.*?)\]", text, re.S).group(1)
        return set(re.findall(r'"([^"]+)"', block))
    with open(path, "rb") as f:
        return set(tomllib.load(f)["licenses"]["allow"])


def licenses(deny: str, sboms: list) -> int:
    allow = deny_allow(deny) | set(EXTRA)
    failed = 0
    for sbom in sboms:
        doc = json.load(open(sbom, encoding="utf-8"))
        root = doc.get("metadata", {}).get("component")
        comps = [*([root] if root else []), *doc.get("components", [])]
        bad = []
        for c in comps:
            exprs = []
            for lic in c.get("licenses") or []:
                if "expression" in lic:
                    exprs.append(lic["expression"])
                elif "id" in lic.get("license", {}):
                    exprs.append(lic["license"]["id"])
                else:
                    exprs.append(None)  # a name, not SPDX: not checkable, so not allowed
            label = f"{c['name']} {c.get('version', '')}".strip()
            # Several entries are the package's licenses together (each must be allowed).
            if not exprs or not all(e is not None and allowed(e, allow) for e in exprs):
                bad.append(f"{label}: {exprs or 'no license'}")
            else:
                print(f"  {label}: {' AND '.join(exprs)}")
        if bad:
            failed += 1
            print(f"{sbom}: licenses outside deny.toml's allow-list:", *bad, sep="\n    ")
            print("# fail 1")
        else:
            print(f"{sbom}: {len(comps)} packages, every license allowed")
            print("# pass 1")
    return 1 if failed else 0


def main(argv: list) -> int:
    if argv[:1] == ["sdist"] and len(argv) == 3:
        sdist(argv[1], argv[2])
        return 0
    if argv[:1] == ["wheel"] and len(argv) == 2:
        return wheel(argv[1])
    if argv[:1] == ["licenses"] and len(argv) >= 3:
        return licenses(argv[1], argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
