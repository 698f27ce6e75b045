# SPDX-License-Identifier: MIT
"""Which system this is and what it must install: /etc/os-release, and the
build-dependency table of docs/build-deps.md (one column per distribution),
the only list of package names the fork has. `deps` installs the Debian
column with apt-get on Debian and nowhere else; on any other system it
stops with that system's column (`refuse`)."""

import os
import re
import shlex
import shutil
import subprocess

from .proc import die

# Tests (and anyone curious) point this at another os-release file.
OS_RELEASE_ENV = "MESA_FORK_OS_RELEASE"
OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")

DEPS_DOC = os.path.join("docs", "build-deps.md")
# The table follows this line in DEPS_DOC.
TABLE_MARK = "<!-- build-deps table: bin/mesa-fork reads it -->"
INSTALL_ROW = "install with"

# Commands and Python modules a build without apt checks for before it
# starts (meson checks the libraries itself).
BUILD_COMMANDS = ("meson", "ninja", "cc", "c++", "pkg-config", "git", "tar", "xz", "flex",
                  "bison", "glslangValidator")
PYTHON_MODULES = ("mako", "yaml", "ply", "packaging")
MESON_MIN = (1, 1)


class OsRelease:
    """The fields of an os-release file (os-release(5))."""

    def __init__(self, path, fields):
        self.path = path
        self.fields = fields
        self.id = fields.get("ID", "").lower()
        self.id_like = fields.get("ID_LIKE", "").lower().split()
        self.codename = fields.get("VERSION_CODENAME", "")
        self.name = fields.get("PRETTY_NAME") or fields.get("NAME") or self.id

    @property
    def is_debian(self):
        """Debian itself: derivatives (Ubuntu, Mint, Kali, ...) have their
        own archives, where Debian's suites do not belong."""
        return self.id == "debian"

    def describe(self):
        like = " ID_LIKE=%s" % " ".join(self.id_like) if self.id_like else ""
        return "%s (ID=%s%s, from %s)" % (self.name, self.id, like, self.path)


def parse_os_release(text):
    fields = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        try:
            words = shlex.split(value)
        except ValueError:
            words = [value.strip("\"'")]
        fields[key.strip()] = " ".join(words)
    return fields


def os_release():
    """This system's os-release ($MESA_FORK_OS_RELEASE overrides it); dies
    with a clear message when there is none or it names no distribution."""
    override = os.environ.get(OS_RELEASE_ENV)
    paths = [override] if override else list(OS_RELEASE_PATHS)
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        except OSError as e:
            die("cannot read %s: %s" % (path, e.strerror))
        osr = OsRelease(path, parse_os_release(text))
        if not osr.id:
            die("%s has no ID= line: it does not say which distribution this is "
                "(see os-release(5))" % path)
        return osr
    die("cannot read %s: no such file; mesa-fork cannot tell which distribution "
        "this is%s" % (" or ".join(paths), "" if override else " (set %s=FILE to name one)"
                       % OS_RELEASE_ENV))


class Column:
    """One distribution's column of the build-dependency table."""

    def __init__(self, key, title):
        self.key = key
        self.title = title
        self.name = title.split(" (")[0]
        self.tested = "untested" not in title.lower()
        self.install = ""
        self.rows = []          # (what, [package, ...])

    @property
    def packages(self):
        out = []
        for _, pkgs in self.rows:
            out += [p for p in pkgs if p not in out]
        return out


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _names(cell):
    """The package names of a cell: `a` `b` or a b; a dash means none."""
    words = cell.replace("`", " ").split()
    return [w for w in words if w not in ("-", "\u2014")]


