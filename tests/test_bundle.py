# SPDX-License-Identifier: MIT
"""The prebuilt bundles (bin/mesafork/bundle.py, docs/bundle.md).

`bin/mesa-fork bundle` runs once per test run, for every architecture under
test, in a clone of this checkout whose working tree is committed (a
bundle refuses a dirty tree, and the tests must test the code as it is),
sharing the work directory's builds. The tests then check what the
archives hold, audit their ELF files, unpack them as a normal user (uid
65534) in a directory with spaces in its name inside Debian bookworm,
trixie and sid roots that hold only the Vulkan loader and the allowed
libraries (config/fork.ini [bundle]), and show every driver working there
on its drm-shim; and install them with `install --from-bundle`, which must
refuse a changed, an added or a hostile file."""

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

import forklib
from mesafork import bundle, cross, upstream

ARCHES = forklib.tested_arches()
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
NOBODY = 65534
_made = {}


def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), env=GIT_ENV, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def snapshot_clone(dest):
    """A clone of this checkout with its working tree (tracked changes,
    untracked files git would add, deletions) committed on top."""
    subprocess.run(["git", "clone", "-q", forklib.TOP, dest], check=True)
    files = git(forklib.TOP, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for f in filter(None, files):
        src, dst = os.path.join(forklib.TOP, f), os.path.join(dest, f)
        if os.path.lexists(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)
        elif os.path.lexists(dst):
            os.unlink(dst)
    git(dest, "add", "-A")
    if git(dest, "status", "--porcelain"):
        git(dest, "commit", "-q", "-m", "the working tree, for the bundle tests")
    return dest


def cli(checkout, *args, env=None, timeout=1800):
    return subprocess.run([os.path.join(checkout, "bin", "mesa-fork")] + list(args),
                          env=dict(env or os.environ, MESA_FORK_WORK=forklib.WORK),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def made():
    """{'tmp', 'clone', 'out', 'result', 'stamps'}: the bundles of this run,
    made once."""
    if not _made:
        tmp = tempfile.mkdtemp(prefix="mesa-fork-bundle-test-")
        os.chmod(tmp, 0o755)
        clone = snapshot_clone(os.path.join(tmp, "checkout"))
        out = os.path.join(tmp, "out")
        stamps = {}
        for a in ARCHES:
            with open(os.path.join(forklib.Target(a).mesa_build, ".mesa-fork-options")) as f:
                stamps[a] = f.read()
        r = cli(clone, "bundle", "--arch", ",".join(ARCHES), "--out", out)
        _made.update(tmp=tmp, clone=clone, out=out, result=r, stamps=stamps)
    return _made


def archive(arch):
    m = made()
    if m["result"].returncode != 0:
        raise AssertionError("bundle failed:\n" + m["result"].stdout[-4000:])
    return os.path.join(m["out"], bundle.bundle_name(forklib.Target(arch).conf, arch)
                        + ".tar.zst")


def unpack(arch, dest):
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "--zstd", "-xf", archive(arch), "-C", dest], check=True)
    return os.path.join(dest, bundle.bundle_name(forklib.Target(arch).conf, arch))


def tearDownModule():
    if _made:
        shutil.rmtree(_made["tmp"], ignore_errors=True)


def objdump_versions(path):
    """Symbol versions path needs, read from objdump's 'Version References'
    (another tool than the audit's readelf)."""
    out = subprocess.run(["objdump", "-p", path], stdout=subprocess.PIPE, text=True).stdout
    refs = out.split("Version References:", 1)
    return set(re.findall(r"\s0x[0-9a-f]+ 0x\d+ \d+ (\S+)", refs[1])) if len(refs) == 2 else set()


