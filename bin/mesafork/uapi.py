# SPDX-License-Identifier: MIT
"""The mainline drm/asahi uAPI header for Honeykrisp.

Honeykrisp is built against <drm/asahi_drm.h>, which Debian ships in
sid's linux-libc-dev (7.2 today). The package is downloaded
with apt from the machine's own Debian mirror through a private apt state
under .work/apt (the machine's sources and package lists are not touched,
nothing is installed) and its drm/ headers are unpacked with dpkg -x into
.work/deps/asahi-uapi/include, which the build puts on the include path.
The whole usr/include of the package is kept there and searched *after*
the system's headers (-idirafter): the machine's own kernel headers win
wherever they exist, and only what they lack (drm/asahi_drm.h and the
newer linux/ headers its drm.h includes) comes from the package. Mesa's
meson then checks that the header has what hk needs.

Only on Debian. Elsewhere (install --no-deps) the header comes from a
directory the user names (--asahi-uapi DIR, MESA_FORK_ASAHI_UAPI), which
include_dir then links to, or from the system's kernel headers
(`use_local`).
"""

import glob
import os
import shutil
import subprocess

from mesafork import tool


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
            tool.die("--asahi-uapi %s: no %s there (give the directory that holds "
                     "drm/ and linux/, e.g. the usr/include of 'make headers_install')"
                     % (src, c["header"]))
        if os.path.islink(dest):
            os.unlink(dest)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        # The whole directory, searched after the system's headers: the
        # newer drm/ headers include linux/ headers older systems lack.
        os.symlink(src, dest)
        return "%s in %s (linked as %s)" % (c["header"], src, tool.rel(dest))
    if linked(fork.work) and os.path.exists(os.path.join(dest, c["header"])):
        return "%s in %s (given before)" % (c["header"], linked(fork.work))
    if os.path.exists(os.path.join(dest, c["header"])) and os.path.exists(stamp):
        with open(stamp) as f:
            return f.read().strip() + " (unpacked before)"
    system = os.path.join(SYSTEM_INCLUDE, c["header"])
    if os.path.exists(system):
        return "%s, the system's kernel headers" % system
    tool.die("Honeykrisp needs <%s>, the mainline drm/asahi uAPI of Linux 6.16 and "
             "later, and this system's headers lack it (%s). Install the kernel "
             "headers package of your distribution if it carries Linux 6.16 or later "
             "(docs/build-deps.md: kernel-headers on Fedora Asahi Remix, "
             "linux-api-headers on Arch), or pass --asahi-uapi DIR (or set %s=DIR) "
             "with DIR/%s, e.g. the usr/include that 'make headers_install' writes in "
             "a Linux tree. Without apt, mesa-fork does not download it from Debian."
             % (c["header"], system, ENV, c["header"]))


def _apt_options(root, sources):
    return ["-o", "Dir::Etc::SourceList=" + sources,
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::State::Lists=" + os.path.join(root, "lists"),
            "-o", "Dir::Cache=" + os.path.join(root, "cache"),
            # Snapshot mirrors serve an expired Release file for sid.
            "-o", "Acquire::Check-Valid-Until=false",
            "-o", "Acquire::Languages=none",
            "-o", "APT::Sandbox::User=root"]


def fetch(work, conf, codename):
    """Unpacks the configured package's headers into include_dir(work).
    Returns a one-line description of where it came from."""
    c = conf["asahi_uapi"]
    dest = include_dir(work)
    stamp = os.path.join(dest, ".source")
    header = os.path.join(dest, c["header"])
    if linked(work) and os.path.exists(header):
        return "%s in %s (--asahi-uapi)" % (c["header"], linked(work))
    if os.path.exists(header) and os.path.exists(stamp):
        return open(stamp).read().strip()

    root = os.path.join(work, "apt", c["suite"])
    for d in ("lists/partial", "cache/archives/partial", "download"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    uri, signed = tool.debian_mirror(codename)
    keyring = signed or "/usr/share/keyrings/debian-archive-keyring.gpg"
    sources = os.path.join(root, "sources.list")
    with open(sources, "w") as f:
        f.write("deb [signed-by=%s] %s %s main\n" % (keyring, uri, c["suite"]))
    opts = _apt_options(root, sources)
    with tool.step("apt-get update (private state for %s, in %s)" % (c["suite"], tool.rel(root))):
        tool.run(["apt-get"] + opts + ["update"], quiet=True)
    dl = os.path.join(root, "download")
    for old in glob.glob(os.path.join(dl, "*.deb")):
        os.unlink(old)
    with tool.step("apt-get download %s/%s" % (c["package"], c["suite"])):
        tool.run(["apt-get"] + opts + ["download", "%s:all" % c["package"]], cwd=dl, quiet=True)
    debs = glob.glob(os.path.join(dl, "*.deb"))
    if len(debs) != 1:
        tool.die("expected one %s package in %s, found %d" % (c["package"], dl, len(debs)))
    unpacked = os.path.join(root, "unpacked")
    shutil.rmtree(unpacked, ignore_errors=True)
    with tool.step("dpkg -x %s" % os.path.basename(debs[0])):
        subprocess.run(["dpkg", "-x", debs[0], unpacked], check=True)
    src = os.path.join(unpacked, "usr", "include")
    if not os.path.exists(os.path.join(src, c["header"])):
        tool.die("%s does not ship %s: Honeykrisp needs the mainline drm/asahi "
                 "uAPI header (Linux 6.16 or later)" % (os.path.basename(debs[0]), c["header"]))
    if os.path.islink(dest):
        os.unlink(dest)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copytree(src, dest)
    what = "%s from %s (%s)" % (c["header"], os.path.basename(debs[0]), c["suite"])
    with open(stamp, "w") as f:
        f.write(what + "\n")
    return what
