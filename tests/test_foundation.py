# SPDX-License-Identifier: MIT
"""End-to-end tests of the foundation: the installed fork on each drm-shim,
the hk uAPI probe, the asahi shim's device models, and the CLI's run verb."""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import forklib
from forklib import bin_path, list_devices, run, shim_env
from mesafork import install

DRIVERS = ("asahi", "panfrost", "intel")
KIND_NAME = {"asahi": "Honeykrisp", "panfrost": "panvk",
             "intel": "Intel open-source Mesa driver"}


class InstalledFork(unittest.TestCase):
    def test_prefix_has_icds_and_env_script(self):
        for drv in DRIVERS:
            path = os.path.join(forklib.PREFIX, "share", "mesa-fork", "icd.d",
                                "mesa_fork_%s_icd.json" % drv)
            self.assertTrue(os.path.exists(path), path)
            lib = json.load(open(path))["ICD"]["library_path"]
            self.assertTrue(os.path.isabs(lib), "library_path must be absolute: %s" % lib)
            self.assertTrue(os.path.exists(lib), lib)
        env_sh = open(os.path.join(forklib.PREFIX, "share", "mesa-fork", "env.sh")).read()
        self.assertIn("VK_DRIVER_FILES=", env_sh)
        self.assertIn("VK_ICD_FILENAMES=", env_sh)

    def test_each_driver_lists_one_fork_device_on_its_shim(self):
        for drv in DRIVERS:
            with self.subTest(driver=drv):
                devs, r = list_devices(shim_env(drv))
                self.assertEqual(len(devs), 1, "%s: %s %s" % (drv, devs, r.stderr[-2000:]))
                self.assertEqual(devs[0]["driver_kind"], drv)
                self.assertEqual(devs[0]["driver"], KIND_NAME[drv])
                self.assertTrue(devs[0]["info"].endswith(forklib.fork_tag()),
                                "driverInfo %r lacks %r" % (devs[0]["info"], forklib.fork_tag()))
                self.assertTrue(devs[0]["info"].startswith("Mesa " + forklib.MESA_VERSION), devs[0]["info"])

    def test_vulkaninfo_names_the_fork(self):
        """vulkaninfo, a client none of us wrote, sees the fork's driverInfo."""
        for drv in DRIVERS:
            with self.subTest(driver=drv):
                r = run(["vulkaninfo", "--summary"], env=shim_env(drv))
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(len(re.findall(r"deviceName\s*=", r.stdout)), 1, r.stdout)
                infos = re.findall(r"driverInfo\s*=\s*(.*)", r.stdout)
                if drv == "panfrost":
                    # Vulkan 1.1 device: the summary has no driver fields.
                    self.assertEqual(infos, [])
                    r = run(["vulkaninfo"], env=shim_env(drv))
                    sect = r.stdout.split("VkPhysicalDeviceDriverProperties", 1)[1][:600]
                    infos = re.findall(r"driverInfo\s*=\s*(.*)", sect)
                    names = re.findall(r"driverName\s*=\s*(.*)", sect)
                else:
                    names = re.findall(r"driverName\s*=\s*(.*)", r.stdout)
                self.assertEqual(len(infos), 1, r.stdout[-3000:])
                self.assertIn(forklib.fork_tag(), infos[0])
                self.assertEqual([n.strip() for n in names], [KIND_NAME[drv]])

    def test_vkcheck_with_validation_on_each_shim(self):
        for drv in DRIVERS:
            with self.subTest(driver=drv):
                r = run([bin_path("mesa-fork-vkcheck"), "--validate"], env=shim_env(drv))
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-3000:])
                self.assertIn("recorded dispatch 64x1x1, pipeline barrier, copy", r.stdout)
                self.assertIn("submitted and waited on the fence", r.stdout)
                self.assertIn("validation on, 0 validation message(s)", r.stdout)
                self.assertNotIn("validation error", r.stderr)
                self.assertNotIn("validation warning", r.stderr)


