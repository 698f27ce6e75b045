# SPDX-License-Identifier: MIT
"""The alternate-ICD prefix: `mesa-fork install` (the drivers, drm-shims, ICD
manifests with absolute library paths, env.sh and our programs, then each
driver shown working; with --destdir, staged for a package) and `mesa-fork
run` (a command on the fork's drivers, refused when another driver loaded)."""

import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

from . import build, cross, deps, distro, guest, series, sources, uapi
from .config import OLD_ICD_DIR, PREFIX_ICD_DIR, driver_info_tag, names_release, parse_arches
from .proc import die, rel, run, step, write_if_changed

# The fork only runs when asked to (VK_DRIVER_FILES, VK_ADD_DRIVER_FILES,
# VK_LAYER_PATH), whatever the prefix: its manifests never sit where the
# Vulkan loader looks by itself. On Linux the loader reads the driver
# manifests in <dir>/vulkan/icd.d and the layer manifests in
# <dir>/vulkan/explicit_layer.d (and implicit_layer.d) for each <dir> of
# $XDG_CONFIG_HOME (~/.config), $XDG_CONFIG_DIRS (/etc/xdg), SYSCONFDIR and
# EXTRASYSCONFDIR (/usr/local/etc, /etc), $XDG_DATA_HOME (~/.local/share)
# and $XDG_DATA_DIRS (/usr/local/share:/usr/share): Khronos'
# Vulkan-Loader, docs/LoaderDriverInterface.md "Driver Discovery on Linux"
# and docs/LoaderLayerInterface.md "Linux Layer Discovery". A prefix of
# ~/.local, /usr/local or /usr puts <prefix>/share on that list, so
# <prefix>/share/vulkan/icd.d (where earlier installs wrote them)
# made every Vulkan program load the fork there and list each GPU twice.
# <prefix>/share/mesa-fork/ ends in no "vulkan/" directory for any prefix.
LAYER_DIR = os.path.join("share", "mesa-fork", "explicit_layer.d")
OLD_LAYER_DIR = os.path.join("share", "vulkan", "explicit_layer.d")


def icd_dir(prefix):
    return os.path.join(prefix, PREFIX_ICD_DIR)


def icd_json(prefix, drv):
    return os.path.join(icd_dir(prefix), "mesa_fork_%s_icd.json" % drv)


def layer_dir(prefix):
    """Where the client's meson.build installs VK_LAYER_MESAFORK_synctrace's
    manifest: VK_LAYER_PATH names it to use the layer."""
    return os.path.join(prefix, LAYER_DIR)


def staged(destdir, path):
    """Where a file of the final prefix is written: under destdir, as make's
    and meson's DESTDIR do (destdir + path), or at path itself."""
    return os.path.join(destdir, path.lstrip(os.sep)) if destdir else path


def shim_lib(prefix, conf, drv):
    return os.path.join(prefix, "lib", "mesa-fork", "drm-shim",
                        os.path.basename(conf["drivers"][drv].split()[1]))


def shim_env_pairs(conf, drv):
    """The environment config/fork.ini [shim] gives drv's drm-shim."""
    return dict(kv.split("=", 1) for kv in conf["shim"].get(drv, "").split())


