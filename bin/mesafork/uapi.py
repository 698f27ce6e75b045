# SPDX-License-Identifier: MIT
"""The mainline drm/asahi uAPI header for Honeykrisp.

Honeykrisp is built against <drm/asahi_drm.h>, which Debian ships in
sid's linux-libc-dev. Every build takes it from one version of that
package, pinned with its sha256 in config/fork.ini ([asahi_uapi]), as the
base is. The package is downloaded
with apt from the machine's own Debian mirror through a private apt state
under .work/apt (the machine's sources and package lists are not touched,
nothing is installed) and unpacked with dpkg -x. Its drm/ headers go to
.work/deps/asahi-uapi/first, which the build searches *before* the
system's headers (-I), so that <drm/asahi_drm.h> is the pinned one even on
a host that has its own (its drm.h may still be libdrm's, included first
under the same guard: the drm core uAPI it holds is stable); the whole
usr/include of the package goes to .work/deps/asahi-uapi/include,
searched *after* them (-idirafter), for the newer linux/ headers drm.h
may include. Mesa's meson then checks that the header has what hk needs.

install --no-deps takes the same package wherever apt and a Debian mirror
exist (no root needed). Elsewhere the header comes from a directory the
user names (--asahi-uapi DIR, MESA_FORK_ASAHI_UAPI), which include_dir
then links to, or, with a warning, from the system's kernel headers
(`use_local`).
"""

import hashlib
import os
import shutil
import subprocess

from . import distro
from .apt import index_fields, private_state
from .proc import die, rel, step
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
        if os.path.islink(dest):
            os.unlink(dest)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        # The whole directory, searched after the system's headers: the
        # newer drm/ headers include linux/ headers older systems lack.
        os.symlink(src, dest)
        return "%s in %s (linked as %s)" % (c["header"], src, rel(dest))
    if linked(fork.work) and os.path.exists(os.path.join(dest, c["header"])):
        return "%s in %s (given before)" % (c["header"], linked(fork.work))
    if os.path.exists(os.path.join(dest, c["header"])) and os.path.exists(stamp) and \
            os.path.isdir(first_dir(fork.work)):
        with open(stamp) as f:
            if f.read().strip() == pinned_source(fork.conf):
                return pinned_source(fork.conf) + " (unpacked before)"
    # The pinned package, as deps takes it: downloading it with a private
    # apt state needs apt and a Debian mirror, not root.
    osr = distro.os_release()
    if osr.is_debian and shutil.which("apt-get"):
        return fetch(fork.work, fork.conf, osr.codename)
    system = os.path.join(SYSTEM_INCLUDE, c["header"])
    if os.path.exists(system):
        # Nothing pinned may stay in front of the system's header.
        shutil.rmtree(first_dir(fork.work), ignore_errors=True)
        print("install: warning: no apt here, so <%s> is the system's (%s), not the "
              "pinned %s; the shim refuses payloads a different uAPI would make"
              % (c["header"], system, pinned_deb(fork.conf)))
        return "%s, the system's kernel headers (not pinned)" % system
    die("Honeykrisp needs <%s>, the mainline drm/asahi uAPI of Linux 6.16 and "
             "later, and this system's headers lack it (%s). Install the kernel "
             "headers package of your distribution if it carries Linux 6.16 or later "
             "(docs/build-deps.md: kernel-headers on Fedora Asahi Remix, "
             "linux-api-headers on Arch), or pass --asahi-uapi DIR (or set %s=DIR) "
             "with DIR/%s, e.g. the usr/include that 'make headers_install' writes in "
             "a Linux tree. Without apt, mesa-fork does not download it from Debian."
             % (c["header"], system, ENV, c["header"]))


def pinned_deb(conf):
    """The file name of the pinned package (Architecture: all)."""
    c = conf["asahi_uapi"]
    # apt writes an epoch's colon as %3a in file names.
    return "%s_%s_all.deb" % (c["package"], c["version"].replace(":", "%3a"))


def pinned_source(conf):
    """The line a stamp holds for the pinned package."""
    c = conf["asahi_uapi"]
    return "%s from %s (%s, sha256 %s)" % (c["header"], pinned_deb(conf), c["suite"],
                                          c["sha256"][:12])