def deps_table(top):
    """{distribution key: Column} from docs/build-deps.md, in the table's order."""
    path = os.path.join(top, DEPS_DOC)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        die("cannot read %s: %s" % (path, e.strerror))
    if TABLE_MARK not in lines:
        die("%s has no line '%s' before its table" % (path, TABLE_MARK))
    rows = []
    for line in lines[lines.index(TABLE_MARK) + 1:]:
        if not line.strip() and not rows:
            continue
        if not line.lstrip().startswith("|"):
            break
        rows.append(_cells(line))
    if len(rows) < 3 or not all(set(c) <= set("-: ") for c in rows[1]):
        die("%s: the table after '%s' is not a markdown table" % (path, TABLE_MARK))
    header = rows[0]
    columns = {}
    for title in header[1:]:
        key = re.sub(r"[^a-z].*", "", title.lower())
        columns[key] = Column(key, title)
    for row in rows[2:]:
        if len(row) != len(header):
            die("%s: row '%s' has %d cells, the header %d" % (path, row[0], len(row),
                                                                len(header)))
        for col, cell in zip(columns.values(), row[1:]):
            if row[0].lower() == INSTALL_ROW:
                col.install = cell.replace("`", "").strip()
            else:
                col.rows.append((row[0], _names(cell)))
    return columns


def column_for(osr, table):
    """The column of this distribution, or of the first one it is like
    (Linux Mint: Ubuntu), or None."""
    for name in [osr.id] + osr.id_like:
        if name in table:
            return table[name]
    return None


def refuse(fork, osr):
    """Stops `deps` on a system that is not Debian, with what to install."""
    table = deps_table(fork.top)
    col = column_for(osr, table)
    b = fork.conf["base"]
    lines = ["deps: this system is %s, not Debian." % osr.describe(),
             "deps installs packages only on Debian (and on bookworm adds Debian's "
             "bookworm-backports to apt); it leaves this system's package sources alone."]
    if col:
        lines.append("Install the build dependencies with the system's package manager. "
                     "The names for %s, from %s (%s):" % (
                         col.name, DEPS_DOC,
                         "tested on Debian, not on this system" if col.tested else
                         "untested, a starting point"))
        lines.append("    %s %s" % (col.install, " ".join(col.packages)))
    else:
        lines.append("%s has no column for this distribution. Install the equivalents "
                     "of the packages Debian names:" % DEPS_DOC)
        lines.append("    " + " ".join(table["debian"].packages))
    lines.append("Then build from Mesa's release tarball, which needs no apt (its sha256 "
                 "is checked against config/fork.ini):")
    lines.append("    bin/mesa-fork install --no-deps --tarball %s" % upstream_url(fork.conf))
    lines.append("(--tarball also takes a downloaded %s). Honeykrisp needs "
                 "<drm/asahi_drm.h> from Linux 6.16 or later: from the system's kernel "
                 "headers, or --asahi-uapi DIR; see %s." % (upstream_name(b), DEPS_DOC))
    die("\n".join(lines))


def upstream_name(base):
    return "mesa-%s.tar.xz" % base["upstream_version"]


def upstream_url(conf):
    return conf["base"]["upstream_url"].rstrip("/") + "/" + upstream_name(conf["base"])


def meson_version(path=None):
    """The version of the meson found on path (default: this process's
    PATH), (0,) when there is none."""
    # By default the meson deps installs (/usr/bin) before others on PATH.
    exe = shutil.which("meson", path=path if path is not None else
                       "/usr/bin:/usr/local/bin:" + os.environ.get("PATH", ""))
    if not exe:
        return (0,)
    r = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, text=True)
    return tuple(int(x) for x in re.findall(r"\d+", r.stdout)[:3])


def missing_build_tools(env):
    """The commands and Python modules a build needs that are not there,
    looked up in the build's environment."""
    missing = [c for c in BUILD_COMMANDS if not shutil.which(c, path=env["PATH"])]
    if "meson" not in missing and meson_version(env["PATH"]) < MESON_MIN:
        missing.append("meson >= %s (found %s)" % (".".join(map(str, MESON_MIN)),
                                                   ".".join(map(str, meson_version(env["PATH"])))))
    python = shutil.which("python3", path="/usr/bin:" + env["PATH"])
    if not python:
        return missing + ["python3"]
    for m in PYTHON_MODULES:
        r = subprocess.run([python, "-c", "import " + m], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            missing.append("python3 module %s" % m)
    return missing
