# SPDX-License-Identifier: MIT
"""apt, for `deps` (deps.py) and the private apt states: the mirror this
machine uses, bookworm-backports for meson, what of the Debian column of
docs/build-deps.md is missing, and apt states of our own under .work/apt
that need no root (the base's deb-src entries, the suites of the asahi
uAPI header, sid's Mesa)."""

import glob
import os
import re
import subprocess

from . import distro
from .proc import die, make_dirs, rel, run, step

# Tests point this at a directory of their own: the machine's apt
# configuration is read and written only here.
APT_ETC_ENV = "MESA_FORK_APT_ETC"


def apt_etc():
    return os.environ.get(APT_ETC_ENV, "/etc/apt")


def os_codename():
    return distro.os_release().codename


def _configured_debian_uris():
    """(uri, suite, signed-by) of the binary (deb, not deb-src) entries
    configured here, in the order apt reads them: sources.list, then
    sources.list.d by name."""
    out = []
    etc = apt_etc()
    files = [os.path.join(etc, "sources.list")] + sorted(
        glob.glob(os.path.join(etc, "sources.list.d", "*.sources")) +
        glob.glob(os.path.join(etc, "sources.list.d", "*.list")))
    for path in files:
        if os.path.basename(path).startswith("mesa-fork") or not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if fields.get("enabled", "yes") == "no" or \
                        "deb" not in fields.get("types", "").split():
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        out.append((uri, suite, fields.get("signed-by", "")))
        else:
            for line in text.splitlines():
                m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
                if m:
                    sb = re.search(r"signed-by=(\S+)", m.group(1) or "")
                    out.append((m.group(2), m.group(3), sb.group(1) if sb else ""))
    return out


# What sources may call a release instead of its codename.
SUITE_ALIASES = ("stable", "testing", "unstable", "sid", "oldstable")


def debian_mirror(codename):
    """The mirror serving this release's main suite (not -security, not
    -updates): an entry naming the codename, else one naming an alias
    (stable, testing, unstable, ...), as Debian's own sources may."""
    entries = _configured_debian_uris()
    for uri, suite, signed in entries:
        if suite == codename:
            return uri, signed
    # "stable" is a suite name other archives use too (a browser's, say):
    # by an alias, only a URI that names Debian.
    for uri, suite, signed in entries:
        if suite in SUITE_ALIASES and "debian" in uri.lower():
            return uri, signed
    die("no apt entry for '%s' (or stable, testing, unstable) in %s: cannot tell which "
        "Debian mirror this machine uses; add one (e.g. 'deb http://deb.debian.org/debian "
        "%s main') and run apt-get update" % (codename, apt_etc(), codename or "stable"))


def security_mirror(codename):
    """(uri, signed-by) of the Debian security archive this machine uses
    (Debian's security updates come from their own archive, which a mirror
    of the main one need not carry): its binary entry for
    '<codename>-security', else the first for another release's
    '-security' suite whose URI names Debian; None when it has neither."""
    entries = [e for e in _configured_debian_uris() if e[1].endswith("-security")]
    for uri, suite, signed in entries:
        if suite == codename + "-security":
            return uri, signed
    for uri, suite, signed in entries:
        if "debian" in uri.lower():
            return uri, signed
    return None


DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def private_state(work, suite, codename, arch=None, lines=None, name=None, required=True):
    """A private apt state for one suite (and with arch, that architecture)
    under .work/apt, from the mirror this machine uses, updated now: the
    machine's own sources and package lists are neither read nor touched
    and nothing is installed, so it needs no root. lines, when given,
    are its sources.list instead (name then names its directory). Returns
    its directory and the apt options that select it. When apt-get update
    fails: dies, or without required raises StateError."""
    root = os.path.join(work, "apt", name or (suite + ("-" + arch if arch else "")))
    for d in ("lists/partial", "cache/archives/partial", "download"):
        make_dirs(os.path.join(root, d))
    if lines is None:
        uri, signed = debian_mirror(codename)
        lines = ["deb [signed-by=%s] %s %s main" % (signed or DEBIAN_KEYRING, uri, suite)]
    sources = os.path.join(root, "sources.list")
    with open(sources, "w") as f:
        f.write("".join(l + "\n" for l in lines))
    opts = ["-o", "Dir::Etc::SourceList=" + sources,
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::State::Lists=" + os.path.join(root, "lists"),
            "-o", "Dir::Cache=" + os.path.join(root, "cache"),
            # Snapshot mirrors serve an expired Release file for sid.
            "-o", "Acquire::Check-Valid-Until=false",
            "-o", "Acquire::Languages=none",
            # Whatever the machine's apt.conf.d says: only signed indexes.
            "-o", "Acquire::AllowInsecureRepositories=false",
            "-o", "APT::Get::AllowUnauthenticated=false",
            "-o", "Dir::Etc::Preferences=/nonexistent",
            "-o", "Dir::Etc::PreferencesParts=/nonexistent",
            "-o", "APT::Sandbox::User=root"]
    if arch:
        opts += ["-o", "APT::Architecture=" + arch, "-o", "APT::Architectures=" + arch]
    with step("apt-get update (private state for %s%s, in %s)" % (
            suite if name is None else ", ".join(l.split()[-2] for l in lines),
            " " + arch if arch else "", rel(root))):
        # --error-on=any: an index that failed to download (no network, a
        # mirror mid-sync, a signature apt does not trust) is an error, not
        # a warning over stale lists.
        cmd = ["apt-get"] + opts + ["update", "--error-on=any"]
        if required:
            run(cmd, quiet=True)
        else:
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
            if r.returncode != 0:
                errors = [l for l in r.stderr.splitlines() if l.startswith("E:")]
                raise StateError((errors or r.stderr.strip().splitlines() or
                                  ["exit %d" % r.returncode])[0])
    return root, opts


