# SPDX-License-Identifier: MIT
"""apt, for `deps` (deps.py) and the private apt states: the mirror this
machine uses, the deb-src entry for Mesa's source package taken from it,
what of the Debian column of docs/build-deps.md is missing, and apt states
of our own under .work/apt that need no root."""

import glob
import os
import re
import subprocess

from . import distro
from .proc import die, rel, run, step

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


def private_state(work, suite, codename, arch=None):
    """A private apt state for one suite (and with arch, that architecture)
    under .work/apt, from the mirror this machine uses, updated now: the
    machine's own sources and package lists are neither read nor touched
    and nothing is installed, so it needs no root. Returns its directory
    and the apt options that select it."""
    root = os.path.join(work, "apt", suite + ("-" + arch if arch else ""))
    for d in ("lists/partial", "cache/archives/partial", "download"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    uri, signed = debian_mirror(codename)
    keyring = signed or "/usr/share/keyrings/debian-archive-keyring.gpg"
    sources = os.path.join(root, "sources.list")
    with open(sources, "w") as f:
        f.write("deb [signed-by=%s] %s %s main\n" % (keyring, uri, suite))
    opts = ["-o", "Dir::Etc::SourceList=" + sources,
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "Dir::State::Lists=" + os.path.join(root, "lists"),
            "-o", "Dir::Cache=" + os.path.join(root, "cache"),
            # Snapshot mirrors serve an expired Release file for sid.
            "-o", "Acquire::Check-Valid-Until=false",
            "-o", "Acquire::Languages=none",
            "-o", "APT::Sandbox::User=root"]
    if arch:
        opts += ["-o", "APT::Architecture=" + arch, "-o", "APT::Architectures=" + arch]
    with step("apt-get update (private state for %s%s, in %s)" % (
            suite, " " + arch if arch else "", rel(root))):
        # --error-on=any: an index that failed to download (no network, a
        # mirror mid-sync) is an error, not a warning over stale lists.
        run(["apt-get"] + opts + ["update", "--error-on=any"], quiet=True)
    return root, opts


def index_fields(opts, package):
    """The fields of the newest version of package in a private state's
    index (apt-cache show), or {} when it serves none."""
    r = subprocess.run(["apt-cache"] + opts + ["show", "--no-all-versions", package],
                       capture_output=True, text=True)
    fields = {}
    for line in r.stdout.splitlines():
        if not line.strip():
            break
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


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
    path = os.path.join(apt_etc(), "sources.list.d", "mesa-fork.sources")
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
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
