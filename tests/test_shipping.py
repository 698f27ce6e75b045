# SPDX-License-Identifier: MIT
"""The Debian shipping form: `mesa-fork debsrc` makes a source package that
dpkg-source unpacks with Debian's series and ours applied, that an archive
(reprepro) takes and apt installs from, made as the owner of .work."""

import contextlib
import glob
import io
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import aptlab
import forklib
from forklib import run
from mesafork import config, deb, proc, sources

# debsrc's .work in these tests, when they run as root: owned by this
# uid, which has no name on the machine, as a user's checkout would be.
WORK_OWNER = 2000


class DebianSourcePackage(unittest.TestCase):
    MAINTAINER = "Jane Packager <jane@example.org>"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        os.chmod(cls.tmp.name, 0o755)
        cls.out = out = os.path.join(cls.tmp.name, "out")
        # Only the fetched sources, no patch-queue tree: debsrc needs none.
        work = os.path.join(cls.tmp.name, "work")
        os.makedirs(work)
        os.symlink(os.path.join(forklib.WORK, "cache"), os.path.join(work, "cache"))
        # As root: a .work of another user, as a checkout is (run as root,
        # debsrc works as its owner); not started by sudo.
        cls.owner = os.geteuid()
        if cls.owner == 0:
            os.chown(work, WORK_OWNER, WORK_OWNER)
            cls.owner = WORK_OWNER
        cls.env = {k: v for k, v in os.environ.items()
                   if k not in ("DEBFULLNAME", "DEBEMAIL", "NAME", "EMAIL") and
                   not k.startswith("SUDO_")}
        cls.env["MESA_FORK_WORK"] = work
        env = dict(cls.env, DEBEMAIL=cls.MAINTAINER, SOURCE_DATE_EPOCH="1764633600")
        cls.make = run([forklib.CLI, "debsrc", "--output", out], env=env, timeout=600)
        c = forklib.config()
        cls.version = "%s+mesafork%s" % (c["base"]["version"], c["fork"]["release"])
        cls.dsc = os.path.join(out, "mesa_%s.dsc" % cls.version)
        cls.changes = os.path.join(out, "mesa_%s_source.changes" % cls.version)
        cls.tree = os.path.join(cls.tmp.name, "x")
        cls.unpack = subprocess.run(["dpkg-source", "--no-check", "-x", cls.dsc, cls.tree],
                                    capture_output=True, text=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_source_package_is_made(self):
        self.assertEqual(self.make.returncode, 0, self.make.stderr)
        self.assertTrue(os.path.exists(self.dsc))
        self.assertTrue(os.path.exists(self.changes))

    def test_made_as_the_owner_of_work(self):
        """Run as root, debsrc does its host steps (dpkg-source -x, quilt,
        the debian/ edits, dpkg-source -b, dpkg-genchanges) as the owner
        of .work: everything it writes is theirs."""
        self.assertEqual(self.make.returncode, 0, self.make.stderr)
        made = [self.out] + sorted(glob.glob(os.path.join(self.out, "*")))
        self.assertGreaterEqual(len(made), 6, made)
        for path in made:
            st = os.stat(path)
            self.assertEqual((st.st_uid, st.st_gid), (self.owner, self.owner), path)

    def test_the_upload_names_the_forks_distribution(self):
        """The _source.changes dput, dupload and reprepro take: the
        distribution of [debsrc], the release tarball and its signature."""
        dist = forklib.config()["debsrc"]["distribution"]
        self.assertNotEqual(dist, "UNRELEASED")
        with open(self.changes) as f:
            text = f.read()
        self.assertIn("\nDistribution: %s\n" % dist, text)
        self.assertIn("\nArchitecture: source\n", text)
        self.assertIn("\nMaintainer: %s\n" % self.MAINTAINER, text)
        for name in ("mesa_%s.dsc" % self.version, "mesa_%s.debian.tar.xz" % self.version,
                     "mesa_%s.orig.tar.xz" % forklib.MESA_VERSION,
                     "mesa_%s.orig.tar.xz.asc" % forklib.MESA_VERSION):
            self.assertRegex(text, r"\n [0-9a-f]{64} \d+ %s\n" % re.escape(name))

    def test_the_upstream_signature_travels_with_the_tarball(self):
        """Mesa's signature of the release tarball, which Debian's .dsc
        lists, is in ours too (lintian: orig-tarball-missing-upstream-signature)."""
        c = forklib.config()
        asc = "mesa_%s.orig.tar.xz.asc" % c["base"]["upstream_version"]
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(self.dsc), asc)))
        dsc = open(self.dsc).read()
        theirs = open(os.path.join(forklib.WORK, "cache", "mesa_%s.dsc" % c["base"]["version"])).read()
        line = [l for l in theirs.splitlines() if l.endswith(" " + asc) and len(l.split()) == 3 and
                len(l.split()[0]) == 64]
        self.assertEqual(len(line), 1)
        self.assertIn(line[0], dsc)

    def test_dpkg_source_applies_debian_and_fork_series(self):
        self.assertEqual(self.unpack.returncode, 0, self.unpack.stderr)
        self.assertNotIn("fuzz", self.unpack.stdout + self.unpack.stderr)
        series = open(os.path.join(self.tree, "debian", "patches", "series")).read().split()
        ours = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(forklib.TOP, "patches", "*.patch")))
        self.assertEqual([s.split("/", 1)[1] for s in series if s.startswith("mesa-fork/")], ours)
        # Debian's own series comes first and stays whole.
        self.assertIn("CVE-2026-40393-part2.patch", series)
        self.assertLess(series.index("CVE-2026-40393-part2.patch"),
                        series.index("mesa-fork/" + ours[0]))
        # The applied tree carries the fork's code.
        self.assertIn("debug_get_bool_option_strict",
                      open(os.path.join(self.tree, "src", "util", "u_debug.h")).read())

    def test_rules_and_changelog(self):
        with open(os.path.join(self.tree, "debian", "rules")) as f:
            rules = f.read()
        # Debian's rules write the package version into Mesa's VERSION, so
        # driverInfo reads "Mesa 25.0.7-2+deb13u1+mesafork1 (mesa-fork 1)":
        # the tag adds the fork's name and release, not the version again.
        c = forklib.config()
        self.assertIn('\t-Dvulkan-driver-info="%s %s" \\\n'
                      % (c["fork"]["name"], c["fork"]["release"]), rules)
        self.assertIn("dpkg-parsechangelog | awk '/^Version:/ {print $$2}' > VERSION", rules)
        self.assertNotIn("$(DEB_VERSION)\"", rules)
        archs = forklib.config()["debsrc"]["asahi_architectures"]
        self.assertIn("    ifneq (,$(filter $(DEB_HOST_ARCH), %s))\n"
                      "\tVULKAN_DRIVERS += asahi\n" % archs, rules)
        with open(os.path.join(self.tree, "debian", "changelog")) as f:
            entry = f.read().split("\nmesa (", 1)[0].splitlines()
        # A real distribution, the fork archive's suite: dput, dupload and
        # reprepro refuse UNRELEASED.
        self.assertEqual(entry[0], "mesa (%s) %s; urgency=medium"
                         % (self.version, forklib.config()["debsrc"]["distribution"]))
        # The packager and the time of SOURCE_DATE_EPOCH, not the patches' author.
        trailers = [l for l in entry if l.startswith(" -- ")]
        self.assertEqual(trailers, [" -- %s  Tue, 02 Dec 2025 00:00:00 +0000" % self.MAINTAINER])
        # The entry says what changed in debian/, not only the patches.
        text = "\n".join(entry)
        self.assertIn("\n  * Build profile pkg.mesa.forkonly: only mesa-vulkan-drivers", text)
        self.assertEqual([l for l in entry if len(l) > 80], [])

    def test_the_fork_maintains_the_package(self):
        for name in ("control", "control.in"):
            with open(os.path.join(self.tree, "debian", name)) as f:
                head = f.read().split("\n\n", 1)[0].splitlines()
            self.assertIn("Maintainer: %s" % self.MAINTAINER, head, name)
            # No Debian developer named as an uploader of our package.
            self.assertEqual([l for l in head if l.startswith(("Vcs-", "Uploaders"))], [],
                             name)
        with open(self.dsc) as f:
            dsc = f.read()
        self.assertIn("\nMaintainer: %s\n" % self.MAINTAINER, dsc)
        self.assertNotIn("\nUploaders:", dsc)
        with open(os.path.join(self.tree, "debian", "changelog")) as f:
            entry = f.read().split("\n -- ", 1)[0]
        self.assertIn("maintained by Debian X Strike Force <debian-x@lists.debian.org>); "
                      "Uploaders and Vcs-* dropped", " ".join(entry.split()))

    def control(self, name="control"):
        """(source stanza, {package: stanza}) of debian/<name>, each stanza
        a dict of its fields with continuation lines kept."""
        with open(os.path.join(self.tree, "debian", name)) as f:
            stanzas = [st for st in f.read().split("\n\n") if st.strip()]
        parsed = []
        for st in stanzas:
            fields, key = {}, None
            for line in st.splitlines():
                if line.startswith((" ", "\t")) and key:
                    fields[key] += "\n" + line
                elif ":" in line and not line.startswith("#"):
                    key, v = line.split(":", 1)
                    fields[key] = v.strip()
            parsed.append(fields)
        return parsed[0], {p["Package"]: p for p in parsed[1:] if "Package" in p}

    def test_profile_builds_only_the_vulkan_drivers_and_shims(self):
        profile = forklib.config()["debsrc"]["profile"]
        for name in ("control", "control.in"):
            _, pkgs = self.control(name)
            built = sorted(p for p, f in pkgs.items()
                           if "!%s" % profile not in f.get("Build-Profiles", ""))
            self.assertEqual(built, ["mesa-drm-shim", "mesa-vulkan-drivers"], name)
            # Debian's own profile stays; ours joins it (both must hold).
            self.assertEqual(pkgs["mesa-va-drivers"]["Build-Profiles"],
                             "<!pkg.mesa.nolibva !%s>" % profile)
            # Without the profile, every package is built as before.
            self.assertEqual(len(pkgs), 22, sorted(pkgs))

    def test_profile_build_dependencies(self):
        profile = forklib.config()["debsrc"]["profile"]
        libc = forklib.config()["debsrc"]["asahi_linux_libc_dev"]
        deps = {}
        for name in ("control", "control.in"):
            src, _ = self.control(name)
            deps[name] = [d.strip() for d in src["Build-Depends"].split(",") if d.strip()]
            skipped = {d.split()[0] for d in deps[name] if "!%s" % profile in d}
            for pkg in ("rustc", "bindgen", "libva-dev", "libvdpau-dev",
                        "directx-headers-dev", "libglvnd-core-dev"):
                self.assertIn(pkg, skipped, name)
            # What the three drivers need stays for both builds.
            for pkg in ("libdrm-dev", "libvulkan-dev", "libclc-19-dev" if name == "control"
                        else "libclc-@LLVM_VERSION@-dev", "glslang-tools", "meson"):
                self.assertNotIn(pkg, skipped, name)
            # <drm/asahi_drm.h>: wherever Honeykrisp is built.
            self.assertIn("linux-libc-dev (>= %s) <%s>" % (libc, profile), deps[name])
            self.assertIn("linux-libc-dev (>= %s) [arm64] <!%s>" % (libc, profile), deps[name])
        # debian/rules clean regenerates control from control.in.
        self.assertEqual(len(deps["control"]), len(deps["control.in"]))

    def make_var(self, var, profiles, **arch):
        """A variable of debian/rules as make evaluates it with the given
        DEB_BUILD_PROFILES (on this machine's architecture, or as arch,
        DEB_BUILD_ARCH and DEB_HOST_ARCH, says)."""
        r = subprocess.run(["make", "-s", "-f", "debian/rules", "--eval",
                            "print-%: ; @echo $($*)", "print-" + var,
                            "DEB_BUILD_PROFILES=" + profiles] +
                           ["%s=%s" % kv for kv in sorted(arch.items())],
                           cwd=self.tree, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_deb_checks_the_drivers_debian_rules_build(self):
        """What `deb` expects the packages to ship per architecture and
        profile (config/fork.ini [debsrc], deb.expected_drivers) is what
        debian/rules builds of the fork's drivers."""
        conf = forklib.config()
        profile = conf["debsrc"]["profile"]
        for arch, cpu in (("amd64", "amd64"), ("arm64", "arm64"), ("armhf", "arm"),
                          ("i386", "i386")):
            for prof in (profile, None):
                built = [d.strip("'") for d in self.make_var(
                    "VULKAN_DRIVERS", prof or "", DEB_BUILD_ARCH=arch, DEB_HOST_ARCH=arch,
                    DEB_HOST_ARCH_CPU=cpu, DEB_HOST_ARCH_OS="linux")]
                self.assertEqual(deb.expected_drivers(conf, arch, prof),
                                 [d for d in conf["drivers"] if d in built], (arch, prof, built))

    def test_rules_define_each_target_once_with_and_without_the_profile(self):
        # The profile replaces some of Debian's override targets; make
        # warns when a target gets two recipes, and the second one wins.
        for profile in (forklib.config()["debsrc"]["profile"], ""):
            for arch in ("amd64", "arm64", "armhf", "i386"):
                # Built on amd64: the others are cross builds.
                profiles = profile + (" cross" if profile and arch != "amd64" else "")
                r = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_install",
                                    "DEB_BUILD_PROFILES=" + profiles, "DEB_HOST_ARCH=" + arch,
                                    "DEB_BUILD_ARCH=amd64"],
                                   cwd=self.tree, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, (profiles, arch, r.stderr))
                self.assertNotIn("overriding recipe", r.stderr, (profiles, arch))
                self.assertNotIn("ignoring old recipe", r.stderr, (profiles, arch))

    def test_profile_meson_options(self):
        c = forklib.config()
        profile = c["debsrc"]["profile"]
        drivers = c["debsrc"]["profile_vulkan_drivers"].split()
        on = self.make_var("confflags", profile)
        self.assertIn("-Dvulkan-drivers=[%s]" % ",".join("'%s'" % d for d in drivers), on)
        self.assertIn("-Dgallium-drivers=[]", on)
        for opt in ("-Dopengl=false", "-Dglx=disabled", "-Degl=disabled", "-Dgbm=disabled",
                    "-Dglvnd=disabled", "-Dgallium-rusticl=false", "-Dosmesa=false"):
            self.assertIn(opt, on)
        # Meson takes the last value: each GL option the profile turns off
        # comes after Debian's.
        self.assertGreater(on.index("-Dglvnd=disabled"), on.index("-Dglvnd=enabled"))
        # A native build (DEB_BUILD_ARCH from dpkg-architecture, as when
        # debian/rules runs alone) has no native build of its own.
        self.assertEqual([o for o in on if o.startswith("--native-file")], [])
        self.assertIn("-Dllvm=enabled", on)
        self.assertIn("-Dvideo-codecs=all", on)
        off = self.make_var("confflags", "")
        self.assertNotIn("-Dopengl=false", off)
        self.assertNotIn("-Dgallium-drivers=[]", off)
        self.assertIn("-Dvideo-codecs=all", off)

    def test_cross_build_takes_mesa_compilers_from_a_native_build(self):
        """dpkg-buildpackage -a arm64 -Pcross,nocheck,PROFILE: the arm64
        drivers without LLVM, Mesa's compilers named in a native file that
        a native build of the same tree writes; a native arm64 build keeps
        Debian's LLVM build. ANV only on x86."""
        c = forklib.config()
        profile = c["debsrc"]["profile"]
        profiles = "cross nocheck " + profile
        cross = self.make_var("confflags", profiles, DEB_BUILD_ARCH="amd64",
                              DEB_HOST_ARCH="arm64")
        native = self.make_var("confflags", "nocheck " + profile, DEB_BUILD_ARCH="arm64",
                               DEB_HOST_ARCH="arm64")
        for flags in (cross, native):
            self.assertIn("-Dvulkan-drivers=['panfrost','asahi']", flags)
        for opt in ("-Dllvm=disabled", "-Dmesa-clc=system", "-Dprecomp-compiler=system",
                    "--native-file=%s/build-native/mesa-fork-tools.ini" % self.tree):
            self.assertIn(opt, cross)
            self.assertNotIn(opt, native)
        self.assertNotIn("-Dllvm=enabled", cross)
        self.assertIn("-Dllvm=enabled", native)
        # The native build makes exactly the compilers config/fork.ini
        # names, and the native file points at them.
        r = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_auto_configure",
                            "DEB_BUILD_PROFILES=" + profiles, "DEB_BUILD_ARCH=amd64",
                            "DEB_HOST_ARCH=arm64", "DEB_BUILD_GNU_TYPE=x86_64-linux-gnu",
                            "DEB_BUILD_OPTIONS=parallel=3 nocheck"],
                           cwd=self.tree, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = " ".join(r.stdout.replace("\\\n", " ").split())
        tools = dict(t.split("=", 1) for t in c["meson"]["cross_native_tools"].split())
        self.assertIn("ninja -C build-native -j3 %s" % " ".join(
            p for _, p in sorted(tools.items())), out)
        for name, path in tools.items():
            self.assertIn("%s = '%s/build-native/%s'" % (name, self.tree, path), out)
        # Its compilers are the build machine's, without the target's flags
        # or the target's pkg-config, from a fresh directory each time.
        self.assertIn("rm -rf build-native env -u CFLAGS -u CXXFLAGS -u CPPFLAGS -u LDFLAGS "
                      "-u PKG_CONFIG -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR "
                      "CC=x86_64-linux-gnu-gcc CXX=x86_64-linux-gnu-g++ "
                      "meson setup build-native", out)
        self.assertLess(out.index("meson setup build-native"), out.index("dh_auto_configure"))
        # A native build has no native build of its own.
        r = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_auto_configure",
                            "DEB_BUILD_PROFILES=nocheck " + profile, "DEB_BUILD_ARCH=arm64",
                            "DEB_HOST_ARCH=arm64"], cwd=self.tree, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("build-native", r.stdout)
        # debian/rules clean removes it.
        r = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_clean",
                            "DEB_BUILD_PROFILES=" + profiles, "DEB_BUILD_ARCH=amd64",
                            "DEB_HOST_ARCH=arm64"], cwd=self.tree, capture_output=True, text=True)
        self.assertIn("rm -rf build build-native\n", r.stdout)
        # Without the cross profile, debian/control would install the
        # target's LLVM: debian/rules stops and says what to run.
        r = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_auto_configure",
                            "DEB_BUILD_PROFILES=nocheck " + profile, "DEB_BUILD_ARCH=amd64",
                            "DEB_HOST_ARCH=arm64"], cwd=self.tree, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("-Pcross,nocheck,%s" % profile, r.stderr)

    def test_cross_build_dependencies(self):
        """What runs on the build machine in a cross build with the profile
        is a :native build-dependency there, and stays as Debian wrote it
        for every other build; Multi-Arch: foreign ones (dpkg refuses
        :native on them) stay as they are."""
        profile = forklib.config()["debsrc"]["profile"]
        for name in ("control", "control.in"):
            src, _ = self.control(name)
            deps = [d.strip() for d in src["Build-Depends"].split(",") if d.strip()]
            for pkg in ("python3", "python3-mako", "python3-yaml", "spirv-tools",
                        "llvm-19-dev" if name == "control" else "llvm-@LLVM_VERSION@-dev",
                        "libclang-cpp19-dev" if name == "control"
                        else "libclang-cpp@LLVM_VERSION@-dev"):
                forms = [d for d in deps if d.split()[0] in (pkg, pkg + ":native")]
                self.assertEqual(len(forms), 2, (name, pkg, forms))
                self.assertTrue(forms[0].startswith(pkg + " ") and
                                forms[0].endswith(" <!cross> <!%s>" % profile), forms)
                self.assertTrue(forms[1].startswith(pkg + ":native") and
                                forms[1].endswith(" <cross %s>" % profile), forms)
            for pkg in ("libdrm-dev", "zlib1g-dev", "libwayland-dev"):
                self.assertIn("%s:native <cross %s>" % (pkg, profile), deps, name)
            for pkg in ("python3-ply", "python3-setuptools"):
                self.assertIn(pkg, deps, name)

    def checkbuilddeps(self, chroot, verb, *options):
        """dpkg-checkbuilddeps on our debian/control in the build chroot
        .work/chroot/<suite><chroot>, which `bin/mesa-fork <verb>
        --prepare-only` makes (as `deb` does, build dependencies
        installed), once per options (a list each)."""
        c = forklib.config()
        root = os.path.join(forklib.WORK, "chroot", "%s%s" % (c["deb"]["suite"], chroot))
        if os.geteuid() != 0:
            forklib.skip_optional("root", "mmdebstrap and chroot need root")
        env = dict(os.environ, DEBEMAIL=self.MAINTAINER, MESA_FORK_WORK=forklib.WORK)
        r = run([forklib.CLI] + verb.split() + ["--prepare-only"], env=env, timeout=2400)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr)
        self.assertIn("deb: build chroot %s ready" % os.path.relpath(root, forklib.TOP),
                      r.stdout)
        # The source was unpacked by the unprivileged build user, not root.
        arch = verb.split("--arch ")[1] if "--arch" in verb else None
        tree = os.path.join(forklib.WORK, "deb-prepare" + ("-" + arch if arch else ""), "build",
                            "mesa-%s" % c["base"]["upstream_version"])
        self.assertEqual(os.stat(tree).st_uid, deb.build_uid(config.Fork(forklib.TOP,
                                                                         forklib.WORK)))
        # What deb wrote under .work outside the chroots is the invoking
        # user's (when that is not root: a user's checkout run with sudo).
        user = proc.invoking_user(forklib.WORK)
        if user:
            work_deb = os.path.dirname(os.path.dirname(tree))
            for top in (work_deb, os.path.join(forklib.WORK, "apt"),
                        os.path.join(forklib.WORK, "ccache-deb")):
                for d, dirs, files in os.walk(top):
                    for path in [d] + [os.path.join(d, f) for f in files]:
                        self.assertEqual(os.lstat(path).st_uid, user[0], path)
        # Honeykrisp's uAPI header in the chroot is the pinned one, by
        # content, whichever upload of linux-libc-dev carried it.
        self.assertEqual(sources.sha256(os.path.join(root, "usr", "include", "drm",
                                                     "asahi_drm.h")),
                         c["asahi_uapi"]["header_sha256"])
        self.assertIn("<drm/asahi_drm.h> of the build chroot has the pinned sha256", r.stdout)
        with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp")) as tmp:
            shutil.copy(os.path.join(self.tree, "debian", "control"), tmp)
            inside = os.path.join("/tmp", os.path.basename(tmp), "control")
            return [run(["chroot", root, "dpkg-checkbuilddeps"] + list(o) + [inside])
                    for o in options]

    def test_live_smoke_dpkg_checkbuilddeps_in_the_build_chroots(self):
        """The live smoke test of `deb` (docs/testing.md, "What Debian
        serves today"): the profile's build-dependencies are what the
        build chroots of `mesa-fork deb` and `deb --arch arm64` (the cross
        profile) hold, from trixie as the archive has it now, and the full
        build needs more. The archive tests of this file run on stand-in
        archives (aptlab)."""
        profile = forklib.config()["debsrc"]["profile"]
        on, off = self.checkbuilddeps("-build", "deb", ["-P", profile], [])
        self.assertEqual(on.returncode, 0, on.stdout + on.stderr)
        self.assertNotEqual(off.returncode, 0)
        self.assertIn("unmet build dependencies", off.stderr)
        self.assertIn("rustc", off.stderr)
        (r,) = self.checkbuilddeps("-build-arm64", "deb --arch arm64",
                                   ["-a", "arm64", "-P", "cross,nocheck," + profile])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def archive(self):
        """The fork's archive (reprepro, signed with a throwaway key) with
        the source package, as includedsc takes it, and stand-in binary
        packages at the fork's version (a real `deb` build takes minutes
        to hours); made once for the class."""
        cls = type(self)
        if getattr(cls, "_archive", None):
            return cls._archive
        self.assertEqual(self.make.returncode, 0, self.make.stderr)
        aptlab.need("reprepro", "gpg")
        d = tempfile.mkdtemp(dir=self.tmp.name)
        os.chmod(d, 0o755)
        key = aptlab.Key(d)
        self.addClassCleanup(key.close)
        repos = os.path.join(d, "repos")
        os.makedirs(repos)
        key.export(os.path.join(repos, "archive-key.gpg"))
        dist = forklib.config()["debsrc"]["distribution"]
        fork = aptlab.Archive(os.path.join(repos, "fork"), key, [dist], "mesa-fork",
                              ["source", "amd64", "arm64"])
        src, _ = self.control()
        fork.reprepro(["-S", src["Section"], "-P", src["Priority"], "includedsc", dist,
                       self.dsc])
        debs = os.path.join(d, "debs")
        os.makedirs(debs)
        for arch in ("amd64", "arm64"):
            for pkg in ("mesa-vulkan-drivers", "mesa-drm-shim"):
                fork.reprepro(["includedeb", dist, aptlab.standin_deb(
                    debs, self.version, pkg, arch, what="stand-in for deb's package")])
        cls._archive = (fork, key, repos, debs, dist)
        return cls._archive

    def test_an_archive_takes_the_upload_and_the_packages(self):
        """reprepro takes the _source.changes (whose distribution it
        checks against the suite), the .dsc (includedsc) and binary
        packages at the fork's version (includedeb)."""
        fork, key, repos, debs, dist = self.archive()
        self.assertEqual(fork.list(dist), {(p, a): self.version for p, a in [
            ("mesa", "source"), ("mesa-vulkan-drivers", "amd64"), ("mesa-drm-shim", "amd64"),
            ("mesa-vulkan-drivers", "arm64"), ("mesa-drm-shim", "arm64")]})
        pool = os.path.join(fork.base, "pool", "main", "m", "mesa")
        for name in (os.path.basename(self.dsc), "mesa_%s.orig.tar.xz" % forklib.MESA_VERSION):
            self.assertTrue(os.path.exists(os.path.join(pool, name)), name)
        # The upload, into an archive of its own: accepted for the suite
        # its changelog names.
        upload = aptlab.Archive(os.path.join(repos, "upload"), key, [dist], "mesa-fork")
        r = upload.reprepro(["include", dist, self.changes], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(upload.list(dist), {("mesa", "source"): self.version})

    def test_apt_installs_from_the_forks_archive(self):
        """As a user: the archive's key in /etc/apt/keyrings, a file:
        source with signed-by next to Debian's (a stand-in with trixie's
        package), apt-get install takes the fork's package."""
        if os.geteuid() != 0:
            forklib.skip_optional("root", "mmdebstrap in root mode and chroot need root")
        fork, key, repos, debs, dist = self.archive()
        debian = aptlab.Archive(os.path.join(repos, "debian-%d" % os.getpid()), key, [dist],
                                "Debian-stand-in")
        debian.reprepro(["includedeb", dist, aptlab.standin_deb(
            debs, forklib.DEBIAN_VERSION, what="stand-in for Debian's package")])
        with contextlib.redirect_stdout(io.StringIO()):
            root = aptlab.AptRoot("archive", repos)
        self.addCleanup(root.remove)
        keyring = "/etc/apt/keyrings/mesa-fork.gpg"
        shutil.copy(os.path.join(repos, "archive-key.gpg"), root.path(keyring))
        inside = aptlab.AptRoot.INSIDE
        root.write("/etc/apt/sources.list.d/debian.list", aptlab.sources_line(
            "file:%s/%s" % (inside, os.path.basename(debian.base)), dist, keyring))
        root.write("/etc/apt/sources.list.d/mesa-fork.list", aptlab.sources_line(
            "file:%s/fork" % inside, dist, keyring))
        with root.chroot.mounted():
            r = root.apt(["update"])
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertNotIn("NO_PUBKEY", r.stdout)
            r = root.apt(["install", "mesa-vulkan-drivers"])
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertEqual(root.installed(), self.version)
            policy = root.apt(["apt-cache", "policy", "mesa-vulkan-drivers"]).stdout
            self.assertRegex(policy, r"\*\*\* %s 500\n\s+500 file:%s/fork %s/main"
                             % (re.escape(self.version), inside, dist))
            # With another key in its place, apt refuses the archive.
            other = aptlab.Key(tempfile.mkdtemp(dir=self.tmp.name), "someone else <x@invalid>")
            self.addCleanup(other.close)
            other.export(root.path(keyring))
            r = root.apt(["update"])
            self.assertIn("An error occurred during the signature verification", r.stdout)
            self.assertIn("file:%s/fork %s InRelease" % (inside, dist), r.stdout)

    def test_refuses_without_a_changelog_author(self):
        with tempfile.TemporaryDirectory() as out:
            r = run([forklib.CLI, "debsrc", "--output", out], env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("set DEBFULLNAME and DEBEMAIL", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


class CrossPackages(unittest.TestCase):
    """`deb --arch`: what a cross build cannot do is refused with its
    reason, before any chroot is made."""

    def deb(self, *args):
        if os.geteuid() != 0:
            forklib.skip_optional("root", "deb needs root")
        return run([forklib.CLI, "deb"] + list(args), timeout=120)

    def test_full_cross_build_is_refused_with_the_reason(self):
        r = self.deb("--arch", "arm64", "--full")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not Multi-Arch: same", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_check_in_a_cross_build_is_refused(self):
        r = self.deb("--arch", "arm64", "--check")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot run the target's tests", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_unknown_architecture_is_refused(self):
        r = self.deb("--arch", "sparc64", "--no-build")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no [arch.sparc64] in config/fork.ini", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


class ForkArchiveDocs(unittest.TestCase):
    def test_docs_name_the_distribution_debsrc_writes(self):
        """docs/shipping.md's reprepro configuration and the user's apt
        source name the distribution of [debsrc], and no apt preferences
        hold the fork (tests/test_packaging.py applies any it gives)."""
        dist = forklib.config()["debsrc"]["distribution"]
        with open(os.path.join(forklib.TOP, "docs", "shipping.md")) as f:
            doc = f.read()
        self.assertIn("\nSuite: %s\nCodename: %s\n" % (dist, dist), doc)
        self.assertIn("include %s mesa_" % dist, doc)
        self.assertRegex(doc, r"deb \[signed-by=/etc/apt/keyrings/mesa-fork.gpg\] \S+ %s main"
                         % dist)
        self.assertIsNone(re.search(r"```\n# /etc/apt/preferences\.d/", doc),
                          "docs/shipping.md gives users an apt preferences file")


class ChrootRemoval(unittest.TestCase):
    """`deb` and `bench` remove their chroots anew; a run killed while
    they were mounted leaves host directories bind-mounted inside, and
    removing the chroot must not remove them."""

    def test_remove_tree_never_follows_a_bind_mount(self):
        from mesafork import proc
        if os.geteuid() != 0:
            forklib.skip_optional("root", "a bind mount needs root")
        with tempfile.TemporaryDirectory() as tmp:
            host = os.path.join(tmp, "host")
            root = os.path.join(tmp, "chroot")
            os.makedirs(host)
            proc.make_dirs(os.path.join(root, "dev"))
            with open(os.path.join(host, "keep"), "w") as f:
                f.write("host file\n")
            r = subprocess.run(["mount", "--bind", host, os.path.join(root, "dev")])
            self.assertEqual(r.returncode, 0, "this test needs root, as CI runs")
            try:
                self.assertEqual(proc.mounts_under(root), [os.path.join(root, "dev")])
                proc.remove_tree(root)
            finally:
                subprocess.run(["umount", "-l", os.path.join(root, "dev")],
                               stderr=subprocess.DEVNULL)
            self.assertFalse(os.path.exists(root))
            self.assertEqual(open(os.path.join(host, "keep")).read(), "host file\n")


if __name__ == "__main__":
    unittest.main()
