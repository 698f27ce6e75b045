# SPDX-License-Identifier: MIT
"""`mesa-fork deb`: the binary packages of the source package `debsrc`
makes, built the way a Debian packager builds them, and the fork's
mesa-vulkan-drivers shown working from the system ICD path.

Two chroots made with mmdebstrap (bin/mesafork/chroot.py) and cached under
.work/chroot/ (a stamp in each records what it was made from; a change
makes it again), with the host's Debian mirror and its security archive:
  <suite>-build  buildd variant, plus ccache and lintian; build
                 dependencies come from `apt-get build-dep` on our .dsc,
                 the kernel headers from the linux-libc-dev that
                 carries the <drm/asahi_drm.h> pinned by config/fork.ini
                 [asahi_uapi] (uapi.find_pinned). Only apt runs as root
                 there: dpkg-source, dpkg-buildpackage and lintian (on the
                 .changes and on the .dsc) run as the user `builder`,
                 with the invoking user's uid (proc.invoking_user: who
                 ran sudo, else the owner of .work; 2000 for root);
  <suite>-base   minbase plus vulkan-tools and the Khronos validation
                 layer, never changed after it is made: each run copies it
                 to <suite>-test and installs the packages just built there.
.work/deb is bind-mounted at /srv/mesa-fork in both, .work/ccache-deb at
/srv/ccache in the build chroot. The drm-shims and mesa-fork-vkcheck are
the ones `mesa-fork install` built on the host; they are copied into the
test chroot. The test chroot checks exactly the drivers whose ICD manifests
the built packages ship (for this architecture and profile), and that a
stand-in Debian security update is not hidden behind the fork.
On the host, debsrc runs as the invoking user, and what root writes under
.work outside the chroots is handed back to them at the end.
"""

import glob
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time

from . import apt, cross, debian, distro, uapi
from .chroot import DEBIAN_KEYRING as KEYRING, PATH, Chroot, sources_list
from .config import debian_version, fork_release, multiarch
from .install import shim_env_pairs, shim_lib, vulkaninfo_device_lines
from .proc import (check_owned, die, fmt_time, hand_back, invoking_user, make_dirs, rel,
                  remove_owned, remove_tree, run, step, user_dir)
from .sources import sha256

INSIDE = "/srv/mesa-fork"
CCACHE_INSIDE = "/srv/ccache"
SHIMS_INSIDE = "/opt/mesa-fork-shim"
# The unprivileged user the package build and lintian run as, in the build
# chroot; its uid when .work belongs to root.
BUILD_USER = "builder"
FALLBACK_BUILD_UID = 2000


def deb_sources(fork, mirror, suites):
    """The chroots' apt sources: suites from the host's Debian mirror, and
    <suite>-security from the security archive the host uses (none when
    the host has none, said once)."""
    suite = fork.conf["deb"]["suite"]
    sec = apt.security_mirror(apt.os_codename())
    if sec is None:
        print("deb: this machine's apt has no -security entry; the chroots get no %s-security "
              "either (add Debian's security archive to take its updates)" % suite)
    return sources_list(mirror, suites, KEYRING,
                               (sec[0], "%s-security" % suite) if sec else None)


def build_uid(fork, environ=None):
    """The build user's uid: the invoking user's (proc.invoking_user: who
    ran sudo, else the owner of .work), so that what the build writes
    there stays theirs; a fixed one when that is root."""
    user = invoking_user(fork.work, environ)
    return user[0] if user else FALLBACK_BUILD_UID


def inside(work_deb, path):
    """Where a path under .work/deb is seen inside the chroots."""
    return os.path.join(INSIDE, os.path.relpath(path, work_deb))


