# SPDX-License-Identifier: MIT
"""The mainline drm/asahi uAPI header for Honeykrisp.

Honeykrisp is built against <drm/asahi_drm.h>, which Debian ships in
linux-libc-dev from Linux 6.16 on (trixie-backports, forky, sid). Every
build uses one header, pinned by its own sha256 in config/fork.ini
([asahi_uapi] header_sha256), not by a package upload: those suites keep
only their newest linux-libc-dev and replace it every few weeks, mostly
with the same asahi_drm.h. The suites listed there are asked in order,
each through a private apt state under .work/apt on the machine's own
Debian mirror (the machine's sources and package lists are not touched,
nothing is installed, no root needed); apt checks each .deb against the
suite's signed index as for any package it installs. The first whose
header has the pinned sha256 is unpacked with dpkg -x; when none has,
the build stops in one line naming what each serves. Its drm/ headers go
to .work/deps/asahi-uapi/first, which the build searches *before* the
system's headers (-I), so that <drm/asahi_drm.h> is the pinned one even on
a host that has its own (its drm.h may still be libdrm's, included first
under the same guard: the drm core uAPI it holds is stable); the whole
usr/include of the package goes to .work/deps/asahi-uapi/include,
searched *after* them (-idirafter), for the newer linux/ headers drm.h
may include. Mesa's meson then checks that the header has what hk needs.

install --no-deps takes the same header wherever apt and a Debian mirror
exist (no root needed). Elsewhere the header comes from a directory the
user names (--asahi-uapi DIR, MESA_FORK_ASAHI_UAPI), which include_dir
then links to, or, with a warning, from the system's kernel headers
(`use_local`).
"""

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess

from . import distro
from .apt import StateError, index_fields, private_state
from .proc import die, make_dirs, rel, remove_owned, step
from .sources import sha256


ENV = "MESA_FORK_ASAHI_UAPI"
SYSTEM_INCLUDE = "/usr/include"


def include_dir(work):
    return os.path.join(work, "deps", "asahi-uapi", "include")


def linked(work):
    """The directory include_dir(work) links to (--asahi-uapi), or None."""
    dest = include_dir(work)
    return os.path.realpath(dest) if os.path.islink(dest) else None


def use_local(fork, src=None):
    """Without apt: makes sure the build finds the header, from src (a
    directory holding drm/asahi_drm.h, linked as include_dir), what was
    linked or unpacked there before, or the system's headers; dies with
    where to get it otherwise. Returns a line saying where it comes from."""
    c = fork.conf["asahi_uapi"]
    dest = include_dir(fork.work)
    stamp = os.path.join(dest, ".source")
    src = src or os.environ.get(ENV)
    if src:
        src = os.path.abspath(src)
        if not os.path.isfile(os.path.join(src, c["header"])):
            die("--asahi-uapi %s: no %s there (give the directory that holds "
                     "drm/ and linux/, e.g. the usr/include of 'make headers_install')"
                     % (src, c["header"]))
        remove_owned(dest)
        make_dirs(os.path.dirname(dest))
        # The whole directory, searched after the system's headers: the
        # newer drm/ headers include linux/ headers older systems lack.
        os.symlink(src, dest)
        return "%s in %s (linked as %s)" % (c["header"], src, rel(dest))
    if linked(fork.work) and os.path.exists(os.path.join(dest, c["header"])):
        return "%s in %s (given before)" % (c["header"], linked(fork.work))
    if os.path.exists(stamp) and _unpacked_is_pinned(fork.work, fork.conf):
        with open(stamp) as f:
            return f.read().strip() + " (unpacked before)"
    # The pinned package, as deps takes it: downloading it with a private
    # apt state needs apt and a Debian mirror, not root.
    osr = distro.os_release()
    if osr.is_debian and shutil.which("apt-get"):
        return fetch(fork.work, fork.conf, osr.codename)
    system = os.path.join(SYSTEM_INCLUDE, c["header"])
    if os.path.exists(system):
        # Nothing pinned may stay in front of the system's header.
        remove_owned(first_dir(fork.work))
        got = sha256(system)
        if got == pinned_sha256(fork.conf):
            return "%s, the system's kernel headers (sha256 matches the pin)" % system
        print("install: warning: no apt here, so <%s> is the system's (%s, sha256 %s), "
              "not the pinned one (%s); the shim refuses payloads a different uAPI "
              "would make" % (c["header"], system, got[:16], pinned_sha256(fork.conf)[:16]))
        return "%s, the system's kernel headers (not the pinned header)" % system
    die("Honeykrisp needs <%s>, the mainline drm/asahi uAPI of Linux 6.16 and "
             "later, and this system's headers lack it (%s). Install the kernel "
             "headers package of your distribution if it carries Linux 6.16 or later "
             "(docs/build-deps.md: kernel-headers on Fedora Asahi Remix, "
             "linux-api-headers on Arch), or pass --asahi-uapi DIR (or set %s=DIR) "
             "with DIR/%s, e.g. the usr/include that 'make headers_install' writes in "
             "a Linux tree. Without apt, mesa-fork does not download it from Debian."
             % (c["header"], system, ENV, c["header"]))