class AsahiShimDevices(unittest.TestCase):
    # Names agx_open_device() builds from generation, variant and revision.
    EXPECTED = {
        "m1max": "Apple M1 Max (G13C C0)",
        "m2max": "Apple M2 Max (G14C B1)",
        "m2ultra": "Apple M2 Ultra (G14D B1)",
    }

    def test_models_are_selectable(self):
        for model, name in self.EXPECTED.items():
            with self.subTest(model=model):
                devs, r = list_devices(shim_env("asahi", ASAHI_SHIM_DEVICE=model))
                self.assertEqual([d["name"] for d in devs], [name], r.stderr[-2000:])

    def test_default_model_is_m1_max(self):
        env = shim_env("asahi")
        env.pop("ASAHI_SHIM_DEVICE", None)
        devs, r = list_devices(env)
        self.assertEqual([d["name"] for d in devs], [self.EXPECTED["m1max"]])

    def test_compute_submission_on_every_model(self):
        for model in self.EXPECTED:
            with self.subTest(model=model):
                r = run([bin_path("mesa-fork-vkcheck"), "--validate"],
                        env=shim_env("asahi", ASAHI_SHIM_DEVICE=model))
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])

    def test_unknown_model_is_a_clear_error(self):
        r = run([bin_path("mesa-fork-vkcheck"), "--list"],
                env=shim_env("asahi", ASAHI_SHIM_DEVICE="m9ultra"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('unknown ASAHI_SHIM_DEVICE="m9ultra"', r.stderr)
        for model in self.EXPECTED:
            self.assertIn(model, r.stderr)


class HoneykrispUapiProbe(unittest.TestCase):
    """hk probes native asahi kernels with the mainline uAPI and refuses a
    downstream-uAPI kernel and virtio-gpu guests cleanly: a message, no device,
    no abort of the process enumerating devices."""

    def test_accepts_the_mainline_uapi(self):
        devs, r = list_devices(shim_env("asahi"))
        self.assertEqual(len(devs), 1, r.stderr[-2000:])
        self.assertNotIn("not probing", r.stderr)

    def refusal(self, **env):
        """Lists devices on the shim set up by env; hk must offer none and the
        process must survive. Returns what hk printed."""
        devs, r = list_devices(shim_env("asahi", **env))
        self.assertEqual(devs, [], "hk must not probe this device")
        self.assertEqual(r.returncode, 0, "refusal must not crash the loader: " + r.stderr[-2000:])
        return r.stderr

    def test_refuses_a_downstream_kernel(self):
        err = self.refusal(ASAHI_SHIM_UAPI="downstream")
        self.assertIn("does not speak the mainline drm/asahi uAPI", err)
        self.assertEqual(err.count("not probing"), 1, err)

    def test_refuses_parameters_of_another_shape(self):
        """A kernel whose parameter struct is smaller leaves the rest zero."""
        err = self.refusal(ASAHI_SHIM_PARAMS_BYTES="16")
        self.assertIn("not the mainline drm/asahi uAPI; not probing", err)

    def test_refuses_a_crashed_gpu_saying_so(self):
        err = self.refusal(ASAHI_SHIM_CRASH_AFTER="0")
        self.assertIn("the GPU has crashed; not probing", err)

    def test_refuses_virtio_gpu(self):
        err = self.refusal(ASAHI_SHIM_DRIVER="virtio_gpu")
        self.assertIn("virtio-gpu native contexts are not supported", err)


def clean_env(**extra):
    """This process's environment without the loader's and the shims'
    variables, with a plain PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VK_", "ASAHI_", "PAN_", "INTEL_")) and k != "LD_PRELOAD"}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env.update(extra)
    return env


class EnvScripts(unittest.TestCase):
    """share/mesa-fork/env.sh and env-add.sh, sourced by a POSIX shell."""

    def source(self, script, then, **extra):
        path = os.path.join(forklib.PREFIX, "share", "mesa-fork", script)
        r = subprocess.run(["sh", "-c", ". %s && %s" % (path, then)], env=clean_env(**extra),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_env_puts_the_programs_on_path_and_undoes_itself(self):
        out = self.source("env.sh", 'command -v mesa-fork-vkcheck; echo "D=$VK_DRIVER_FILES"; '
                          'mesa_fork_off; echo "D=${VK_DRIVER_FILES-unset} '
                          'I=${VK_ICD_FILENAMES-unset} P=$PATH"; '
                          'command -v mesa_fork_off || echo gone')
        lines = out.splitlines()
        self.assertEqual(lines[0], os.path.join(forklib.PREFIX, "bin", "mesa-fork-vkcheck"))
        self.assertTrue(lines[1].startswith("D=" + forklib.PREFIX), lines)
        self.assertEqual(lines[2], "D=unset I=unset P=/usr/local/bin:/usr/bin:/bin")
        self.assertEqual(lines[3], "gone")

    def test_env_off_restores_what_was_set_before(self):
        out = self.source("env.sh", 'mesa_fork_off; echo "D=$VK_DRIVER_FILES"',
                          VK_DRIVER_FILES="/etc/vulkan/icd.d/mine.json")
        self.assertEqual(out.strip(), "D=/etc/vulkan/icd.d/mine.json")

    def test_env_add_adds_and_leaves_the_driver_search_alone(self):
        out = self.source("env-add.sh", 'echo "A=$VK_ADD_DRIVER_FILES D=$VK_DRIVER_FILES"; '
                          'mesa_fork_off; echo "A=${VK_ADD_DRIVER_FILES-unset}"',
                          VK_DRIVER_FILES="/etc/vulkan/icd.d/mine.json")
        first, second = out.splitlines()
        self.assertTrue(first.startswith("A=" + forklib.PREFIX), first)
        self.assertTrue(first.endswith(" D=/etc/vulkan/icd.d/mine.json"), first)
        self.assertEqual(second, "A=unset")


class NoTracebacks(unittest.TestCase):
    """What goes wrong around a verb ends in one line saying what to do."""

    def test_a_missing_program_is_named(self):
        """export without git on PATH (only the Python running the CLI)."""
        with tempfile.TemporaryDirectory() as tmp:
            os.symlink(sys.executable, os.path.join(tmp, "python3"))
            r = run([forklib.CLI, "export", "--output", os.path.join(tmp, "out")],
                    env=dict(os.environ, PATH=tmp))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("export: git is not installed", r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    def test_ctrl_c_says_the_verb_was_interrupted(self):
        """SIGINT to the process group, as a terminal's Ctrl-C sends it,
        while `test` unpacks sid's root: in a work directory of its own
        (this run's .work is in use), once that step has started. The verb
        says it was interrupted, in one line, and the half-made root is
        not marked ready, so the next run makes it anew. Whatever happens,
        the whole group is killed and waited for before the directory
        goes."""
        if os.geteuid() != 0:
            forklib.skip_optional("root", "unpacking sid's root, the step interrupted, "
                                  "needs root")
        import select
        with tempfile.TemporaryDirectory(dir=os.path.join(forklib.WORK, "tmp")) as tmp:
            work = os.path.join(tmp, "work")
            with open(os.path.join(tmp, "stderr"), "w+") as err_f:
                # A background job (CI's) inherits SIGINT ignored; a
                # user's Ctrl-C reaches a foreground one: the default.
                p = subprocess.Popen(
                    [forklib.CLI, "test", "-k", "NoSuchTest"], stdout=subprocess.PIPE,
                    stderr=err_f, text=True, start_new_session=True,
                    env=dict(os.environ, MESA_FORK_WORK=work),
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
                seen, interrupted = [], False
                try:
                    deadline = time.monotonic() + 600
                    while time.monotonic() < deadline:
                        ready, _, _ = select.select([p.stdout], [], [], 5)
                        if not ready:
                            continue
                        line = p.stdout.readline()
                        if not line:
                            break
                        seen.append(line)
                        if line.startswith("==> mmdebstrap: sid"):
                            os.killpg(p.pid, signal.SIGINT)
                            interrupted = True
                            break
                    out = "".join(seen) + (p.communicate(timeout=120)[0] if interrupted
                                           else "")
                finally:
                    # Nothing of the group may outlive the test: mmdebstrap's
                    # apt and tar would write on into the directory.
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
                    for _ in range(100):
                        try:
                            os.killpg(p.pid, 0)
                        except ProcessLookupError:
                            break
                        time.sleep(0.1)
                err_f.seek(0)
                err = err_f.read()
            if not interrupted:
                text = "".join(seen)
                if "cannot be had" in text:
                    m = re.search(r"^test: sid's Mesa for \S+ cannot be had \((.*)\)", text, re.M)
                    forklib.skip_optional("sid-unreachable", "the step interrupted unpacks "
                                          "sid's packages: %s" % (m.group(1) if m else text[-300:]))
                self.fail("`test` never reached the step to interrupt:\n%s%s"
                          % (text[-2000:], err[-2000:]))
            self.assertEqual(p.returncode, 130, out[-2000:] + err[-2000:])
            self.assertIn("mesa-fork: test: interrupted", err)
            self.assertNotIn("Traceback", err + out)
            roots = glob.glob(os.path.join(work, "chroot", "sid-*"))
            self.assertEqual([r for r in roots
                              if os.path.exists(os.path.join(r, ".mesa-fork-ready"))], [],
                             "an interrupted root is marked ready")

    def test_bad_token_counts_are_refused_before_anything_runs(self):
        for bad in (["24", "8"], ["0", "8"], ["8", "8"], ["8", "5000"]):
            r = run([forklib.CLI, "bench", "hk", "--tokens"] + bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn("bench: --tokens A B: two decode lengths", r.stderr)
            self.assertNotIn("==>", r.stdout)

    def test_bench_as_a_user_says_it_needs_root_in_one_line(self):
        """The sid chroot the native llama.cpp runs use needs root: as a user
        (nobody), bench hk says so before it downloads or mounts anything."""
        if os.geteuid() != 0:
            forklib.skip_optional("root", "run as a user already: becoming nobody needs root")
        with tempfile.TemporaryDirectory() as work:
            os.chmod(work, 0o777)
            os.symlink(forklib.PREFIX, os.path.join(work, "prefix"))
            r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     forklib.CLI, "bench", "hk"],
                    env=dict(os.environ, HOME="/nonexistent", MESA_FORK_WORK=work))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn("needs root (mmdebstrap, chroot, bind mounts): run it with sudo",
                      r.stderr)
        self.assertNotIn("==>", r.stdout)

    def test_a_work_directory_the_user_cannot_write_is_one_line(self):
        """A .work/ an earlier run as root made: every verb but deps says
        what to do, before anything runs."""
        if os.geteuid() != 0:
            forklib.skip_optional("root", "run as a user already: becoming nobody needs root")
        with tempfile.TemporaryDirectory() as work:
            os.chmod(work, 0o755)
            r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     forklib.CLI, "install"], env=dict(os.environ, MESA_FORK_WORK=work))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("is not writable by you (an earlier run as root made it?)", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertNotIn("==>", r.stdout)

    def test_a_report_into_a_missing_directory_stops_first(self):
        r = run([forklib.CLI, "report", "--dry", "--output", "/nonexistent/dir/r.md"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("report: --output /nonexistent/dir/r.md: no directory", r.stderr)
        self.assertNotIn("==>", r.stdout)


class RememberedPrefix(unittest.TestCase):
    def test_later_verbs_use_the_prefix_install_was_given(self):
        from mesafork import config
        with tempfile.TemporaryDirectory() as tmp:
            fork = config.Fork(forklib.TOP, os.path.join(tmp, "work"))
            chosen = os.path.join(tmp, "opt")
            fork.remember_prefix(chosen)
            # Not an installation (yet): the default.
            self.assertEqual(fork.prefix(None), os.path.abspath(fork.default_prefix))
            os.makedirs(os.path.join(chosen, "share", "mesa-fork", "icd.d"))
            self.assertEqual(fork.prefix(None), chosen)
            self.assertEqual(fork.prefix("/elsewhere"), "/elsewhere")
            # Installing into the default again forgets the choice.
            fork.remember_prefix(fork.default_prefix)
            self.assertEqual(fork.prefix(None), os.path.abspath(fork.default_prefix))


class RunVerb(unittest.TestCase):
    def test_run_executes_command_on_the_fork(self):
        r = run([forklib.CLI, "run", "--prefix", forklib.PREFIX, "--shim", "panfrost",
                 "--", "sh", "-c", "echo ran-with $VK_DRIVER_FILES"],
                env=shim_env("panfrost"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ran-with " + forklib.PREFIX, r.stdout)
        self.assertIn("panvk", r.stdout)

    def test_run_finds_the_prefix_programs_by_name(self):
        """The probes run as the README writes them: by name."""
        r = run([forklib.CLI, "run", "--prefix", forklib.PREFIX, "--shim", "panfrost",
                 "--", "mesa-fork-vkcheck", "--list"], env=clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"driver_kind": "panfrost"', r.stdout)

    def test_run_add_keeps_the_system_drivers_visible(self):
        """--add: the fork's manifests through VK_ADD_DRIVER_FILES, the
        system's driver search left alone; the loader (bookworm's 1.3.239)
        still finds the fork's device."""
        r = run([forklib.CLI, "run", "--add", "--prefix", forklib.PREFIX, "--shim", "asahi",
                 "--", "sh", "-c", "echo A=$VK_ADD_DRIVER_FILES D=${VK_DRIVER_FILES-unset}"],
                env=clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Honeykrisp", r.stdout)
        self.assertIn("A=" + forklib.PREFIX, r.stdout)
        self.assertIn("D=unset", r.stdout)

    def test_run_refuses_when_no_device_loaded(self):
        """A prefix whose ICDs load nothing: run says it found no device and
        does not run CMD."""
        with tempfile.TemporaryDirectory() as tmp:
            icd_dir = os.path.join(tmp, "share", "mesa-fork", "icd.d")
            os.makedirs(icd_dir)
            for drv in DRIVERS:
                with open(os.path.join(icd_dir, "mesa_fork_%s_icd.json" % drv), "w") as f:
                    f.write('{"file_format_version": "1.0.0", "ICD": {"library_path": '
                            '"/nonexistent/libvulkan_other.so", "api_version": "1.3.0"}}')
            os.makedirs(os.path.join(tmp, "bin"))
            os.symlink(bin_path("mesa-fork-vkcheck"), os.path.join(tmp, "bin", "mesa-fork-vkcheck"))
            marker = os.path.join(tmp, "ran")
            r = run([forklib.CLI, "run", "--prefix", tmp, "--", "touch", marker])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("refusing: the Vulkan loader found no device", r.stderr)
            self.assertNotIn("picked a driver", r.stderr)
            self.assertFalse(os.path.exists(marker), "CMD ran although the fork did not load")

    def test_run_refuses_another_driver(self):
        """The installed drivers, seen by a CLI whose config names another
        release: a driver that is not this fork loaded, so run refuses."""
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "repo")
            for d in ("bin", "config"):
                shutil.copytree(os.path.join(forklib.TOP, d), os.path.join(top, d))
            ini = os.path.join(top, "config", "fork.ini")
            with open(ini) as f:
                text = f.read()
            fork = forklib.config()["fork"]
            with open(ini, "w") as f:
                f.write(text.replace("\nrelease = %s\n" % fork["release"],
                                     "\nrelease = %s0\n" % fork["release"]))
            marker = os.path.join(tmp, "ran")
            r = run([os.path.join(top, "bin", "mesa-fork"), "run", "--prefix", forklib.PREFIX,
                     "--shim", "intel", "--", "touch", marker], env=shim_env("intel"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("picked a driver that is not %s %s0" % (fork["name"], fork["release"]),
                          r.stderr)
            self.assertFalse(os.path.exists(marker), "CMD ran on another driver")

    def fork_driver_copy(self, tmp, drv, old=None, new=None):
        """A manifest in tmp for a copy of the installed drv driver, in its
        driverInfo old replaced by new (bytes of one length): another
        driver, as far as any program can tell, for the same GPU."""
        with open(install.icd_json(forklib.PREFIX, drv)) as f:
            lib = json.load(f)["ICD"]["library_path"]
        with open(lib, "rb") as f:
            data = f.read()
        if old:
            self.assertEqual(len(old), len(new))
            self.assertIn(old, data)
            data = data.replace(old, new)
        name = os.path.join(tmp, "copy%d_%s" % (len(os.listdir(tmp)), os.path.basename(lib)))
        with open(name, "wb") as f:
            f.write(data)
        icd = name + ".json"
        with open(icd, "w") as f:
            json.dump({"file_format_version": "1.0.0",
                       "ICD": {"library_path": name, "api_version": "1.3.0"}}, f)
        return icd

    def test_run_refuses_a_release_that_only_begins_like_this_one(self):
        """A driver of release 12 is not release 1's (driverInfo's whole
        tag is compared, not its first characters)."""
        release = forklib.config()["fork"]["release"]
        tag = "(mesa-fork %s" % release
        with tempfile.TemporaryDirectory() as tmp:
            icd = self.fork_driver_copy(tmp, "intel", (tag + ",").encode(),
                                        (tag + "2").encode())
            prefix = os.path.join(tmp, "prefix")
            os.makedirs(os.path.join(prefix, "bin"))
            os.symlink(bin_path("mesa-fork-vkcheck"),
                       os.path.join(prefix, "bin", "mesa-fork-vkcheck"))
            os.makedirs(os.path.join(prefix, "lib", "mesa-fork"))
            os.symlink(os.path.join(forklib.PREFIX, "lib", "mesa-fork", "drm-shim"),
                       os.path.join(prefix, "lib", "mesa-fork", "drm-shim"))
            for drv in DRIVERS:
                os.makedirs(install.icd_dir(prefix), exist_ok=True)
                shutil.copy(icd if drv == "intel" else install.icd_json(forklib.PREFIX, drv),
                            install.icd_json(prefix, drv))
            marker = os.path.join(tmp, "ran")
            r = run([forklib.CLI, "run", "--prefix", prefix, "--shim", "intel", "--",
                     "touch", marker], env=clean_env())
            self.assertIn(tag + "2 ", r.stdout)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("picked a driver that is not mesa-fork %s " % release, r.stderr)
            self.assertFalse(os.path.exists(marker), "CMD ran on release %s2's driver" % release)

    def test_release_tags_are_compared_whole(self):
        from mesafork import config
        conf = forklib.config()
        release = conf["fork"]["release"]
        for info, ours in (("Mesa M (mesa-fork %s, Debian D)", True),
                           ("Mesa M (mesa-fork %s, upstream tarball)", True),
                           ("Mesa D+mesafork1 (mesa-fork %s)", True),
                           ("  vulkaninfo: driverInfo = Mesa M (mesa-fork %s, Debian D)", True),
                           ("Mesa M (mesa-fork %s2, Debian D)", False),
                           ("Mesa M (mesa-fork %s.1, Debian D)", False),
                           ("Mesa M (mesa-fork %s", False),
                           ("Mesa M (not-mesa-fork %s, Debian D)", False),
                           ("Mesa M mesa-fork %s, Debian D", False)):
            with self.subTest(info=info):
                self.assertEqual(config.names_release(conf, info % release), ours)

    @staticmethod
    def system_driver_env(tmp, icd):
        """icd as the distribution's driver: where the loader finds it by
        itself (XDG_DATA_DIRS/vulkan/icd.d, as /usr/share/vulkan/icd.d).
        VK_DRIVER_FILES would not do: the loader ignores VK_ADD_DRIVER_FILES
        when it is set."""
        # (A directory whose name ends in .json the loader takes for a file.)
        system = os.path.join(tmp, "system%d" % len(os.listdir(tmp)))
        os.makedirs(os.path.join(system, "vulkan", "icd.d"))
        shutil.copy(icd, os.path.join(system, "vulkan", "icd.d", "intel_icd.x86_64.json"))
        return clean_env(XDG_DATA_DIRS=system, XDG_CONFIG_DIRS=system, HOME=system)

    def test_run_add_refuses_one_gpu_listed_by_the_fork_and_another_driver(self):
        """--add next to the distribution's Mesa lists one GPU twice. The
        stand-in for Debian's driver: the fork's ANV with another driverInfo
        (not the fork's, as far as any program can tell), on the same intel
        drm-shim: the same deviceUUID. run refuses in one line; two fork
        drivers of one GPU (the control) are not refused."""
        with tempfile.TemporaryDirectory() as tmp:
            other = self.fork_driver_copy(tmp, "intel", b"(mesa-fork ", b"(stand-in: ")
            env = shim_env("intel")
            env["VK_DRIVER_FILES"] = ":".join([other, install.icd_json(forklib.PREFIX, "intel")])
            devs, r = list_devices(env)
            self.assertEqual(len(devs), 2, r.stderr[-2000:])
            self.assertEqual(devs[0]["uuid"], devs[1]["uuid"])
            self.assertRegex(devs[0]["uuid"], "^[0-9a-f]{32}$")
            self.assertNotEqual(devs[0]["uuid"], "0" * 32)
            marker = os.path.join(tmp, "ran")
            r = run([forklib.CLI, "run", "--add", "--prefix", forklib.PREFIX, "--shim", "intel",
                     "--", "touch", marker], env=self.system_driver_env(tmp, other))
            self.assertNotEqual(r.returncode, 0, r.stdout)
            refusal = [l for l in r.stderr.splitlines() if "run: refusing" in l]
            self.assertEqual(len(refusal), 1, r.stderr)
            self.assertRegex(refusal[0], r"run: refusing: .* is listed twice, by mesa-fork \S+'s "
                             r"driver and by Intel open-source Mesa driver \(Mesa .*\(stand-in: "
                             r".*\), with one deviceUUID \([0-9a-f]{32}\); .*run without --add$")
            self.assertFalse(os.path.exists(marker), "CMD ran with the GPU listed twice")
            # The control: a second copy of the fork's own driver.
            same = self.fork_driver_copy(tmp, "intel")
            r = run([forklib.CLI, "run", "--add", "--prefix", forklib.PREFIX, "--shim", "intel",
                     "--", "touch", marker], env=self.system_driver_env(tmp, same))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("run: device"), 2, r.stdout)
            self.assertTrue(os.path.exists(marker))

    def test_run_without_an_install_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run([forklib.CLI, "run", "--prefix", tmp, "--", "true"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("mesa-fork-vkcheck is not installed", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
