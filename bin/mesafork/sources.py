# SPDX-License-Identifier: MIT
"""`mesa-fork fetch`: Debian's Mesa source package (apt-get source) or, with
--tarball, Mesa's release tarball, and the VMA header; every file checked
against the sha256 sums of config/fork.ini before anything uses it."""

import contextlib
import datetime
import email.utils
import hashlib
import os
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request

from . import apt, distro
from .proc import die, rel, run, step

# Where a system without apt may have the VMA header.
SYSTEM_VMA_HEADERS = ("/usr/include/vk_mem_alloc.h", "/usr/include/vma/vk_mem_alloc.h")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def debian_files(fork):
    """{kind: (file name, pinned sha256)} of Debian's source package."""
    b = fork.conf["base"]
    up, v = b["upstream_version"], b["version"]
    return {
        "orig": ("%s_%s.orig.tar.xz" % (b["package"], up), b["sha256_orig"]),
        "debian": ("%s_%s.debian.tar.xz" % (b["package"], v), b["sha256_debian"]),
        "dsc": ("%s_%s.dsc" % (b["package"], v), b["sha256_dsc"]),
    }


def debian_file(fork, kind):
    return os.path.join(fork.cache, debian_files(fork)[kind][0])


def verify_debian(fork):
    """What is wrong with the cached Debian sources: [] when all match."""
    bad = []
    for name, want in debian_files(fork).values():
        path = os.path.join(fork.cache, name)
        if not os.path.exists(path):
            bad.append("%s: missing" % name)
            continue
        got = sha256(path)
        if got != want:
            bad.append("%s: sha256 %s, expected %s" % (name, got, want))
    return bad


# fetch --tarball keeps the release tarball here and its sha256 next to it;
# prepare uses the tarball whenever the checksum file exists.
def upstream_tarball(fork):
    return os.path.join(fork.cache, "upstream.tar.xz")


def upstream_sha256(fork):
    return os.path.join(fork.cache, "upstream.sha256")


def uses_upstream(fork):
    return os.path.exists(upstream_sha256(fork))


def verify_upstream(fork):
    """Dies unless the cached tarball is the one fetch --tarball verified."""
    with open(upstream_sha256(fork)) as f:
        want = f.read().strip()
    path = upstream_tarball(fork)
    got = sha256(path) if os.path.exists(path) else "missing"
    if got != want or want != fork.conf["base"]["sha256_orig"]:
        die("%s (sha256 %s) is not the tarball 'fetch --tarball' verified (%s); "
            "run 'bin/mesa-fork fetch --tarball PATH' again" % (rel(path), got, want))


def tarball_version(path, shown=None):
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
        die("%s is not a readable tarball: %s" % (shown or path, e))
    return "(no VERSION file)", None


def debian_changelog_date(path):
    """The date of the newest entry of a debian/changelog, in UTC."""
    with open(path) as f:
        for line in f:
            if line.startswith(" -- "):
                stamp = line.split(">", 1)[1].strip()
                dt = email.utils.parsedate_to_datetime(stamp)
                return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    die("no date in %s" % path)


def vma_include(fork):
    return os.path.join(fork.work, "deps", "vma", "include")


def has_vma(fork):
    return os.path.exists(os.path.join(vma_include(fork), "vk_mem_alloc.h"))


def vma_from_system(fork):
    """Without apt: the distribution's VMA header, copied, or none (then
    mesa-fork-memtypes is not built)."""
    for path in SYSTEM_VMA_HEADERS:
        if os.path.exists(path):
            os.makedirs(vma_include(fork), exist_ok=True)
            shutil.copyfile(path, os.path.join(vma_include(fork), "vk_mem_alloc.h"))
            print("fetch: VMA header copied from %s (its version is not checked)" % path)
            return
    print("fetch: no VMA header (not in %s, no Debian source package cached): "
          "mesa-fork-memtypes will not be built; the drivers and the other programs "
          "will" % " or ".join(SYSTEM_VMA_HEADERS))