class Contents(unittest.TestCase):
    def test_every_architecture_under_test_has_its_archive(self):
        m = made()
        self.assertEqual(m["result"].returncode, 0, m["result"].stdout[-4000:])
        self.assertEqual(sorted(os.listdir(m["out"])),
                         sorted([os.path.basename(archive(a)) for a in ARCHES] +
                                ["SHA256SUMS"]))

    def test_the_build_directory_keeps_the_install_s_options(self):
        """bundle rebuilds the drivers with 'bundle' in driverInfo and puts
        the build back: install --no-build afterwards installs what install
        did."""
        m = made()
        for a in ARCHES:
            t = forklib.Target(a)
            with open(os.path.join(t.mesa_build, ".mesa-fork-options")) as f:
                self.assertEqual(f.read(), m["stamps"][a])
            for drv, paths in t.conf["drivers"].items():
                with self.subTest(arch=a, driver=drv), tempfile.TemporaryDirectory() as tmp:
                    # The build directory's driver, through a manifest of its own.
                    icd = os.path.join(tmp, "icd.json")
                    with open(icd, "w") as f:
                        json.dump({"file_format_version": "1.0.1", "ICD": {
                            "library_path": os.path.join(t.mesa_build, paths.split()[0]),
                            "api_version": "1.3.0"}}, f)
                    env = t.shim_env(drv, VK_DRIVER_FILES=icd, VK_ICD_FILENAMES=icd)
                    devices = t.list_devices(env)[0]
                    self.assertEqual(len(devices), 1, devices)
                    self.assertTrue(devices[0]["info"].endswith(forklib.fork_tag()),
                                    devices[0]["info"])

    def test_manifest_sources_and_relative_paths(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                conf = forklib.Target(a).conf
                # sha256sum reads MANIFEST as it is, every file listed.
                r = subprocess.run(["sha256sum", "-c", "--strict", "MANIFEST"], cwd=top,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                self.assertEqual(r.returncode, 0, r.stdout)
                listed = {line.split("  ", 1)[1] for line in open(os.path.join(top, "MANIFEST"))
                          .read().splitlines()}
                on_disk = {os.path.relpath(os.path.join(d, n), top)
                           for d, _, ns in os.walk(top) for n in ns} - {"MANIFEST"}
                self.assertEqual(listed, on_disk)
                # Every driver with its shim and manifest; no test helper.
                for drv, paths in conf["drivers"].items():
                    icd = os.path.join(top, "share", "mesa-fork", "icd.d",
                                       "mesa_fork_%s_icd.json" % drv)
                    lib = json.load(open(icd))["ICD"]["library_path"]
                    self.assertFalse(os.path.isabs(lib), lib)
                    self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(icd), lib)))
                    self.assertIn("lib/mesa-fork/drm-shim/" + os.path.basename(paths.split()[1]),
                                  on_disk)
                self.assertNotIn("lib/mesa-fork/libmesa-fork-failmalloc.so", on_disk)
                for prog in ("mesa-fork-vkcheck", "mesa-fork-check", "mesa-fork-va-probe",
                             "mesa-fork-fastpath-probe"):
                    self.assertIn("bin/" + prog, on_disk)
                # Nothing used at run time names the machine it was built on.
                for rel in on_disk - {"SOURCES"}:
                    with open(os.path.join(top, rel), "rb") as f:
                        data = f.read()
                    if not data.startswith(b"\x7fELF"):
                        for where in (forklib.WORK, made()["clone"], forklib.TOP):
                            self.assertNotIn(where.encode(), data, rel)
                self.assertEqual(open(os.path.join(top, "share", "mesa-fork", "release"))
                                 .read().strip(), forklib.fork_tag()[1:-1] + ", bundle")
                # SOURCES: the commit, the base's checksums, each patch's sha256.
                src = open(os.path.join(top, "SOURCES")).read()
                self.assertIn("commit: " + git(made()["clone"], "rev-parse", "HEAD").strip(),
                              src)
                self.assertIn(conf["base"]["sha256_dsc"], src)
                patches = sorted(p for p in os.listdir(os.path.join(forklib.TOP, "patches"))
                                 if p.endswith(".patch"))
                self.assertGreater(len(patches), 0)
                for p in patches:
                    with open(os.path.join(forklib.TOP, "patches", p), "rb") as f:
                        self.assertIn("%s  %s" % (hashlib.sha256(f.read()).hexdigest(), p), src)


