# SPDX-License-Identifier: MIT
"""The arm64 build against the machine's own, scenario by scenario.

Honeykrisp and panvk users run arm64. The arm64 build (bin/mesa-fork
install --arch arm64: cross-compiled, its programs run under qemu-user)
must send the kernel exactly what the amd64 build sends: the same CDM
control streams (launches, barriers and each barrier's bits, stream ends)
for every hk synchronization scenario in every setting, and for panvk the
same VM_BIND operations, VA peaks, TLS and WLS sizes and job descriptors.
A difference that exists only on arm64 (a size computed from a type whose
width differs, an uninitialised field, an alignment taken from the page
size) turns these red.

Mesa's asahi, panfrost and util unit suites of the arm64 build run under
meson's exe_wrapper in tests/run.py ("mesa-arm64: ..."), and vkcheck on each
shim in "shim-arm64: ..."."""

import json
import os
import unittest

import forklib
import test_hk
import test_panvk

ARCH = "arm64"


def targets(case):
    """(the machine's build, the arm64 build); skipped, as optional, when
    this run does not test arm64."""
    if forklib.HOST.arch == ARCH:
        forklib.skip_optional("host", "this machine is arm64: every other test runs on the arm64 "
                              "build itself")
    return forklib.HOST, forklib.target(ARCH)


class Build(unittest.TestCase):
    """What the comparisons below run is the arm64 build, not this
    machine's: every driver, drm-shim and program of the arm64 prefix is an
    aarch64 ELF, run through qemu-user."""

    def test_prefix_holds_arm64_programs(self):
        _, arm = targets(self)
        from mesafork import cross, install
        files = [os.path.join(arm.prefix, "lib", "mesa-fork", os.path.basename(
            arm.conf["drivers"][d].split()[0])) for d in arm.conf["drivers"]]
        files += [install.shim_lib(arm.prefix, arm.conf, d) for d in arm.conf["drivers"]]
        files += [arm.bin_path(p) for p in ("mesa-fork-vkcheck", "mesa-fork-scenarios",
                                            "mesa-fork-inflight")]
        self.assertEqual(sorted(arm.conf["drivers"]), ["asahi", "panfrost"])
        for f in files:
            with self.subTest(file=f):
                self.assertTrue(cross.is_target_elf(arm.fork, f), f)
        cmd = arm.command([arm.bin_path("mesa-fork-vkcheck"), "--list"])
        self.assertEqual(cmd[:3], arm.fork.exe_wrapper)

    def test_both_builds_are_of_the_same_tree(self):
        """driverInfo names the Mesa tree's commit (git-<sha>): an arm64 prefix
        left from an older series would compare old code with new."""
        host, arm = targets(self)
        for drv in arm.conf["drivers"]:
            with self.subTest(driver=drv):
                infos = []
                for t in (host, arm):
                    devs, r = t.list_devices(t.shim_env(drv))
                    self.assertEqual(len(devs), 1, r.stderr[-2000:])
                    infos.append(devs[0]["info"])
                self.assertRegex(infos[0], r"git-[0-9a-f]+")
                self.assertEqual(infos[1], infos[0],
                                 "rebuild: bin/mesa-fork install --arch %s" % ARCH)


class HoneykrispStreams(unittest.TestCase):
    """Every scenario of test_hk, in its three settings and with a reduced
    barrier mask, on both builds: the decoded kernel commands are equal."""

    def setUp(self):
        self.host, self.arm = targets(self)

    def compare(self, scenario, count=4, model="m1max", **env):
        a, _ = test_hk.capture_commands(scenario, count, model, self.host, **env)
        b, _ = test_hk.capture_commands(scenario, count, model, self.arm, **env)
        # Only the "empty" scenario (an empty command buffer) submits nothing.
        self.assertEqual(bool(a), scenario != "empty", "%s: %s" % (scenario, a))
        self.assertEqual(b, a, "%s %s: arm64 streams differ" % (scenario, env))
        return a

    def test_every_scenario_in_every_setting(self):
        for sc in test_hk.SCENARIOS:
            for name, env in test_hk.SETTINGS:
                with self.subTest(scenario=sc, setting=name):
                    self.compare(sc, **env)

    def test_reduced_mask(self):
        for sc in ("dispatches", "barrier", "chain", "indirect-fill"):
            with self.subTest(scenario=sc):
                cmds = self.compare(sc, HK_CDM_BARRIER_MASK="0xf0")
                blocks = [b for kind, s in cmds if kind == "compute" for b in s]
                self.assertIn(test_hk.MASK, blocks)

    def test_device_models(self):
        """The VA layout and USC heap of each chip come from the same code on
        both: a launch's pipeline mapped from the queue's USC base on every
        model."""
        for model in ("m1", "m2max", "m2ultra"):
            with self.subTest(model=model):
                self.compare("chain", 3, model)


