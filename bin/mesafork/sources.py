# SPDX-License-Identifier: MIT
"""`mesa-fork fetch`: Debian's Mesa source package (apt-get source) or, with
--tarball, Mesa's release tarball, and the VMA header; every file checked
against the sha256 sums of config/fork.ini before anything uses it."""

import contextlib
import datetime
import email.utils
import hashlib
import http.client
import io
import os
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request

from . import apt, distro
from .proc import die, make_dirs, rel, remove_owned, step

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
            make_dirs(vma_include(fork))
            shutil.copyfile(path, os.path.join(vma_include(fork), "vk_mem_alloc.h"))
            print("fetch: VMA header copied from %s (its version is not checked)" % path)
            return
    print("fetch: no VMA header (not in %s, no Debian source package cached): "
          "mesa-fork-memtypes will not be built; the drivers and the other programs "
          "will" % " or ".join(SYSTEM_VMA_HEADERS))


def fetch_vma(fork, use_apt=None):
    """The VMA header from Debian's source package, verified and unpacked
    (fetched as the base is: fetch_source). Without apt (use_apt False,
    or None on a system that is not Debian): from the cache if the
    package is there, else from the system."""
    v = fork.conf["vma"]
    pkg = vma_package(fork)
    orig = [n for n in pkg.want if n != pkg.dsc][0]
    header = os.path.join(vma_include(fork), os.path.basename(v["header"]))
    files = SourceFiles(fork, pkg)
    if os.path.exists(header) and not files.missing():
        return
    if files.missing():
        if not (on_debian() if use_apt is None else use_apt):
            if not os.path.exists(header):
                vma_from_system(fork)
            return
        try:
            fetch_source(fork, pkg)
        except SystemExit:
            # Only mesa-fork-memtypes needs it: the rest builds without.
            print("fetch: %s %s could not be had (above); trying the system's VMA header"
                  % (v["package"], v["version"]))
            if not os.path.exists(header):
                vma_from_system(fork)
            return
    with step("unpack %s from %s" % (v["header"], orig)):
        make_dirs(vma_include(fork))
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
    a tarball build carries: the cached one, else from Debian's pool or
    its snapshot archive (no apt), sha256 verified against sha256_debian."""
    if not verify_debian_fixes(fork):
        fetch_base(fork, ("dsc", "debian"), use_apt=False,
                   why="Debian's security fixes (%s) come from that file"
                   % ", ".join(security_patches(fork)))


# Stand-ins for Debian's pool and snapshot archive: another mirror, or a
# file:// or http://127.0.0.1 directory (the tests' stand-in archive).
POOL_ENV = "MESA_FORK_DEBIAN_POOL"
SNAPSHOT_ENV = "MESA_FORK_SNAPSHOT"


def try_download(url, dest):
    """url into dest; None when it worked, else why not (dest removed)."""
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(dest, "wb") as out:
            shutil.copyfileobj(r, out, 1 << 20)
        return None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        return str(getattr(e, "reason", e)) or type(e).__name__


def dsc_checksums(path):
    """{file name: (sha1, sha256)} of the files a .dsc lists."""
    out, field = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith(" "):
                field = line.split(":", 1)[0]
                continue
            parts = line.split()
            if field in ("Checksums-Sha1", "Checksums-Sha256") and len(parts) == 3:
                sums = out.setdefault(parts[2], [None, None])
                sums[field == "Checksums-Sha256"] = parts[0]
    return {k: tuple(v) for k, v in out.items()}


class SourcePackage:
    """One Debian source package pinned by content, as config/fork.ini
    names it: package, version, the suite whose deb-src has it, the
    sha256 of the files every fetch must have ({file name: sha256}, the
    .dsc among them) and the .dsc's sha1 (Debian's snapshot archive
    serves files by sha1)."""

    def __init__(self, package, version, suite, want, dsc, sha1_dsc, section, extras=True):
        self.package, self.version, self.suite = package, version, suite
        self.want, self.dsc, self.sha1_dsc, self.section = want, dsc, sha1_dsc, section
        # Whether the other files the .dsc lists are wanted too (optional).
        self.extras = extras


def base_package(fork, kinds=("dsc", "orig", "debian")):
    b = fork.conf["base"]
    files = debian_files(fork)
    return SourcePackage(b["package"], b["version"], b["source_suite"],
                         {files[k][0]: files[k][1] for k in kinds}, files["dsc"][0],
                         b["sha1_dsc"], "[base]", extras="orig" in kinds)


def vma_package(fork):
    v = fork.conf["vma"]
    orig = "%s_%s.orig.tar.gz" % (v["package"], v["upstream_version"])
    dsc = "%s_%s.dsc" % (v["package"], v["version"])
    return SourcePackage(v["package"], v["version"], v["source_suite"],
                         {dsc: v["sha256_dsc"], orig: v["sha256_orig"]}, dsc, v["sha1_dsc"],
                         "[vma]")


class SourceFiles:
    """The files of a SourcePackage a fetch wants, each with the sha256 it
    must have: the pinned ones, and what else the pinned .dsc lists (for
    Mesa, its signature of the release tarball), optional. Only a file
    with the right sha256 enters the cache; one with other bytes is
    removed and named in the report."""

    def __init__(self, fork, pkg):
        self.fork, self.pkg = fork, pkg
        self.want = dict(pkg.want)
        self.optional = {}
        self.tried = []
        self._from_dsc()

    def _dsc_path(self):
        return os.path.join(self.fork.cache, self.pkg.dsc)

    def _from_dsc(self):
        if not self.pkg.extras or self.pkg.dsc not in self.want or not self.ok(self.pkg.dsc):
            return
        for name, (_, s256) in dsc_checksums(self._dsc_path()).items():
            if name not in self.want:
                self.optional[name] = s256

    def expected(self, name):
        return self.want.get(name) or self.optional.get(name)

    def ok(self, name):
        path = os.path.join(self.fork.cache, name)
        return os.path.exists(path) and sha256(path) == self.expected(name)

    def missing(self, optional=False):
        names = list(self.want) + (list(self.optional) if optional else [])
        return [n for n in names if not self.ok(n)]

    def sha1(self, name):
        """For snapshot's by-hash URLs: the pinned one of the .dsc, the
        verified .dsc's for the rest."""
        if name == self.pkg.dsc:
            return self.pkg.sha1_dsc
        if self.pkg.dsc in self.want and self.ok(self.pkg.dsc):
            return dsc_checksums(self._dsc_path()).get(name, (None, None))[0]
        return None

    def take(self, path, source):
        """path (a download) into the cache when its sha256 is the one
        expected; else removed, and the source noted as wrong."""
        name = os.path.basename(path[:-5] if path.endswith(".part") else path)
        got = sha256(path)
        if got != self.expected(name):
            os.unlink(path)
            self.tried.append("%s: %s had sha256 %s, not %s (refused)"
                              % (source, name, got[:16], self.expected(name)[:16]))
            return False
        os.replace(path, os.path.join(self.fork.cache, name))
        if name == self.pkg.dsc:
            self._from_dsc()
        return True

    def from_urls(self, source, url_of):
        """Each missing file from url_of(name) (None: not offered); the
        .dsc first, so that what else it lists is asked for too."""
        got, failed, asked = [], [], set()
        while True:
            todo = [n for n in self.missing(optional=True) if n not in asked]
            if not todo:
                break
            name = todo[0]
            asked.add(name)
            url = url_of(name)
            if not url:
                continue
            part = os.path.join(self.fork.cache, name + ".part")
            err = try_download(url, part)
            if err:
                failed.append("%s (%s)" % (name, err))
            elif self.take(part, source):
                got.append(name)
        if got or failed:
            self.tried.append("%s: %s%s" % (source, ", ".join(got) + " verified" if got else "",
                                           ("; " if got else "") + "missing " + ", ".join(failed)
                                           if failed else ""))

    def from_apt(self):
        """apt-get source through a private deb-src state per suite
        (apt.source_states): apt checks each file against the suite's
        signed Sources index."""
        p = self.pkg
        for suite, opts, error in apt.source_states(self.fork.work, p.suite,
                                                    distro.os_release().codename):
            source = "apt-get source %s=%s (%s)" % (p.package, p.version, suite)
            if opts is None:
                self.tried.append("%s: its index could not be had (%s)" % (source, error))
                continue
            tmp = os.path.join(self.fork.cache, "apt-source")
            remove_owned(tmp)
            make_dirs(tmp)
            try:
                with step(source):
                    r = subprocess.run(["apt-get"] + opts + [
                        "source", "--download-only", "%s=%s" % (p.package, p.version)],
                        cwd=tmp, capture_output=True, text=True)
                if r.returncode != 0:
                    why = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
                    self.tried.append("%s: %s" % (source, why))
                    continue
                # The .dsc first: what else it lists is known once it is verified.
                for name in sorted(os.listdir(tmp), key=lambda n: n != p.dsc):
                    if self.expected(name):
                        self.take(os.path.join(tmp, name), source)
                self.tried.append(source + (": " + ", ".join(self.missing()) + " missing"
                                            if self.missing() else ": verified"))
            finally:
                remove_owned(tmp)
            if not self.missing():
                return