class Audit(unittest.TestCase):
    def test_the_bundles_pass_the_audit(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                self.assertEqual(bundle.audit(top, forklib.Target(a).conf), [])

    def test_a_lower_floor_names_each_file_that_needs_more(self):
        """With the floor at GLIBC_2.33 the audit names exactly the files
        objdump says need a newer GLIBC; without libdrm.so.2 allowed, each
        file that needs it."""
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                conf = forklib.Target(a).conf
                conf["bundle"]["floor"] = re.sub(r"GLIBC_\S+", "GLIBC_2.33",
                                                 conf["bundle"]["floor"])
                conf["bundle"]["allowed_libraries"] = " ".join(
                    x for x in conf["bundle"]["allowed_libraries"].split() if x != "libdrm.so.2")
                expect_glibc, expect_drm = set(), set()
                for d, _, names in os.walk(top):
                    for n in names:
                        p = os.path.join(d, n)
                        if not bundle.is_elf(p):
                            continue
                        rel = os.path.relpath(p, top)
                        for v in objdump_versions(p):
                            m = re.match(r"GLIBC_(\d+)\.(\d+)", v)
                            if m and (int(m.group(1)), int(m.group(2))) > (2, 33):
                                expect_glibc.add(rel)
                        dyn = subprocess.run(["objdump", "-p", p], stdout=subprocess.PIPE,
                                             text=True).stdout
                        if re.search(r"NEEDED\s+libdrm\.so\.2", dyn):
                            expect_drm.add(rel)
                faults = bundle.audit(top, conf)
                self.assertTrue(expect_glibc and expect_drm)
                self.assertEqual({f.split(" ")[0] for f in faults if "newer than" in f},
                                 expect_glibc)
                self.assertEqual({f.split(" ")[0] for f in faults if "libdrm.so.2" in f},
                                 expect_drm)


    def test_glibcxx_floor_runpath_execstack_and_machine(self):
        """The other checks of the audit, each against a control: a lower
        GLIBCXX floor names the files objdump finds needing more; a program
        with a RUNPATH and an executable stack, and a bundle audited as the
        other architecture, are named."""
        a = ARCHES[0]
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, tmp)
            conf = forklib.Target(a).conf
            conf["bundle"]["floor"] = re.sub(r"GLIBCXX_\S+", "GLIBCXX_3.4.29",
                                             conf["bundle"]["floor"])
            expect = set()
            for d, _, names in os.walk(top):
                for n in names:
                    p = os.path.join(d, n)
                    if bundle.is_elf(p) and "GLIBCXX_3.4.30" in objdump_versions(p):
                        expect.add(os.path.relpath(p, top))
            self.assertTrue(expect)
            self.assertEqual({f.split(" ")[0] for f in bundle.audit(top, conf)}, expect)
            conf = forklib.Target(a).conf
            if a == forklib.HOST.arch:
                src = os.path.join(tmp, "t.c")
                with open(src, "w") as f:
                    f.write("int main(void) { return 0; }\n")
                subprocess.run(["gcc", "-o", os.path.join(top, "bin", "bad"), src,
                                "-Wl,-rpath,/builds/x", "-z", "execstack"], check=True)
                faults = bundle.audit(top, conf)
                self.assertEqual(len(faults), 2, faults)
                self.assertIn("bin/bad has RUNPATH /builds/x", faults[0] + faults[1])
                self.assertIn("bin/bad asks for an executable stack", faults[0] + faults[1])
                os.unlink(os.path.join(top, "bin", "bad"))
            other = [x for x in bundle.MACHINES if x != a][0]
            faults = bundle.audit(top, conf, arch=other)
            elves = [os.path.relpath(os.path.join(d, n), top) for d, _, ns in os.walk(top)
                     for n in ns if bundle.is_elf(os.path.join(d, n))]
            self.assertEqual(sorted({f.split(" ")[0] for f in faults if "of machine" in f}),
                             sorted(elves))

    def test_no_debug_sections(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                for d, _, names in os.walk(top):
                    for n in names:
                        p = os.path.join(d, n)
                        if bundle.is_elf(p):
                            secs = subprocess.run(["readelf", "-S", "-W", p],
                                                  stdout=subprocess.PIPE, text=True).stdout
                            self.assertNotIn(".debug_info", secs, p)
                            self.assertIn(".symtab", secs, p)


class Archive(unittest.TestCase):
    def test_the_tar_stream_depends_on_the_files_only(self):
        """Two archives of one staged tree, made under different umasks and
        times, are the same bytes; members are owned by root, 0755 or
        0644."""
        a = ARCHES[0]
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, os.path.join(tmp, "one"))
            os.chmod(os.path.join(top, "SOURCES"), 0o600)
            first = os.path.join(tmp, "first.tar.zst")
            bundle.write_archive(top, first, 1700000000)
            old = os.umask(0o077)
            try:
                again = os.path.join(tmp, "again")
                shutil.copytree(top, os.path.join(again, os.path.basename(top)))
                for d, dirs, names in os.walk(again):
                    for n in dirs + names:
                        os.utime(os.path.join(d, n), (1, 1))
                second = os.path.join(tmp, "second.tar.zst")
                bundle.write_archive(os.path.join(again, os.path.basename(top)), second,
                                     1700000000)
            finally:
                os.umask(old)
            with open(first, "rb") as f1, open(second, "rb") as f2:
                self.assertEqual(hashlib.sha256(f1.read()).hexdigest(),
                                 hashlib.sha256(f2.read()).hexdigest())
            listing = subprocess.run(["tar", "--zstd", "-tvf", first], stdout=subprocess.PIPE,
                                     text=True).stdout.splitlines()
            for line in listing:
                mode, owner = line.split()[:2]
                self.assertEqual(owner, "0/0", line)
                self.assertIn(mode, ("drwxr-xr-x", "-rwxr-xr-x", "-rw-r--r--"), line)

    def test_sha256sums_names_each_archive(self):
        out = made()["out"]
        with open(os.path.join(out, "SHA256SUMS")) as f:
            sums = dict(reversed(line.split("  ", 1)) for line in f.read().splitlines())
        for a in ARCHES:
            with open(archive(a), "rb") as f:
                self.assertEqual(sums[os.path.basename(archive(a))],
                                 hashlib.sha256(f.read()).hexdigest())