def fetch_vma(fork, use_apt=None):
    """The VMA header from Debian's source package, verified and unpacked.
    Without apt (use_apt False, or None on a system that is not Debian):
    from the cache if the package is there, else from the system."""
    v = fork.conf["vma"]
    orig = "%s_%s.orig.tar.gz" % (v["package"], v["upstream_version"])
    dsc = "%s_%s.dsc" % (v["package"], v["version"])
    header = os.path.join(vma_include(fork), os.path.basename(v["header"]))
    want = {orig: v["sha256_orig"], dsc: v["sha256_dsc"]}

    def bad():
        return [n for n, h in want.items()
                if not os.path.exists(os.path.join(fork.cache, n)) or
                sha256(os.path.join(fork.cache, n)) != h]

    if os.path.exists(header) and not bad():
        return
    if bad() and not (on_debian() if use_apt is None else use_apt):
        if not os.path.exists(header):
            vma_from_system(fork)
        return
    if bad():
        with step("apt-get source --download-only %s=%s" % (v["package"], v["version"])):
            run(["apt-get", "source", "--download-only",
                 "%s=%s" % (v["package"], v["version"])], cwd=fork.cache, quiet=True)
    if bad():
        die("refusing %s: sha256 of %s does not match config/fork.ini" % (
            v["package"], ", ".join(bad())))
    with step("unpack %s from %s" % (v["header"], orig)):
        os.makedirs(vma_include(fork), exist_ok=True)
        with open(header + ".tmp", "wb") as out:
            r = subprocess.run(["tar", "xzOf", os.path.join(fork.cache, orig), "--wildcards",
                                "*/" + v["header"]], stdout=out)
        if r.returncode != 0 or os.path.getsize(header + ".tmp") == 0:
            die("%s holds no %s" % (orig, v["header"]))
        os.replace(header + ".tmp", header)


def is_url(arg):
    return "://" in arg


def download(url, dest, hint=""):
    """url into dest with urllib; dies with the reason (and hint) when it
    cannot."""
    with step("download %s" % url):
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(dest, "wb") as out:
                shutil.copyfileobj(r, out, 1 << 20)
        except (urllib.error.URLError, OSError, ValueError) as e:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dest)
            die("fetch: cannot download %s: %s%s" % (url, getattr(e, "reason", e), hint))
        print("    %d bytes" % os.path.getsize(dest))