def fork_env(prefix, conf, shim=None, base=None, add=False):
    """base (default: this process's environment) with the loader pointed at
    the fork's ICDs in prefix (with add, next to the system's, through
    VK_ADD_DRIVER_FILES), the prefix's programs first on PATH, and with shim,
    that driver's drm-shim preloaded."""
    env = dict(base if base is not None else os.environ)
    files = ":".join(icd_json(prefix, d) for d in conf["drivers"])
    if add:
        env["VK_ADD_DRIVER_FILES"] = files
    else:
        env["VK_DRIVER_FILES"] = files
        env["VK_ICD_FILENAMES"] = files
    env["PATH"] = os.pathsep.join([os.path.join(prefix, "bin")] +
                                  [p for p in env.get("PATH", "").split(os.pathsep) if p])
    if shim:
        lib = shim_lib(prefix, conf, shim)
        if any(c.isspace() for c in lib):
            # LD_PRELOAD splits at blanks and has no escape: name the shim by
            # its file name, which ld.so finds through LD_LIBRARY_PATH.
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [os.path.dirname(lib)] +
                [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
            lib = os.path.basename(lib)
        env["LD_PRELOAD"] = (lib + " " + env.get("LD_PRELOAD", "")).strip()
        for k, v in shim_env_pairs(conf, shim).items():
            env.setdefault(k, v)
    return env


def env_script(prefix, files, add):
    """A POSIX sh script to source: the fork's ICDs (only them, or with add
    next to the system's), the prefix's programs on PATH, and a function
    mesa_fork_off that puts back what the script changed. Every path is
    quoted: a prefix may hold a space, a quote or a $."""
    return env_script_text(
        shlex.quote(files), shlex.quote(os.path.join(prefix, "bin")), add,
        shlex.quote(os.path.join(prefix, "share", "mesa-fork",
                                 "env-add.sh" if add else "env.sh")))


def env_script_text(files, bindir, add, shown, preamble="", cleanup=()):
    """env_script's text with files (VK_DRIVER_FILES) and bindir given as
    shell words, quoted already; shown: the file as its comment names it.
    preamble runs first (a bundle's finds its directory); cleanup names the
    preamble's variables, unset at the end."""
    saved = ["PATH"] + (["VK_ADD_DRIVER_FILES"] if add else
                        ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"])
    lines = ["# Source this file to run Vulkan applications on mesa-fork's drivers%s,"
             % (", next to\n# the system's (Vulkan loader 1.3.234 or later)" if add else " only"),
             "# with its programs on PATH; mesa_fork_off undoes it:",
             "#   . %s" % shown, "",
             "# Sourced again (or the other of env.sh and env-add.sh): undo the first.",
             "if command -v mesa_fork_off >/dev/null 2>&1; then mesa_fork_off; fi", ""]
    if preamble:
        lines += [preamble.rstrip("\n"), ""]
    for var in saved:
        lines.append('[ -n "${%s+set}" ] && _mesa_fork_old_%s=$%s || unset _mesa_fork_old_%s'
                     % (var, var, var, var))
        lines.append('[ -n "${%s+set}" ] && _mesa_fork_set_%s=1 || _mesa_fork_set_%s=' % (
            var, var, var))
    if add:
        lines.append("export VK_ADD_DRIVER_FILES=%s" % files)
    else:
        lines.append("export VK_DRIVER_FILES=%s" % files)
        lines.append("# Vulkan loaders before VK_DRIVER_FILES existed read this one.")
        lines.append("export VK_ICD_FILENAMES=%s" % files)
    lines.append('export PATH=%s"${PATH:+:$PATH}"' % bindir)
    if cleanup:
        lines.append("unset %s" % " ".join(cleanup))
    lines += ["", "mesa_fork_off() {"]
    for var in saved:
        lines.append('    if [ -n "$_mesa_fork_set_%s" ]; then export %s="$_mesa_fork_old_%s"; '
                     'else unset %s; fi' % (var, var, var, var))
        lines.append("    unset _mesa_fork_old_%s _mesa_fork_set_%s" % (var, var))
    lines += ["    unset -f mesa_fork_off", "}", ""]
    return "\n".join(lines)


def shims_file(conf):
    """share/mesa-fork/shims, read by mesa-fork-check: per driver, its
    drm-shim's file name (in lib/mesa-fork/drm-shim) and the environment
    that makes it look like the hardware we target."""
    lines = ["# driver, drm-shim (in lib/mesa-fork/drm-shim), environment; "
             "read by mesa-fork-check"]
    for drv, paths in conf["drivers"].items():
        lines.append(" ".join([drv, os.path.basename(paths.split()[1])] +
                              ["%s=%s" % kv for kv in shim_env_pairs(conf, drv).items()]))
    return "\n".join(lines) + "\n"


def built_api_version(icd_dir, drv):
    """The Vulkan version of Mesa's own ICD manifest for drv, built next to
    the driver."""
    for path in glob.glob(os.path.join(icd_dir, "%s_icd.*.json" % drv)):
        with open(path) as f:
            return json.load(f)["ICD"]["api_version"]
    die("install: Mesa's %s_icd manifest is not built; run 'bin/mesa-fork build'" % drv)


def install_file(src, dst):
    """Copies src to dst (a staged path), atomically."""
    if not os.path.exists(src):
        die("install: %s is not built; run 'bin/mesa-fork build'" % src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".tmp"
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


ARCH_FILE = os.path.join("share", "mesa-fork", "arch")
# Where install --from-bundle keeps the bundle's MANIFEST and SOURCES.
BUNDLE_DIR = os.path.join("share", "mesa-fork", "bundle")


def prefix_arch(prefix):
    """The Debian architecture install put into prefix, or None."""
    try:
        with open(os.path.join(prefix, ARCH_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def old_manifests(prefix, destdir=None):
    """The manifests an install before share/mesa-fork/ wrote into
    share/vulkan/, where the loader finds them by itself: those named as
    ours whose library is in the prefix's lib/mesa-fork/. Another file of
    the same name (another program's) is not ours and stays."""
    ours = os.path.join(prefix, "lib", "mesa-fork") + os.sep
    found = []
    for pattern, key in ((os.path.join(OLD_ICD_DIR, "mesa_fork_*_icd.json"), "ICD"),
                         (os.path.join(OLD_LAYER_DIR, "VkLayer_mesafork_synctrace.json"),
                          "layer")):
        for path in sorted(glob.glob(staged(destdir, os.path.join(prefix, pattern)))):
            try:
                with open(path) as f:
                    lib = json.load(f)[key]["library_path"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if isinstance(lib, str) and lib.startswith(ours):
                found.append(path)
    return found


def remove_old_manifests(prefix, destdir=None):
    """Removes old_manifests(), saying so: with them the fork would stay
    the default of every Vulkan program that searches there."""
    for path in old_manifests(prefix, destdir):
        os.unlink(path)
        print("install: removed %s: an earlier install wrote it where the Vulkan loader "
              "looks by itself (the fork's manifests are in %s now)"
              % (path, os.path.join(prefix, "share", "mesa-fork")))


def check_prefix(prefix):
    """A prefix every file the install writes can name: PATH and
    VK_DRIVER_FILES separate their entries with ':'."""
    if ":" in prefix:
        die("install: the prefix %s holds a ':', which separates entries of PATH and "
            "VK_DRIVER_FILES; choose another" % prefix)


def install_prefix(prefix, build_dir, conf, upstream=False, arch=None, destdir=None):
    """Drivers, drm-shims, ICD manifests, env.sh and env-add.sh into prefix;
    returns the manifests. upstream: the build's base is Mesa's release
    tarball. destdir: the files go under destdir + prefix, and every path
    written inside them is prefix's (a package's staging directory)."""
    check_prefix(prefix)
    libdir = os.path.join(prefix, "lib", "mesa-fork")
    icds = []
    for drv, paths in conf["drivers"].items():
        icd, shim = [os.path.join(build_dir, p) for p in paths.split()]
        dst = os.path.join(libdir, os.path.basename(icd))
        install_file(icd, staged(destdir, dst))
        install_file(shim, staged(destdir, shim_lib(prefix, conf, drv)))
        doc = {"file_format_version": "1.0.1",
               "ICD": {"library_path": dst,
                       "api_version": built_api_version(os.path.dirname(icd), drv)}}
        write_if_changed(staged(destdir, icd_json(prefix, drv)),
                         json.dumps(doc, indent=4) + "\n")
        icds.append(icd_json(prefix, drv))
    files = ":".join(icds)
    share = os.path.join(prefix, "share", "mesa-fork")
    write_if_changed(staged(destdir, os.path.join(share, "env.sh")),
                     env_script(prefix, files, add=False))
    write_if_changed(staged(destdir, os.path.join(share, "env-add.sh")),
                     env_script(prefix, files, add=True))
    write_if_changed(staged(destdir, os.path.join(share, "release")),
                     driver_info_tag(conf, upstream) + "\n")
    write_if_changed(staged(destdir, os.path.join(share, "shims")), shims_file(conf))
    # What a bundle installed here before said of itself is no longer so.
    for name in ("MANIFEST", "SOURCES"):
        old = staged(destdir, os.path.join(prefix, BUNDLE_DIR, name))
        if os.path.exists(old):
            os.unlink(old)
    if arch:
        write_if_changed(staged(destdir, os.path.join(prefix, ARCH_FILE)), arch + "\n")
    remove_old_manifests(prefix, destdir)
    return icds


def list_devices(prefix, env, wrapper=()):
    """The Vulkan devices mesa-fork-vkcheck --list sees in env, one dict
    each, and its completed process. wrapper runs a cross build's program."""
    exe = os.path.join(prefix, "bin", "mesa-fork-vkcheck")
    if not os.path.exists(exe):
        die("%s is not installed; run 'bin/mesa-fork install'" % exe)
    # A hung device must not hang the verb: the caller's main() turns the
    # timeout into one line.
    r = subprocess.run(list(wrapper) + [exe, "--list"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", timeout=300)
    devs = []
    for line in r.stdout.splitlines():
        with contextlib.suppress(ValueError):
            devs.append(json.loads(line))
    return devs, r


VULKANINFO_FIELDS = ("deviceName", "deviceType", "apiVersion", "driverID", "driverName",
                     "driverInfo")


def vulkaninfo_device_lines(env, vulkaninfo=None, command=("vulkaninfo",)):
    """Device and driver fields from `vulkaninfo --summary`. The summary shows
    driver fields only for Vulkan 1.2 devices; for older ones (panvk on
    Valhall reports 1.1) they come from the full VkPhysicalDeviceDriverProperties.
    vulkaninfo(args) returns its stdout; by default command runs here, in env."""
    if vulkaninfo is None:
        def vulkaninfo(args):
            return subprocess.run(list(command) + args, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, errors="replace",
                                  timeout=300).stdout
    fields = {}
    for line in vulkaninfo(["--summary"]).split("Devices:", 1)[-1].splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*(.*)", line)
        if m and m.group(1) in VULKANINFO_FIELDS:
            fields.setdefault(m.group(1), m.group(2).strip())
    if "driverInfo" not in fields:
        sect = vulkaninfo([]).split("VkPhysicalDeviceDriverProperties", 1)[-1]
        for line in sect.splitlines()[:8]:
            m = re.match(r"\s*(driverID|driverName|driverInfo)\s*=\s*(.*)", line)
            if m:
                fields.setdefault(m.group(1), m.group(2).strip() + "  (full vulkaninfo)")
    return ["%-10s = %s" % (k, fields[k]) for k in VULKANINFO_FIELDS if k in fields]


def demo_drivers(fork, prefix):
    """Show each installed driver working: on its device if present, else on
    its drm-shim (a cross build's under qemu-user). Returns whether every
    one did."""
    conf = fork.conf
    vkcheck = os.path.join(prefix, "bin", "mesa-fork-vkcheck")
    wrapper = fork.exe_wrapper
    real, _ = list_devices(prefix, fork_env(prefix, conf), wrapper)
    ok_all = True
    for drv in conf["drivers"]:
        mine = [d for d in real if d["driver_kind"] == drv]
        shim = None if mine else drv
        env = fork_env(prefix, conf, shim=shim)
        where = "real device" if mine else "drm-shim (%s)" % " ".join(
            "%s=%s" % kv for kv in shim_env_pairs(conf, drv).items())
        if fork.cross:
            where += ", %s" % cross.describe(fork)
        print("---- %s on %s" % (drv, where))
        lines = vulkaninfo_device_lines(env, command=cross.wrap(fork, ["vulkaninfo"]))
        print("\n".join("  vulkaninfo: " + line for line in lines))
        shown = any(names_release(conf, line) for line in lines)
        c = subprocess.run(wrapper + [vkcheck, "--validate"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        for line in c.stdout.splitlines():
            print("  vkcheck: " + line)
        good = shown and c.returncode == 0
        if good:
            print("  => OK: the fork's driver recorded and submitted compute work%s" % (
                " (a drm-shim executes nothing, so the data is not checked)" if shim else ""))
        else:
            print("  => FAILED (vulkaninfo fork device: %s, vkcheck exit %d)"
                  % (shown, c.returncode))
        ok_all &= good
    return ok_all


def without_apt(fork, tarball, asahi_uapi):
    """install --no-deps up to the tree: no apt, no dpkg, Mesa's release
    tarball as the base."""
    b = fork.conf["base"]
    sources.require_tarball(fork, tarball)
    print("install --no-deps: no apt: nothing is installed and no package source is "
          "touched; the build dependencies must be there (docs/build-deps.md)")
    print("install --no-deps: the base is Mesa %s's release tarball with Debian's security "
          "fixes (%s) and none of %s's other patches"
          % (b["upstream_version"], ", ".join(sources.security_patches(fork)), b["version"]))
    with step("check build tools"):
        missing = distro.missing_build_tools(build.build_env(fork.top))
        if missing:
            osr = distro.os_release()
            col = distro.column_for(osr, distro.deps_table(fork.top))
            hint = ("; %s names them: %s %s" % (distro.DEPS_DOC, col.install,
                                                " ".join(col.packages))
                    if col else "; see %s" % distro.DEPS_DOC)
            die("install --no-deps: missing: %s%s" % (", ".join(missing), hint))
    print("install: asahi uAPI header: " + uapi.use_local(fork, asahi_uapi))
    sources.fetch_without_apt(fork, tarball)


def install(fork, prefix=None, no_build=False, no_demo=False, no_deps=False, tarball=None,
            asahi_uapi=None, prepare_only=False, arch=None, assertions=False, destdir=None):
    """Install the drivers as an alternate ICD into a prefix and show them working."""
    arches = parse_arches(fork, arch)
    if prefix and len(arches) > 1:
        die("install: --prefix names one prefix; install one --arch at a time with it")
    if destdir is not None:
        if not prefix:
            die("install: --destdir DIR stages the files for the prefix they will have; "
                "name it with --prefix (for example /opt/mesa-fork)")
        if not destdir:
            die("install: --destdir names a directory")
        destdir = os.path.abspath(destdir)
    if prefix:
        check_prefix(os.path.abspath(prefix))
    if no_build and (no_deps or tarball or prepare_only or assertions):
        die("install: --no-build installs what is built; it takes no --no-deps, "
            "--tarball, --prepare-only or --assertions")
    forks = [fork.for_arch(a) for a in arches]
    if no_build:
        for f in forks:
            check_built_tag(f)
    if not no_build:
        if no_deps:
            without_apt(fork, tarball, asahi_uapi)
            for f in forks:
                if f.cross:
                    cross.require_host_tools(f)
        else:
            deps.ensure(fork, arch=",".join(arches))
            print("install: asahi uAPI header: " + (
                uapi.use_local(fork, asahi_uapi) if asahi_uapi else
                uapi.fetch(fork.work, fork.conf, distro.os_release().codename)))
            if tarball:
                sources.fetch(fork, tarball)
            else:
                sources.fetch_chosen(fork)
        series.prepare(fork)
        if prepare_only:
            print("install: --prepare-only: %s is ready; 'bin/mesa-fork build' compiles "
                  "it, 'bin/mesa-fork install --no-build' installs it" % rel(fork.tree))
            return
        for f in forks:
            build.build(f, assertions=assertions)
    failed = []
    for f in forks:
        chosen = f.prefix(prefix)
        # A staged prefix holds nothing here: later verbs keep theirs.
        if prefix and not destdir:
            f.remember_prefix(chosen)
        if not install_arch(f, chosen, no_demo, destdir):
            failed.append(f.arch)
    if failed:
        die("install: a fork driver did not come up, on hardware or on its drm-shim (%s)"
            % ", ".join(failed))


def check_built_tag(fork):
    """install --no-build installs what is built: never drivers a bundle
    run killed halfway left with its own driverInfo tag (bundle.py)."""
    try:
        with open(os.path.join(fork.build, ".mesa-fork-options")) as f:
            opts = json.load(f)
    except (OSError, ValueError):
        return
    want = "-Dvulkan-driver-info=" + driver_info_tag(fork.conf, sources.uses_upstream(fork))
    got = [o for o in opts if o.startswith("-Dvulkan-driver-info=")]
    if got and got[-1] != want:
        die("install --no-build: the %s build holds drivers built with %s, not install's "
            "%s (a 'bundle' stopped halfway?); run 'bin/mesa-fork install' without "
            "--no-build" % (fork.arch, got[-1], want))


def install_arch(fork, prefix, no_demo, destdir=None):
    """Installs fork.arch's build into prefix (staged under destdir) and
    shows it working."""
    env = build.build_env(fork.top)
    # meson install reads DESTDIR from the environment: only --destdir
    # stages, for our files and the client's alike.
    env.pop("DESTDIR", None)
    into = prefix if not destdir else "%s (staged in %s)" % (prefix, destdir)
    with step("install %s into %s" % (fork.arch, into)):
        icds = install_prefix(prefix, fork.build, fork.conf, sources.uses_upstream(fork),
                              fork.arch, destdir)
    with step("install client into %s/bin" % into):
        build.build_client(fork, env, prefix)
        run(["meson", "install", "-C", fork.client_build, "--quiet"] +
            (["--destdir", destdir] if destdir else []), env=env, quiet=True)
    if destdir:
        print()
        print("Staged the %s build for %s in %s: every path inside the files is %s's; "
              "a package installs the tree under %s as it is. Nothing to show working "
              "until it is installed." % (fork.arch, prefix, destdir, prefix, destdir))
        return True
    if fork.cross and "guest_kernel" in fork.conf["arch." + fork.arch]:
        guest.ensure(fork)
    print()
    if fork.cross:
        print("Installed the %s build (%s). On this machine its programs run under "
              "qemu-user:" % (fork.arch, cross.describe(fork)))
        print("    bin/mesa-fork run --prefix %s --shim DRIVER -- vulkaninfo --summary"
              % shlex.quote(rel(prefix)))
        print("On an %s machine, build there: bin/mesa-fork install" % fork.arch)
    else:
        print("Installed. To use the fork's drivers and probes in this shell "
              "(mesa_fork_off undoes it; env-add.sh keeps the system's drivers too):")
        print("    . %s" % shlex.quote(os.path.join(prefix, "share", "mesa-fork", "env.sh")))
        print("or for one command:")
        print("    VK_DRIVER_FILES=%s \\" % shlex.quote(":".join(icds)))
        print("        vulkaninfo --summary")
        print("(Vulkan loaders older than 1.3.234 read VK_ICD_FILENAMES instead; env.sh "
              "sets both.)")
        print("    bin/mesa-fork run [--add] -- CMD    runs CMD (a probe by name, too) and "
              "refuses if the fork did not load.")
    if no_demo:
        return True
    print()
    return demo_drivers(fork, prefix)


def require_manifests(prefix, conf, verb):
    """Dies, saying what to do, unless prefix holds the fork's manifests
    where this version looks for them."""
    missing = [icd_json(prefix, d) for d in conf["drivers"]
               if not os.path.exists(icd_json(prefix, d))]
    if not missing:
        return
    old = (" (an earlier install put the manifests in %s, where every Vulkan program "
           "loads them)" % os.path.join(prefix, OLD_ICD_DIR)) if old_manifests(prefix) else ""
    die("%s: %s has no %s%s; install again: bin/mesa-fork install --prefix %s"
        % (verb, rel(prefix), missing[0], old, shlex.quote(prefix)))


def same_gpu_twice(devices, ours):
    """(another driver's device, the fork's) pairs of one GPU: the same
    deviceUUID (VkPhysicalDeviceIDProperties; all zero: unknown) listed by
    a driver that is not the fork's, as when --add puts the fork next to the
    distribution's Mesa."""
    unknown = "0" * 32
    return [(d, o) for d in devices if d not in ours for o in ours
            if d.get("uuid") and d.get("uuid") != unknown and d.get("uuid") == o.get("uuid")]


def run_command(fork, cmd, prefix=None, shim=None, arch=None, add=False):
    """Run CMD against the fork's ICDs; fail loudly if any other driver loaded
    (with add, next to the system's drivers: fail if none is the fork's)."""
    if arch and prefix:
        die("run: --arch picks the prefix of that architecture's install; --prefix DIR "
            "says which one itself")
    fork = fork.for_arch(arch) if arch else fork
    prefix = fork.prefix(prefix)
    # A prefix knows its architecture: an arm64 one runs under qemu-user here.
    installed = prefix_arch(prefix)
    if installed and installed != fork.arch:
        fork = fork.for_arch(installed)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        die("run: usage: mesa-fork run [--prefix DIR | --arch ARCH] [--shim DRIVER] "
            "-- CMD [ARGS]")
    if shim and shim not in fork.drivers:
        die("run: the %s build has no %s driver (it has %s)" % (fork.arch, shim,
                                                               ", ".join(fork.drivers)))
    env = fork_env(prefix, fork.conf, shim=shim, add=add)
    devices, _ = list_devices(prefix, env, fork.exe_wrapper)
    for d in devices:
        print("run: device %-32s driver %-14s %s" % (d["name"], d["driver"], d["info"]))
    if not devices:
        require_manifests(prefix, fork.conf, "run")
        die("run: refusing: the Vulkan loader found no device with the ICDs in %s; "
            "without the GPU, pass --shim DRIVER to use a drm-shim" % rel(prefix))
    ours = [d for d in devices if names_release(fork.conf, d["info"])]
    twins = same_gpu_twice(devices, ours)
    if twins:
        other, mine = twins[0]
        die("run: refusing: %s is listed twice, by %s's driver and by %s (%s), with one "
            "deviceUUID (%s); a program may take the other one (llama.cpp's Vulkan backend "
            "keeps the first device of a UUID): %s"
            % (mine["name"], fork.release, other["driver"], other["info"], mine["uuid"],
               "run without --add" if add else "check the prefix's manifests"))
    if add and not ours:
        die("run: refusing: none of the devices above is %s's; check the prefix "
            "(--add needs a Vulkan loader that reads VK_ADD_DRIVER_FILES, 1.3.234 or "
            "later)" % fork.release)
    if not add and len(ours) != len(devices):
        die("run: refusing: the Vulkan loader picked a driver that is not %s "
            "(see above); check VK_DRIVER_FILES and the prefix" % fork.release)
    sys.stdout.flush()
    cmd = cross.wrap(fork, cmd, prefix)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        die("run: cannot run %s: %s" % (cmd[0], e.strerror))
