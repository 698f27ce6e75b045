# SPDX-License-Identifier: MIT
"""config/fork.ini and the paths under .work/: one Fork object that every
verb receives, and the names the fork gives itself."""

import configparser
import os
import platform
import re
import subprocess

from .proc import MARK, WORK_ROOTS, die, make_dirs, mark

BRANCH = "mesa-fork"
BASE_TAG = "base"

# INTEL_STUB_GPU_PLATFORM names `memtypes` shows by default.
MEMTYPES_PLATFORMS = ("mtl", "arl", "tgl", "adl", "glk")


# Debian architecture names of the machines Python reports, for hosts
# without dpkg.
MACHINE_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


# Debian's multiarch triplets of the architectures the fork runs on.
MULTIARCH = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}


def host_arch():
    """The Debian architecture of this machine, from the kernel's name for
    it (no dpkg: this runs on any distribution)."""
    m = platform.machine()
    return MACHINE_ARCH.get(m, m)


def multiarch(arch):
    """Debian's multiarch triplet of arch (x86_64-linux-gnu, aarch64-linux-gnu):
    where its libraries and libexec programs live."""
    if arch in MULTIARCH:
        return MULTIARCH[arch]
    r = subprocess.run(["dpkg-architecture", "-a", arch, "-qDEB_HOST_MULTIARCH"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        die("no multiarch triplet known for %s" % arch)
    return r.stdout.strip()


def arch_section(arch):
    return "arch.%s" % arch


def cross_arches(cp):
    """The architectures config/fork.ini knows how to cross-build."""
    return [s.split(".", 1)[1] for s in cp.sections() if s.startswith("arch.")]


def parse_arches(fork, arch):
    """The Debian architectures an --arch argument names (comma-separated;
    default this machine's), the machine's own first."""
    names = [a for a in (arch or fork.host_arch).replace(",", " ").split()]
    for a in names:
        fork.for_arch(a)  # dies with the supported ones if a is unknown
    return sorted(set(names), key=lambda a: (a != fork.host_arch, names.index(a)))


def load(top, arch=None):
    """config/fork.ini as a build for arch sees it. A cross build for an
    architecture with an [arch.NAME] section keeps only the drivers that
    section lists, appends its meson options (later ones win in meson) and
    runs its unit suites."""
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    path = os.path.join(top, "config", "fork.ini")
    if not cp.read(path):
        die("cannot read %s" % path)
    if arch is None or arch == host_arch():
        return cp
    if not cp.has_section(arch_section(arch)):
        die("no [%s] in config/fork.ini: mesa-fork cross-builds for %s only (this "
            "machine is %s); on a %s machine, run it there without --arch"
            % (arch_section(arch), ", ".join(cross_arches(cp)) or "no architecture",
               host_arch(), arch))
    a = cp[arch_section(arch)]
    keep = a["drivers"].split()
    for drv in list(cp["drivers"]):
        if drv not in keep:
            cp.remove_option("drivers", drv)
    cp["meson"]["options"] = cp["meson"]["options"] + "\n" + a["meson_options"]
    cp["meson"]["test_suites"] = a["test_suites"]
    return cp


def cross_native_tools(conf):
    """{program: path in a Mesa build tree} of [meson] cross_native_tools:
    the compilers a cross build takes from a native build."""
    return dict(item.split("=", 1) for item in conf["meson"]["cross_native_tools"].split())


def fork_release(conf):
    """'mesa-fork 1': what the driverInfo of every fork driver names."""
    return "%s %s" % (conf["fork"]["name"], conf["fork"]["release"])


def names_release(conf, info):
    """Whether a driverInfo (or a line holding one) names this release as a
    whole tag: '(mesa-fork 1, Debian ...)', '(mesa-fork 1, upstream
    tarball)', the Debian package's '(mesa-fork 1)'; never '(mesa-fork 12,
    ...)', which merely begins with the same characters."""
    return re.search(r"\(%s[,)]" % re.escape(fork_release(conf)), info or "") is not None


# Where install writes the fork's ICD manifests inside a prefix: a
# directory the Vulkan loader never searches by itself, whatever the
# prefix (it searches only <dir>/vulkan/icd.d, install.py says which dirs).
PREFIX_ICD_DIR = os.path.join("share", "mesa-fork", "icd.d")
# Where installs before that put them (and install now removes them from).
OLD_ICD_DIR = os.path.join("share", "vulkan", "icd.d")


def driver_info_tag(conf, upstream=False):
    """The text -Dvulkan-driver-info appends to driverInfo: the fork's
    release and the base it is built on (upstream: Mesa's release tarball,
    without Debian's patches)."""
    if upstream:
        return "%s, upstream tarball" % fork_release(conf)
    return "%s, Debian %s" % (fork_release(conf), conf["base"]["version"])


def debian_version(conf):
    """The version of the source package debsrc makes: 25.0.7-2+deb13u1+mesafork1."""
    return "%s+%s%s" % (conf["base"]["version"], conf["fork"]["name"].replace("-", ""),
                        conf["fork"]["release"])


class Fork:
    """The repository at top, its configuration and its work directory
    (work, else MESA_FORK_WORK, else .work/), for one architecture (arch,
    default this machine's). A cross build has its own build directories,
    prefix and sysroot, suffixed with the architecture, next to the
    machine's own: .work/build/mesa-arm64, .work/prefix-arm64,
    .work/sysroot/arm64. The Mesa tree is shared."""

    def __init__(self, top, work=None, arch=None):
        self.top = top
        self.host_arch = host_arch()
        self.arch = arch or self.host_arch
        self.cross = self.arch != self.host_arch
        self.conf = load(top, self.arch)
        self.work = os.path.abspath(work or os.environ.get("MESA_FORK_WORK",
                                                           os.path.join(top, ".work")))
        WORK_ROOTS.add(self.work)
        suffix = "-" + self.arch if self.cross else ""
        self.patches = os.path.join(top, "patches")
        self.cache = os.path.join(self.work, "cache")
        self.tree = os.path.join(self.work, "mesa")
        self.build = os.path.join(self.work, "build", "mesa" + suffix)
        self.client_build = os.path.join(self.work, "build", "client" + suffix)
        self.default_prefix = os.path.join(self.work, "prefix" + suffix)
        self.sysroot = os.path.join(self.work, "sysroot", self.arch) if self.cross else None

    def adopt_default_work(self):
        """The clone's own .work/ is mesa-fork's by definition (git-ignored,
        made for its verbs): one an older mesa-fork made without marks is
        marked. A MESA_FORK_WORK directory is only ever mesa-fork's where
        make_dirs() made it."""
        if os.path.abspath(self.work) == os.path.join(self.top, ".work") and \
                os.path.isdir(self.work) and not os.path.exists(os.path.join(self.work, MARK)):
            mark(self.work)

    def for_arch(self, arch):
        """The same repository and work directory, for another architecture."""
        return Fork(self.top, self.work, arch)

    @property
    def exe_wrapper(self):
        """What runs this architecture's programs here: nothing natively,
        qemu-user with the sysroot as its library prefix for a cross build."""
        if not self.cross:
            return []
        return [self.conf[arch_section(self.arch)]["qemu"], "-L", self.sysroot]

    @property
    def chosen_prefix_file(self):
        """Where install records a --prefix it was given, for later verbs."""
        return os.path.join(self.work, "prefix-chosen-" + self.arch)

    def prefix(self, arg):
        """The install prefix a --prefix argument names; without one, the
        prefix the last install --prefix chose, while it still holds an
        installation, else the default."""
        if arg:
            return os.path.abspath(arg)
        try:
            with open(self.chosen_prefix_file) as f:
                chosen = f.read().strip()
        except OSError:
            chosen = ""
        # An installation, of this layout or the one before (run then says
        # to install again).
        if chosen and any(os.path.isdir(os.path.join(chosen, d))
                          for d in (PREFIX_ICD_DIR, OLD_ICD_DIR)):
            return chosen
        return os.path.abspath(self.default_prefix)

    def remember_prefix(self, prefix):
        """Later verbs without --prefix use prefix (the default: forget)."""
        path = self.chosen_prefix_file
        if os.path.abspath(prefix) == os.path.abspath(self.default_prefix):
            if os.path.exists(path):
                os.unlink(path)
            return
        make_dirs(self.work)
        with open(path, "w") as f:
            f.write(os.path.abspath(prefix) + "\n")

    @property
    def release(self):
        return fork_release(self.conf)

    @property
    def drivers(self):
        return list(self.conf["drivers"])


def stock_knobs(conf, driver):
    """The environment that turns every change of driver off
    (config/fork.ini [stock])."""
    return dict(p.split("=", 1) for p in conf["stock"][driver].split())
