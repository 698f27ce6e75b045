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
                         sorted(os.path.basename(archive(a)) for a in ARCHES))

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

    def test_an_archive_reaching_outside_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as t:
                for name in ("mesa-fork-1-amd64/MANIFEST", "mesa-fork-1-amd64/../evil"):
                    info = tarfile.TarInfo(name)
                    info.size = 1
                    t.addfile(info, io.BytesIO(b"x"))
            path = os.path.join(tmp, "bad.tar.zst")
            subprocess.run(["zstd", "-q", "-o", path], input=buf.getvalue(), check=True)
            r = cli(forklib.TOP, "install", "--from-bundle", path, "--prefix",
                    os.path.join(tmp, "p"), "--no-demo")
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("refusing %s: it holds mesa-fork-1-amd64/../evil" % path, r.stdout)
            self.assertFalse(os.path.exists(os.path.join(tmp, "evil")))


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
            self.assertIn("set MESA_FORK_PREFIX", r.stdout)


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
                              'MESA_FORK_PREFIX="$PWD" . ./share/mesa-fork/env.sh && '
                              'mesa-fork-check')
                    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/a user"}
                    if a == forklib.HOST.arch:
                        cmd = [shutil.which("chroot") or "/usr/sbin/chroot", "--userspec=%d:%d" % (NOBODY, NOBODY), root,
                               "/bin/sh", "-c", script, "sh", "/home/a user/my bundles", name]
                    else:
                        qemu = upstream.qemu_for(forklib.Target(a).fork)
                        env["MESA_FORK_WRAPPER"] = "%s -L %s" % (qemu, root)
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
        for a in ("amd64", "arm64"):
            self.assertEqual(bundle.bundle_name(conf, a),
                             "%s-%s-%s" % (conf["fork"]["name"], conf["fork"]["release"], a))
            name = "${CI_COMMIT_TAG}-%s.tar.zst" % a
            self.assertTrue(any(name in link["url"] and name in link["name"]
                                for link in links), (name, links))


if __name__ == "__main__":
    sys.exit(unittest.main())
