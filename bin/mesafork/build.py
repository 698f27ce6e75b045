# SPDX-License-Identifier: MIT
"""meson and ninja: `mesa-fork build` (the three Vulkan drivers, their
drm-shims and unit tests in .work/build/mesa, then our clients and probes in
.work/build/client) and `mesa-fork bisect` (every commit of the series)."""

import json
import os
import re
import shutil
import subprocess

from . import apt, cross, series, sources, uapi, upstreaming
from .config import BASE_TAG, BRANCH, driver_info_tag, parse_arches
from .proc import (capture, check_owned, die, make_dirs, rel, remove_owned, run, step,
                  write_if_changed)


class ConfigureError(Exception):
    """meson could not (re)generate a build directory; args[0] is its output."""


def build_env(top):
    env = dict(os.environ)
    # ccache's compiler links first; then the user's PATH as it is, the
    # system's directories only after it. Mesa's generators still get
    # Debian's python3 (python3-mako & co.), not a pyenv or venv interpreter
    # that comes first on PATH: meson's native file names it.
    env["PATH"] = ":".join(["/usr/lib/ccache"] + [p for p in env.get("PATH", "").split(":") if p] +
                           ["/usr/bin", "/bin", "/usr/sbin", "/sbin"])
    env.setdefault("CCACHE_BASEDIR", top)
    env.setdefault("CCACHE_MAXSIZE", "10G")
    env.setdefault("CCACHE_NOHASHDIR", "1")
    env.pop("PYTHONHOME", None)
    env.pop("PYTHONPATH", None)
    return env


def write_native_file(d, extra=(), name="native.ini"):
    """meson's native file: Debian's python3, and extra [binaries] lines."""
    make_dirs(d)
    path = os.path.join(d, name)
    text = "[binaries]\npython = '/usr/bin/python3'\npython3 = '/usr/bin/python3'\n"
    text += "".join(line + "\n" for line in extra)
    write_if_changed(path, text)
    return path


def machine_files(fork, env):
    """meson's machine-file arguments for fork.arch: the native file, and for
    a cross build the cross file, its sysroot and the native tools."""
    d = os.path.dirname(fork.build)
    if not fork.cross:
        return ["--native-file", write_native_file(d, llvm_config_entry(fork))]
    cross.ensure_sysroot(fork)
    build_native_tools(fork, env)
    native = write_native_file(d, cross.native_file_entries(fork),
                               "native-for-%s.ini" % fork.arch)
    return ["--native-file", native, "--cross-file", cross.cross_file(fork)]


def llvm_config_entry(fork):
    """The llvm-config of the LLVM `deps` chose from what apt offers
    (apt.llvm_version), for meson's native file: meson would otherwise take
    the newest llvm-config installed, which may be an LLVM without the
    SPIR-V translator Mesa needs. Nothing without apt (install --no-deps):
    meson searches as it does."""
    if not shutil.which("apt-cache"):
        return []
    v = apt.llvm_version(fork, required=False)
    path = "/usr/bin/llvm-config-%s" % v
    return ["llvm-config = '%s'" % path] if v and os.path.exists(path) else []


def uapi_include_options(fork):
    """<drm/asahi_drm.h> for Honeykrisp, unpacked by deps (uapi.py): the
    pinned package's drm/ headers before the system's, so that a host with
    its own asahi_drm.h still builds against the pinned one; the rest of
    the package's headers (newer linux/ ones drm.h may need) after them.
    With --asahi-uapi DIR, only DIR, after the system's."""
    first = uapi.first_dir(fork.work)
    inc = ["-idirafter" + uapi.include_dir(fork.work)]
    if os.path.isdir(first) and not uapi.linked(fork.work):
        inc.insert(0, "-I" + first)
    return ["-Dc_args=" + " ".join(inc), "-Dcpp_args=" + " ".join(inc)]


def override(opts, extra):
    """opts with each -Dname=value of extra in place of opts' own."""
    names = option_names(extra)
    return [o for o in opts if not (o.startswith("-D") and o[2:].split("=", 1)[0] in names)] + \
        list(extra)


def meson_options(fork, assertions=False):
    opts = (fork.conf["meson"]["options"].split() +
            ["-Dvulkan-driver-info=%s" % driver_info_tag(fork.conf,
                                                         sources.uses_upstream(fork))] +
            uapi_include_options(fork))
    return override(opts, fork.conf["meson"]["assertions"].split()) if assertions else opts


def checks_build(fork):
    return os.path.join(fork.work, "build", "mesa-checks")