def build_packages(fork, chroot, work_deb, dsc, profile, check, jobs, host_arch=None,
                   prepare_only=False):
    """dpkg-source -x, build-dep, dpkg-buildpackage -B (with host_arch, a
    cross build: -a host_arch and the cross profile); returns the .changes
    file and the build time in seconds. Only apt runs as root: unpacking
    and building run as the chroot's build user, as on Debian's buildds."""
    tree_parent = os.path.join(work_deb, "build")
    remove_owned(tree_parent)
    make_dirs(tree_parent)
    uid = build_uid(fork)
    chroot.add_user(BUILD_USER, uid)
    os.chown(tree_parent, uid, uid)
    ccache = os.path.join(chroot.root, CCACHE_INSIDE.lstrip("/"))
    if os.stat(ccache).st_uid != uid:
        # A cache an earlier, root build filled: handed to the build user.
        run(["chown", "-R", "%d:%d" % (uid, uid), ccache])
    b = fork.conf["base"]
    tree = os.path.join(tree_parent, "%s-%s" % (b["package"], b["upstream_version"]))
    profiles = [profile] if profile else []
    cross = ["-a", host_arch] if host_arch else []
    if host_arch:
        # Debian's build profiles for cross builds: cross always, nocheck
        # because the target's tests cannot run on the build machine.
        profiles = ["cross", "nocheck"] + profiles
    with step("dpkg-source -x %s (in the build chroot, as %s, uid %d)"
              % (os.path.basename(dsc), BUILD_USER, uid)):
        chroot.run_in(["dpkg-source", "-x", inside(work_deb, dsc), inside(work_deb, tree)],
                      quiet=True, user=BUILD_USER)
    # <drm/asahi_drm.h>: the linux-libc-dev every other build takes
    # (config/fork.ini [asahi_uapi]: the first of its suites whose header
    # has the pinned sha256), downloaded on the host by apt, which checks it
    # against that suite's signed index, and installed from a file.
    header = fork.conf["asahi_uapi"]["header"]
    found = uapi.find_pinned(fork.work, fork.conf, distro.os_release().codename)
    deb = os.path.join(work_deb, os.path.basename(found.deb))
    shutil.copyfile(found.deb, deb)
    with step("apt-get update and dist-upgrade; linux-libc-dev %s from %s (<%s>)"
              % (found.version, found.suite, header)):
        # A cached build chroot is brought up to date, as sbuild-update does.
        chroot.run_in(["apt-get", "update"], quiet=True)
        chroot.run_in(["apt-get", "dist-upgrade", "-y"], quiet=True)
        chroot.apt_install([inside(work_deb, deb)], "--allow-downgrades")
    os.unlink(deb)
    with step("<%s> of the build chroot has the pinned sha256 (%s)"
              % (header, uapi.pinned_sha256(fork.conf)[:16])):
        path = os.path.join(chroot.root, "usr", "include", header)
        got = sha256(path) if os.path.exists(path) else "missing"
        if got != uapi.pinned_sha256(fork.conf):
            die("deb: the build chroot's %s (linux-libc-dev %s from %s) has sha256 %s, not "
                "the pinned %s; Honeykrisp would be built against another uAPI"
                % (header, found.version, found.suite, got, uapi.pinned_sha256(fork.conf)))
    with step("apt-get build-dep %s%s" % (" ".join(cross + [os.path.basename(dsc)]),
                                           " -P " + ",".join(profiles) if profiles else "")):
        chroot.run_in(["apt-get", "build-dep", "-y", "--no-install-recommends"] + cross +
                      (["-P", ",".join(profiles)] if profiles else []) +
                      [inside(work_deb, dsc)], quiet=True)
    if prepare_only:
        return None, 0
    log = os.path.join(work_deb, "build.log")
    opts = ["parallel=%d" % jobs] + ([] if check and not host_arch else ["nocheck"])
    cmd = ["nice", "-n", "10", "dpkg-buildpackage", "-B", "-us", "-uc"] + cross + \
        (["-P" + ",".join(profiles)] if profiles else [])
    env = {"DEB_BUILD_OPTIONS": " ".join(opts), "CCACHE_DIR": CCACHE_INSIDE,
           "CCACHE_MAXSIZE": "5G"}
    if host_arch:
        # Meson puts ccache in front of the compilers it finds itself, not
        # of those a cross file names; ccache's directory of compiler names
        # (aarch64-linux-gnu-gcc among them) first on PATH does it.
        env["PATH"] = "/usr/lib/ccache:" + PATH
    what = "%s as %s (DEB_BUILD_OPTIONS=\"%s\"; log %s)" % (
        " ".join(cmd[3:]), BUILD_USER, env["DEB_BUILD_OPTIONS"], rel(log))
    t0 = time.monotonic()
    with step(what):
        with open(log, "w") as f:
            r = subprocess.run(chroot.command(cmd, env, inside(work_deb, tree), user=BUILD_USER),
                               stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            with open(log) as f:
                print(f.read()[-6000:])
            die("deb: dpkg-buildpackage failed (exit %d); the whole log is %s"
                % (r.returncode, rel(log)))
    took = time.monotonic() - t0
    changes = glob.glob(os.path.join(tree_parent, "*_%s_%s.changes" % (
        debian_version(fork.conf), host_arch or "*")))
    if len(changes) != 1:
        die("deb: expected one .changes file in %s, found %d" % (rel(tree_parent), len(changes)))
    return changes[0], took


LINTIAN_SEVERITIES = {"E": "errors", "W": "warnings", "I": "info", "P": "pedantic",
                      "X": "experimental", "O": "overridden"}


def lintian_tags(text):
    """lintian's output as ({severity: count}, {(severity, package, tag):
    count}); a source package's lines name it 'PACKAGE source'."""
    counts, tags = {}, {}
    for line in text.splitlines():
        m = re.match(r"([EWIPXO]): (\S+?)(?: (source))?: (\S+)", line)
        if not m:
            continue
        pkg = m.group(2) + (" source" if m.group(3) else "")
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        key = (m.group(1), pkg, m.group(4))
        tags[key] = tags.get(key, 0) + 1
    return counts, tags


def lintian_summary(chroot, work_deb, path, report):
    """Runs lintian on a .changes or a .dsc inside the build chroot, as
    the build user; writes its output to work_deb/report, prints its tags
    grouped by severity and returns the counts."""
    r = chroot.capture(["lintian", "--display-info", "--tag-display-limit", "0",
                        inside(work_deb, path)], user=BUILD_USER)
    counts, tags = lintian_tags(r.stdout)
    with open(os.path.join(work_deb, report), "w") as f:
        f.write(r.stdout)
    print("lintian %s: %s (%s)" % (os.path.basename(path), ", ".join(
        "%d %s" % (counts.get(k, 0), v) for k, v in LINTIAN_SEVERITIES.items()),
        rel(os.path.join(work_deb, report))))
    for (sev, pkg, tag), n in sorted(tags.items()):
        print("  %s: %s: %s%s" % (sev, pkg, tag, " (x%d)" % n if n > 1 else ""))
    if r.returncode not in (0, 1, 2):
        die("deb: lintian did not run (exit %d):\n%s" % (r.returncode, r.stdout[-3000:]))
    return counts


def lint(chroot, work_deb, changes, dsc):
    """lintian on the binary packages of the build and on the source
    package they were built from."""
    lintian_summary(chroot, work_deb, changes, "lintian.txt")
    lintian_summary(chroot, work_deb, dsc, "lintian-source.txt")


def deb_fields(path):
    r = subprocess.run(["dpkg-deb", "-f", path], stdout=subprocess.PIPE, text=True)
    fields = {}
    for line in r.stdout.splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


def same_build_closure(debs, first):
    """first and the packages of the same build it depends on, recursively."""
    by_name = {deb_fields(d)["Package"]: d for d in debs}
    want, todo = [], [first]
    while todo:
        name = todo.pop()
        if name in want:
            continue
        want.append(name)
        deps = deb_fields(by_name[name]).get("Depends", "") + "," + \
            deb_fields(by_name[name]).get("Pre-Depends", "")
        for alt in deps.split(","):
            dep = alt.split("|")[0].split("(")[0].split(":")[0].strip()
            if dep in by_name:
                todo.append(dep)
    return [by_name[n] for n in want]


def chroot_vulkaninfo(chroot, env):
    """The device and driver fields of `vulkaninfo --summary` in the chroot."""
    return vulkaninfo_device_lines(
        env, lambda args: chroot.capture(["vulkaninfo"] + args, env=env).stdout)


# docs/shipping.md, section 4: no apt preferences. The fork's version,
# <base>+mesaforkN, sorts above the base and below every later upload
# Debian can make of the same upstream release (+debNNuM, M greater): a
# Debian security update replaces the fork in the next `apt upgrade`, as
# any upgrade, until the fork is rebuilt on it. `deb` shows that in its
# test chroot with a stand-in.


def next_update(base, n=1):
    """The n-th stable update Debian can publish after base
    (25.0.7-2+deb13u1 -> 25.0.7-2+deb13u2 for n=1)."""
    m = re.match(r"(.*\+deb\d+u)(\d+)$", base)
    if not m:
        die("deb: base version %s has no +debNNuN suffix to count on from" % base)
    return "%s%d" % (m.group(1), int(m.group(2)) + n)


def fake_update(chroot, version, what):
    """A local apt repository in the chroot with an empty
    mesa-vulkan-drivers `version`, standing in for the next security
    update; returns the sources.list line. [trusted=yes]: a flat
    repository this process wrote a moment ago, in a throwaway copy of
    the test chroot; apt's signature check of a signed archive is what
    tests/test_packaging.py shows (a reprepro archive, signed-by)."""
    repo = os.path.join(chroot.root, "srv", "fake-update")
    pkg = os.path.join(repo, "pkg")
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write("Package: mesa-vulkan-drivers\nSource: mesa\nVersion: %s\n"
                "Architecture: %s\nMulti-Arch: same\nMaintainer: nobody <nobody@invalid>\n"
                "Description: %s\n" % (version, arch, what))
    deb_file = "mesa-vulkan-drivers_%s_%s.deb" % (version, arch)
    chroot.run_in(["dpkg-deb", "--build", "/srv/fake-update/pkg",
                   "/srv/fake-update/" + deb_file], quiet=True)
    remove_owned(pkg)
    path = os.path.join(repo, deb_file)
    digest = sha256(path)
    r = subprocess.run(["dpkg-deb", "-f", path], stdout=subprocess.PIPE, text=True)
    with open(os.path.join(repo, "Packages"), "w") as f:
        f.write(r.stdout + "Filename: ./%s\nSize: %d\nSHA256: %s\n\n"
                % (deb_file, os.path.getsize(path), digest))
    return "deb [trusted=yes] file:/srv/fake-update ./\n"


def candidate(chroot, package="mesa-vulkan-drivers"):
    r = chroot.capture(["apt-cache", "policy", package])
    m = re.search(r"Candidate: (\S+)", r.stdout)
    return (m.group(1) if m else None), r.stdout


def upgradable(chroot):
    """{package: (new version, installed version)} of `apt list
    --upgradable` in the chroot."""
    r = chroot.capture(["apt", "list", "--upgradable"])
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"([^/\s]+)/\S+ (\S+) \S+ \[upgradable from: ([^\]]+)\]", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def update_check(fork, chroot):
    """A stand-in for Debian's next security update of the base, next to
    the installed fork: apt must list it as upgradable and make it the
    candidate (docs/shipping.md, section 4); an apt preference that hid
    it (as the 990 pin on +mesafork did) fails here."""
    ours = debian_version(fork.conf)
    update = next_update(fork.conf["base"]["version"])
    line = fake_update(chroot, update, "stand-in for the next security update")
    with open(os.path.join(chroot.root, "etc", "apt", "sources.list.d",
                           "fake-update.list"), "w") as f:
        f.write(line)
    chroot.run_in(["apt-get", "update"], quiet=True)
    cand, text = candidate(chroot)
    listed = upgradable(chroot).get("mesa-vulkan-drivers")
    print("security update: a local repository offers mesa-vulkan-drivers %s" % update)
    print("  apt list --upgradable: %s" % (
        "%s [upgradable from: %s]" % listed if listed else "nothing"))
    print("\n".join("    " + l for l in text.splitlines()))
    if cand != update or listed != (update, ours):
        die("deb: Debian's security update %s is hidden behind the fork %s: candidate %s, "
            "apt list --upgradable %s" % (update, ours, cand, listed))


DRIVER_NAMES = {"asahi": "Honeykrisp", "panfrost": "panvk",
                "intel": "Intel open-source Mesa driver"}


def _arch_map(value):
    """{driver: [arch]} of 'DRIVER=ARCH,ARCH ...'."""
    out = {}
    for item in value.split():
        drv, archs = item.split("=", 1)
        out[drv] = archs.split(",")
    return out


def expected_drivers(conf, arch, profile):
    """The fork's drivers ([drivers], in that order) whose manifests the
    packages built for arch ship, from the config the debsrc rules edit
    uses: with the profile, [debsrc] profile_vulkan_drivers except where
    profile_driver_architectures leaves one out; without it, what Debian's
    rules build (debian_driver_architectures) and Honeykrisp on
    asahi_architectures."""
    d = conf["debsrc"]
    if profile:
        only = debian.profile_driver_archs(d)
        names = [drv for drv in d["profile_vulkan_drivers"].split()
                 if drv not in only or arch in only[drv]]
    else:
        names = [drv for drv, archs in _arch_map(d["debian_driver_architectures"]).items()
                 if arch in archs]
        if arch in d["asahi_architectures"].split():
            names.append("asahi")
    return [drv for drv in conf["drivers"] if drv in names]


ICD_DIR = "usr/share/vulkan/icd.d/"


def deb_manifests(path):
    """{manifest name: library_path} of the Vulkan ICD manifests a .deb
    ships in /usr/share/vulkan/icd.d."""
    r = subprocess.run(["dpkg-deb", "--fsys-tarfile", path], stdout=subprocess.PIPE)
    if r.returncode != 0:
        die("deb: dpkg-deb cannot read %s" % rel(path))
    out = {}
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
        for m in tar.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            if name.startswith(ICD_DIR) and name.endswith(".json") and m.isfile():
                data = json.load(tar.extractfile(m))
                out[os.path.basename(name)] = data.get("ICD", {}).get("library_path", "")
    return out


def shipped_drivers(conf, debs):
    """The fork's drivers ([drivers], in that order) whose ICD manifest
    one of debs ships (matched by the manifest's library_path), and every
    manifest seen, as {name: library_path}."""
    manifests = {}
    for d in debs:
        manifests.update(deb_manifests(d))
    libs = {os.path.basename(p) for p in manifests.values()}
    return ([drv for drv in conf["drivers"]
             if os.path.basename(conf["drivers"][drv].split()[0]) in libs], manifests)


def drivers_to_check(conf, arch, profile, debs):
    """Exactly the drivers whose manifests the built packages (debs) ship;
    stops when that is not what a build for arch with that profile (None:
    without one) must ship (expected_drivers)."""
    shipped, manifests = shipped_drivers(conf, debs)
    want = expected_drivers(conf, arch, profile)
    if shipped != want:
        die("deb: the %s packages built %s ship the manifests of %s (%s); a build for %s "
            "%s must ship %s (config/fork.ini [debsrc])"
            % (arch, "with profile " + profile if profile else "without a profile",
               ", ".join(shipped) or "none of the fork's drivers",
               " ".join(sorted(manifests)) or "no ICD manifest", arch,
               "with the profile" if profile else "without it", ", ".join(want) or "none"))
    return shipped


def show_drivers(fork, chroot, prefix, debs, arch, profile):
    """Each driver whose ICD manifest the built packages (debs, for arch,
    built with profile, or None) ship, from /usr/share/vulkan/icd.d on its
    drm-shim inside the test chroot, with mesa-fork-vkcheck under the
    validation layer."""
    conf = fork.conf
    # Mesa's version is the package's (Debian's rules write it), then the
    # fork's tag: "Mesa 25.0.7-2+deb13u1+mesafork1 (mesa-fork 1)".
    tag = "Mesa %s (%s)" % (debian_version(conf), fork_release(conf))
    ok_all = True
    for drv in drivers_to_check(conf, arch, profile, debs):
        env = {"LD_PRELOAD": os.path.join(SHIMS_INSIDE, os.path.basename(
            shim_lib(prefix, conf, drv)))}
        env.update(shim_env_pairs(conf, drv))
        print("---- %s on its drm-shim (%s), ICDs from /usr/share/vulkan/icd.d"
              % (drv, " ".join("%s=%s" % kv for kv in shim_env_pairs(conf, drv).items())))
        lines = chroot_vulkaninfo(chroot, env)
        print("\n".join("  vulkaninfo: " + line for line in lines))
        # The driver's own name too: on a host with a GPU, /dev is bound in
        # and its real device would carry the same tag.
        c = chroot.capture([os.path.join(SHIMS_INSIDE, "mesa-fork-vkcheck"), "--validate"],
                           env=env)
        ok_all &= judge(drv, tag, lines, c)
    return ok_all


def judge(drv, tag, lines, vkcheck):
    """Prints vkcheck's output and the verdict on one driver: vulkaninfo's
    lines name the driver and the fork's tag, and vkcheck passed."""
    shown = any(tag in line for line in lines) and \
        any(line.startswith("driverName") and line.split("=", 1)[1].strip().startswith(
            DRIVER_NAMES[drv]) for line in lines)
    for line in vkcheck.stdout.splitlines():
        print("  vkcheck: " + line)
    good = shown and vkcheck.returncode == 0
    print("  => %s" % ("OK" if good else "FAILED (driverInfo names the fork: %s, "
                       "vkcheck exit %d)" % (shown, vkcheck.returncode)))
    return good


def host_programs(fork, prefix, drivers):
    """The drm-shims of drivers and mesa-fork-vkcheck, which `mesa-fork
    install` built on the host and the test chroot runs."""
    paths = [shim_lib(prefix, fork.conf, drv) for drv in drivers]
    paths.append(os.path.join(prefix, "bin", "mesa-fork-vkcheck"))
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        die("deb: %s missing; run 'bin/mesa-fork install' first, or pass --prefix "
            "(or --no-test)" % ", ".join(missing))
    return paths


def install_and_show(fork, work_deb, changes, prefix, mirror, profile):
    conf = fork.conf["deb"]
    suite = conf["suite"]
    base = Chroot(os.path.join(fork.work, "chroot", "%s-base" % suite))
    base.ensure(suite, "minbase", deb_sources(fork, mirror, [suite, suite + "-updates"]),
                conf["test_packages"].split(), fork.host_arch)
    test = Chroot(os.path.join(fork.work, "chroot", "%s-test" % suite),
                  [(work_deb, INSIDE)])
    check_owned(test.root)
    with step("fresh test chroot %s (a copy of %s)" % (rel(test.root), rel(base.root))):
        remove_tree(test.root)
        run(["cp", "-a", "--reflink=auto", base.root, test.root])
    shims = os.path.join(test.root, SHIMS_INSIDE.lstrip("/"))
    os.makedirs(shims)
    debs = glob.glob(os.path.join(os.path.dirname(changes), "*.deb"))
    for path in host_programs(fork, prefix, drivers_to_check(fork.conf, fork.host_arch,
                                                              profile, debs)):
        shutil.copy2(path, shims)
    closure = same_build_closure(debs, "mesa-vulkan-drivers")
    with test.mounted():
        r = test.capture(["dpkg-query", "-W", "-f=${db:Status-Status} ${Package} ${Version}\\n",
                          "*mesa*"])
        mesa = [l for l in r.stdout.splitlines() if l.startswith("installed ")]
        if mesa:
            die("deb: the test chroot already holds Mesa packages:\n" + "\n".join(mesa))
        with step("apt-get install %s" % " ".join(os.path.basename(d) for d in closure)):
            test.run_in(["apt-get", "update"], quiet=True)
            test.apt_install([inside(work_deb, d) for d in closure])
        r = test.capture(["dpkg-query", "-W", "-f=${Package} ${Version} ${Architecture}\\n",
                          "mesa-vulkan-drivers"])
        print("installed: " + r.stdout.strip())
        r = test.capture(["ls", "/usr/share/vulkan/icd.d"])
        print("system ICD manifests: " + " ".join(r.stdout.split()))
        ok = show_drivers(fork, test, prefix, debs, fork.host_arch, profile)
        print()
        update_check(fork, test)
        return ok


def external_depends(debs):
    """Names of the packages debs depend on that are not among them (first
    alternatives, without versions or architecture qualifiers)."""
    names = {deb_fields(d)["Package"] for d in debs}
    out = []
    for d in debs:
        f = deb_fields(d)
        for alt in (f.get("Depends", "") + "," + f.get("Pre-Depends", "")).split(","):
            dep = alt.split("|")[0].split("(")[0].split(":")[0].strip()
            if dep and dep not in names and dep not in out:
                out.append(dep)
    return out


# Where show_cross puts the statically linked qemu-user inside the root.
QEMU_INSIDE = "/usr/libexec/mesa-fork"


def in_root(target, root, cmd, preload):
    """cmd, a program of the root, run in it with preload in its
    LD_PRELOAD: chroot into root, then qemu-user, statically linked and
    copied into the root, runs it. (qemu's -L prefix is not enough: it does
    not translate faccessat(), with which the Vulkan loader checks each
    manifest it lists, so the loader would find /usr/share/vulkan/icd.d and
    then open none of its files.) LD_PRELOAD goes through qemu's -E, so
    that the host's chroot program does not try to preload it."""
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    return [chroot, root, os.path.join(QEMU_INSIDE, cross.arch_conf(target)["qemu"]),
            "-E", "LD_PRELOAD=" + preload] + cmd


def show_cross(fork, target, work_deb, changes, prefix):
    """The cross-built packages shown working without installing anything
    on this machine: a root of the target's packages unpacked by mmdebstrap
    (the suite's vulkan-tools, the validation layer and what the packages
    depend on), the packages unpacked into a copy of it, and each driver
    from /usr/share/vulkan/icd.d on the package's own drm-shim, inside that
    root under qemu-user: vulkaninfo, then mesa-fork-vkcheck under the
    validation layer."""
    conf = fork.conf["deb"]
    debs = glob.glob(os.path.join(os.path.dirname(changes), "*.deb"))
    by_name = {deb_fields(d)["Package"]: d for d in debs}
    if "mesa-drm-shim" not in by_name:
        die("deb: the build made no mesa-drm-shim package")
    shown = same_build_closure(debs, "mesa-vulkan-drivers") + [by_name["mesa-drm-shim"]]
    pkgs = sorted(set(conf["test_packages"].split() + external_depends(shown)))
    base = os.path.join(fork.work, "chroot", "%s-%s-base" % (conf["suite"], target.arch))
    cross.extract_root(target, conf["suite"], pkgs, base,
                       "root for the packages, %d packages" % len(pkgs))
    root = os.path.join(fork.work, "chroot", "%s-%s-test" % (conf["suite"], target.arch))
    check_owned(root)
    with step("fresh %s root %s (a copy of %s), with %s unpacked"
              % (target.arch, rel(root), rel(base),
                 " ".join(os.path.basename(d) for d in shown))):
        remove_tree(root)
        run(["cp", "-a", "--reflink=auto", base, root])
        for d in shown:
            run(["dpkg-deb", "-x", d, root], quiet=True)
    icds = os.path.join(root, "usr", "share", "vulkan", "icd.d")
    print("system ICD manifests: " + " ".join(sorted(os.listdir(icds))))
    vkcheck = os.path.join(prefix, "bin", "mesa-fork-vkcheck")
    shutil.copy2(vkcheck, os.path.join(root, "usr", "bin"))
    qemu = shutil.which(cross.arch_conf(target)["qemu"])
    os.makedirs(os.path.join(root, QEMU_INSIDE.lstrip("/")))
    shutil.copy2(qemu, os.path.join(root, QEMU_INSIDE.lstrip("/")))
    libdir = os.path.join("/usr/lib", multiarch(target.arch))
    tag = "Mesa %s (%s)" % (debian_version(fork.conf), fork_release(fork.conf))
    ok_all = True
    for drv in drivers_to_check(target.conf, target.arch, fork.conf["debsrc"]["profile"], debs):
        shim = os.path.join(libdir, os.path.basename(target.conf["drivers"][drv].split()[1]))
        if not os.path.exists(os.path.join(root, shim[1:])):
            die("deb: mesa-drm-shim has no %s" % shim)
        env = {"HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
        env.update(shim_env_pairs(target.conf, drv))
        print("---- %s on its drm-shim %s (%s), ICDs from /usr/share/vulkan/icd.d, "
              "chroot and %s" % (drv, shim, " ".join("%s=%s" % kv for kv in shim_env_pairs(
                  target.conf, drv).items()), cross.describe(target).split(",")[0]))
        lines = vulkaninfo_device_lines(env, command=in_root(target, root,
                                                              ["/usr/bin/vulkaninfo"], shim))
        print("\n".join("  vulkaninfo: " + line for line in lines))
        c = subprocess.run(in_root(target, root, ["/usr/bin/mesa-fork-vkcheck", "--validate"],
                                   shim),
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=600)
        ok_all &= judge(drv, tag, lines, c)
    return ok_all


def last_build(fork, work_deb):
    """The .changes of the previous build and its build time."""
    changes = glob.glob(os.path.join(work_deb, "build", "*_%s_*.changes"
                                     % debian_version(fork.conf)))
    stamp = os.path.join(work_deb, "build", "build-time")
    if len(changes) != 1 or not os.path.exists(stamp):
        die("deb: --no-build: no finished build in %s" % rel(os.path.join(work_deb, "build")))
    return changes[0], float(open(stamp).read())


def deb(fork, jobs=2, full=False, check=False, no_build=False, no_test=False, prefix=None,
        arch=None, prepare_only=False):
    """Build the binary packages of our source package in a clean trixie
    chroot, lint them, and show mesa-vulkan-drivers working in another.
    With --arch, cross-build them for that architecture and show them under
    qemu-user."""
    if os.geteuid() != 0:
        die("deb: run as root (mmdebstrap, chroot and bind mounts need it; the build itself "
            "runs as an unprivileged user inside the chroot)")
    osr = distro.os_release()
    if not osr.is_debian:
        die("deb: builds Debian packages with Debian's mmdebstrap and archive; this is "
            "%s, not Debian" % osr.describe())
    target = fork.for_arch(arch) if arch and arch != fork.host_arch else None
    # Only apt and the chroots need root: debsrc runs as the invoking user,
    # and what root writes into .work outside the chroots (the build's log
    # and lintian's reports, apt's private states) is handed back to them.
    user = invoking_user(fork.work)
    # --prepare-only unpacks elsewhere: the last build's packages stay.
    work_deb = os.path.join(fork.work, "deb-%s%s" % ("prepare-" if prepare_only else "",
                                                     target.arch) if target else
                            ("deb-prepare" if prepare_only else "deb"))
    ccache = os.path.join(fork.work, "ccache-deb")
    try:
        if target:
            return deb_cross(fork, target, jobs, full, check, no_build, no_test, prefix,
                             prepare_only, work_deb)
        return deb_native(fork, jobs, full, check, no_build, no_test, prefix, prepare_only,
                          work_deb)
    finally:
        hand_back(user, [work_deb, ccache, os.path.join(fork.work, "apt")])


def work_dirs(fork, work_deb):
    """.work/deb (or its --prepare-only, --arch twin) and .work/ccache-deb,
    made for the invoking user, and handed back to them when an earlier
    run as root left them root's."""
    user = invoking_user(fork.work)
    dirs = [work_deb, os.path.join(fork.work, "ccache-deb")]
    for d in dirs:
        user_dir(d, user)
    hand_back(user, dirs)


def deb_native(fork, jobs, full, check, no_build, no_test, prefix, prepare_only, work_deb):
    work_dirs(fork, work_deb)
    conf = fork.conf["deb"]
    suite = conf["suite"]
    profile = None if full else fork.conf["debsrc"]["profile"]
    prefix = fork.prefix(prefix)
    if not no_test and not prepare_only:
        host_programs(fork, prefix, expected_drivers(fork.conf, fork.host_arch, profile))
    mirror, _ = apt.debian_mirror(apt.os_codename())
    ccache = os.path.join(fork.work, "ccache-deb")
    src = os.path.join(work_deb, "src")
    if no_build:
        changes, took = last_build(fork, work_deb)
        print("deb: the build of %s, %s" % (rel(changes), fmt_time(took)))
        return finish(fork, work_deb, changes, took, profile, prefix, mirror, no_test)
    remove_owned(src)
    debian.debsrc(fork, output=src)
    dsc = os.path.join(src, "%s_%s.dsc" % (fork.conf["base"]["package"],
                                           debian_version(fork.conf)))
    build = Chroot(os.path.join(fork.work, "chroot", "%s-build" % suite),
                   [(work_deb, INSIDE), (ccache, CCACHE_INSIDE)])
    build.ensure(suite, "buildd",
                 deb_sources(fork, mirror, [suite, suite + "-updates", conf["backports"]]),
                 conf["build_packages"].split(), fork.host_arch)
    with build.mounted():
        changes, took = build_packages(fork, build, work_deb, dsc, profile, check, jobs,
                                       prepare_only=prepare_only)
        if prepare_only:
            print("deb: build chroot %s ready, build dependencies installed; not built "
                  "(--prepare-only)" % rel(build.root))
            return
        print()
        print("built with %s in %s:" % ("profile " + profile if profile else "no profile",
                                       fmt_time(took)))
        for d in sorted(glob.glob(os.path.join(os.path.dirname(changes), "*.deb"))):
            print("  %-60s %8d KiB" % (os.path.basename(d), os.path.getsize(d) // 1024))
        r = build.capture(["ccache", "-s"], env={"CCACHE_DIR": CCACHE_INSIDE})
        hits = []
        for l in r.stdout.splitlines():
            m = re.match(r"\s*(Hits|Misses):\s+(.*)", l)
            if m and m.group(1) not in [h.split(":")[0] for h in hits]:
                hits.append("%s: %s" % (m.group(1), m.group(2)))
        if hits:
            print("ccache (all builds so far): " + "; ".join(hits))
        print()
        lint(build, work_deb, changes, dsc)
    with open(os.path.join(work_deb, "build", "build-time"), "w") as f:
        f.write("%.1f\n" % took)
    return finish(fork, work_deb, changes, took, profile, prefix, mirror, no_test)


def finish(fork, work_deb, changes, took, profile, prefix, mirror, no_test):
    return show_and_judge(
        took, no_test, lambda: install_and_show(fork, work_deb, changes, prefix, mirror,
                                                profile),
        "build time %s (dpkg-buildpackage -B%s)" % (fmt_time(took),
                                                     " -P" + profile if profile else ""),
        "a driver of the installed package")


def show_and_judge(took, no_test, show, what, subject):
    """Runs show() unless no_test, then prints what (the build time and how
    it was built) and fails when show() did not see every driver work."""
    if no_test:
        print("deb: build time %s" % fmt_time(took))
        return
    print()
    ok = show()
    print()
    print("deb: " + what)
    if not ok:
        die("deb: %s did not come up on its drm-shim" % subject)


def deb_cross(fork, target, jobs, full, check, no_build, no_test, prefix, prepare_only,
              work_deb):
    """deb --arch: the profile's packages cross-built for target.arch in
    their own build chroot (the target added as a foreign architecture,
    Debian's crossbuild-essential), linted, and shown under qemu-user."""
    if full:
        die("deb --arch %s --full: not supported. Debian's llvm-19-dev and libclang-19-dev "
            "are not Multi-Arch: same, so one build chroot cannot hold the build "
            "machine's LLVM (for Mesa's compilers) and the target's (for llvmpipe, "
            "radeonsi, rusticl): build the full package natively on %s"
            % (target.arch, target.arch))
    if check:
        die("deb --arch %s --check: a cross build cannot run the target's tests "
            "(nocheck); 'bin/mesa-fork test --arch %s' runs them under qemu"
            % (target.arch, target.arch))
    conf = fork.conf["deb"]
    suite = conf["suite"]
    profile = fork.conf["debsrc"]["profile"]
    prefix = target.prefix(prefix)
    if not no_test and not prepare_only:
        cross.require_host_tools(target, guest=False)
        if not os.path.exists(os.path.join(prefix, "bin", "mesa-fork-vkcheck")):
            die("deb --arch %s: no %s; run 'bin/mesa-fork install --arch %s' first, or pass "
                "--prefix (or --no-test)" % (target.arch, rel(os.path.join(
                    prefix, "bin", "mesa-fork-vkcheck")), target.arch))
    mirror, _ = apt.debian_mirror(apt.os_codename())
    work_dirs(fork, work_deb)
    if no_build:
        changes, took = last_build(fork, work_deb)
        print("deb: the %s build of %s, %s" % (target.arch, rel(changes), fmt_time(took)))
    else:
        ccache = os.path.join(fork.work, "ccache-deb")
        src = os.path.join(work_deb, "src")
        remove_owned(src)
        debian.debsrc(fork, output=src)
        dsc = os.path.join(src, "%s_%s.dsc" % (fork.conf["base"]["package"],
                                               debian_version(fork.conf)))
        build = Chroot(os.path.join(fork.work, "chroot", "%s-build-%s" % (suite, target.arch)),
                       [(work_deb, INSIDE), (ccache, CCACHE_INSIDE)])
        pkgs = conf["build_packages"].split() + \
            conf["cross_build_packages"].replace("{arch}", target.arch).split()
        build.ensure(suite, "buildd",
                     deb_sources(fork, mirror, [suite, suite + "-updates", conf["backports"]]),
                     pkgs, fork.host_arch, foreign=[target.arch])
        with build.mounted():
            changes, took = build_packages(fork, build, work_deb, dsc, profile, False, jobs,
                                           host_arch=target.arch, prepare_only=prepare_only)
            if prepare_only:
                print("deb: build chroot %s ready, build dependencies installed; not built "
                      "(--prepare-only)" % rel(build.root))
                return
            print()
            print("cross-built for %s with profiles cross,nocheck,%s in %s:"
                  % (target.arch, profile, fmt_time(took)))
            for d in sorted(glob.glob(os.path.join(os.path.dirname(changes), "*.deb"))):
                print("  %-60s %8d KiB" % (os.path.basename(d), os.path.getsize(d) // 1024))
            print()
            lint(build, work_deb, changes, dsc)
        with open(os.path.join(work_deb, "build", "build-time"), "w") as f:
            f.write("%.1f\n" % took)
    return show_and_judge(
        took, no_test, lambda: show_cross(fork, target, work_deb, changes, prefix),
        "%s build time %s (dpkg-buildpackage -B -a %s -Pcross,nocheck,%s)"
        % (target.arch, fmt_time(took), target.arch, profile),
        "a driver of the %s package" % target.arch)