class PanvkMemory(unittest.TestCase):
    """mesa-fork-inflight on the panthor shim, stock and fork: the same
    VM_BIND operations and peaks, the same jobs with the same TLS and WLS."""

    def setUp(self):
        self.host, self.arm = targets(self)

    def vm(self, kind, cmdbufs=1, **opts):
        out = []
        for t in (self.host, self.arm):
            s, peak, ops, _ = test_panvk.inflight(kind, cmdbufs, target=t, **opts)
            out.append((s, peak, [(o["op"], o["size"], o.get("va")) for o in ops]))
        (sa, pa, oa), (sb, pb, ob) = out
        self.assertTrue(oa, "no VM_BIND operation seen")
        self.assertEqual(pb, pa, "%s %s: VA peak" % (kind, opts))
        self.assertEqual(ob, oa, "%s %s: VM_BIND operations" % (kind, opts))
        for key in ("ok", "out_of_device_memory"):
            self.assertEqual(sb[key], sa[key], "%s %s: %s" % (kind, opts, key))
        return sa, pa

    def test_tls_in_flight_stock_and_fork(self):
        for n in (1, 4, 12):
            for knob in ("0", "1"):
                with self.subTest(cmdbufs=n, PANVK_SHARED_TLS=knob):
                    s, _ = self.vm("tls", n, validate=knob == "1", tls_kib=4,
                                   PANVK_SHARED_TLS=knob)
                    if knob == "1":
                        self.assertEqual(s["ok"], n)

    def test_tls_growth(self):
        self.vm("tls", 4, tls_kib=1, tls_grow=True)

    def test_wls_stock_and_fork(self):
        cases = (dict(groups=4096), dict(groups=4096, dispatches=4, barrier=True),
                 dict(groups=8192, local_size=1), dict(groups=65535, groups_y=65535))
        for opts in cases:
            for knob in ("0", "1"):
                with self.subTest(PANVK_WLS_REUSE=knob, **opts):
                    self.vm("wls", validate=knob == "1", PANVK_WLS_REUSE=knob, **opts)

    def test_submitted_jobs(self):
        """The capture of every submitted job: its TLS (base, per-thread size,
        buffer), its WLS (instances, instance size, base), its scoreboard
        entry and waits."""
        cases = (("tls", 3, dict(tls_kib=1, tls_shrink=True, dispatches=2)),
                 ("tls", 4, dict(tls_kib=1, tls_grow=True)),
                 ("wls", 1, dict(groups=4096, dispatches=8, barrier=True)),
                 ("wls", 1, dict(groups=8192, local_size=1)))
        for kind, n, opts in cases:
            for knobs in ({}, {"PANVK_SHARED_TLS": "0", "PANVK_WLS_REUSE": "0"}):
                with self.subTest(kind=kind, cmdbufs=n, **opts, **knobs):
                    # Stock runs out of VA on some: the driver reports it.
                    got = [test_panvk.captured(kind, n, submit=True, target=t,
                                               expect_messages=bool(knobs), **opts, **knobs)
                           for t in (self.host, self.arm)]
                    (sa, da, la, _), (sb, db, lb, _) = got
                    self.assertEqual(db, da, "device model")
                    ja, jb = test_panvk.jobs(la), test_panvk.jobs(lb)
                    self.assertEqual((sb["ok"], sb["out_of_device_memory"]),
                                     (sa["ok"], sa["out_of_device_memory"]))
                    # Stock runs out of VA on the large WLS: then nothing is
                    # submitted, and both builds must agree on that too.
                    if sa["ok"]:
                        self.assertTrue(ja, "no job captured")
                    self.assertEqual(jb, ja)
                    self.assertEqual(lb, la)