def build_checks(fork):
    """The assertion build of one driver and its drm-shim
    (config/fork.ini [meson] checks_options) in .work/build/mesa-checks, for
    the tests that need assertions compiled in. Returns the paths of its
    driver library and drm-shim."""
    env = build_env(fork.top)
    bdir = checks_build(fork)
    m = fork.conf["meson"]
    opts = override(meson_options(fork), m["checks_options"].split())
    configure(bdir, fork.tree, opts, machine_files(fork, env), env)
    paths = fork.conf["drivers"][m["checks_driver"]].split()
    with step("ninja: the assertion build of %s and its drm-shim (%s)"
              % (m["checks_driver"], rel(bdir))):
        run(["ninja", "-C", bdir] + paths, env=env, quiet=True)
    return [os.path.join(bdir, p) for p in paths]


def option_names(opts):
    """The names of meson options given as -Dname=value."""
    return {o[2:].split("=", 1)[0] for o in opts if o.startswith("-D")}


def configure(build, src, opts, machine, env):
    """Set up the build directory with exactly opts: meson keeps every option
    it was ever given, so when an option is no longer in the list the
    directory is set up anew (ccache makes the rebuild cheap)."""
    stamp = os.path.join(build, ".mesa-fork-options")
    old = None
    if os.path.exists(os.path.join(build, "build.ninja")) and os.path.exists(stamp):
        with open(stamp) as f:
            old = json.load(f)
    if old == opts:
        return
    dropped = sorted(option_names(old) - option_names(opts)) if old is not None else []
    if old is not None and not dropped:
        with step("meson configure (options changed)"):
            run(["meson", "configure", build] + opts, env=env, quiet=True)
    else:
        if os.path.exists(build):
            check_owned(build)
            why = ("%s no longer in config/fork.ini" % ", ".join("-D" + d for d in dropped)
                   if dropped else "options unknown")
            with step("remove %s (%s)" % (rel(build), why)):
                remove_owned(build)
        make_dirs(build)
        with step("meson setup %s" % rel(build)):
            run(["meson", "setup", build, src] + machine + opts, env=env, quiet=True)
    with open(stamp, "w") as f:
        json.dump(opts, f)


