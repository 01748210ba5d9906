"""The steps of `scripts/python --package` that are not a tool's own (stdlib only):

  package.py sdist SDIST EPOCH      rewrite the sdist in place so two builds are byte-identical
                                    (setuptools keeps each file's own mtime and gzip's clock)
  package.py wheel WHEEL            refuse a wheel without the component, its digest or the
                                    license, or whose component is not the digest beside it

The licenses of the SBOMs are checked by scripts/licenses, the one checker for every tree.
"""

import gzip
import hashlib
import io
import re
import sys
import tarfile
import zipfile

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


def main(argv: list) -> int:
    if argv[:1] == ["sdist"] and len(argv) == 3:
        sdist(argv[1], argv[2])
        return 0
    if argv[:1] == ["wheel"] and len(argv) == 2:
        return wheel(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