class StateError(Exception):
    """A private state's apt-get update failed (required=False): the
    first error apt gave."""


def source_states(work, suite, codename):
    """Private apt states with the deb-src entry of one suite each, in the
    order a stable release's Mesa moves through them: suite on this
    machine's mirror, suite-security on the security archive the machine
    uses (when it uses one), suite-proposed-updates. Yields (suite, apt
    options, None), or (suite, None, apt's error) when that suite's index
    could not be had (a mirror need not carry proposed-updates). Updated lazily: the caller
    stops asking once it has what it wants."""
    uri, signed = debian_mirror(codename)
    entries = [(suite, uri, signed)]
    sec = security_mirror(codename)
    if sec:
        entries.append((suite + "-security", sec[0], sec[1]))
    entries.append((suite + "-proposed-updates", uri, signed))
    for name, u, key in entries:
        line = "deb-src [signed-by=%s] %s %s main" % (key or DEBIAN_KEYRING, u, name)
        try:
            _, opts = private_state(work, name, codename, lines=[line], name=name + "-src",
                                    required=False)
            yield name, opts, None
        except StateError as e:
            yield name, None, str(e)


def index_fields(opts, package):
    """The fields of the newest version of package in a private state's
    index (apt-cache show), or {} when it serves none; dies when apt-cache
    fails otherwise."""
    r = subprocess.run(["apt-cache"] + opts + ["show", "--no-all-versions", package],
                       capture_output=True, text=True)
    if r.returncode != 0:
        if "No packages found" in r.stderr or "Unable to locate package" in r.stderr:
            return {}
        die("apt-cache show %s failed (exit %d): %s" % (package, r.returncode,
                                                         r.stderr.strip()[-500:]))
    fields = {}
    for line in r.stdout.splitlines():
        if not line.strip():
            break
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


OUR_SOURCES_MARK = "# Written by mesa-fork deps"


def ensure_apt_sources(codename):
    """bookworm-backports (meson >= 1.1) from the configured mirror, on
    bookworm; nothing elsewhere. fetch needs no entry of the machine's
    (it uses private states, source_states). A file of ours from an
    earlier version (a deb-src entry for the base) is rewritten or, when
    nothing is left to say, removed; a file of that name that we did not
    write is left alone. Returns whether the sources changed."""
    path = os.path.join(apt_etc(), "sources.list.d", "mesa-fork.sources")
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if not old.startswith(OUR_SOURCES_MARK):
            print("    %s was not written by mesa-fork: left as it is" % path)
            return False
    if codename != "bookworm":
        if old is None:
            return False
        os.unlink(path)
        print("    removed %s (an earlier mesa-fork's deb-src entry: fetch needs none)" % path)
        return True
    uri, signed = debian_mirror(codename)
    signed = signed or (DEBIAN_KEYRING if os.path.exists(DEBIAN_KEYRING) else "")
    text = ("%s: meson from bookworm-backports.\n\nTypes: deb\nURIs: %s\n"
            "Suites: bookworm-backports\nComponents: main\n%s"
            % (OUR_SOURCES_MARK, uri, "Signed-By: %s\n" % signed if signed else ""))
    if old == text:
        return False
    with open(path, "w") as f:
        f.write(text)
    print("    wrote %s (mirror %s, taken from the machine's apt configuration)" % (path, uri))
    return True


def missing_debs(pkgs):
    missing = []
    for p in pkgs:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    return missing


# The LLVM the Debian column of docs/build-deps.md names.
TABLE_LLVM = "15"


def with_llvm(pkgs, llvm):
    """pkgs with the table's LLVM version replaced by llvm."""
    return [re.sub(r"(?<=[a-z])(-?)%s(?=$|-)" % TABLE_LLVM, r"\g<1>" + llvm, p) for p in pkgs]


def apt_offers(pkg):
    """Whether this machine's apt has a candidate for pkg (no root needed)."""
    return subprocess.run(["apt-cache", "show", "--no-all-versions", pkg],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def llvm_version(fork, required=True):
    """The newest LLVM of config/fork.ini [base] llvm_versions (those Mesa
    25.0.7 builds with) of which this machine's apt offers every package
    the table names for LLVM. When none is offered: None, or with required,
    dies naming what is missing."""
    pkgs = [p for p in distro.deps_table(fork.top)["debian"].packages
            if with_llvm([p], "X") != [p]]
    versions = fork.conf["base"]["llvm_versions"].split()
    for v in versions:
        if all(apt_offers(p) for p in with_llvm(pkgs, v)):
            return v
    if not required:
        return None
    die("apt offers no LLVM that Mesa %s builds with (%s) with all of %s; add the suite that "
        "has one (bookworm: main has 15; trixie: 19) and run apt-get update"
        % (fork.conf["base"]["upstream_version"], ", ".join(versions),
           " ".join(with_llvm(pkgs, "N"))))


def debian_packages(fork, llvm=None):
    """The Debian column of docs/build-deps.md, less meson (deps checks
    its version and takes it from bookworm-backports on bookworm), with
    the LLVM apt offers (llvm_version) or llvm in place of the table's."""
    return with_llvm([p for p in distro.deps_table(fork.top)["debian"].packages
                      if p != "meson"], llvm or llvm_version(fork))