def header_sha256(deb, header):
    """The sha256 of usr/include/<header> inside a .deb."""
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True, check=True)
    data = subprocess.run(["tar", "-xO", "./usr/include/" + header], input=tar.stdout,
                          capture_output=True, check=True).stdout
    return hashlib.sha256(data).hexdigest()


def first_dir(work):
    """The pinned package's drm/ headers alone, searched before the system's
    (-I): <drm/asahi_drm.h> is the pinned one even where the system has its
    own."""
    return os.path.join(work, "deps", "asahi-uapi", "first")


def _apt_root(work, conf, codename):
    """The private apt state of the configured suite, updated."""
    return private_state(work, conf["asahi_uapi"]["suite"], codename)


def _newest(opts, package):
    """The version of package the private state's suite serves, or None."""
    return index_fields(opts, "%s:all" % package).get("Version")


def download_pinned(work, conf, codename):
    """The pinned package's .deb under the private apt state, downloaded
    if needed and checked against the configured sha256. Dies with the
    update procedure when the suite no longer serves that version."""
    c = conf["asahi_uapi"]
    root = os.path.join(work, "apt", c["suite"])
    deb = os.path.join(root, "download", pinned_deb(conf))
    if os.path.exists(deb) and sha256(deb) == c["sha256"]:
        return deb
    root, opts = _apt_root(work, conf, codename)
    dl = os.path.join(root, "download")
    with step("apt-get download %s=%s (%s)" % (c["package"], c["version"], c["suite"])):
        r = subprocess.run(["apt-get"] + opts + ["download", "%s:all=%s" % (c["package"],
                                                                            c["version"])],
                           cwd=dl, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(deb):
        newest = _newest(opts, c["package"])
        hint = ""
        if newest:
            subprocess.run(["apt-get"] + opts + ["download", "%s:all=%s" % (c["package"], newest)],
                           cwd=dl, capture_output=True, text=True)
            got = os.path.join(dl, "%s_%s_all.deb" % (c["package"], newest.replace(":", "%3a")))
            if os.path.exists(got):
                hint = (" %s serves %s now: its sha256 is %s. To move to it, set version "
                        "and sha256 in [asahi_uapi] of config/fork.ini to these and run the "
                        "tests (docs/build-deps.md, \"The asahi uAPI header\")."
                        % (c["suite"], newest, sha256(got)))
        die("%s no longer serves %s %s, the <%s> every build is pinned to (apt-get: "
                 "%s).%s" % (c["suite"], c["package"], c["version"], c["header"],
                             (r.stderr.strip().splitlines() or ["no package"])[-1], hint))
    got = sha256(deb)
    if got != c["sha256"]:
        os.unlink(deb)
        die("%s: sha256 %s, but config/fork.ini pins %s; refusing to build with it"
                 % (pinned_deb(conf), got, c["sha256"]))
    return deb


def fetch(work, conf, codename):
    """Unpacks the pinned package's headers into include_dir(work).
    Returns a one-line description of where it came from."""
    c = conf["asahi_uapi"]
    dest = include_dir(work)
    stamp = os.path.join(dest, ".source")
    header = os.path.join(dest, c["header"])
    if linked(work) and os.path.exists(header):
        return "%s in %s (--asahi-uapi)" % (c["header"], linked(work))
    if os.path.exists(header) and os.path.exists(stamp) and os.path.isdir(first_dir(work)):
        with open(stamp) as f:
            if f.read().strip() == pinned_source(conf):
                return pinned_source(conf)

    deb = download_pinned(work, conf, codename)
    root = os.path.join(work, "apt", c["suite"])
    unpacked = os.path.join(root, "unpacked")
    shutil.rmtree(unpacked, ignore_errors=True)
    with step("dpkg -x %s" % os.path.basename(deb)):
        subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
    src = os.path.join(unpacked, "usr", "include")
    if not os.path.exists(os.path.join(src, c["header"])):
        die("%s does not ship %s: Honeykrisp needs the mainline drm/asahi "
                 "uAPI header (Linux 6.16 or later)" % (os.path.basename(deb), c["header"]))
    if os.path.islink(dest):
        os.unlink(dest)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copytree(src, dest)
    first = first_dir(work)
    shutil.rmtree(first, ignore_errors=True)
    shutil.copytree(os.path.join(src, "drm"), os.path.join(first, "drm"))
    with open(stamp, "w") as f:
        f.write(pinned_source(conf) + "\n")
    return pinned_source(conf)
