"""A PEP 517 build backend for frs_client, in the standard library only.

pip builds a project in an isolated environment and installs its build
requirements there first: with setuptools or flit that means an index to
download from. This backend requires nothing, so `pip install
./clients/python` works on a machine without network. It builds what the
client is: one module, with the metadata from pyproject.toml's [project]
table (PEP 621 fields: name, version, description, readme, requires-python,
license, classifiers; no dependencies, no entry points).
"""

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Reproducible archives: every member dated 1980-01-01 (the zip epoch).
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _version():
    # The project's one VERSION file: at the top of a checkout (two folders
    # up), or beside pyproject.toml in a source archive built from one.
    for path in (os.path.join(_ROOT, "VERSION"), os.path.join(_ROOT, "..", "..", "VERSION")):
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                return f.read().strip()
    raise RuntimeError("no VERSION file beside %s or at the top of its checkout" % _ROOT)


def _project():
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)
    project = dict(data["project"])
    project.setdefault("version", _version())
    return project, data.get("tool", {}).get("frs-build", {})


def _dist_name(name):
    # The name as wheel and sdist file names spell it (PEP 427, PEP 625).
    return name.replace("-", "_").replace(".", "_").lower()


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % project["name"],
        "Version: %s" % project["version"],
    ]
    if "description" in project:
        lines.append("Summary: %s" % project["description"])
    if "requires-python" in project:
        lines.append("Requires-Python: %s" % project["requires-python"])
    lic = project.get("license", {})
    if "text" in lic:
        lines.append("License: %s" % lic["text"])
    for c in project.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    body = ""
    readme = project.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _license_path():
    # The project's LICENSE: at the top of a checkout, or in the archive.
    for path in (os.path.join(_ROOT, "LICENSE"), os.path.join(_ROOT, "..", "..", "LICENSE")):
        if os.path.exists(path):
            return path
    raise RuntimeError("no LICENSE beside %s or at the top of its checkout" % _ROOT)


def _files(tool):
    return [(m + ".py", os.path.join(_ROOT, m + ".py")) for m in tool.get("modules", [])]


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _write_metadata(directory, project):
    info = "%s-%s.dist-info" % (_dist_name(project["name"]), project["version"])
    os.makedirs(os.path.join(directory, info), exist_ok=True)
    with open(os.path.join(directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(project))
    return info


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project, _ = _project()
    return _write_metadata(metadata_directory, project)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, tool = _project()
    name, version = _dist_name(project["name"]), project["version"]
    info = "%s-%s.dist-info" % (name, version)
    wheel = "%s-%s-py3-none-any.whl" % (name, version)
    entries = []
    for arcname, path in _files(tool):
        with open(path, "rb") as f:
            entries.append((arcname, f.read()))
    entries.append((info + "/METADATA", _metadata(project).encode("utf-8")))
    with open(_license_path(), "rb") as f:
        entries.append((info + "/LICENSE", f.read()))  # the MIT notice travels with every copy
    entries.append(
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: frs_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    )
    record = io.StringIO()
    for arcname, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.write("%s,sha256=%s,%d\n" % (arcname, digest, len(data)))
    record.write("%s/RECORD,,\n" % info)
    entries.append((info + "/RECORD", record.getvalue().encode("utf-8")))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            zi = zipfile.ZipInfo(arcname, _EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    project, tool = _project()
    base = "%s-%s" % (_dist_name(project["name"]), project["version"])
    members = ["pyproject.toml", "README.md", "build_backend/frs_build.py", "test_frs_client.py"]
    members += [arc for arc, _ in _files(tool)]
    sdist = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for m in members:
            path = os.path.join(_ROOT, m)
            if not os.path.exists(path):
                continue
            ti = t.gettarinfo(path, base + "/" + m)
            ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 315532800, 0, 0, "", ""
            with open(path, "rb") as f:
                t.addfile(ti, f)
        with open(_license_path(), "rb") as f:
            license_text = f.read()
        for name, data in (
            ("PKG-INFO", _metadata(project).encode("utf-8")),
            ("VERSION", (project["version"] + "\n").encode("ascii")),
            ("LICENSE", license_text),
        ):
            ti = tarfile.TarInfo(base + "/" + name)
            ti.size, ti.mtime, ti.mode = len(data), 315532800, 0o644
            t.addfile(ti, io.BytesIO(data))
    return sdist