def pinned_sha256(conf):
    """The sha256 of the one <drm/asahi_drm.h> every build may use."""
    return conf["asahi_uapi"]["header_sha256"]


def suites(conf):
    """The Debian suites asked for the header, in order."""
    return conf["asahi_uapi"]["suites"].split()


def pinned_source(conf, origin="?"):
    """The line a stamp holds: the pinned header and the package it came
    from."""
    c = conf["asahi_uapi"]
    return "%s sha256 %s, from %s" % (c["header"], pinned_sha256(conf)[:16], origin)


def deb_header(deb, header):
    """The bytes of usr/include/<header> inside a .deb, or None."""
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True)
    if tar.returncode != 0:
        return None
    r = subprocess.run(["tar", "-xO", "./usr/include/" + header], input=tar.stdout,
                       capture_output=True)
    return r.stdout if r.returncode == 0 else None


def header_sha256(deb, header):
    """The sha256 of usr/include/<header> inside a .deb, or None when it
    has none."""
    data = deb_header(deb, header)
    return hashlib.sha256(data).hexdigest() if data is not None else None


def first_dir(work):
    """The pinned package's drm/ headers alone, searched before the system's
    (-I): <drm/asahi_drm.h> is the pinned one even where the system has its
    own."""
    return os.path.join(work, "deps", "asahi-uapi", "first")


def _deb_name(package, version):
    # apt writes an epoch's colon as %3a in file names.
    return "%s_%s_all.deb" % (package, version.replace(":", "%3a"))


class Offer:
    """What one suite serves: its newest package version, the .deb apt
    downloaded (checked against the suite's signed index), and the sha256
    of the header inside; or why none could be had."""

    def __init__(self, suite, version=None, deb=None, sha=None, error=None):
        self.suite, self.version, self.deb, self.sha, self.error = \
            suite, version, deb, sha, error

    def __str__(self):
        if self.error:
            return "%s: %s" % (self.suite, self.error)
        return "%s %s: %s" % (self.suite, self.version,
                              "sha256 " + self.sha if self.sha else "no header")