class Check(unittest.TestCase):
    def test_another_release_in_driverinfo_or_no_driver_fails(self):
        """mesa-fork-check fails each driver whose driverInfo does not name
        the prefix's release, and a prefix that names no driver."""
        a = forklib.HOST.arch
        if a not in ARCHES:
            forklib.skip_optional("arch", "this machine's architecture is not under test")
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, tmp)
            share = os.path.join(top, "share", "mesa-fork")
            check = os.path.join(top, "bin", "mesa-fork-check")
            with open(os.path.join(share, "release"), "w") as f:
                f.write("mesa-fork 999, elsewhere\n")
            r = subprocess.run([check], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            self.assertEqual(r.returncode, 1, r.stdout)
            for drv in forklib.Target(a).conf["drivers"]:
                self.assertRegex(r.stdout, r"(?m)^%s: FAILED .*does not name "
                                 r"\(mesa-fork 999, elsewhere\)$" % drv)
            with open(os.path.join(share, "shims"), "w") as f:
                f.write("# nothing\n")
            r = subprocess.run([check], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("names no driver", r.stdout)


class Refusals(unittest.TestCase):
    def test_a_dirty_tree_is_refused(self):
        clone = made()["clone"]
        out = os.path.join(made()["tmp"], "dirty-out")
        with open(os.path.join(clone, "README.md"), "a") as f:
            f.write("an edit\n")
        try:
            r = cli(clone, "bundle", "--arch", ARCHES[0], "--out", out)
        finally:
            git(clone, "checkout", "--", "README.md")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("refusing", r.stdout)
        self.assertIn("uncommitted or untracked files (README.md)", r.stdout)
        self.assertFalse(os.path.exists(out))
        with open(os.path.join(clone, "src", "new.c"), "w") as f:
            f.write("int x;\n")
        try:
            r = cli(clone, "bundle", "--arch", ARCHES[0], "--out", out)
        finally:
            os.unlink(os.path.join(clone, "src", "new.c"))
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("uncommitted or untracked files (src/new.c)", r.stdout)
        self.assertFalse(os.path.exists(out))

    def test_a_series_the_mesa_tree_does_not_hold_is_refused(self):
        clone = made()["clone"]
        first = sorted(p for p in os.listdir(os.path.join(clone, "patches"))
                       if p.endswith(".patch"))[0]
        path = os.path.join(clone, "patches", first)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("Subject: [PATCH] ", "Subject: [PATCH] changed: ", 1))
        git(clone, "commit", "-q", "-am", "a patch changed")
        try:
            r = cli(clone, "bundle", "--arch", ARCHES[0], "--out",
                    os.path.join(made()["tmp"], "series-out"))
        finally:
            git(clone, "reset", "-q", "--hard", "HEAD~1")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("the Mesa tree is not the base plus patches/", r.stdout)


class FromBundle(unittest.TestCase):
    def setUp(self):
        # install --prefix is remembered for later verbs: keep the run's.
        self.saved = {}
        for a in ARCHES:
            path = forklib.Target(a).fork.chosen_prefix_file
            self.saved[path] = open(path).read() if os.path.exists(path) else None

    def tearDown(self):
        for path, text in self.saved.items():
            if text is None:
                if os.path.exists(path):
                    os.unlink(path)
            else:
                with open(path, "w") as f:
                    f.write(text)

    def test_installs_into_a_prefix_and_run_uses_it(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                prefix = os.path.join(tmp, "pre fix")
                r = cli(forklib.TOP, "install", "--from-bundle", archive(a), "--prefix", prefix)
                self.assertEqual(r.returncode, 0, r.stdout)
                self.assertRegex(r.stdout, r"\d+ files match MANIFEST")
                conf = forklib.Target(a).conf
                for drv in conf["drivers"]:
                    self.assertRegex(r.stdout, r"%s: OK on its drm-shim .*, bundle\)" % drv)
                self.assertTrue(os.path.isfile(os.path.join(prefix, "share", "mesa-fork",
                                                            "bundle", "SOURCES")))
                # The prefix's env.sh names its paths: any shell sources it.
                r = subprocess.run(["dash", "-c", '. "$1/share/mesa-fork/env.sh" && '
                                    'echo "$VK_DRIVER_FILES"', "sh", prefix],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                self.assertEqual(r.stdout.strip().split(":"), [
                    os.path.join(prefix, "share", "mesa-fork", "icd.d",
                                 "mesa_fork_%s_icd.json" % d) for d in conf["drivers"]])
                drv = list(conf["drivers"])[0]
                r = cli(forklib.TOP, "run", "--prefix", prefix, "--shim", drv, "--",
                        "mesa-fork-vkcheck")
                self.assertEqual(r.returncode, 0, r.stdout)
                self.assertIn(", bundle)", r.stdout)

    def _refused(self, a, top, expect):
        prefix = os.path.join(os.path.dirname(top), "prefix")
        r = cli(forklib.TOP, "install", "--from-bundle", top, "--prefix", prefix,
                "--no-demo")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(expect, r.stdout)
        self.assertFalse(os.path.exists(prefix))

    def test_a_changed_file_is_refused(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                drv = list(forklib.Target(a).conf["drivers"])[0]
                lib = os.path.join("lib", "mesa-fork", "libvulkan_%s.so" % drv)
                with open(os.path.join(top, lib), "r+b") as f:
                    f.seek(4096)
                    b = f.read(1)
                    f.seek(4096)
                    f.write(bytes([b[0] ^ 1]))
                self._refused(a, top, "refusing: %s changed" % lib)

    def test_an_added_or_a_missing_file_is_refused(self):
        for a in ARCHES:
            with self.subTest(arch=a), tempfile.TemporaryDirectory() as tmp:
                top = unpack(a, tmp)
                with open(os.path.join(top, "lib", "mesa-fork", "libextra.so"), "w") as f:
                    f.write("x")
                self._refused(a, top, "refusing: lib/mesa-fork/libextra.so is not in MANIFEST")
                os.unlink(os.path.join(top, "lib", "mesa-fork", "libextra.so"))
                os.unlink(os.path.join(top, "bin", "mesa-fork-vkcheck"))
                self._refused(a, top, "refusing: bin/mesa-fork-vkcheck is missing")

    def test_hostile_archives_and_manifests_are_refused(self):
        """Members a bundle never holds, each alone in an archive otherwise
        well formed: refused with the member named, nothing installed."""
        def member(name, kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            info.size = 1 if kind == tarfile.REGTYPE else 0
            return info
        cases = {
            "dotdot": ([member("b/MANIFEST"), member("b/../evil")], "it holds b/../evil"),
            "absolute": ([member("b/MANIFEST"), member("/tmp/evil")], "it holds /tmp/evil"),
            "symlink": ([member("b/MANIFEST"), member("b/lib", tarfile.SYMTYPE, "/etc")],
                        "it holds b/lib"),
            "hardlink": ([member("b/MANIFEST"), member("b/x", tarfile.LNKTYPE, "b/MANIFEST")],
                         "it holds b/x"),
            "fifo": ([member("b/MANIFEST"), member("b/p", tarfile.FIFOTYPE)], "it holds b/p"),
            "two tops": ([member("b/MANIFEST"), member("c/MANIFEST")],
                         "more than one top directory"),
            "file then dir": ([member("b/x"), member("b/x/y")], "refusing"),
        }
        for what, (members, expect) in cases.items():
            with self.subTest(case=what), tempfile.TemporaryDirectory() as tmp:
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w") as t:
                    for info in members:
                        t.addfile(info, io.BytesIO(b"x") if info.size else None)
                path = os.path.join(tmp, "bad.tar.zst")
                subprocess.run(["zstd", "-q", "-o", path], input=buf.getvalue(), check=True)
                prefix = os.path.join(tmp, "p")
                r = cli(forklib.TOP, "install", "--from-bundle", path, "--prefix", prefix,
                        "--no-demo")
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn(expect, r.stdout)
                self.assertNotIn("Traceback", r.stdout)
                self.assertFalse(os.path.exists(prefix))
        a = ARCHES[0]
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, tmp)
            with open(os.path.join(top, "MANIFEST"), "a") as f:
                f.write("%s  ../outside\n" % ("0" * 64))
            self._refused(a, top, "is not 'sha256  path' with a path inside the bundle")

    def test_a_bundle_of_another_release_is_refused(self):
        a = ARCHES[0]
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, tmp)
            release = os.path.join(top, "share", "mesa-fork", "release")
            with open(release, "w") as f:
                f.write("mesa-fork 999, elsewhere\n")
            # A MANIFEST that agrees: only the release is wrong.
            subprocess.run(["sh", "-c", "find . -type f ! -name MANIFEST | sed 's|^./||' | "
                            "LC_ALL=C sort | xargs sha256sum > MANIFEST"], cwd=top, check=True)
            self._refused(a, top, "the bundle is mesa-fork 999, elsewhere")


class EnvScript(unittest.TestCase):
    def test_bash_finds_the_bundle_dash_asks_for_it(self):
        a = forklib.HOST.arch
        if a not in ARCHES:
            forklib.skip_optional("arch", "this machine's architecture is not under test")
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, os.path.join(tmp, "my bundles"))
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("VK_", "MESA_FORK"))}
            r = subprocess.run(["bash", "-c", '. "$1/share/mesa-fork/env.sh" && '
                                'echo "$VK_DRIVER_FILES" && command -v mesa-fork-check && '
                                'mesa_fork_off && echo "off:${VK_DRIVER_FILES-unset}"', "sh",
                                top], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd="/")
            self.assertEqual(r.returncode, 0, r.stdout)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0].split(":"), [
                os.path.join(top, "share", "mesa-fork", "icd.d", "mesa_fork_%s_icd.json" % d)
                for d in forklib.Target(a).conf["drivers"]])
            self.assertEqual(lines[1], os.path.join(top, "bin", "mesa-fork-check"))
            self.assertEqual(lines[2], "off:unset")
            r = subprocess.run(["dash", "-c", '. "$1/share/mesa-fork/env.sh"; echo "rc=$? '
                                '${VK_DRIVER_FILES-unset}"', "sh", top], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertIn("rc=1 unset", r.stdout)
            self.assertIn("set MESA_FORK_BUNDLE", r.stdout)
            want = os.path.join(top, "bin", "mesa-fork-check")
            # dash with MESA_FORK_BUNDLE, which is gone afterwards; zsh by
            # itself; bash from a relative path with a CDPATH and a cd
            # wrapper that prints, which a cd in env.sh would capture.
            rel = os.path.relpath(top, tmp)
            for shell, script in (
                    ("dash", 'MESA_FORK_BUNDLE="$1"; . "$1/share/mesa-fork/env.sh" && '
                             'echo "${MESA_FORK_BUNDLE-gone}" && command -v mesa-fork-check'),
                    ("zsh", '. "$1/share/mesa-fork/env.sh" && echo gone && '
                            'command -v mesa-fork-check'),
                    ("bash", 'CDPATH=.:/usr; cd() { echo "cd: $*"; builtin cd "$@"; }; '
                             '. "%s/share/mesa-fork/env.sh" && echo gone && '
                             'command -v mesa-fork-check' % rel)):
                with self.subTest(shell=shell):
                    r = subprocess.run([shell, "-c", script, "sh", top], env=env, cwd=tmp,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
                    self.assertEqual(r.returncode, 0, r.stdout)
                    self.assertEqual(r.stdout.splitlines()[-2], "gone", r.stdout)
                    self.assertEqual(os.path.realpath(r.stdout.splitlines()[-1]), want)

    def test_sourced_twice_or_both_scripts_mesa_fork_off_restores_all(self):
        a = forklib.HOST.arch
        if a not in ARCHES:
            forklib.skip_optional("arch", "this machine's architecture is not under test")
        with tempfile.TemporaryDirectory() as tmp:
            top = unpack(a, tmp)
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("VK_", "MESA_FORK"))}
            env["VK_ADD_DRIVER_FILES"] = "/x.json"
            show = 'echo "$PATH|${VK_DRIVER_FILES-u}|${VK_ICD_FILENAMES-u}|$VK_ADD_DRIVER_FILES"'
            for order in (("env.sh", "env.sh"), ("env.sh", "env-add.sh"),
                          ("env-add.sh", "env.sh")):
                with self.subTest(order=order):
                    script = (show + '; . "$1/share/mesa-fork/%s" && . "$1/share/mesa-fork/%s"'
                              ' && mesa_fork_off && ' % order + show +
                              ' && ! command -v mesa_fork_off')
                    r = subprocess.run(["bash", "-c", script, "sh", top], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
                    self.assertEqual(r.returncode, 0, r.stdout)
                    before, after = r.stdout.splitlines()[:2]
                    self.assertEqual(before, after)


class InDebianRoots(unittest.TestCase):
    """Each bundle unpacked and shown working by uid 65534, in a directory
    with spaces in its name, in roots of Debian bookworm, trixie and sid
    holding only config/fork.ini [bundle] test_packages. This machine's
    architecture runs chrooted (the root's own sh, tar, sha256sum and
    libraries); arm64 runs under qemu-user with the root as its library
    prefix (this machine has no arm64 library to fall back on), unpacked
    with this machine's tar."""

    def root(self, suite, a):
        t = forklib.Target(a)
        dest = os.path.join(forklib.WORK, "chroot", "bundle-%s-%s" % (suite, a))
        pkgs = t.conf["bundle"]["test_packages"].split()
        if os.geteuid() != 0:
            forklib.skip_optional("root", "unpacking Debian %s roots and running as another "
                                  "user needs root" % suite)
        cross.extract_root(t.fork, suite, pkgs, dest, "root for the bundle tests",
                           apt_options=['Acquire::Check-Valid-Until "false"'])
        return dest

    def test_each_driver_works_in_each_root(self):
        for a in ARCHES:
            for suite in forklib.config()["bundle"]["test_suites"].split():
                with self.subTest(arch=a, suite=suite):
                    root = self.root(suite, a)
                    home = os.path.join(root, "home", "a user")
                    shutil.rmtree(home, ignore_errors=True)
                    os.makedirs(os.path.join(home, "my bundles"))
                    shutil.copy(archive(a), os.path.join(home, "my bundles"))
                    for d, dirs, files in os.walk(home):
                        for n in dirs + files:
                            os.chown(os.path.join(d, n), NOBODY, NOBODY)
                    os.chown(home, NOBODY, NOBODY)
                    name = os.path.basename(archive(a))
                    script = ('cd "$1" && tar --zstd -xf "$2" && cd "${2%.tar.zst}" && '
                              'sha256sum -c --quiet MANIFEST && '
                              'MESA_FORK_BUNDLE="$PWD" . ./share/mesa-fork/env.sh && '
                              'mesa-fork-check')
                    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/a user"}
                    if a == forklib.HOST.arch:
                        cmd = [shutil.which("chroot") or "/usr/sbin/chroot", "--userspec=%d:%d" % (NOBODY, NOBODY), root,
                               "/bin/sh", "-c", script, "sh", "/home/a user/my bundles", name]
                    else:
                        qemu = upstream.qemu_for(forklib.Target(a).fork)
                        env["MESA_FORK_WRAPPER"] = "%s -L %s" % (qemu, shlex.quote(root))
                        env["PATH"] = os.environ["PATH"]
                        cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                               "--clear-groups", "--", "/bin/sh", "-c", script, "sh",
                               os.path.join(home, "my bundles"), name]
                    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, timeout=600)
                    self.assertEqual(r.returncode, 0, r.stdout)
                    tag = forklib.fork_tag()[:-1] + ", bundle)"
                    for drv in forklib.Target(a).conf["drivers"]:
                        self.assertRegex(r.stdout, r"(?m)^%s: OK on its drm-shim .*%s$"
                                         % (drv, re.escape(tag)))
                    shutil.rmtree(home)