class Pages16K(unittest.TestCase):
    """The arm64 build on a 16 KiB-page kernel, as Asahi runs: Debian's
    linux-image-arm64-16k booted in qemu-system-aarch64 (bin/mesafork/guest.py;
    qemu-user keeps the host's 4 KiB pages). The drm-shims there place and
    map every BO on 16 KiB pages, as the kernels do. Every hk scenario in the
    stock and default settings, and the panvk TLS and WLS runs, must send the
    kernel what the amd64 build sends on 4 KiB pages; the drivers must
    report the guest's page as minMemoryMapAlignment."""

    HK = [(sc, name, env) for sc in test_hk.SCENARIOS
          for name, env in (test_hk.SETTINGS[0], test_hk.SETTINGS[2])]
    PANVK = [("tls", n, dict(tls_kib=4, PANVK_SHARED_TLS=k)) for n in (1, 4) for k in "01"] + \
        [("tls", 4, dict(tls_kib=1, tls_grow=True))] + \
        [("wls", 1, dict(groups=4096, dispatches=4, barrier=True, PANVK_WLS_REUSE=k))
         for k in "01"] + [("wls", 1, dict(groups=8192, local_size=1))]

    @classmethod
    def setUpClass(cls):
        if forklib.HOST.arch == ARCH:
            forklib.skip_optional("host", "an arm64 host has its own page size; the 16 KiB guest "
                                  "is for machines that are not arm64")
        cls.arm = forklib.target(ARCH)
        from mesafork import guest, install
        fork, prefix = cls.arm.fork, cls.arm.prefix

        def env(driver, **extra):
            e = install.fork_env(prefix, fork.conf, shim=driver, base={})
            e.update({k: str(v) for k, v in extra.items()})
            return e

        cmds = [(env(drv), ["/usr/bin/vulkaninfo"], []) for drv in ("asahi", "panfrost")]
        for sc, _, knobs in cls.HK:
            cmds.append((env("asahi", ASAHI_SHIM_CAPTURE="/tmp/cap", ASAHI_SHIM_DEVICE="m1max",
                             **knobs),
                         [os.path.join(prefix, "bin", "mesa-fork-scenarios"), "--count", "4",
                          sc], ["/tmp/cap"]))
        for kind, n, opts in cls.PANVK:
            args, knobs = test_panvk.inflight_args(kind, n, opts)
            cmds.append((env("panfrost", PAN_SHIM_VM_LOG="/tmp/vm", **knobs),
                         [os.path.join(prefix, "bin", "mesa-fork-inflight")] + args, ["/tmp/vm"]))
        cls.page, cls.results = guest.run_commands(fork, prefix, cmds)
        cls.vulkaninfo = cls.results[:2]
        cls.hk = cls.results[2:2 + len(cls.HK)]
        cls.panvk = cls.results[2 + len(cls.HK):]

    def test_the_guest_has_16k_pages(self):
        self.assertRegex(self.page, r"KernelPageSize:\s+16 kB")

    def test_drivers_report_the_page_as_map_alignment(self):
        for (rc, out, err, _), drv in zip(self.vulkaninfo, ("asahi", "panfrost")):
            with self.subTest(driver=drv):
                self.assertEqual(rc, 0, err)
                self.assertIn(forklib.fork_tag(), out)
                self.assertRegex(out, r"minMemoryMapAlignment\s*=\s*16384\b")

    def test_hk_streams_equal_amd64_on_4k_pages(self):
        for (sc, name, knobs), (rc, out, err, files) in zip(self.HK, self.hk):
            with self.subTest(scenario=sc, setting=name):
                self.assertEqual(rc, 0, err)
                got = test_hk.kernel_commands(files["/tmp/cap"] or "")
                want, _ = test_hk.capture_commands(sc, 4, "m1max", **knobs)
                self.assertEqual(got, want)
        # Not a comparison of nothing: only the "empty" scenario submits no
        # kernel command.
        empty = [sc for (sc, _, _), (_, _, _, f) in zip(self.HK, self.hk)
                 if not test_hk.kernel_commands(f["/tmp/cap"] or "")]
        self.assertEqual(set(empty), {"empty"})

    def test_panvk_vm_equals_amd64_on_4k_pages(self):
        for (kind, n, opts), (rc, out, err, files) in zip(self.PANVK, self.panvk):
            with self.subTest(kind=kind, cmdbufs=n, **opts):
                self.assertIn(rc, (0, 3), err)
                (s,) = test_panvk.summary_of(out)
                ops = [json.loads(l) for l in (files["/tmp/vm"] or "").splitlines()]
                # The guest has no validation layer; neither has this run.
                hs, hpeak, hops, _ = test_panvk.inflight(kind, n, validate=False, **opts)
                self.assertTrue(ops)
                self.assertEqual(max(o["peak"] for o in ops), hpeak)
                self.assertEqual([(o["op"], o["va"], o["size"]) for o in ops],
                                 [(o["op"], o["va"], o["size"]) for o in hops])
                self.assertEqual((s["ok"], s["out_of_device_memory"]),
                                 (hs["ok"], hs["out_of_device_memory"]))
