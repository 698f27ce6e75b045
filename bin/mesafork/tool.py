# SPDX-License-Identifier: MIT
"""Helpers for bin/mesa-fork: process running, apt, git, install layout."""

import argparse
import configparser
import contextlib
import datetime
import email.utils
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

# --------------------------------------------------------------------------
# output


def fmt_time(s):
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%.1fs" % s


@contextlib.contextmanager
def step(what):
    print("==> %s" % what, flush=True)
    t0 = time.monotonic()
    yield
    print("    %s (%s)" % (what.split(" (")[0], fmt_time(time.monotonic() - t0)), flush=True)


def die(msg):
    print("mesa-fork: error: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, cwd=None, env=None, quiet=False):
    """Run a command; with quiet, show its output only when it fails."""
    if quiet:
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stdout.write(r.stdout[-20000:])
    else:
        r = subprocess.run(cmd, cwd=cwd, env=env)
    if r.returncode != 0:
        die("command failed (exit %d): %s" % (r.returncode, " ".join(cmd)))


def rel(path):
    with contextlib.suppress(ValueError):
        r = os.path.relpath(path)
        if not r.startswith(".."):
            return r
    return path


def load_config(top):
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    path = os.path.join(top, "config", "fork.ini")
    if not cp.read(path):
        die("cannot read %s" % path)
    return cp


def defaults_for(fn, parser):
    """An argparse namespace holding the defaults of the subcommand that runs fn."""
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            if sub.get_default("fn") is fn:
                return sub.parse_args([])
    return argparse.Namespace()


# --------------------------------------------------------------------------
# apt


def os_codename():
    with open("/etc/os-release") as f:
        for line in f:
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return ""


def _configured_debian_uris():
    """(uri, suite) pairs of the deb entries already configured on this machine."""
    out = []
    files = glob.glob("/etc/apt/sources.list.d/*.sources") + \
        glob.glob("/etc/apt/sources.list.d/*.list") + ["/etc/apt/sources.list"]
    for path in files:
        if os.path.basename(path).startswith("mesa-fork") or not os.path.exists(path):
            continue
        text = open(path).read()
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if fields.get("enabled", "yes") == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        out.append((uri, suite, fields.get("signed-by", "")))
        else:
            for line in text.splitlines():
                m = re.match(r"\s*deb(?:-src)?\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
                if m:
                    sb = re.search(r"signed-by=(\S+)", m.group(1) or "")
                    out.append((m.group(2), m.group(3), sb.group(1) if sb else ""))
    return out


def debian_mirror(codename):
    """The mirror serving this release's main suite (not -security, not -updates)."""
    for uri, suite, signed in _configured_debian_uris():
        if suite == codename:
            return uri, signed
    die("no apt entry for suite '%s' found in /etc/apt; cannot derive the mirror" % codename)


def ensure_apt_sources(source_suite, codename):
    """Add deb-src for the base's suite (and bookworm-backports) from the configured mirror."""
    uri, signed = debian_mirror(codename)
    stanzas = []
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    signed = signed or (keyring if os.path.exists(keyring) else "")
    signed_line = "Signed-By: %s\n" % signed if signed else ""
    if codename == "bookworm":
        stanzas.append("Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\n%s"
                       % (uri, signed_line))
    stanzas.append("Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n%s"
                   % (uri, source_suite, signed_line))
    text = "# Written by mesa-fork deps: Mesa's source suite%s.\n\n" % (
        " and meson from bookworm-backports" if codename == "bookworm" else "") + "\n".join(stanzas)
    path = "/etc/apt/sources.list.d/mesa-fork.sources"
    if os.path.exists(path) and open(path).read() == text:
        return False
    with open(path, "w") as f:
        f.write(text)
    print("    wrote %s (mirror %s, taken from the machine's apt configuration)" % (path, uri))
    return True


def apt_has_source(pkg, version):
    r = subprocess.run(["apt-cache", "showsrc", pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return ("\nVersion: %s\n" % version) in ("\n" + r.stdout)


def missing_debs(pkgs):
    missing = []
    for p in pkgs:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    return missing


def meson_version():
    exe = shutil.which("meson", path="/usr/bin:/usr/local/bin:" + os.environ.get("PATH", ""))
    if not exe:
        return (0,)
    r = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, text=True)
    return tuple(int(x) for x in re.findall(r"\d+", r.stdout)[:3])


# --------------------------------------------------------------------------
# sources and series


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tarball_version(path):
    """(version, UTC date) of the Mesa release tarball at path: the text of
    its top-level VERSION file and that file's time, which is the release's
    (so the base commit made from it is the same everywhere)."""
    try:
        with tarfile.open(path) as tar:
            for m in tar:
                if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/VERSION"):
                    text = tar.extractfile(m).read().decode(errors="replace").strip()
                    date = datetime.datetime.fromtimestamp(m.mtime, datetime.timezone.utc)
                    return (text.splitlines() or [""])[0], date.strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OSError, tarfile.TarError, EOFError) as e:
        die("%s is not a readable tarball: %s" % (path, e))
    return "(no VERSION file)", None


def check_upstream_tarball(path, version, sha):
    """Refuses anything but Mesa's release tarball of version, whose sha256
    is sha (Debian's orig tarball is that very file)."""
    if not os.path.isfile(path):
        die("fetch: %s: no such file" % path)
    got, _ = tarball_version(path)
    if got != version:
        die("fetch: %s is Mesa %s, the series is for %s" % (path, got, version))
    digest = sha256(path)
    if digest != sha:
        die("fetch: %s has sha256 %s, not that of Mesa %s's release tarball (%s, "
            "sha256_orig in config/fork.ini)" % (path, digest, version, sha))
    return digest


def read_series(path):
    out = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line.split()[0])
    return out


def debian_changelog_date(path):
    for line in open(path):
        if line.startswith(" -- "):
            stamp = line.split(">", 1)[1].strip()
            dt = email.utils.parsedate_to_datetime(stamp)
            return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    die("no date in %s" % path)


def fixed_git_env(date):
    """Fixed identities and dates so that prepare makes the same commit ids every time."""
    env = dict(os.environ)
    env.update(GIT_AUTHOR_NAME="mesa-fork", GIT_AUTHOR_EMAIL="mesa-fork@localhost",
               GIT_COMMITTER_NAME="mesa-fork", GIT_COMMITTER_EMAIL="mesa-fork@localhost")
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return env


def git(args, cwd, capture=True, check=True, env=None, raw=False):
    """Run git; with capture, return its output (stripped unless raw)."""
    if capture:
        r = subprocess.run(["git"] + args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            if check:
                die("git %s failed: %s" % (" ".join(args), r.stderr.strip()))
            return ""
        return r.stdout if raw else r.stdout.strip()
    r = subprocess.run(["git"] + args, cwd=cwd, env=env)
    if r.returncode != 0:
        if check:
            die("git %s failed" % " ".join(args))
        return False
    return True


def slug(subject):
    s = re.sub(r"[^A-Za-z0-9._]+", "-", subject).strip("-.")
    s = re.sub(r"\.+", ".", s)
    return s[:52].rstrip("-.")


def add_dep3(mail, forwarded, last_update):
    """Add DEP-3 fields to the mail header, where git am ignores them."""
    head, sep, body = mail.partition("\n\n")
    extra = "Forwarded: %s\nLast-Update: %s" % (forwarded, last_update)
    return head + "\n" + extra + sep + body


def series_differs(a, b):
    fa = {os.path.basename(p): p for p in glob.glob(os.path.join(a, "*.patch"))}
    fb = {os.path.basename(p): p for p in glob.glob(os.path.join(b, "*.patch"))}
    diff = []
    for n in sorted(set(fa) | set(fb)):
        if n not in fb:
            diff.append("%s: on the branch, not in patches/" % n)
        elif n not in fa:
            diff.append("%s: in patches/, not on the branch" % n)
        elif open(fa[n], "rb").read() != open(fb[n], "rb").read():
            diff.append("%s: content differs" % n)
    return diff


def series_hash(d):
    """One hash over the names and contents of a directory's patches."""
    h = hashlib.sha256()
    for p in sorted(glob.glob(os.path.join(d, "*.patch"))):
        h.update(os.path.basename(p).encode() + b"\0" + open(p, "rb").read())
    return h.hexdigest()


def series_subjects(d):
    return sorted(glob.glob(os.path.join(d, "*.patch")))


# --------------------------------------------------------------------------
# build


def build_env(top):
    env = dict(os.environ)
    # Mesa's generators need Debian's python3 (python3-mako & co.), not a
    # pyenv or venv interpreter that happens to come first on PATH.
    env["PATH"] = "/usr/lib/ccache:/usr/bin:/bin:/usr/sbin:/sbin:" + env.get("PATH", "")
    env.setdefault("CCACHE_BASEDIR", top)
    env.setdefault("CCACHE_MAXSIZE", "10G")
    env.setdefault("CCACHE_NOHASHDIR", "1")
    env.pop("PYTHONHOME", None)
    env.pop("PYTHONPATH", None)
    return env


def write_native_file(d):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "native.ini")
    text = "[binaries]\npython = '/usr/bin/python3'\npython3 = '/usr/bin/python3'\n"
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)
    return path