def _introspect(build, what, env):
    r = subprocess.run(["meson", "introspect", what, build], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise ConfigureError(r.stdout)
    return json.loads(r.stdout)


def build_targets(build, conf, env):
    """Ninja targets: ICDs with their manifests, drm-shims and the executables
    of the unit suites we run. Raises ConfigureError when meson fails to
    regenerate the build directory."""
    # Introspection describes the last generated build.ninja: regenerate it
    # first, or tests added since (a pull, another commit) are missed.
    r = capture(["ninja", "-C", build, "build.ninja"], env=env)
    if r.returncode != 0:
        raise ConfigureError(r.stdout)
    targets = []
    for paths in conf["drivers"].values():
        targets += paths.split()
    suites = set(conf["meson"]["test_suites"].split())
    tests = _introspect(build, "--tests", env)
    manifests = {drv + "_icd" for drv in conf["drivers"]}
    by_id = {}
    for t in _introspect(build, "--targets", env):
        by_id[t["id"]] = t
        # Mesa's ICD manifest of each driver (not the devenv one): install
        # copies its api_version.
        if t["name"] in manifests:
            targets += [os.path.relpath(f, build) for f in t["filename"]]
    for t in tests:
        if not suites & {s.split(":")[-1] for s in t["suite"]}:
            continue
        outs = [t["cmd"][0]] if t["cmd"][0].startswith(build) else []
        for dep in t.get("depends", []):
            if dep in by_id:
                outs += by_id[dep]["filename"]
        targets += [os.path.relpath(o, build) for o in outs if o.startswith(build)]
    seen = set()
    return [t for t in targets if not (t in seen or seen.add(t))]


def ccache_summary(env):
    r = subprocess.run(["ccache", "-s"], env=env, stdout=subprocess.PIPE, text=True)
    hits = re.search(r"Hits:\s+(\d+)\s*/\s*(\d+)", r.stdout)
    if hits:
        return "ccache %s of %s compilations were cache hits" % hits.groups()
    return "ccache: " + " ".join(r.stdout.split()[:8])


def build_client(fork, env, prefix=None):
    """Our programs (top-level meson.build), configured for prefix."""
    prefix = prefix or fork.default_prefix
    opts = ["-Dprefix=" + prefix, "-Dfork_prefix=" + prefix, "-Dfork_build=" + fork.build,
            "-Dvma_include=" + (sources.vma_include(fork) if sources.has_vma(fork) else ""),
            "-Ddrivers=" + ",".join(fork.drivers)]
    if not os.path.exists(os.path.join(fork.client_build, "build.ninja")):
        machine = ([] if not fork.cross else
                   ["--cross-file", cross.cross_file(fork)])
        run(["meson", "setup", fork.client_build, fork.top] + machine + opts, env=env,
            quiet=True)
    else:
        run(["meson", "configure", fork.client_build] + opts, env=env, quiet=True)
    run(["ninja", "-C", fork.client_build], env=env, quiet=True)


def build_native_tools(fork, env):
    """Makes the tools a cross build runs (mesa_clc, vtn_bindgen, asahi_clc)
    in the native build, configuring it first if needed."""
    host = fork.for_arch(fork.host_arch)
    tools = cross.native_tools(fork)
    # A native build set up already (an assertion build too) makes them.
    if not os.path.exists(os.path.join(host.build, "build.ninja")):
        configure(host.build, host.tree, meson_options(host), machine_files(host, env), env)
    with step("native tools for the %s build: %s" % (fork.arch, ", ".join(tools))):
        run(["ninja", "-C", host.build] + [os.path.relpath(p, host.build)
                                           for p in tools.values()], env=env, quiet=True)


def build(fork, jobs=0, assertions=False):
    """Configure and compile the three Vulkan drivers, their drm-shims and
    the tests; with assertions, an assertion build (not what users run)."""
    if not series.tree_is_prepared(fork):
        die("build: no Mesa tree; run 'bin/mesa-fork prepare' first")
    env = build_env(fork.top)
    if fork.cross:
        cross.require_host_tools(fork)
        print("build: %s" % cross.describe(fork))
    if assertions:
        print("build: an assertion build (%s), not the optimised one users run"
              % fork.conf["meson"]["assertions"])
    configure(fork.build, fork.tree, meson_options(fork, assertions),
              machine_files(fork, env), env)
    try:
        targets = build_targets(fork.build, fork.conf, env)
    except ConfigureError as e:
        print(e.args[0][-20000:])
        die("build: meson could not regenerate %s" % rel(fork.build))
    with step("ninja: %d targets for %s (ICDs and manifests, drm-shims, %s unit tests)" % (
            len(targets), fork.arch, fork.conf["meson"]["test_suites"])):
        run(["ninja", "-C", fork.build] + (["-j", str(jobs)] if jobs else []) + targets,
            env=env)
    with step("client and probes (top-level meson.build)"):
        build_client(fork, env)
    if shutil.which("ccache"):
        print("build: " + ccache_summary(env))


def build_arches(fork, jobs=0, arch=None, assertions=False):
    """Configure and compile the Vulkan drivers, their drm-shims and the tests,
    for each architecture asked (default: this machine's)."""
    for a in parse_arches(fork, arch):
        build(fork.for_arch(a), jobs, assertions)


def bisect_commit(fork, wt, bdir, native, opts, env):
    """Configures, builds and unit-tests the commit checked out in wt.
    Returns None, or (what it fails to do, the output)."""
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        r = capture(["meson", "setup", bdir, wt] + native + opts, env=env)
        if r.returncode != 0:
            return "configure", r.stdout
    try:
        targets = build_targets(bdir, fork.conf, env)
    except ConfigureError as e:
        return "configure", e.args[0]
    r = capture(["ninja", "-C", bdir] + targets, env=env)
    if r.returncode != 0:
        return "build", r.stdout
    cmd = ["meson", "test", "-C", bdir, "--no-rebuild", "--print-errorlogs"]
    for su in fork.conf["meson"]["test_suites"].split():
        cmd += ["--suite", su]
    r = capture(cmd, env=env)
    if r.returncode != 0:
        return "pass its unit tests", r.stdout
    return None


def bisect(fork, upstream=False):
    """Build every commit of the series (with upstream, of the merge-request
    branch) and run the unit suites (bisectability)."""
    if not series.tree_is_prepared(fork):
        die("bisect: run 'bin/mesa-fork prepare' first")
    env = build_env(fork.top)
    wt = os.path.join(fork.work, "bisect", "tree")
    bdir = os.path.join(fork.work, "bisect", "build")
    revs = upstreaming.upstream_revs(fork) if upstream else series.series_revs(fork)
    if not revs:
        die("bisect: branch %s has no commits above '%s'"
            % (upstreaming.UPSTREAM_BRANCH if upstream else BRANCH, BASE_TAG))
    native = ["--native-file", write_native_file(os.path.dirname(fork.build),
                                                 llvm_config_entry(fork))]
    # The options every commit knows: the series adds -Dvulkan-driver-info.
    opts = fork.conf["meson"]["options"].split() + uapi_include_options(fork)
    failed = None
    with series.scratch_worktree(fork, wt, revs[0]):
        for n, rev in enumerate(revs, 1):
            subject = series.git(fork, "log", "-1", "--format=%s", rev)
            with step("%d/%d %s" % (n, len(revs), subject)):
                series.git(fork, "checkout", "-q", "--detach", rev, cwd=wt)
                failed = bisect_commit(fork, wt, bdir, native, opts, env)
            if failed:
                failed = (subject,) + failed
                break
    if failed:
        subject, what, log = failed
        die("bisect: %s fails to %s:\n%s" % (subject, what, log[-3000:]))
    print("bisect: all %d commits build and pass the %s unit suites"
          % (len(revs), ", ".join(fork.conf["meson"]["test_suites"].split())))