def fetch_tarball(fork, path, shown=None):
    """Mesa's release tarball instead of Debian's source: refuses anything
    but the release of the base version, whose sha256 is that of Debian's
    orig tarball (the very same file). path may be a URL, downloaded into
    the cache first and deleted when refused."""
    if is_url(path):
        part = os.path.join(fork.cache, "download.part")
        download(path, part)
        try:
            fetch_tarball(fork, part, shown=path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
        return
    b = fork.conf["base"]
    shown = shown or path
    with step("verify and copy upstream tarball %s" % shown):
        if not os.path.isfile(path):
            die("fetch: %s: no such file" % path)
        if not os.access(path, os.R_OK):
            die("fetch: %s: not readable" % path)
        version, _ = tarball_version(path, shown)
        if version != b["upstream_version"]:
            die("fetch: %s is Mesa %s, the series is for %s" % (shown, version,
                                                                b["upstream_version"]))
        digest = sha256(path)
        if digest != b["sha256_orig"]:
            die("fetch: %s has sha256 %s, not that of Mesa %s's release tarball (%s, "
                "sha256_orig in config/fork.ini)" % (shown, digest, version, b["sha256_orig"]))
        dest = upstream_tarball(fork)
        shutil.copyfile(path, dest + ".tmp")
        os.replace(dest + ".tmp", dest)
        with open(upstream_sha256(fork), "w") as f:
            f.write(digest + "\n")
    fetch_debian_fixes(fork)
    print("fetch: prepare will use the upstream tarball with Debian's security fixes (%s) "
          "and none of its other patches; 'bin/mesa-fork fetch' without --tarball switches "
          "back to Debian's source" % ", ".join(security_patches(fork)))


def security_patches(fork):
    return fork.conf["base"]["security_patches"].split()


def verify_debian_fixes(fork):
    """Path of Debian's debian.tar.xz when it is cached and verified."""
    name, want = debian_files(fork)["debian"]
    path = os.path.join(fork.cache, name)
    return path if os.path.exists(path) and sha256(path) == want else None


def fetch_debian_fixes(fork):
    """Debian's debian.tar.xz of the base, which holds the security fixes
    a tarball build carries: the cached one, else from Debian's pool over
    HTTPS (no apt), sha256 verified against sha256_debian."""
    if verify_debian_fixes(fork):
        return
    name, want = debian_files(fork)["debian"]
    # MESA_FORK_DEBIAN_POOL: another pool, a mirror or a file:// directory.
    pool = os.environ.get("MESA_FORK_DEBIAN_POOL") or fork.conf["base"]["debian_pool"]
    url = pool.rstrip("/") + "/" + name
    path = os.path.join(fork.cache, name)
    download(url, path + ".part", hint="; Debian's security fixes (%s) come from that file: "
             "put it in %s and run again" % (", ".join(security_patches(fork)), rel(fork.cache)))
    got = sha256(path + ".part")
    if got != want:
        os.unlink(path + ".part")
        die("fetch: %s has sha256 %s, not %s (sha256_debian in config/fork.ini)"
            % (url, got, want))
    os.replace(path + ".part", path)


def on_debian():
    return distro.os_release().is_debian


def fetch(fork, tarball=None):
    """Download Debian's Mesa source package into the cache and verify it."""
    b = fork.conf["base"]
    os.makedirs(fork.cache, exist_ok=True)
    fetch_vma(fork)
    if tarball:
        fetch_tarball(fork, tarball)
        return
    if uses_upstream(fork):
        for path in (upstream_sha256(fork), upstream_tarball(fork)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        print("fetch: prepare will use Debian's source again, not the upstream tarball")
    if not verify_debian(fork):
        print("fetch: %s %s is in %s, sha256 verified" % (b["package"], b["version"],
                                                          rel(fork.cache)))
        return
    if not on_debian():
        die("fetch: Debian's source package %s %s is not in %s, and this system is not "
            "Debian: its apt would not fetch our base. Use Mesa's release tarball: "
            "'bin/mesa-fork fetch --tarball %s' (a file or URL)"
            % (b["package"], b["version"], rel(fork.cache), distro.upstream_url(fork.conf)))
    with step("apt-get source --download-only %s=%s" % (b["package"], b["version"])):
        if not apt.apt_has_source(b["package"], b["version"]):
            die("apt does not know source %s %s: run 'bin/mesa-fork deps' first "
                "(it adds the deb-src entry)" % (b["package"], b["version"]))
        run(["apt-get", "source", "--download-only", "%s=%s" % (b["package"], b["version"])],
            cwd=fork.cache, quiet=True)
    bad = verify_debian(fork)
    if bad:
        for name, _ in debian_files(fork).values():
            with contextlib.suppress(FileNotFoundError):
                os.rename(os.path.join(fork.cache, name),
                          os.path.join(fork.cache, name + ".rejected"))
        die("refusing the download, checksums do not match SPEC:\n  " + "\n  ".join(bad))
    print("fetch: sha256 of orig, debian and dsc match config/fork.ini")


def fetch_chosen(fork):
    """What install needs: the base fetch chose, verified. That is the
    release tarball after fetch --tarball, else Debian's source, fetched
    when it is missing."""
    if not uses_upstream(fork):
        fetch(fork)
        return
    fetch_vma(fork)
    verify_upstream(fork)
    fetch_debian_fixes(fork)
    print("fetch: the upstream tarball 'fetch --tarball' verified is the base "
          "('bin/mesa-fork fetch' switches back to Debian's source)")


def require_tarball(fork, tarball):
    """Dies unless a tarball is given or one was verified before."""
    if not tarball and not uses_upstream(fork):
        die("install --no-deps builds from Mesa's release tarball: pass --tarball FILE "
            "or --tarball URL, e.g. --tarball %s" % distro.upstream_url(fork.conf))


def fetch_without_apt(fork, tarball=None):
    """What install --no-deps needs, without apt: Mesa's release tarball
    (a file or URL, or the one fetch --tarball verified before) and the
    VMA header from the cache or the system."""
    os.makedirs(fork.cache, exist_ok=True)
    require_tarball(fork, tarball)
    fetch_vma(fork, use_apt=False)
    if tarball:
        fetch_tarball(fork, tarball)
        return
    verify_upstream(fork)
    fetch_debian_fixes(fork)
    print("fetch: the release tarball verified before is the base")
