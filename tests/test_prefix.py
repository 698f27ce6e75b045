# SPDX-License-Identifier: MIT
"""`mesa-fork install --prefix` as a user and a packager meet it, run for
real (`install --no-build --no-demo`, in a work directory of its own that
shares the Mesa build, so that the machine's client build and prefix stay
as they are):

- the fork stays opt-in whatever the prefix: with the prefix at
  ~/.local and on XDG_DATA_DIRS and XDG_CONFIG_DIRS, the Vulkan loader
  finds neither the fork's driver nor its layer by itself, and finds both
  when env.sh / VK_LAYER_PATH ask for them; the manifests an earlier
  install left in share/vulkan/ are removed, another program's stay;
- env.sh and env-add.sh on a prefix with a space, sourced by sh and bash;
- --destdir: the staged tree is the plain install's, and no staged file
  (binaries included) names the staging directory; rpmbuild with Fedora's
  check-buildroot accepts the %install line docs/build-deps.md documents."""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import forklib
from forklib import CLI, run
from mesafork import config, install

TMP = None           # everything of this module: work directory, prefixes, staging
WORK = None          # its work directory (the machine's Mesa build, its own client build)
HOME = None          # a home directory with a space in its name
PREFIX = None        # install --prefix HOME/.local
DESTDIR = None       # install --destdir DESTDIR --prefix STAGED_PREFIX
STAGED_PREFIX = None
OUT = {}             # what each install printed

# What an earlier install (manifests in share/vulkan/) left in the prefix,
# and what other programs keep there.
OLD_OURS = ("share/vulkan/icd.d/mesa_fork_intel_icd.json",
            "share/vulkan/explicit_layer.d/VkLayer_mesafork_synctrace.json")
NOT_OURS = ("share/vulkan/icd.d/intel_icd.x86_64.json",
            "share/vulkan/icd.d/mesa_fork_panfrost_icd.json")


def work_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VK_")}
    env.update(MESA_FORK_WORK=WORK, **extra)
    return env


def cli_install(*args):
    r = run([CLI, "install", "--no-build", "--no-demo"] + list(args), env=work_env(),
            timeout=900)
    if r.returncode != 0:
        raise AssertionError("install %s failed:\n%s\n%s" % (" ".join(args), r.stdout[-3000:],
                                                            r.stderr[-3000:]))
    return r.stdout


def manifest(key, lib):
    return json.dumps({"file_format_version": "1.0.0",
                       key: {"library_path": lib, "api_version": "1.3.0"}})


def seed_old_install(prefix):
    """The manifests an install of the earlier layout wrote (their library
    in the prefix's lib/mesa-fork/), and two files that are not ours."""
    ours = os.path.join(prefix, "lib", "mesa-fork")
    files = {OLD_OURS[0]: manifest("ICD", os.path.join(ours, "libvulkan_intel.so")),
             OLD_OURS[1]: manifest("layer", os.path.join(ours, "libVkLayer_mesafork_synctrace.so")),
             NOT_OURS[0]: manifest("ICD", "/usr/lib/x86_64-linux-gnu/libvulkan_intel.so"),
             NOT_OURS[1]: manifest("ICD", "/opt/other/libvulkan_panfrost.so")}
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(prefix, path)), exist_ok=True)
        with open(os.path.join(prefix, path), "w") as f:
            f.write(text)