def option_names(opts):
    """The names of meson options given as -Dname=value."""
    return {o[2:].split("=", 1)[0] for o in opts if o.startswith("-D")}


def configure(build, src, opts, native, env):
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
            why = ("%s no longer in config/fork.ini" % ", ".join("-D" + d for d in dropped)
                   if dropped else "options unknown")
            with step("remove %s (%s)" % (rel(build), why)):
                shutil.rmtree(build)
        with step("meson setup %s" % rel(build)):
            run(["meson", "setup", build, src, "--native-file", native] + opts,
                env=env, quiet=True)
    with open(stamp, "w") as f:
        json.dump(opts, f)


def fork_release(conf):
    """'mesa-fork 1': what every fork driver's driverInfo names."""
    return "%s %s" % (conf["fork"]["name"], conf["fork"]["release"])


def driver_info_tag(conf):
    return "%s, Debian %s" % (fork_release(conf), conf["base"]["version"])


class ConfigureError(Exception):
    """meson could not (re)generate a build directory; args[0] is its output."""


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
    r = subprocess.run(["ninja", "-C", build, "build.ninja"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise ConfigureError(r.stdout)
    targets = []
    for drv, paths in conf["drivers"].items():
        targets += paths.split()
    suites = set(conf["meson"]["test_suites"].split())
    tests = _introspect(build, "--tests", env)
    by_id = {}
    for t in _introspect(build, "--targets", env):
        by_id[t["id"]] = t
        # Mesa's ICD manifest of each driver (not the devenv one): install
        # copies its api_version.
        if t["name"] in {drv + "_icd" for drv in conf["drivers"]}:
            targets += [os.path.relpath(f, build) for f in t["filename"]]
    for t in tests:
        if not suites & {s.split(":")[-1] for s in t["suite"]}:
            continue
        outs = [t["cmd"][0]] if t["cmd"][0].startswith(build) else []
        for dep in t.get("depends", []):
            if dep in by_id:
                outs += by_id[dep]["filename"]
        for o in outs:
            if o.startswith(build):
                targets.append(os.path.relpath(o, build))
    seen = set()
    return [t for t in targets if not (t in seen or seen.add(t))]


def ccache_summary(env):
    r = subprocess.run(["ccache", "-s"], env=env, stdout=subprocess.PIPE, text=True)
    hits = re.search(r"Hits:\s+(\d+)\s*/\s*(\d+)", r.stdout)
    if hits:
        return "ccache %s of %s compilations were cache hits" % hits.groups()
    return "ccache: " + " ".join(r.stdout.split()[:8])


# --------------------------------------------------------------------------
# install and run


def icd_json(prefix, drv):
    return os.path.join(prefix, "share", "vulkan", "icd.d", "mesa_fork_%s_icd.json" % drv)


def shim_lib(prefix, conf, drv):
    return os.path.join(prefix, "lib", "mesa-fork", "drm-shim",
                        os.path.basename(conf["drivers"][drv].split()[1]))


def install_prefix(prefix, build, conf):
    libdir = os.path.join(prefix, "lib", "mesa-fork")
    os.makedirs(os.path.join(libdir, "drm-shim"), exist_ok=True)
    os.makedirs(os.path.dirname(icd_json(prefix, "x")), exist_ok=True)
    icds = []
    for drv, paths in conf["drivers"].items():
        icd, shim = [os.path.join(build, p) for p in paths.split()]
        dst = os.path.join(libdir, os.path.basename(icd))
        install_file(icd, dst)
        install_file(shim, shim_lib(prefix, conf, drv))
        api = built_api_version(os.path.dirname(icd), drv)
        doc = {"file_format_version": "1.0.1",
               "ICD": {"library_path": dst, "api_version": api}}
        write_if_changed(icd_json(prefix, drv), json.dumps(doc, indent=4) + "\n")
        icds.append(icd_json(prefix, drv))
    files = ":".join(icds)
    env_sh = (
        "# Source this file to run Vulkan applications on mesa-fork's drivers.\n"
        "export VK_DRIVER_FILES=%s\n"
        "# Vulkan loaders before VK_DRIVER_FILES existed read this one.\n"
        "export VK_ICD_FILENAMES=%s\n" % (files, files))
    write_if_changed(os.path.join(prefix, "share", "mesa-fork", "env.sh"), env_sh)
    with open(os.path.join(prefix, "share", "mesa-fork", "release"), "w") as f:
        f.write(driver_info_tag(conf) + "\n")
    return icds


def built_api_version(icd_dir, drv):
    """The Vulkan version of Mesa's own ICD manifest for drv, built next to
    the driver."""
    for path in glob.glob(os.path.join(icd_dir, "%s_icd.*.json" % drv)):
        with open(path) as f:
            return json.load(f)["ICD"]["api_version"]
    die("install: Mesa's %s_icd manifest is not built; run 'bin/mesa-fork build'" % drv)


def install_file(src, dst):
    if not os.path.exists(src):
        die("install: %s is not built; run 'bin/mesa-fork build'" % src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".tmp"
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def write_if_changed(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as f:
        f.write(text)


def shim_env_pairs(conf, drv):
    return dict(kv.split("=", 1) for kv in conf["shim"].get(drv, "").split())


def fork_env(prefix, conf, shim=None, base=None):
    env = dict(base if base is not None else os.environ)
    files = ":".join(icd_json(prefix, d) for d in conf["drivers"])
    env["VK_DRIVER_FILES"] = files
    env["VK_ICD_FILENAMES"] = files
    if shim:
        lib = shim_lib(prefix, conf, shim)
        env["LD_PRELOAD"] = (lib + " " + env.get("LD_PRELOAD", "")).strip()
        for k, v in shim_env_pairs(conf, shim).items():
            env.setdefault(k, v)
    return env


def list_devices(prefix, env):
    """The Vulkan devices mesa-fork-vkcheck --list sees in env, one dict each."""
    exe = os.path.join(prefix, "bin", "mesa-fork-vkcheck")
    if not os.path.exists(exe):
        die("%s is not installed; run 'bin/mesa-fork install'" % exe)
    r = subprocess.run([exe, "--list"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    devs = []
    for line in r.stdout.splitlines():
        with contextlib.suppress(ValueError):
            devs.append(json.loads(line))
    return devs, r


def check_fork_loaded(prefix, conf, env):
    devs, _ = list_devices(prefix, env)
    tag = fork_release(conf)
    ok = bool(devs) and all(tag in d["info"] for d in devs)
    return ok, devs


VULKANINFO_FIELDS = ("deviceName", "deviceType", "apiVersion", "driverID", "driverName",
                     "driverInfo")


def vulkaninfo_device_lines(env):
    """Device and driver fields from `vulkaninfo --summary`. The summary shows
    driver fields only for Vulkan 1.2 devices; for older ones (panvk on
    Valhall reports 1.1) they come from the full VkPhysicalDeviceDriverProperties."""
    r = subprocess.run(["vulkaninfo", "--summary"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    fields = {}
    for l in r.stdout.split("Devices:", 1)[-1].splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*(.*)", l)
        if m and m.group(1) in VULKANINFO_FIELDS:
            fields.setdefault(m.group(1), m.group(2).strip())
    if "driverInfo" not in fields:
        r = subprocess.run(["vulkaninfo"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        sect = r.stdout.split("VkPhysicalDeviceDriverProperties", 1)[-1]
        for l in sect.splitlines()[:8]:
            m = re.match(r"\s*(driverID|driverName|driverInfo)\s*=\s*(.*)", l)
            if m:
                fields.setdefault(m.group(1), m.group(2).strip() + "  (full vulkaninfo)")
    return ["%-10s = %s" % (k, fields[k]) for k in VULKANINFO_FIELDS if k in fields]


def demo_drivers(prefix, conf):
    """Show each installed driver working: on its device if present, else on its drm-shim."""
    tag = fork_release(conf)
    vkcheck = os.path.join(prefix, "bin", "mesa-fork-vkcheck")
    real, _ = list_devices(prefix, fork_env(prefix, conf))
    ok_all = True
    for drv in conf["drivers"]:
        mine = [d for d in real if d["driver_kind"] == drv]
        shim = None if mine else drv
        env = fork_env(prefix, conf, shim=shim)
        where = "real device" if mine else "drm-shim (%s)" % " ".join(
            "%s=%s" % kv for kv in shim_env_pairs(conf, drv).items())
        print("---- %s on %s" % (drv, where))
        lines = vulkaninfo_device_lines(env)
        print("\n".join("  vulkaninfo: " + l for l in lines))
        shown = any(tag in l for l in lines)
        c = subprocess.run([vkcheck, "--validate"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        for l in c.stdout.splitlines():
            print("  vkcheck: " + l)
        good = shown and c.returncode == 0
        print("  => %s" % ("OK: the fork's driver recorded and submitted compute work%s" % (
                           " (a drm-shim executes nothing, so the data is not checked)"
                           if shim else "") if good else "FAILED (vulkaninfo fork device: %s, vkcheck exit %d)"
                           % (shown, c.returncode)))
        ok_all &= good
    return ok_all


# --------------------------------------------------------------------------
# Debian source package


def patch_debian_rules(path, tag, asahi_archs):
    """Name the build in driverInfo and build Honeykrisp on asahi_archs,
    inside the block where Debian builds the other Arm Vulkan drivers."""
    text = open(path).read()
    anchor = "\t-Dvulkan-drivers=\"[$(VULKAN_DRIVERS_LIST)]\" \\\n"
    if anchor not in text:
        die("debsrc: debian/rules has no -Dvulkan-drivers line to extend")
    text = text.replace(anchor, anchor + "\t-Dvulkan-driver-info=\"%s, Debian $(DEB_VERSION)\" \\\n"
                        % tag, 1)
    arm = "\tVULKAN_DRIVERS += broadcom freedreno panfrost\n"
    if arm not in text:
        die("debsrc: debian/rules has no Arm Vulkan driver line")
    text = text.replace(arm, arm + "    ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                        "\tVULKAN_DRIVERS += asahi\n    endif\n" % " ".join(asahi_archs), 1)
    with open(path, "w") as f:
        f.write(text)


def changelog_maintainer():
    """'Name <email>' of whoever makes the package, from the variables dch
    reads: DEBFULLNAME and DEBEMAIL (which may hold both), else NAME and
    EMAIL."""
    email_ = os.environ.get("DEBEMAIL") or os.environ.get("EMAIL") or ""
    name, addr = email.utils.parseaddr(email_)
    name = os.environ.get("DEBFULLNAME") or os.environ.get("NAME") or name
    if not name or "@" not in addr:
        die("debsrc: the changelog entry needs its author: set DEBFULLNAME and "
            "DEBEMAIL, as for dch (found name %r, email %r)" % (name, addr))
    return "%s <%s>" % (name, addr)


def changelog_date():
    """Now, or SOURCE_DATE_EPOCH for a reproducible package, in the
    changelog's RFC 2822 form."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and not epoch.isdigit():
        die("debsrc: SOURCE_DATE_EPOCH=%r is not a number of seconds" % epoch)
    if epoch:
        dt = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
    else:
        dt = datetime.datetime.now().astimezone()
    return email.utils.format_datetime(dt)


def prepend_changelog(path, package, version, patches, date, who):
    lines = ["%s (%s) UNRELEASED; urgency=medium" % (package, version), "",
             "  * Apply the mesa-fork series (%d patches):" % len(patches)]
    for p in patches:
        lines.append("    - %s" % os.path.basename(p))
    lines += ["", " -- %s  %s" % (who, date), "", ""]
    old = open(path).read()
    with open(path, "w") as f:
        f.write("\n".join(lines) + old)