class CiJob(unittest.TestCase):
    def test_a_tag_builds_and_releases_both_bundles_with_the_verb(self):
        import yaml
        with open(os.path.join(forklib.TOP, ".gitlab-ci.yml")) as f:
            ci = yaml.safe_load(f)
        jobs = {k: v for k, v in ci.items() if isinstance(v, dict) and "script" in v}
        makers = [j for j in jobs.values()
                  if any("bin/mesa-fork bundle" in line for line in j["script"])]
        self.assertEqual(len(makers), 1, jobs)
        job = makers[0]
        self.assertIn({"if": "$CI_COMMIT_TAG"}, job["rules"])
        self.assertTrue(any("--arch amd64,arm64" in line and "bundle" in line
                            for line in job["script"]))
        release = [j for j in jobs.values() if "release" in j]
        self.assertEqual(len(release), 1)
        links = release[0]["release"]["assets"]["links"]
        conf = forklib.config()
        # The job accepts only the tag NAME-RELEASE, so that the links name
        # the files bundle writes.
        self.assertTrue(any('"$CI_COMMIT_TAG" = "%s-$R"' % conf["fork"]["name"] in line
                            for line in job["script"]))
        # The files the job uploads are the ones the links name.
        upload = "".join(line for line in job["script"] if "--upload-file" in line)
        base = re.search(r'"(\$CI_API_V4_URL/projects/\$CI_PROJECT_ID/packages/generic/[^"]*/)'
                         r'\$\(basename "\$f"\)"', upload)
        self.assertTrue(base, upload)
        out = re.search(r"bundle --arch amd64,arm64 --out (\S+)",
                        " ".join(job["script"])).group(1)
        self.assertIn("for f in %s/*.tar.zst %s/SHA256SUMS" % (out, out), upload)
        for name in ["${CI_COMMIT_TAG}-%s.tar.zst" % a for a in ("amd64", "arm64")] + \
                ["SHA256SUMS"]:
            self.assertIn({"name": name, "url": base.group(1) + name},
                          [{"name": x["name"], "url": x["url"]} for x in links])
        # The ccache CI keeps in the checkout is ignored, or bundle refuses
        # the tree as dirty.
        ccache = ci["variables"]["CCACHE_DIR"].replace("$CI_PROJECT_DIR/", "")
        r = subprocess.run(["git", "-C", forklib.TOP, "check-ignore", "-q",
                            os.path.join(ccache, "x")])
        self.assertEqual(r.returncode, 0, ccache)


if __name__ == "__main__":
    sys.exit(unittest.main())