def setUpModule():
    global TMP, WORK, HOME, PREFIX, DESTDIR, STAGED_PREFIX
    if not forklib.HOST.installed():
        raise AssertionError("nothing installed in %s: run 'bin/mesa-fork install'"
                             % forklib.HOST.prefix)
    TMP = tempfile.mkdtemp(prefix="mesa-fork-prefix-")
    WORK = os.path.join(TMP, "work")
    os.makedirs(os.path.join(WORK, "build"))
    # install reads the Mesa build, the VMA header and whether the base is
    # the release tarball from there; it writes only the client build.
    os.symlink(forklib.HOST.mesa_build, os.path.join(WORK, "build", "mesa"))
    for d in ("deps", "cache"):
        if os.path.exists(os.path.join(forklib.WORK, d)):
            os.symlink(os.path.join(forklib.WORK, d), os.path.join(WORK, d))
    HOME = os.path.join(TMP, "a home")
    PREFIX = os.path.join(HOME, ".local")
    seed_old_install(PREFIX)
    OUT["plain"] = cli_install("--prefix", PREFIX)
    DESTDIR = os.path.join(TMP, "stage dir")
    # A final prefix that does not exist here, with a space.
    STAGED_PREFIX = os.path.join("/opt", "mesa fork " + os.path.basename(TMP))
    OUT["staged"] = cli_install("--prefix", STAGED_PREFIX, "--destdir", DESTDIR)


def tearDownModule():
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


def tree(root):
    """The files and symlinks under root, relative to it."""
    found = set()
    for d, dirs, files in os.walk(root):
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            found.add(os.path.relpath(os.path.join(d, name), root))
    return found