def offer(work, conf, suite, codename):
    """Asks one suite for its newest package and the header inside it.
    apt-get download checks the .deb against the Packages index, whose
    hash the suite's signed Release names (apt refuses an unsigned or
    wrongly signed one), as for any package apt installs."""
    c = conf["asahi_uapi"]
    try:
        root, opts = private_state(work, suite, codename, required=False)
    except StateError as e:
        return Offer(suite, error="its index could not be had (%s)" % e)
    version = index_fields(opts, "%s:all" % c["package"]).get("Version")
    if not version:
        return Offer(suite, error="serves no %s" % c["package"])
    dl = os.path.join(root, "download")
    deb = os.path.join(dl, _deb_name(c["package"], version))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(deb)
    with step("apt-get download %s=%s (%s)" % (c["package"], version, suite)):
        r = subprocess.run(["apt-get"] + opts + ["download", "%s:all=%s" % (c["package"],
                                                                            version)],
                           cwd=dl, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(deb):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(deb)
        why = (r.stderr.strip().splitlines() or ["no file"])[-1]
        return Offer(suite, version, error="%s %s refused by apt (%s)"
                     % (c["package"], version, why))
    return Offer(suite, version, deb, header_sha256(deb, c["header"]))


def version_lt(a, b):
    """Whether Debian version a is older than b (dpkg's ordering)."""
    return subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0


def update_procedure(conf):
    return ("docs/build-deps.md, \"The asahi uAPI header\", says how to move "
            "header_sha256 in [asahi_uapi] of config/fork.ini")


def find_pinned(work, conf, codename):
    """The first suite (config/fork.ini [asahi_uapi] suites) whose package
    carries the pinned header, as an Offer. Dies in one line when none
    does, naming what each serves and the update procedure: never
    another header."""
    c = conf["asahi_uapi"]
    want = pinned_sha256(conf)
    offers = []
    for suite in suites(conf):
        o = offer(work, conf, suite, codename)
        if o.sha == want:
            return o
        offers.append(o)
    served = sorted((o for o in offers if o.sha), key=functools.cmp_to_key(
        lambda a, b: -1 if version_lt(a.version, b.version) else
        (1 if version_lt(b.version, a.version) else 0)))
    newest = ("; the newest header is sha256 %s (%s %s)"
              % (served[-1].sha, served[-1].suite, served[-1].version)) if served else ""
    die("no suite of %s serves a %s with the pinned <%s> (sha256 %s): %s%s. Nothing was "
        "built; %s" % (", ".join(suites(conf)), c["package"], c["header"], want,
                       "; ".join(str(o) for o in offers), newest, update_procedure(conf)))


def _unpacked_is_pinned(work, conf):
    """Whether include_dir and first_dir hold the pinned header, by content."""
    c = conf["asahi_uapi"]
    for d in (include_dir(work), first_dir(work)):
        path = os.path.join(d, c["header"])
        if not os.path.isfile(path) or sha256(path) != pinned_sha256(conf):
            return False
    return True


def fetch(work, conf, codename):
    """Unpacks the headers of the first package that carries the pinned
    <drm/asahi_drm.h> into include_dir(work). Returns a one-line
    description of where it came from."""
    c = conf["asahi_uapi"]
    dest = include_dir(work)
    stamp = os.path.join(dest, ".source")
    # A directory an earlier --asahi-uapi linked is not the pin: without
    # --asahi-uapi this run, the link goes (below) and the pin is fetched.
    if os.path.exists(stamp) and not linked(work) and _unpacked_is_pinned(work, conf):
        with open(stamp) as f:
            return f.read().strip() + " (unpacked before)"

    # What an earlier pin unpacked goes first: if no suite has the pinned
    # header, no build may find another one there.
    remove_owned(dest)
    remove_owned(first_dir(work))
    o = find_pinned(work, conf, codename)
    unpacked = os.path.join(work, "apt", "asahi-uapi-unpacked")
    remove_owned(unpacked)
    make_dirs(unpacked)
    with step("dpkg -x %s" % os.path.basename(o.deb)):
        subprocess.run(["dpkg", "-x", o.deb, unpacked], check=True)
    src = os.path.join(unpacked, "usr", "include")
    if not os.path.isfile(os.path.join(src, c["header"])) or \
            sha256(os.path.join(src, c["header"])) != pinned_sha256(conf):
        die("%s unpacked a %s that is not the pinned one; refusing it"
            % (os.path.basename(o.deb), c["header"]))
    make_dirs(os.path.dirname(dest))
    shutil.copytree(src, dest)
    shutil.copytree(os.path.join(src, "drm"), os.path.join(first_dir(work), "drm"))
    remove_owned(unpacked)
    line = pinned_source(conf, "%s %s (%s)" % (c["package"], o.version, o.suite))
    with open(stamp, "w") as f:
        f.write(line + "\n")
    return line