def pool_url(fork, package):
    """The pool directory of a source package: under MESA_FORK_DEBIAN_POOL
    (a stand-in mirror's root) when set, else on the machine's own Debian
    mirror, else (no apt configuration, e.g. --tarball on another
    system) under [base] debian_mirror."""
    root = os.environ.get(POOL_ENV)
    if not root and on_debian():
        with contextlib.suppress(SystemExit), contextlib.redirect_stderr(io.StringIO()):
            uri, _ = apt.debian_mirror(distro.os_release().codename)
            if uri.startswith(("http://", "https://", "file:")):
                root = uri
    root = root or fork.conf["base"]["debian_mirror"]
    prefix = package[:4] if package.startswith("lib") else package[0]
    return "%s/pool/main/%s/%s/" % (root.rstrip("/"), prefix, package)


def fetch_source(fork, pkg, use_apt=True, why=""):
    """A source package's files into the cache, from the first source that
    has them with the pinned sha256: the cache itself, apt (use_apt),
    Debian's pool over HTTP(S), Debian's snapshot archive by hash. Dies in
    one line naming every source tried when one is still missing."""
    files = SourceFiles(fork, pkg)
    if not files.missing():
        return
    for name in files.missing(optional=True):
        path = os.path.join(fork.cache, name)
        if os.path.exists(path):
            # Never used, and out of the way of what replaces it.
            os.replace(path, path + ".rejected")
            files.tried.append("the cache: %s had sha256 %s, not %s (kept as %s.rejected)"
                               % (name, sha256(path + ".rejected")[:16],
                                  files.expected(name)[:16], name))
    if use_apt:
        files.from_apt()
    pool = pool_url(fork, pkg.package)
    if files.missing(optional=True):
        with step("Debian's pool: %s" % pool):
            files.from_urls("pool " + pool, lambda n: pool + n)
    snapshot = os.environ.get(SNAPSHOT_ENV) or fork.conf["base"]["snapshot"]
    if files.missing(optional=True):
        with step("Debian's snapshot archive, by hash: %s" % snapshot):
            files.from_urls("snapshot " + snapshot, lambda n: files.sha1(n) and
                            snapshot.rstrip("/") + "/" + files.sha1(n))
    left = files.missing()
    if left:
        die("fetch: no source had %s with the pinned sha256%s; tried: %s. Put the files in %s, "
            "or move %s of config/fork.ini to a version Debian serves (docs/build-deps.md, "
            "\"Rebasing when the base is gone\")"
            % (", ".join(left), " (%s)" % why if why else "", "; ".join(files.tried) or
               "nothing", rel(fork.cache), pkg.section))
    for name in files.missing(optional=True):
        print("fetch: %s, which the .dsc lists, could not be had" % name)
    print("fetch: sha256 of %s match config/fork.ini" % ", ".join(files.want))


def fetch_base(fork, kinds=("dsc", "orig", "debian"), use_apt=True, why=""):
    """The base's files (config/fork.ini [base]) into the cache:
    fetch_source."""
    fetch_source(fork, base_package(fork, kinds), use_apt, why)


def on_debian():
    return distro.os_release().is_debian


def fetch(fork, tarball=None):
    """Download Debian's Mesa source package into the cache and verify it."""
    b = fork.conf["base"]
    make_dirs(fork.cache)
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
    fetch_base(fork)


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
    make_dirs(fork.cache)
    require_tarball(fork, tarball)
    fetch_vma(fork, use_apt=False)
    if tarball:
        fetch_tarball(fork, tarball)
        return
    verify_upstream(fork)
    fetch_debian_fixes(fork)
    print("fetch: the release tarball verified before is the base")
