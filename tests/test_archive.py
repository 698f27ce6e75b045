# SPDX-License-Identifier: MIT
"""The build's inputs when Debian's archive has moved on (issue 30).

Each test builds a stand-in Debian archive of its own in a temporary
directory: an apt repository served on http://127.0.0.1 with a Release
file signed by a throwaway key, trusted through `signed-by` in a stand-in
/etc/apt (MESA_FORK_APT_ETC), and stand-ins for Debian's pool and its
snapshot archive (MESA_FORK_DEBIAN_POOL, MESA_FORK_SNAPSHOT). Then:

- the asahi uAPI header, pinned by its own sha256, is taken from the
  first suite whose linux-libc-dev carries it, whatever the upload;
  a suite that only has another header is passed over, and when none has
  it the fetch stops in one line and unpacks nothing; a .deb whose bytes
  differ from the signed index is refused by apt;
- the base comes from apt while a suite's Sources lists it, from the
  snapshot archive by hash once it left the pool, each file checked
  against the pinned sha256; a file with other bytes never enters the
  cache.

The stand-in source package and headers are made here, small; the pins
are overridden to their checksums, so nothing depends on what Debian
serves today.
"""

import contextlib
import functools
import hashlib
import http.server
import io
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

import forklib
from mesafork import apt, config, distro, proc, sources, uapi

ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                      text=True).stdout.strip()
CODENAME = distro.os_release().codename
HEADER = "drm/asahi_drm.h"
PINNED = b"/* the pinned asahi uAPI: struct drm_asahi_cmd_render */\n"
OTHER = b"/* another asahi uAPI: struct drm_asahi_cmd_render_v2 */\n"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class StandinArchive:
    """An apt repository (dists/ and pool/) with a signed Release per
    suite, a pool and a snapshot directory, all served over HTTP on the
    loopback, and an /etc/apt that names the repository as this
    machine's Debian mirror."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.repo = os.path.join(tmp, "www", "debian")
        self.pool = os.path.join(tmp, "www", "mirror", "pool", "main", "m", "mesa")
        self.snapshot = os.path.join(tmp, "www", "snapshot")
        for d in (self.repo, self.pool, self.snapshot):
            os.makedirs(d)
        self.gnupg = os.path.join(tmp, "gnupg")
        os.makedirs(self.gnupg, mode=0o700)
        self.key = os.path.join(tmp, "standin.gpg")
        self.gpg(["--quick-gen-key", "mesa-fork stand-in archive <standin@invalid>",
                  "ed25519", "sign", "never"])
        with open(self.key, "wb") as f:
            f.write(self.gpg(["--export"]).stdout)
        handler = functools.partial(Quiet, directory=os.path.join(tmp, "www"))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.etc = os.path.join(tmp, "etc-apt")
        os.makedirs(os.path.join(self.etc, "sources.list.d"))
        with open(os.path.join(self.etc, "sources.list"), "w") as f:
            f.write("deb [signed-by=%s] %s/debian %s main\n" % (self.key, self.url, CODENAME))
        self.suites = {}

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        subprocess.run(["gpgconf", "--homedir", self.gnupg, "--kill", "gpg-agent"],
                       capture_output=True)

    def gpg(self, args):
        return subprocess.run(["gpg", "--batch", "--homedir", self.gnupg, "--passphrase", "",
                               "--pinentry-mode", "loopback"] + args,
                              capture_output=True, check=True)

    def suite_dir(self, suite):
        d = os.path.join(self.repo, "pool", suite)
        os.makedirs(d, exist_ok=True)
        self.suites.setdefault(suite, d)
        return d

    def add_headers_deb(self, suite, version, header):
        """A linux-libc-dev (Architecture: all) holding header as
        usr/include/drm/asahi_drm.h, in suite's pool."""
        pkg = os.path.join(self.tmp, "pkg-%s-%s" % (suite, version))
        os.makedirs(os.path.join(pkg, "DEBIAN"))
        os.makedirs(os.path.join(pkg, "usr", "include", "drm"))
        os.makedirs(os.path.join(pkg, "usr", "include", "linux"))
        with open(os.path.join(pkg, "usr", "include", HEADER), "wb") as f:
            f.write(header)
        with open(os.path.join(pkg, "usr", "include", "linux", "types.h"), "w") as f:
            f.write("/* stand-in */\n")
        with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
            f.write("Package: linux-libc-dev\nVersion: %s\nArchitecture: all\n"
                    "Maintainer: stand-in <standin@invalid>\nMulti-Arch: foreign\n"
                    "Description: stand-in kernel headers\n" % version)
        deb = os.path.join(self.suite_dir(suite), "linux-libc-dev_%s_all.deb" % version)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", pkg, deb],
                       capture_output=True, check=True)
        return deb

    def add_source(self, suite, files):
        """The files of a source package (a .dsc among them) in suite's
        pool, listed in its Sources."""
        d = self.suite_dir(suite)
        for path in files:
            shutil.copy(path, d)

    def publish(self, suites=None):
        """Packages, Sources and a signed InRelease for every suite."""
        for suite in suites or list(self.suites):
            rel_pool = os.path.relpath(self.suite_dir(suite), self.repo)
            dist = os.path.join(self.repo, "dists", suite)
            shutil.rmtree(dist, ignore_errors=True)
            indexes = {}
            pk = subprocess.run(["dpkg-scanpackages", "-m", rel_pool, "/dev/null"],
                                cwd=self.repo, capture_output=True, check=True).stdout
            indexes["main/binary-%s/Packages" % ARCH] = pk
            src = subprocess.run(["dpkg-scansources", rel_pool, "/dev/null"],
                                 cwd=self.repo, capture_output=True, check=True).stdout
            indexes["main/source/Sources"] = src
            lines = ["Origin: stand-in", "Label: stand-in", "Suite: %s" % suite,
                     "Codename: %s" % suite, "Date: Thu, 03 Dec 2026 00:00:00 UTC",
                     "Architectures: %s" % ARCH, "Components: main", "SHA256:"]
            for name, data in indexes.items():
                os.makedirs(os.path.dirname(os.path.join(dist, name)), exist_ok=True)
                with open(os.path.join(dist, name), "wb") as f:
                    f.write(data)
                lines.append(" %s %d %s" % (sha256(data), len(data), name))
            with open(os.path.join(dist, "Release"), "w") as f:
                f.write("\n".join(lines) + "\n")
            self.gpg(["--clearsign", "-o", os.path.join(dist, "InRelease"),
                      os.path.join(dist, "Release")])

    def env(self):
        return {apt.APT_ETC_ENV: self.etc,
                sources.POOL_ENV: self.url + "/mirror",
                sources.SNAPSHOT_ENV: self.url + "/snapshot/"}