def intel_shim_env(**extra):
    """No Vulkan variable: the loader searches as it does by itself, on the
    prefix's intel drm-shim (its path holds a space, which LD_PRELOAD cannot
    carry: fork_env names it through LD_LIBRARY_PATH)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VK_", "XDG_", "INTEL_", "ASAHI_", "PAN_", "LD_"))}
    env = install.fork_env(PREFIX, forklib.HOST.conf, shim="intel", base=base)
    for k in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        del env[k]
    env.update(extra)
    return env


def source(script, then, shell="sh", env=None):
    r = subprocess.run([shell, "-c", '. "$0" && %s' % then, script], env=env,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("%s: . %s && %s: %s" % (shell, script, then, r.stderr))
    return r.stdout


class OptIn(unittest.TestCase):
    """Whatever the prefix, the fork runs only when asked to."""

    def search_env(self, **extra):
        """The prefix on every list the loader searches by itself: it is
        $HOME/.local (XDG_DATA_HOME's default), and its share/ and itself
        are on XDG_DATA_DIRS and XDG_CONFIG_DIRS."""
        dirs = ":".join([PREFIX, os.path.join(PREFIX, "share"), "/usr/local/share", "/usr/share"])
        return intel_shim_env(HOME=HOME, XDG_DATA_DIRS=dirs, XDG_CONFIG_DIRS=dirs + ":/etc/xdg",
                              **extra)

    @staticmethod
    def fork_devices(out):
        devs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        return [d for d in devs if config.names_release(forklib.HOST.conf, d["info"])]

    def test_the_loader_finds_no_fork_driver_by_itself(self):
        vkcheck = os.path.join(PREFIX, "bin", "mesa-fork-vkcheck")
        r = run([vkcheck, "--list"], env=self.search_env())
        self.assertEqual(self.fork_devices(r.stdout), [],
                         "a Vulkan program that asked for nothing loaded the fork")
        # The control: env.sh asks for it, and the loader finds it.
        out = source(os.path.join(PREFIX, "share", "mesa-fork", "env.sh"),
                     "mesa-fork-vkcheck --list", env=self.search_env())
        self.assertEqual(len(self.fork_devices(out)), 1, out)

    def test_the_loader_lists_the_layer_only_on_request(self):
        env = self.search_env(VK_DRIVER_FILES=install.icd_json(PREFIX, "intel"))
        r = run(["vulkaninfo", "--summary"], env=env)
        self.assertIn("Instance Layers", r.stdout, r.stderr[-2000:])
        self.assertNotIn("VK_LAYER_MESAFORK_synctrace", r.stdout)
        r = run(["vulkaninfo", "--summary"], env=dict(env, VK_LAYER_PATH=install.layer_dir(PREFIX)))
        self.assertIn("VK_LAYER_MESAFORK_synctrace", r.stdout, r.stderr[-2000:])

    def test_manifests_are_in_share_mesa_fork(self):
        for drv in forklib.HOST.conf["drivers"]:
            path = install.icd_json(PREFIX, drv)
            self.assertTrue(path.startswith(os.path.join(PREFIX, "share", "mesa-fork") + "/"))
            with open(path) as f:
                lib = json.load(f)["ICD"]["library_path"]
            self.assertEqual(lib, os.path.join(PREFIX, "lib", "mesa-fork", os.path.basename(lib)))
            self.assertTrue(os.path.exists(lib), lib)
        self.assertTrue(os.path.exists(os.path.join(install.layer_dir(PREFIX),
                                                    "VkLayer_mesafork_synctrace.json")))
        # Nothing of ours under share/vulkan/: only other programs' files.
        self.assertEqual(sorted(p for p in tree(PREFIX) if p.startswith("share/vulkan/")),
                         sorted(NOT_OURS))

    def test_an_earlier_installs_manifests_are_removed_others_kept(self):
        for path in OLD_OURS:
            self.assertFalse(os.path.exists(os.path.join(PREFIX, path)), path)
            self.assertIn("install: removed %s: an earlier install wrote it where the Vulkan "
                          "loader looks by itself" % os.path.join(PREFIX, path), OUT["plain"])
        for path in NOT_OURS:
            self.assertTrue(os.path.exists(os.path.join(PREFIX, path)), path)
            self.assertNotIn(path, OUT["plain"])

    def test_run_on_a_prefix_of_the_earlier_layout_says_to_install_again(self):
        with tempfile.TemporaryDirectory() as tmp:
            seed_old_install(tmp)
            os.makedirs(os.path.join(tmp, "bin"))
            os.symlink(forklib.bin_path("mesa-fork-vkcheck"),
                       os.path.join(tmp, "bin", "mesa-fork-vkcheck"))
            r = run([CLI, "run", "--prefix", tmp, "--", "true"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("(an earlier install put the manifests in %s/share/vulkan/icd.d, where "
                      "every Vulkan program loads them); install again: bin/mesa-fork install "
                      "--prefix %s" % (tmp, tmp), r.stderr)
        self.assertNotIn("Traceback", r.stderr)


class RunWithASpace(unittest.TestCase):
    def test_run_on_the_shim_of_a_prefix_with_a_space(self):
        r = run([CLI, "run", "--prefix", PREFIX, "--shim", "intel", "--", "sh", "-c",
                 'echo "D=$VK_DRIVER_FILES"'], env=work_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Intel open-source Mesa driver", r.stdout)
        self.assertIn("D=" + ":".join(install.icd_json(PREFIX, d)
                                      for d in forklib.HOST.conf["drivers"]), r.stdout)


class EnvScriptsWithASpace(unittest.TestCase):
    """The prefix is '.../a home/.local': env.sh and env-add.sh quote it."""

    ORIG_PATH = "/usr/local/bin:/usr/bin:/bin"

    def check(self, shell):
        env = {"PATH": self.ORIG_PATH, "HOME": HOME}
        share = os.path.join(PREFIX, "share", "mesa-fork")
        files = ":".join(install.icd_json(PREFIX, d) for d in forklib.HOST.conf["drivers"])
        show = ('printf "%s\\n" "$(command -v mesa-fork-vkcheck)" "D=${VK_DRIVER_FILES-unset}" '
                '"I=${VK_ICD_FILENAMES-unset}" "A=${VK_ADD_DRIVER_FILES-unset}" "P=$PATH"')
        out = source(os.path.join(share, "env.sh"), show + "; mesa_fork_off; " + show,
                     shell, env).splitlines()
        self.assertEqual(out[:5], [os.path.join(PREFIX, "bin", "mesa-fork-vkcheck"),
                                   "D=" + files, "I=" + files, "A=unset",
                                   "P=%s:%s" % (os.path.join(PREFIX, "bin"), self.ORIG_PATH)])
        self.assertEqual(out[5:], ["", "D=unset", "I=unset", "A=unset", "P=" + self.ORIG_PATH])
        out = source(os.path.join(share, "env-add.sh"), show + "; mesa_fork_off; " + show,
                     shell, dict(env, VK_ADD_DRIVER_FILES="/x y/mine.json")).splitlines()
        self.assertEqual(out[:5], [os.path.join(PREFIX, "bin", "mesa-fork-vkcheck"),
                                   "D=unset", "I=unset", "A=" + files,
                                   "P=%s:%s" % (os.path.join(PREFIX, "bin"), self.ORIG_PATH)])
        self.assertEqual(out[5:], ["", "D=unset", "I=unset", "A=/x y/mine.json",
                                   "P=" + self.ORIG_PATH])

    def test_sh(self):
        self.check("sh")

    def test_bash(self):
        self.check("bash")

    def test_any_character_but_a_colon(self):
        """A prefix with a quote, a $ and a backslash (the script alone);
        one with a colon is refused: it separates PATH's entries."""
        with tempfile.TemporaryDirectory() as tmp:
            odd = os.path.join(tmp, "it's $HOME \\ `x`")
            script = os.path.join(tmp, "env.sh")
            with open(script, "w") as f:
                f.write(install.env_script(odd, odd + "/a.json", add=False))
            out = source(script, 'printf "%s\\n" "$VK_DRIVER_FILES" "$PATH"',
                         env={"PATH": "/bin"}).splitlines()
            self.assertEqual(out, [odd + "/a.json", odd + "/bin:/bin"])
            r = run([CLI, "install", "--no-build", "--prefix", os.path.join(tmp, "a:b")],
                    env=work_env())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("holds a ':', which separates entries of PATH and VK_DRIVER_FILES",
                      r.stderr)


class Staging(unittest.TestCase):
    """install --destdir DIR --prefix P: what a package's %install runs."""

    def test_the_staged_tree_is_the_installed_one(self):
        root = DESTDIR + STAGED_PREFIX
        self.assertEqual(tree(root), tree(PREFIX) - set(NOT_OURS))
        self.assertFalse(os.path.exists(STAGED_PREFIX), "install wrote the final prefix")
        self.assertEqual(os.listdir(DESTDIR), ["opt"])

    def test_no_staged_file_names_the_staging_directory(self):
        """What rpm's check-buildroot and a reviewer grep for: every file,
        the drivers and programs included, and every symlink's target."""
        needle = DESTDIR.encode()
        checked = 0
        for rel in sorted(tree(DESTDIR)):
            path = os.path.join(DESTDIR, rel)
            if os.path.islink(path):
                self.assertNotIn(DESTDIR, os.readlink(path), rel)
                continue
            with open(path, "rb") as f:
                self.assertNotIn(needle, f.read(), rel)
            checked += 1
        self.assertGreater(checked, 15)

    def test_staged_files_name_the_final_prefix(self):
        root = DESTDIR + STAGED_PREFIX
        for drv in forklib.HOST.conf["drivers"]:
            with open(install.staged(DESTDIR, install.icd_json(STAGED_PREFIX, drv))) as f:
                lib = json.load(f)["ICD"]["library_path"]
            self.assertEqual(os.path.dirname(lib), os.path.join(STAGED_PREFIX, "lib", "mesa-fork"))
            self.assertTrue(os.path.exists(DESTDIR + lib), lib)
        with open(os.path.join(install.staged(DESTDIR, install.layer_dir(STAGED_PREFIX)),
                               "VkLayer_mesafork_synctrace.json")) as f:
            lib = json.load(f)["layer"]["library_path"]
        self.assertEqual(lib, os.path.join(STAGED_PREFIX, "lib", "mesa-fork",
                                           "libVkLayer_mesafork_synctrace.so"))
        out = source(os.path.join(root, "share", "mesa-fork", "env.sh"),
                     'printf "%s\\n" "$VK_DRIVER_FILES" "$PATH"', env={"PATH": "/bin"})
        self.assertEqual(out.splitlines(), [
            ":".join(install.icd_json(STAGED_PREFIX, d) for d in forklib.HOST.conf["drivers"]),
            os.path.join(STAGED_PREFIX, "bin") + ":/bin"])

    def test_staging_leaves_the_remembered_prefix(self):
        """Later verbs keep using the prefix installed last, not a staged one."""
        with open(os.path.join(WORK, "prefix-chosen-" + forklib.HOST.arch)) as f:
            self.assertEqual(f.read().strip(), PREFIX)
        self.assertIn("Staged the %s build for %s in %s" % (forklib.HOST.arch, STAGED_PREFIX,
                                                           DESTDIR), OUT["staged"])

    def test_destdir_needs_the_final_prefix(self):
        r = run([CLI, "install", "--no-build", "--destdir", DESTDIR], env=work_env())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("install: --destdir DIR stages the files for the prefix they will have; "
                      "name it with --prefix", r.stderr)


def documented_install_line():
    """The %install line of docs/build-deps.md, "For a distribution package"."""
    with open(os.path.join(forklib.TOP, "docs", "build-deps.md")) as f:
        text = f.read()
    section = text.split("### For a distribution package", 1)[1].split("\n#", 1)[0]
    lines = [l.split("#", 1)[0].strip() for l in section.splitlines()
             if re.search(r"#\s*%install\b", l)]
    if len(lines) != 1:
        raise AssertionError("docs/build-deps.md: %d lines marked '# %%install'" % len(lines))
    return lines[0]


SPEC = """Name: mesa-fork-test
Version: 1
Release: 1
Summary: mesa-fork's prefix staged as the docs say
License: MIT
%%description
The %%install line of docs/build-deps.md.
%%install
cd %(top)s
export MESA_FORK_WORK=%(work)s
%(line)s
%%files
%(files)s
"""


class RpmPackage(unittest.TestCase):
    def rpmbuild(self, top, install_line, files):
        spec = os.path.join(top, "t.spec")
        with open(spec, "w") as f:
            f.write(SPEC % dict(top=forklib.TOP, work=WORK, line=install_line, files=files))
        # Fedora's redhat-rpm-config runs check-buildroot after %install;
        # Debian's rpm has the script without the macro.
        return run(["rpmbuild", "-bb", "--nodeps", "--define", "_topdir " + top,
                    "--define", "__arch_install_post /usr/lib/rpm/check-buildroot",
                    "--define", "debug_package %{nil}",
                    "--define", "_binary_payload w.ufdio", spec], timeout=900)

    def test_rpmbuild_accepts_the_documented_install(self):
        # `deps` installs rpm (docs/build-deps.md): without it the run is
        # broken, not lacking something by nature.
        self.assertTrue(shutil.which("rpmbuild"), "rpmbuild is not installed: 'bin/mesa-fork "
                        "deps' installs Debian's package rpm")
        line = documented_install_line()
        self.assertIn("--destdir %{buildroot}", line)
        with tempfile.TemporaryDirectory(dir=TMP) as top:
            # The control: check-buildroot refuses a file naming the buildroot.
            r = self.rpmbuild(top, "mkdir -p %{buildroot}/opt/x && echo %{buildroot} > "
                              "%{buildroot}/opt/x/f", "/opt/x")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("in installed files; aborting", r.stdout + r.stderr)
            r = self.rpmbuild(top, line, "/opt/mesa-fork")
            self.assertEqual(r.returncode, 0, (r.stdout + r.stderr)[-4000:])
            rpms = glob.glob(os.path.join(top, "RPMS", "*", "mesa-fork-test-1-1.*.rpm"))
            self.assertEqual(len(rpms), 1)
            listed = run(["rpm", "-qlp", rpms[0]]).stdout.split()
        self.assertIn("/opt/mesa-fork/share/mesa-fork/icd.d/mesa_fork_intel_icd.json", listed)
        self.assertIn("/opt/mesa-fork/bin/mesa-fork-vkcheck", listed)
        self.assertEqual([p for p in listed if "/share/vulkan" in p], [])


if __name__ == "__main__":
    unittest.main()