@contextlib.contextmanager
def patched_env(values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def call(fn, *args):
    """fn(*args) with its output captured: (returned, SystemExit code or
    None, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code, ret = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ret = fn(*args)
        except SystemExit as e:
            code = e.code
    return ret, code, out.getvalue(), err.getvalue()


class Standin(unittest.TestCase):
    def setUp(self):
        for tool in ("gpg", "dpkg-scanpackages", "dpkg-scansources", "dpkg-deb", "apt-get"):
            if not shutil.which(tool):
                self.fail("%s is missing: bin/mesa-fork deps installs it" % tool)
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.archive = StandinArchive(self.tmp)
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work)
        self._env = patched_env(self.archive.env())
        self._env.__enter__()

    def tearDown(self):
        self._env.__exit__(None, None, None)
        self.archive.close()
        self._tmp.cleanup()


class HeaderPinnedByContent(Standin):
    """uapi.fetch against suites that moved on."""

    def conf(self, pin=PINNED):
        c = config.load(forklib.TOP)
        c["asahi_uapi"]["header_sha256"] = sha256(pin)
        c["asahi_uapi"]["suites"] = "trixie-backports forky sid"
        return c

    def unpacked(self):
        path = os.path.join(uapi.include_dir(self.work), HEADER)
        first = os.path.join(uapi.first_dir(self.work), HEADER)
        out = []
        for p in (path, first):
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out.append(f.read())
        return out

    def test_another_upload_with_the_same_header_is_taken(self):
        """The pinned upload is gone; trixie-backports has a newer one with
        another header, forky none at all, sid another upload with the
        pinned header: sid's is unpacked, and its header is the pinned
        bytes in both include directories."""
        self.archive.add_headers_deb("trixie-backports", "9.1.0-1~bpo13+1", OTHER)
        self.archive.suite_dir("forky")
        self.archive.add_headers_deb("sid", "9.0.2-1", PINNED)
        self.archive.publish()
        line, code, out, err = call(uapi.fetch, self.work, self.conf(), CODENAME)
        self.assertIsNone(code, out + err)
        self.assertIn("linux-libc-dev 9.0.2-1 (sid)", line)
        self.assertEqual(self.unpacked(), [PINNED, PINNED])
        # What the build searches after the system's: the package's whole usr/include.
        self.assertTrue(os.path.exists(os.path.join(uapi.include_dir(self.work),
                                                    "linux", "types.h")))
        # Asked again, nothing is downloaded: the unpacked header is checked by content.
        again, code, out, _ = call(uapi.fetch, self.work, self.conf(), CODENAME)
        self.assertIsNone(code)
        self.assertTrue(again.endswith("(unpacked before)"), again)
        self.assertNotIn("apt-get download", out)

    def test_an_unpack_with_another_header_is_replaced(self):
        """What an earlier run unpacked is checked by content, not by its
        stamp: another header under a stamp that names the pin is
        replaced by the pinned one."""
        self.archive.add_headers_deb("sid", "9.0.2-1", PINNED)
        self.archive.publish()
        c = self.conf()
        # What an earlier run made (and marked: the work directory is
        # not mesa-fork's, as with MESA_FORK_WORK=$HOME).
        for d in (uapi.include_dir(self.work), uapi.first_dir(self.work)):
            proc.make_dirs(os.path.join(d, "drm"))
            with open(os.path.join(d, HEADER), "wb") as f:
                f.write(OTHER)
        with open(os.path.join(uapi.include_dir(self.work), ".source"), "w") as f:
            f.write(uapi.pinned_source(c, "an earlier run") + "\n")
        line, code, out, err = call(uapi.fetch, self.work, c, CODENAME)
        self.assertIsNone(code, out + err)
        self.assertIn("(sid)", line)
        self.assertEqual(self.unpacked(), [PINNED, PINNED])

    def test_a_directory_an_earlier_asahi_uapi_linked_is_not_used(self):
        """install --asahi-uapi DIR once, then a plain install: DIR is not
        the pin, so the link goes and the pinned header is fetched."""
        self.archive.add_headers_deb("sid", "9.0.2-1", PINNED)
        self.archive.publish()
        own = os.path.join(self.tmp, "own-headers")
        os.makedirs(os.path.join(own, "drm"))
        with open(os.path.join(own, HEADER), "wb") as f:
            f.write(OTHER)
        # The earlier install made (and marked) the directory the link is in.
        proc.make_dirs(os.path.dirname(uapi.include_dir(self.work)))
        os.symlink(own, uapi.include_dir(self.work))
        line, code, out, err = call(uapi.fetch, self.work, self.conf(), CODENAME)
        self.assertIsNone(code, out + err)
        self.assertIn("(sid)", line)
        self.assertFalse(os.path.islink(uapi.include_dir(self.work)))
        self.assertEqual(self.unpacked(), [PINNED, PINNED])
        with open(os.path.join(own, HEADER), "rb") as f:
            self.assertEqual(f.read(), OTHER, "the user's directory is left as it was")

    def test_the_first_suite_with_the_header_wins(self):
        self.archive.add_headers_deb("trixie-backports", "9.0.1-1~bpo13+1", PINNED)
        self.archive.add_headers_deb("sid", "9.0.2-1", PINNED)
        self.archive.publish()
        line, code, out, err = call(uapi.fetch, self.work, self.conf(), CODENAME)
        self.assertIsNone(code, out + err)
        self.assertIn("9.0.1-1~bpo13+1 (trixie-backports)", line)

    def test_only_another_header_stops_in_one_line_and_unpacks_nothing(self):
        """And what an earlier pin unpacked is gone, so that no build
        finds another header there."""
        # What an earlier run made (and marked: the work directory is
        # not mesa-fork's, as with MESA_FORK_WORK=$HOME).
        for d in (uapi.include_dir(self.work), uapi.first_dir(self.work)):
            proc.make_dirs(os.path.join(d, "drm"))
            with open(os.path.join(d, HEADER), "wb") as f:
                f.write(OTHER)
        self.archive.add_headers_deb("trixie-backports", "9.1.0-1~bpo13+1", OTHER)
        self.archive.add_headers_deb("forky", "9.3.0-1", OTHER)
        self.archive.add_headers_deb("sid", "9.2.0-1", OTHER)
        self.archive.publish()
        _, code, out, err = call(uapi.fetch, self.work, self.conf(), CODENAME)
        self.assertEqual(code, 1, out + err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("no suite of trixie-backports, forky, sid serves a linux-libc-dev "
                      "with the pinned <drm/asahi_drm.h> (sha256 %s)" % sha256(PINNED), err)
        self.assertIn("the newest header is sha256 %s (forky 9.3.0-1)" % sha256(OTHER), err)
        self.assertIn("docs/build-deps.md", err)
        self.assertEqual(self.unpacked(), [])
        self.assertFalse(os.path.exists(uapi.include_dir(self.work)))
        self.assertFalse(os.path.exists(uapi.first_dir(self.work)))

    def test_a_deb_with_other_bytes_than_the_index_is_refused(self):
        """The .deb is replaced after the signed index was made: apt's
        hash check refuses it, and nothing is unpacked."""
        deb = self.archive.add_headers_deb("trixie-backports", "9.0.1-1~bpo13+1", PINNED)
        self.archive.publish()
        with open(deb, "ab") as f:
            f.write(b"tampered")
        c = self.conf()
        c["asahi_uapi"]["suites"] = "trixie-backports"
        _, code, out, err = call(uapi.fetch, self.work, c, CODENAME)
        self.assertEqual(code, 1, out + err)
        self.assertIn("trixie-backports: linux-libc-dev 9.0.1-1~bpo13+1 refused by apt", err)
        self.assertEqual(self.unpacked(), [])

    def test_an_unsigned_suite_is_not_asked(self):
        """A Release signed by a key the sources do not trust: apt refuses
        the index, the suite is passed over."""
        self.archive.add_headers_deb("trixie-backports", "9.0.1-1~bpo13+1", PINNED)
        self.archive.publish()
        other = StandinArchive(os.path.join(self.tmp, "other"))
        try:
            # Re-sign with a key nobody trusts.
            dist = os.path.join(self.archive.repo, "dists", "trixie-backports")
            os.unlink(os.path.join(dist, "InRelease"))
            other.gpg(["--clearsign", "-o", os.path.join(dist, "InRelease"),
                       os.path.join(dist, "Release")])
        finally:
            other.close()
        c = self.conf()
        c["asahi_uapi"]["suites"] = "trixie-backports"
        _, code, out, err = call(uapi.fetch, self.work, c, CODENAME)
        self.assertEqual(code, 1, out + err)
        self.assertIn("trixie-backports: its index could not be had", err)
        self.assertEqual(self.unpacked(), [])


class BaseSurvivesThePool(Standin):
    """sources.fetch_base against a stand-in trixie whose Sources no longer
    lists the base, and stand-ins for the pool and the snapshot archive.
    The base here is a small source package made by the test; the pins
    ([base] sha256_*, sha1_dsc) are overridden to its checksums."""

    VERSION = forklib.DEBIAN_VERSION
    # A later upload of the same Mesa that replaced the base in trixie.
    LATER = forklib.DEBIAN_VERSION + "+later1"

    def make_source(self, version=VERSION):
        d = os.path.join(self.tmp, "src-" + version)
        os.makedirs(d)
        orig = os.path.join(d, "mesa_%s.orig.tar.xz" % forklib.MESA_VERSION)
        debian = os.path.join(d, "mesa_%s.debian.tar.xz" % version)
        asc = orig + ".asc"
        for path, text in ((orig, b"stand-in orig"), (debian, b"stand-in debian " +
                                                      version.encode()),
                           (asc, b"stand-in signature")):
            with open(path, "wb") as f:
                f.write(text)
        files = [orig, asc, debian]

        def sums(algo):
            out = []
            for p in files:
                with open(p, "rb") as f:
                    data = f.read()
                out.append(" %s %d %s" % (hashlib.new(algo, data).hexdigest(), len(data),
                                          os.path.basename(p)))
            return "\n".join(out)

        dsc = os.path.join(d, "mesa_%s.dsc" % version)
        with open(dsc, "w") as f:
            f.write("Format: 3.0 (quilt)\nSource: mesa\nBinary: mesa-vulkan-drivers\n"
                    "Architecture: any\nVersion: %s\nMaintainer: stand-in <standin@invalid>\n"
                    "Checksums-Sha1:\n%s\nChecksums-Sha256:\n%s\nFiles:\n%s\n"
                    % (version, sums("sha1"), sums("sha256"),
                       sums("md5").replace(" ", " ", 1)))
        return {"dsc": dsc, "orig": orig, "debian": debian, "asc": asc}

    def fork(self, src):
        f = config.Fork(forklib.TOP, work=self.work)
        b = f.conf["base"]
        b["version"] = self.VERSION

        def digest(path, algo):
            with open(path, "rb") as fh:
                return hashlib.new(algo, fh.read()).hexdigest()
        b["sha256_dsc"] = digest(src["dsc"], "sha256")
        b["sha256_orig"] = digest(src["orig"], "sha256")
        b["sha256_debian"] = digest(src["debian"], "sha256")
        b["sha1_dsc"] = digest(src["dsc"], "sha1")
        os.makedirs(f.cache, exist_ok=True)
        return f

    def serve_snapshot(self, src, tamper=None):
        for kind in ("dsc", "orig", "debian", "asc"):
            with open(src[kind], "rb") as fh:
                data = fh.read()
            name = hashlib.sha1(data).hexdigest()
            if kind == tamper:
                data += b" tampered"
            with open(os.path.join(self.archive.snapshot, name), "wb") as fh:
                fh.write(data)

    def cached(self, fork):
        return sorted(os.listdir(fork.cache))

    def test_apt_while_a_suite_lists_it(self):
        src = self.make_source()
        self.archive.add_source("trixie", src.values())
        self.archive.publish()
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_base, f)
        self.assertIsNone(code, out + err)
        self.assertIn("apt-get source mesa=%s (trixie)" % self.VERSION, out)
        self.assertEqual(self.cached(f), sorted(os.path.basename(p) for p in src.values()))

    def test_the_snapshot_archive_once_it_left_the_pool(self):
        """trixie now lists a later upload only, the pool lacks the base: the
        snapshot archive serves each file by its sha1, the .dsc's from
        config, the others' from the verified .dsc."""
        self.archive.add_source("trixie", self.make_source(self.LATER).values())
        self.archive.publish()
        src = self.make_source()
        self.serve_snapshot(src)
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_base, f)
        self.assertIsNone(code, out + err)
        self.assertIn("Debian's snapshot archive, by hash", out)
        self.assertEqual(self.cached(f), sorted(os.path.basename(p) for p in src.values()))
        for kind in ("dsc", "orig", "debian"):
            with open(src[kind], "rb") as a, \
                    open(os.path.join(f.cache, os.path.basename(src[kind])), "rb") as b:
                self.assertEqual(a.read(), b.read())

    def test_the_pool_when_the_index_no_longer_lists_it(self):
        """A mirror's pool may keep a file the index dropped: taken from
        there, and what the .dsc lists besides (the signature) too."""
        self.archive.suite_dir("trixie")
        self.archive.publish()
        src = self.make_source()
        for path in src.values():
            shutil.copy(path, self.archive.pool)
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_base, f)
        self.assertIsNone(code, out + err)
        self.assertIn("Debian's pool: %s/mirror/pool/main/m/mesa/" % self.archive.url, out)
        self.assertNotIn("snapshot archive", out)
        self.assertEqual(self.cached(f), sorted(os.path.basename(p) for p in src.values()))

    def test_wrong_bytes_in_the_pool_then_the_snapshot(self):
        """The pool serves a .dsc with other bytes: refused, and the
        snapshot archive's, with the pinned sha256, is taken instead."""
        src = self.make_source()
        with open(src["dsc"], "rb") as fh:
            data = fh.read()
        with open(os.path.join(self.archive.pool, os.path.basename(src["dsc"])), "wb") as fh:
            fh.write(data + b"tampered")
        self.serve_snapshot(src)
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_base, f, ("dsc", "orig", "debian"), False)
        self.assertIsNone(code, out + err)
        with open(os.path.join(f.cache, os.path.basename(src["dsc"])), "rb") as fh:
            self.assertEqual(fh.read(), data)

    def test_the_tarball_builds_security_fix_too(self):
        """fetch --tarball's debian.tar.xz (Debian's security fixes) takes
        the same way: pool, then snapshot."""
        src = self.make_source()
        self.serve_snapshot(src)
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_debian_fixes, f)
        self.assertIsNone(code, out + err)
        self.assertTrue(sources.verify_debian_fixes(f))

    def test_wrong_bytes_from_the_snapshot_are_refused(self):
        """The .dsc, or a tarball the verified .dsc names, served with
        other bytes: refused, never in the cache, no partial file left."""
        src = self.make_source()
        for kind in ("dsc", "orig"):
            with self.subTest(tampered=kind):
                shutil.rmtree(self.work)
                os.makedirs(self.work)
                shutil.rmtree(self.archive.snapshot)
                os.makedirs(self.archive.snapshot)
                self.serve_snapshot(src, tamper=kind)
                f = self.fork(src)
                _, code, out, err = call(sources.fetch_base, f, ("dsc", "orig", "debian"), False)
                self.assertEqual(code, 1, out + err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("%s had sha256" % os.path.basename(src[kind]), err)
                self.assertIn("(refused)", err)
                self.assertNotIn(os.path.basename(src[kind]), self.cached(f))
                self.assertFalse([n for n in self.cached(f) if n.endswith(".part")])

    def test_nothing_anywhere_names_every_source_tried(self):
        self.archive.suite_dir("trixie")
        self.archive.publish()
        src = self.make_source()
        f = self.fork(src)
        _, code, out, err = call(sources.fetch_base, f)
        self.assertEqual(code, 1, out + err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for source in ("apt-get source mesa=%s (trixie)" % self.VERSION, "pool " +
                       self.archive.url, "snapshot " + self.archive.url):
            self.assertIn(source, err)
        self.assertIn("Rebasing when the base is gone", err)
        self.assertEqual(self.cached(f), [])


if __name__ == "__main__":
    unittest.main()
