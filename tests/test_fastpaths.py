# SPDX-License-Identifier: MIT
"""llama.cpp's fast paths on the fork (docs/changes/fast-paths.md): panvk's
shaderFloat16 and VK_KHR_shader_integer_dot_product, the float-controls
and dot-product properties it claims, and Honeykrisp's required subgroup
size, each behind a knob that restores stock.

What llama.cpp sees is read from llama.cpp itself: Debian sid's
ggml-vulkan (from the root `test` makes, .work/chroot/sid-ARCH, under
qemu-user) prints a line per device, "fp16: N | ... | int dot: N", on the
fork's panvk over the panthor shim. What the driver claims is read with
mesa-fork-fastpath-probe, which also compiles its fp16 and dot-product
pipelines; on the assertion build of panvk (.work/build/mesa-checks) a
compiler assertion would abort it. Nothing executes on a shim, so the
probe's GPU results are not compared here: its comparison is checked by
--self-test, and users with the hardware run it through `report`."""

import contextlib
import glob
import io
import json
import os
import re
import subprocess
import tempfile
import unittest
import unittest.mock

import forklib
from forklib import checks_env, run
from mesafork import upstream
from mesafork.install import icd_json
from mesafork.bench import shaders

PANVK_KNOBS = ("PANVK_SHADER_FLOAT16", "PANVK_INTEGER_DOT_PRODUCT")
HK_KNOB = "HK_REQUIRED_SUBGROUP_SIZE"

DEVICE_LINE = re.compile(r"^ggml_vulkan: 0 = (.*)$", re.M)


def probe(t, driver, *args, **env):
    """mesa-fork-fastpath-probe of target t on driver's shim: (device JSON,
    {check: JSON}, process)."""
    r = t.run([t.bin_path("mesa-fork-fastpath-probe")] + list(args),
              env=t.shim_env(driver, **env), timeout=600)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines or "device" not in lines[0]:
        raise AssertionError("fastpath-probe exited %d:\n%s\n%s"
                             % (r.returncode, r.stdout, r.stderr[-3000:]))
    return lines[0], {l["check"]: l for l in lines[1:]}, r


def sid_root(t):
    """The root of sid's packages (llama.cpp among them) that `test` made
    for t's architecture."""
    # A root this run cannot make (a user's run, offline) is an optional
    # skip with its cause; one that failed to be made is a failure.
    forklib.Yardstick.from_env(t.arch).require()
    root = upstream.SidRoot(t.fork)
    if not os.path.exists(os.path.join(root.root, "usr", "bin", "llama-bench")):
        raise AssertionError("no llama.cpp in %s: 'bin/mesa-fork test' makes it before the "
                             "tests" % root.root)
    return root


def ggml_device_line(t, **env):
    """The line sid's ggml-vulkan prints for the fork's panvk on the
    panthor shim, as a dict of its fields."""
    root = sid_root(t)
    e = t.shim_env("panfrost", **env)
    e["GGML_VK_VISIBLE_DEVICES"] = "0"
    r = root.run_in(["llama-bench", "--list-devices"], env=e, capture=True,
                    timeout=600 * (4 if t.cross else 1))
    m = DEVICE_LINE.search(r.stderr + r.stdout)
    if not m:
        raise AssertionError("no ggml_vulkan device line (exit %d):\n%s" % (
            r.returncode, (r.stderr + r.stdout)[-3000:]))
    fields = {}
    for part in m.group(1).split("|"):
        if ":" in part:
            k, v = part.split(":", 1)
            fields[k.strip()] = v.strip()
    fields["name"] = m.group(1).split("|")[0].strip()
    return fields, r


class FastPaths:
    """One architecture's build; the subclasses below name it."""
    ARCH = None

    @classmethod
    def setUpClass(cls):
        cls.t = forklib.target(cls.ARCH)

    # -- panvk: what llama.cpp sees --------------------------------------

    def test_panvk_gives_llama_cpp_fp16_and_int_dot(self):
        """The fork's panvk: "fp16: 1" and "int dot: 1" (25.0.7 gave 0 and
        0), on the fork's own driver (driverInfo), and the probe predicts
        the same line."""
        line, _ = ggml_device_line(self.t)
        self.assertIn("panvk", line["name"])
        self.assertEqual((line["fp16"], line["int dot"]), ("1", "1"), line)
        dev, _, _ = probe(self.t, "panfrost")
        self.assertIn(forklib.fork_tag(), dev["info"])
        self.assertEqual(dev["ggml"], {"fp16": 1, "int_dot": 1})

    def test_panvk_knobs_restore_stock_each_alone(self):
        """Each knob at 0 turns its own path off and leaves the other on;
        both at 0 give 25.0.7's line. The probe agrees each time."""
        cases = [({}, ("1", "1")),
                 ({"PANVK_SHADER_FLOAT16": "0"}, ("0", "1")),
                 ({"PANVK_INTEGER_DOT_PRODUCT": "0"}, ("1", "0")),
                 (dict.fromkeys(PANVK_KNOBS, "0"), ("0", "0"))]
        for env, want in cases:
            with self.subTest(env=env):
                line, _ = ggml_device_line(self.t, **env)
                self.assertEqual((line["fp16"], line["int dot"]), want, line)
                dev, _, _ = probe(self.t, "panfrost", **env)
                self.assertEqual((str(dev["ggml"]["fp16"]), str(dev["ggml"]["int_dot"])), want)

    def test_panvk_malformed_knob_warns_once_and_is_stock(self):
        for knob in PANVK_KNOBS:
            with self.subTest(knob=knob):
                dev, _, r = probe(self.t, "panfrost", **{knob: "maybe"})
                warnings = [l for l in r.stderr.splitlines() if knob in l]
                self.assertEqual(len(warnings), 1, r.stderr)
                if knob == "PANVK_SHADER_FLOAT16":
                    self.assertFalse(dev["features"]["shaderFloat16"])
                    self.assertEqual(dev["ggml"]["fp16"], 0)
                else:
                    self.assertFalse(dev["extensions"]["VK_KHR_shader_integer_dot_product"])
                    self.assertEqual(dev["ggml"]["int_dot"], 0)

    # -- panvk: what it claims --------------------------------------------

    def test_panvk_claims_acceleration_only_where_idp_is_used(self):
        """Accelerated: the packed 4x8-bit forms, plain and saturating
        accumulate, which one IDP does. Not: mixed signedness (lowered),
        the unpacked 8-bit vectors (packed first), 16 and 32 bits. With
        the knob off nothing is claimed, and there is no extension."""
        dev, _, _ = probe(self.t, "panfrost")
        acc = dev["integer_dot_accelerated"]
        yes = ["4x8_packed_signed", "4x8_packed_unsigned",
               "sat_4x8_packed_signed", "sat_4x8_packed_unsigned"]
        self.assertTrue(dev["extensions"]["VK_KHR_shader_integer_dot_product"])
        self.assertTrue(dev["features"]["shaderIntegerDotProduct"])
        self.assertEqual(sorted(k for k, v in acc.items() if v), sorted(yes))
        off, _, _ = probe(self.t, "panfrost", PANVK_INTEGER_DOT_PRODUCT="0")
        self.assertFalse(off["extensions"]["VK_KHR_shader_integer_dot_product"])
        self.assertFalse(off["features"]["shaderIntegerDotProduct"])
        self.assertEqual([k for k, v in off["integer_dot_accelerated"].items() if v], [])

    def test_panvk_float_controls_are_what_valhall_honours(self):
        """One flush-to-zero mode per shader (no fp16-flush with
        fp32-preserve): denorm independence NONE. The compiler rounds
        arithmetic to nearest even whatever RoundingModeRTZ says: no RTZ.
        The same with the knobs off."""
        for env in ({}, dict.fromkeys(PANVK_KNOBS, "0")):
            with self.subTest(env=env):
                dev, _, _ = probe(self.t, "panfrost", **env)
                fc = dev["float_controls"]
                self.assertEqual(fc["denorm_independence"], "none")
                self.assertEqual((fc["rtz16"], fc["rtz32"]), (False, False))
                self.assertEqual((fc["rte16"], fc["rte32"]), (True, True))
                self.assertTrue(fc["denorm_ftz16"] and fc["denorm_ftz32"]
                                and fc["denorm_preserve16"] and fc["denorm_preserve32"])

    def test_panvk_compiles_the_fast_path_pipelines(self):
        """The probe's fp16 (multiply-add, vec2, ldexp, 2x16 pack) and
        dot-product pipelines compile on the installed panvk into what
        the claims rest on: each of SDot, UDot, SDotAccSat and UDotAccSat
        is one IDP of its signedness (saturating for the last two), the
        fp16 ldexp is done in fp32, and the fp16 arithmetic is 16-bit.
        With the knobs off the probe does not try them."""
        _, checks, r = probe(self.t, "panfrost", "--compute", BIFROST_MESA_DEBUG="shaders")
        self.assertTrue(checks["fp16"]["ran"], r.stdout + r.stderr[-2000:])
        self.assertTrue(checks["int_dot"]["ran"], r.stdout + r.stderr[-2000:])
        # The disassembly (the IR printed before it has "rN = IDP...").
        idp = [(v, ".saturate" in mods) for v, mods in
               re.findall(r"^\s*IDP\.(v4[su]8)((?:\.\w+)*) r\d+,", r.stdout, re.M)]
        self.assertEqual(sorted(idp), [("v4s8", False), ("v4s8", True),
                                       ("v4u8", False), ("v4u8", True)], r.stdout)
        self.assertIn("LDEXP.f32", r.stdout)
        self.assertNotIn("LDEXP.v2f16", r.stdout)
        self.assertRegex(r.stdout, r"\bF(MA|ADD)\.(v2f16|f16)\b")
        _, off, _ = probe(self.t, "panfrost", "--compute", **dict.fromkeys(PANVK_KNOBS, "0"))
        self.assertFalse(off["fp16"]["ran"])
        self.assertFalse(off["int_dot"]["ran"])

    def test_panvk_merges_ssbo_loads_only_without_robust_buffer_access(self):
        """The probe's four neighbouring storage-buffer loads at a 16-byte
        aligned word compile to one 128-bit LD_BUFFER and no 32-bit one on
        a device without robustBufferAccess (bound at offset 0 and at 4
        bytes), and to no load wider than 32 bits where robustness is asked
        for: by the pipeline (VK_EXT_pipeline_robustness) or by the device.
        With PANVK_VECTORIZE_SSBO=0, or a malformed value (reported once),
        nothing is merged. Since a pipeline that asks for no robustness
        gets merged loads, panvk promises none by default
        (defaultRobustnessStorageBuffers); with the switch off it promises
        robust buffer access, as 25.0.7 did."""
        wide = re.compile(r"LD_BUFFER\.i(64|96|128)\b")
        checks_in_order = ("ssbo_vec4", "ssbo_vec4_offset", "ssbo_vec4_pipeline_robust",
                           "ssbo_vec4_robust")
        for env, merged in (({}, True), ({"PANVK_VECTORIZE_SSBO": "0"}, False),
                            ({"PANVK_VECTORIZE_SSBO": "maybe"}, False)):
            with self.subTest(env=env):
                dev, checks, r = probe(self.t, "panfrost", "--compute",
                                       BIFROST_MESA_DEBUG="shaders", **env)
                for name in checks_in_order:
                    self.assertTrue(checks[name]["ran"], r.stdout[-2000:] + r.stderr[-2000:])
                self.assertEqual(dev["default_robustness_storage_buffers"],
                                 "disabled" if merged else "robust_buffer_access")
                # The compiler prints each shader while the check creates
                # its pipeline, before the check's own line (one stdout).
                out = r.stdout
                ends = [out.index('{"check": "%s",' % name) for name in checks_in_order]
                starts = [out.rindex('{"check": ', 0, ends[0])] + ends[:-1]
                dumps = {name: out[a:b] for name, a, b in zip(checks_in_order, starts, ends)}
                # The pipeline-robustness check builds the default pipeline
                # first, then the one asking for robustness: its last dump
                last = dumps["ssbo_vec4_pipeline_robust"]
                dumps["ssbo_vec4_pipeline_robust"] = last[last.rindex("shader: MESA_SHADER"):]
                for name, dump in dumps.items():
                    robust = name.endswith("_robust")
                    if merged and not robust:
                        self.assertIn("LD_BUFFER.i128", dump, name)
                        self.assertNotIn("LD_BUFFER.i32", dump, name)
                    else:
                        self.assertIn("LD_BUFFER.i32", dump, name)
                        self.assertIsNone(wide.search(dump), (name, dump[-3000:]))
                warnings = [l for l in r.stderr.splitlines() if "PANVK_VECTORIZE_SSBO" in l]
                self.assertEqual(len(warnings), 1 if env.get("PANVK_VECTORIZE_SSBO") == "maybe"
                                 else 0, r.stderr[-2000:])

    def test_panvk_pipeline_cache_follows_the_compiler_switches(self):
        """A VkPipelineCache written under one setting of the switches that
        change what panvk's compiler makes must not be taken under another
        (vk_pipeline_cache checks pipelineCacheUUID): the UUID is the same
        for the same setting and differs with each switch off."""
        uuid = lambda **env: probe(self.t, "panfrost", **env)[0]["pipeline_cache_uuid"]
        base = uuid()
        self.assertEqual(uuid(), base)
        seen = {base}
        for knob in ("PANVK_VECTORIZE_SSBO", "BIFROST_SPILL_REUSE", "BIFROST_REMAT",
                     "BIFROST_SPILL_SPLIT", "BIFROST_RA_EVICT", "BIFROST_SPLIT_VECTORS",
                     "BIFROST_RA_DEMAND"):
            with self.subTest(knob=knob):
                u = uuid(**{knob: "0"})
                self.assertNotIn(u, seen)
                seen.add(u)

    def test_panvk_reports_the_shader_db_figures(self):
        """The pipeline executable statistics panvk reports are the figures
        of the compiler's shader-db line for the same compile: for every
        pipeline sid's llama.cpp builds for a Q4_0 model (ggml-vulkan
        prints the statistics right after creating the pipeline, the
        compiler prints its line while creating it)."""
        root = sid_root(self.t)
        model = shaders.model_files(root, forklib.WORK, ["dense-q4_0"])["dense-q4_0"]
        env = self.t.shim_env("panfrost", BIFROST_MESA_DEBUG="shaderdb",
                              GGML_VK_PIPELINE_STATS=shaders.STATS_FILTER,
                              MESA_SHADER_CACHE_DISABLE="true")
        # As `bench shaders` runs it: natively where it can
        r = root.run_in(["llama-bench", "-m", model, "-r", "1", "-p", "64", "-ub", "64",
                         "-n", "1", "-o", "csv"], env=env, capture=True,
                        timeout=1800 * (4 if self.t.cross else 1),
                        native=root.can_run_natively())
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        shaderdb, pairs, current = None, [], None
        for line in r.stderr.splitlines():
            m = re.search(r"SHADER-DB: MESA_SHADER_COMPUTE shader: (\d+) inst, ([\d.]+) cycles,"
                          r".* (\d+) threads, (\d+) loops, (\d+):(\d+) spills:fills, "
                          r"(\d+) demand", line)
            if m:
                shaderdb = m.groups()
                continue
            h = shaders.HEADER_RE.match(line)
            if h:
                current = {}
                pairs.append((h.group(1), shaderdb, current))
                shaderdb = None
                continue
            st = shaders.STAT_RE.match(line)
            if st and current is not None:
                current[st.group(1)] = st.group(2)
        self.assertGreater(len(pairs), 5, r.stderr[-3000:])
        for name, db, stats in pairs:
            with self.subTest(pipeline=name):
                self.assertIsNotNone(db, "no shader-db line before %s" % name)
                instrs, cycles, threads, loops, spills, fills, demand = db
                self.assertEqual(stats["Instructions"], instrs)
                self.assertEqual(stats["Threads"], threads)
                self.assertEqual(stats["Loops"], loops)
                self.assertEqual((stats["Spills"], stats["Fills"]), (spills, fills))
                self.assertEqual(stats["Register Demand"], demand)
                # A shader that fits the file at half occupancy needs no spill
                if int(demand) <= 32:
                    self.assertEqual((spills, fills), ("0", "0"))
                self.assertAlmostEqual(float(stats["Cycles"]), float(cycles), places=3)
                regs = int(stats["Register Count"])
                self.assertTrue(0 < regs <= 64, regs)
                self.assertEqual(threads, "2" if regs <= 32 else "1")

    def test_llama_cpp_runs_natively_where_the_root_is_this_machines(self):
        """`bench shaders` runs sid's llama.cpp by the root's own dynamic
        loader where the root is this machine's architecture: it finds
        the libraries its RUNPATHs name, its backends and the fork's
        panvk, and prints the device line it prints under qemu-user.
        Another architecture's root is refused, not run."""
        root = sid_root(self.t)
        if self.t.cross:
            self.assertFalse(root.can_run_natively())
            with self.assertRaises(SystemExit):
                root.run_in(["llama-bench", "--list-devices"], native=True)
            return
        self.assertTrue(root.can_run_natively())
        cmd = root.native_command(["llama-bench", "--list-devices"])
        self.assertTrue(cmd[0].startswith(root.root + os.sep), cmd)
        self.assertNotIn("qemu", " ".join(cmd))
        # Token generation of a Q4_0 model (the mat-vec pipelines), natively
        # and under qemu-user: the same device line, and every pipeline's
        # statistics but the compile time the same
        model = shaders.model_files(root, forklib.WORK, ["dense-q4_0"])["dense-q4_0"]
        env = self.t.shim_env("panfrost", GGML_VK_PIPELINE_STATS=shaders.STATS_FILTER,
                              MESA_SHADER_CACHE_DISABLE="true")
        runs = {}
        for native in (True, False):
            r = root.run_in(["llama-bench", "-m", model, "-r", "1", "-p", "0", "-n", "1"],
                            env=env, capture=True, timeout=1200, native=native)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            runs[native] = shaders.parse_run(r.stderr + r.stdout)
            if native:
                backends = shaders.BACKEND_RE.findall(r.stderr + r.stdout)
                self.assertIn("Vulkan", [b for b, _ in backends], r.stderr[-2000:])
                for _, path in backends:
                    self.assertTrue(os.path.realpath(path).startswith(
                        os.path.realpath(root.root) + os.sep), path)
        (dev, pipes, _), (qdev, qpipes, _) = runs[True], runs[False]
        self.assertIn("panvk", dev)
        self.assertEqual(dev, qdev)
        self.assertGreater(len(pipes), 3)
        strip = lambda ps: {p: {f: v for f, v in st.items() if f != "compile_us"}
                            for p, st in ps.items()}
        self.assertEqual(strip(pipes), strip(qpipes))
        self.assertTrue(all("compile_us" in st for st in pipes.values()))

    def test_probe_self_test(self):
        r = self.t.run([self.t.bin_path("mesa-fork-fastpath-probe"), "--self-test"])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("self-test: ok", r.stdout)

    # -- Honeykrisp: required subgroup size ---------------------------------

    def test_hk_lets_compute_pipelines_require_the_subgroup_size(self):
        """hk's subgroup is 32 wide (min = max): the compute stage is
        listed in requiredSubgroupSizeStages, and a pipeline requiring 32
        is created with the validation layer silent."""
        dev, checks, r = probe(self.t, "asahi", "--compute", "--validate")
        self.assertEqual((dev["subgroup"]["min"], dev["subgroup"]["max"]), (32, 32))
        self.assertTrue(dev["subgroup"]["required_stages_compute"])
        c = checks["required_subgroup_size"]
        self.assertEqual((c["size"], c["result"], c["validation_messages"]),
                         (32, "VK_SUCCESS", 0), r.stdout + r.stderr[-2000:])

    def test_hk_knob_off_is_stock_and_the_layer_refuses_a_required_size(self):
        """HK_REQUIRED_SUBGROUP_SIZE=0: no stage listed, as 25.0.7, and the
        validation layer reports the same pipeline; a malformed value
        warns once and is stock."""
        for value, warnings in (("0", 0), ("maybe", 1)):
            with self.subTest(value=value):
                dev, checks, r = probe(self.t, "asahi", "--compute", "--validate",
                                       **{HK_KNOB: value})
                self.assertFalse(dev["subgroup"]["required_stages_compute"])
                self.assertGreaterEqual(checks["required_subgroup_size"]["validation_messages"],
                                        1, r.stdout)
                self.assertEqual(len([l for l in r.stderr.splitlines() if HK_KNOB in l]),
                                 warnings, r.stderr)


class BenchShadersParsing(unittest.TestCase):
    """What `bench shaders` reads of a llama-bench run: ggml-vulkan's
    device line and the statistics it prints after each compile, under
    each driver's statistic names, a second pipeline of one name kept
    apart (ggml names the dequantizing matmuls of every type alike)."""

    RUN = "\n".join([
        "ggml_vulkan: 0 = Mali-G610 (panvk) | uma: 1 | fp16: 1 | int dot: 1",
        "SHADER-DB: MESA_SHADER_COMPUTE shader: 10 inst, 2.000000 cycles",
        "ggml_vulkan: pipeline stats for matmul_quant_f32_aligned_1:",
        "ggml_vulkan:   Instructions: 10",
        "ggml_vulkan:   Cycles: 2.5",
        "ggml_vulkan:   Register Count: 64",
        "ggml_vulkan:   Spills: 3",
        "ggml_vulkan:   Fills: 7",
        "ggml_vulkan:   Register Demand: 71",
        "ggml_vulkan:   Compile Time: 1250",
        "llama_context: something else: 5",
        "ggml_vulkan:   Spills: 99",
        "SHADER-DB: MESA_SHADER_COMPUTE shader: 12 inst",
        "ggml_vulkan: pipeline stats for matmul_quant_f32_aligned_1:",
        "ggml_vulkan:   Instructions: 12",
        "ggml_vulkan:   Registers used: 32",
        "ggml_vulkan: pipeline stats for add_f32:",
        "ggml_vulkan:   Number of GPRs: 20",
        "ggml_vulkan:   Code Size: 1024",
        "ggml_vulkan:   Unknown Thing: 4",
    ])

    def test_parse_run(self):
        device, pipes, shaderdb = shaders.parse_run(self.RUN)
        self.assertEqual(device, "Mali-G610 (panvk) | uma: 1 | fp16: 1 | int dot: 1")
        self.assertEqual(shaderdb, 2)
        self.assertEqual(pipes["matmul_quant_f32_aligned_1"],
                         {"instrs": 10, "cycles": 2.5, "regs": 64, "spills": 3, "fills": 7,
                          "demand": 71, "compile_us": 1250})
        self.assertEqual(pipes["matmul_quant_f32_aligned_1#2"], {"instrs": 12, "regs": 32})
        self.assertEqual(pipes["add_f32"], {"regs": 20, "code": 1024})

    def test_totals_set_spills_against_the_demand(self):
        # The issue-38 goal: spills only where the demand passes 64
        pipes = {"a": {"spills": 2, "fills": 5, "demand": 70},
                 "b": {"spills": 1, "fills": 1, "demand": 64},
                 "c": {"spills": 0, "fills": 0, "demand": 80},
                 "d": {"spills": 0, "fills": 0, "demand": 10}}
        t = shaders.totals(pipes)
        self.assertEqual((t["spilling"], t["spilling, fits"], t["over the file"]), (2, 1, 2))
        self.assertEqual(t["demand"], 224)
        # Drivers that report no demand (upstream) get no such rows
        t = shaders.totals({"a": {"spills": 2, "fills": 5}})
        self.assertEqual((t["spilling, fits"], t["over the file"]), (None, None))

    @staticmethod
    def timed(label, rows, runs=1):
        """A column whose rows (NAME: compile time, or a list of one per
        run) went through its runs."""
        c = shaders.Column(label, {}, runs=runs)
        for i in range(runs):
            c.merge("m", {p: {"instrs": 1, "compile_us": t[i] if isinstance(t, list) else t}
                          for p, t in rows.items()})
        return c

    def test_compile_time_outliers_are_those_over_twice_stock(self):
        fork = self.timed("fork", {"a": 2000, "b": 2100, "c": 900, "d": 5000})
        stock = self.timed("stock", {"a": 1000, "b": 1000, "c": 1000})
        slow, compared, left_out = shaders.compile_time_outliers([fork, stock])
        self.assertEqual((compared, left_out), (3, 0))
        self.assertEqual([(p, r) for p, _, _, r in slow], [("m b", 2.1)])
        # Upstream's compiler reports no compile time: no verdict
        stock.pipes = {"m a": {"cycles": 1.0}}
        self.assertIsNone(shaders.compile_time_outliers([fork, stock]))

    def test_compile_time_is_measured_against_stock_allocation(self):
        # With a stock-ra column (same SPIR-V), that is the reference
        fork = self.timed("fork", {"a": 3000})
        stock = self.timed("stock", {"a": 1000})
        ra = self.timed(shaders.RA_STOCK_LABEL, {"a": 2000})
        self.assertEqual(shaders.compile_time_outliers([stock, ra, fork]), ([], 1, 0))

    def test_a_backend_path_through_a_link_to_the_root_is_the_roots(self):
        # ggml prints resolved paths; the work directory may be a link
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "real", "lib"))
            os.symlink(os.path.join(d, "real"), os.path.join(d, "link"))
            root = unittest.mock.Mock(root=os.path.join(d, "link"))
            shaders.check_native_backends(root, "load_backend: loaded Vulkan backend from %s"
                                          % os.path.join(d, "real", "lib", "libv.so"))
            with self.assertRaises(SystemExit):
                shaders.check_native_backends(root, "load_backend: loaded Vulkan backend from "
                                              "/usr/lib/libv.so")

    def test_compile_time_verdict(self):
        fork, ra = shaders.Column("fork", {}), shaders.Column(shaders.RA_STOCK_LABEL, {})
        fork.native = ra.native = True
        self.assertEqual(shaders.compile_time_verdict(([], 5, 0), [fork, ra]), "met")
        self.assertEqual(shaders.compile_time_verdict(([("m a", 3, 1, 3)], 5, 0), [fork, ra]),
                         "not met")
        self.assertIn("not judged", shaders.compile_time_verdict(([], 5, 1), [fork, ra]))
        self.assertIn("not judged", shaders.compile_time_verdict(([], 0, 0), [fork, ra]))
        ra.native = False
        self.assertIn("qemu-user", shaders.compile_time_verdict(([], 5, 0), [fork, ra]))

    def test_a_model_whose_first_run_printed_nothing_is_not_timed(self):
        fork = shaders.Column("fork", {}, runs=3)
        fork.merge("m", {})
        for t in (500, 400):
            fork.merge("m", {"a": {"instrs": 1, "compile_us": t}})
        self.assertEqual(fork.times["m a"], [500, 400])
        self.assertFalse(fork.timed("m a"))

    def test_rows_of_another_demand_are_not_paired(self):
        # Pipelines of one name paired across the columns by NAME#N: a
        # demand that differs says they are not the same shader
        fork = self.timed("fork", {"a": 3000})
        ra = self.timed(shaders.RA_STOCK_LABEL, {"a": 1000})
        fork.pipes["m a"]["demand"], ra.pipes["m a"]["demand"] = 70, 70
        self.assertEqual(shaders.compile_time_outliers([ra, fork])[1:], (1, 0))
        ra.pipes["m a"]["demand"] = 96
        self.assertEqual(shaders.compile_time_outliers([ra, fork]), ([], 0, 1))

    def test_first_runs_count_the_compiles_and_failures_name_the_run(self):
        here = self.Root("amd64")
        here.output = ["SHADER-DB: a\nSHADER-DB: b", "SHADER-DB: a\nSHADER-DB: b"]
        fork = shaders.Column("fork", {}, runs=2)
        with contextlib.redirect_stdout(io.StringIO()):
            shaders.run_columns("amd64", "panfrost", [fork], here, {"m1": "/m1.gguf"}, [1])
        self.assertEqual(fork.shaderdb, 2)
        fork = shaders.Column("fork", {}, runs=2)
        fork.model_runs["m1"] = 1
        here.run_in = lambda *a, **k: subprocess.CompletedProcess(a[0], 1, "", "boom")
        fork.run(here, "/m1.gguf", "m1", [1])
        self.assertEqual(fork.failed, ["m1, run 2 (exit 1: boom)"])

    def test_compile_time_ratios_only_between_columns_run_alike(self):
        stock = self.timed("stock", {"a": 1000})
        ra = self.timed(shaders.RA_STOCK_LABEL, {"a": [900, 800]}, runs=2)
        fork = self.timed("fork", {"a": [1200, 1000]}, runs=2)
        for c in (stock, ra, fork):
            c.native = True
        with contextlib.redirect_stdout(io.StringIO()) as out:
            shaders.print_driver("amd64", "panfrost", [stock, ra, fork], "none")
        self.assertIn("fork/stock-ra compile_us 1.250", out.getvalue())
        self.assertNotIn("fork/stock compile_us", out.getvalue())
        self.assertIn("0 of 1 over 2x: met", out.getvalue())

    def test_runs_must_be_one_to_ten(self):
        for runs in (0, 11):
            with self.subTest(runs=runs), self.assertRaises(SystemExit):
                shaders.bench_shaders(None, "/p", ["amd64"], runs=runs)

    def test_compile_time_compares_only_rows_timed_alike(self):
        # b's least of three is over twice stock-ra's: an outlier
        fork = self.timed("fork", {"a": [900, 800, 1000], "b": [5000, 2500, 4000]}, runs=3)
        ra = self.timed(shaders.RA_STOCK_LABEL, {"a": [500, 450, 700], "b": [1200, 1000, 1400]},
                        runs=3)
        slow, compared, left_out = shaders.compile_time_outliers([ra, fork])
        self.assertEqual(([(p, r) for p, _, _, r in slow], compared, left_out),
                         ([("m b", 2.5)], 2, 0))
        # A row one run of stock-ra did not print has fewer times than the
        # fork's: left out, not compared against the fork's least of three
        ra = shaders.Column(shaders.RA_STOCK_LABEL, {}, runs=3)
        for t in ([1200, 500], [1000], [1400, 700]):
            ra.merge("m", dict(zip(("b", "a"), ({"instrs": 1, "compile_us": u} for u in t))))
        self.assertEqual(shaders.compile_time_outliers([ra, fork])[1:], (1, 1))
        self.assertEqual(ra.unstable, {"m a"})
        # Pipelines of one name printed in another order: which pairs with
        # which across the columns is not known, so none is compared
        fork = shaders.Column("fork", {}, runs=2)
        fork.merge("m", {"x": {"instrs": 1, "compile_us": 10}, "x#2": {"instrs": 2,
                                                                     "compile_us": 30}})
        fork.merge("m", {"x": {"instrs": 2, "compile_us": 40}, "x#2": {"instrs": 1,
                                                                     "compile_us": 20}})
        ra = self.timed(shaders.RA_STOCK_LABEL, {"x": [10, 10], "x#2": [10, 10]}, runs=2)
        self.assertEqual(fork.reordered, {"m x", "m x#2"})
        self.assertEqual(shaders.compile_time_outliers([ra, fork])[1:], (0, 2))

    def test_goal_report(self):
        fork, ra = shaders.Column("fork", {}), shaders.Column(shaders.RA_STOCK_LABEL, {})
        up = shaders.Column("upstream", {})
        fork.pipes = {"m a": {"spills": 1, "fills": 4, "cycles": 10.0, "demand": 60},
                      "m b": {"spills": 5, "fills": 6, "cycles": 20.0, "demand": 90},
                      "m c": {"spills": 0, "fills": 0, "cycles": 1.0, "demand": 20}}
        ra.pipes = {"m a": {"fills": 8}, "m b": {"fills": 12}, "m c": {"fills": 0}}
        up.pipes = {"m a": {"spills": 2, "fills": 3, "cycles": 30.0},
                    "m b": {"spills": 9, "fills": 9, "cycles": 19.0}}
        fits, worse, share, ok = shaders.goal_report([ra, fork, up])
        self.assertEqual(fits, ["m a"])
        self.assertEqual(worse, [("m a", "fills", 4, 3), ("m b", "cycles", 20.0, 19.0)])
        self.assertEqual((share, ok), (0.5, True))
        ra.pipes["m b"]["fills"] = 11
        self.assertFalse(shaders.goal_report([ra, fork, up])[3])
        # Without the stock allocation's column, no verdict
        self.assertIsNone(shaders.goal_report([fork, up]))
        # Without an upstream column, or one that built no row the fork
        # did (its runs failed), the comparison is not made (not 0)
        self.assertIsNone(shaders.goal_report([ra, fork])[1])
        up.pipes = {"other m": {"spills": 0}}
        self.assertIsNone(shaders.goal_report([ra, fork, up])[1])

    class Fork:
        """What upstream_column reads of a build: its architecture, the
        config, and each architecture's default prefix."""

        def __init__(self, arch, prefixes):
            self.arch, self.prefixes = arch, prefixes
            self.conf = {"upstream": {"panvk_arches": "arm64"}}
            self.default_prefix = prefixes.get(arch)

        def for_arch(self, arch):
            return BenchShadersParsing.Fork(arch, self.prefixes)

    class Root:
        """A root of sid's packages: its llama.cpp Vulkan backend's
        version, and the llama-bench runs made in it."""

        def __init__(self, arch, ggml="0.27.0-1"):
            self.arch, self.ggml, self.runs = arch, ggml, []

        def shim_env(self, prefix, conf, driver, **extra):
            return dict(extra, PREFIX=prefix, DRIVER=driver)

        def describe(self):
            return "sid's Mesa (%s)" % self.arch

        def package_version(self, package):
            return self.ggml if package == shaders.GGML_VULKAN else None

        root = "/sid"

        def can_run_natively(self):
            return self.arch == "amd64"

        def run_in(self, cmd, env=None, capture=False, timeout=None, native=False):
            self.runs.append((cmd[cmd.index("-m") + 1], env))
            self.native = getattr(self, "native", []) + [native]
            out = self.output.pop(0) if getattr(self, "output", None) else (
                "load_backend: loaded Vulkan backend from /sid/libggml-vulkan.so" if native else "")
            return subprocess.CompletedProcess(cmd, 0, "", out)

    def test_upstream_arch(self):
        amd64 = self.Fork("amd64", {})
        # sid builds panvk for arm64 only: amd64's panvk column is arm64's
        # where the fork's arm64 build is installed, else there is none
        self.assertIsNone(shaders.upstream_arch(amd64, "panfrost", lambda a: False))
        self.assertEqual(shaders.upstream_arch(amd64, "panfrost", lambda a: a == "arm64"),
                         "arm64")
        self.assertEqual(shaders.upstream_arch(self.Fork("arm64", {}), "panfrost",
                                               lambda a: False), "arm64")
        # Honeykrisp is built for both
        self.assertEqual(shaders.upstream_arch(amd64, "asahi", lambda a: False), "amd64")

    def test_upstream_column_from_another_architecture_runs_once(self):
        with tempfile.TemporaryDirectory() as d:
            prefixes = {"amd64": os.path.join(d, "amd64"), "arm64": os.path.join(d, "arm64")}
            amd64, arm64 = self.Fork("amd64", prefixes), self.Fork("arm64", prefixes)
            roots, cache = {"arm64": self.Root("arm64"), "amd64": self.Root("amd64")}, {}
            # No arm64 build: no column, and the note says how to get one
            col, note = shaders.upstream_column(amd64, prefixes["amd64"], "panfrost", roots,
                                                cache)
            self.assertIsNone(col)
            self.assertIn("install --arch amd64,arm64", note)
            icd = icd_json(prefixes["arm64"], "panfrost")
            os.makedirs(os.path.dirname(icd))
            open(icd, "w").close()
            col, note = shaders.upstream_column(amd64, prefixes["amd64"], "panfrost", roots,
                                                cache)
            # sid's arm64 panvk, on the arm64 build's shim, in the arm64 root
            self.assertIs(col.root, roots["arm64"])
            self.assertEqual(col.env["PREFIX"], prefixes["arm64"])
            self.assertEqual(col.env["BIFROST_MESA_DEBUG"], "shaderdb")
            self.assertIn("no panvk for amd64", note)
            # The arm64 section gets the same column, not a second run,
            # under its own heading
            col2, note2 = shaders.upstream_column(arm64, prefixes["arm64"], "panfrost", roots,
                                                  cache)
            self.assertIs(col2, col)
            self.assertNotIn("no panvk", note2)
            # Honeykrisp's is this machine's
            col3, _ = shaders.upstream_column(amd64, prefixes["amd64"], "asahi", roots, cache)
            self.assertIs(col3.root, roots["amd64"])
            self.assertEqual(col3.env["PREFIX"], prefixes["amd64"])
            # Another llama.cpp Vulkan backend in the arm64 root: other
            # SPIR-V, so no column
            roots["arm64"].ggml = "0.28.0-1"
            col5, note5 = shaders.upstream_column(amd64, prefixes["amd64"], "panfrost", roots,
                                                  {})
            self.assertIsNone(col5)
            self.assertIn("other SPIR-V", note5)
            # sid's arm64 root cannot be made in this run: no column, and why
            del roots["arm64"]
            with unittest.mock.patch.object(shaders, "optional_sid_root",
                                            return_value=(None, "needs root")):
                col4, note4 = shaders.upstream_column(amd64, prefixes["amd64"], "panfrost",
                                                      roots, {})
            self.assertIsNone(col4)
            self.assertEqual(note4, "none: needs root")
            self.assertNotIn("arm64", roots)

    def test_run_columns_runs_each_column_once_in_its_root(self):
        here, there = self.Root("amd64"), self.Root("arm64")
        fork, up = shaders.Column("fork", {"A": "1"}), shaders.Column("upstream", {}, root=there)
        paths = {"m1": "/m1.gguf", "m2": "/m2.gguf"}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            shaders.run_columns("amd64", "panfrost", [fork, up], here, paths, [1, 64])
        self.assertEqual(here.runs, [("/m1.gguf", {"A": "1"}), ("/m2.gguf", {"A": "1"})])
        self.assertEqual([m for m, _ in there.runs], ["/m1.gguf", "/m2.gguf"])
        self.assertIn("amd64, panfrost shim, upstream, sid arm64: llama-bench m1", out.getvalue())
        # The arm64 section reuses the upstream column: not run again
        with contextlib.redirect_stdout(io.StringIO()):
            shaders.run_columns("arm64", "panfrost", [shaders.Column("fork", {}), up], there,
                                paths, [1, 64])
        self.assertEqual(len(there.runs), 4)
        self.assertEqual([e for _, e in there.runs[2:]], [{}, {}])

    def test_run_columns_runs_natively_only_in_this_machines_root(self):
        here, there = self.Root("amd64"), self.Root("arm64")
        # The fork's build natively in this machine's root; sid's Mesa
        # under qemu-user, in this machine's root too
        with contextlib.redirect_stdout(io.StringIO()) as out:
            shaders.run_columns("amd64", "panfrost", [shaders.Column("fork", {}, own=True),
                                shaders.Column("upstream", {}, root=there),
                                shaders.Column("upstream", {})], here,
                                {"m1": "/m1.gguf"}, [1])
        self.assertEqual((here.native, there.native), ([True, False], [False]))
        self.assertIn("upstream, sid arm64: llama-bench m1 at ubatch 1, under qemu-user",
                      out.getvalue())
        # Another architecture's root: the fork's build under qemu-user too
        with contextlib.redirect_stdout(io.StringIO()):
            shaders.run_columns("arm64", "panfrost", [shaders.Column("fork", {}, own=True)],
                                there, {"m1": "/m1.gguf"}, [1])
        self.assertEqual(there.native, [False, False])

    def test_a_native_run_with_backends_from_the_host_is_refused(self):
        here = self.Root("amd64")
        # No Vulkan backend at all: refused too
        here.output = ["load_backend: loaded CPU backend from /sid/usr/lib/b/libcpu.so"]
        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
            shaders.run_columns("amd64", "panfrost", [shaders.Column("fork", {}, own=True)],
                                here, {"m1": "/m1.gguf"}, [1])
        here.output = ["load_backend: loaded Vulkan backend from /sid/usr/lib/b/libv.so\n"
                       "load_backend: loaded CPU backend from /usr/lib/b/libcpu.so"]
        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
            shaders.run_columns("amd64", "panfrost", [shaders.Column("fork", {}, own=True)],
                                here, {"m1": "/m1.gguf"}, [1])
        here.output = ["load_backend: loaded Vulkan backend from /sid/usr/lib/b/libv.so"]
        with contextlib.redirect_stdout(io.StringIO()):
            shaders.run_columns("amd64", "panfrost", [shaders.Column("fork", {}, own=True)],
                                here, {"m1": "/m1.gguf"}, [1])

    def test_timed_columns_take_turns(self):
        here = self.Root("amd64")
        # fork and stock-ra run three times each, in rounds, model by
        # model, the one that went first going last in the next round;
        # then the columns that run once
        cols = [shaders.Column("stock", {"C": "stock"}),
                shaders.Column(shaders.RA_STOCK_LABEL, {"C": "ra"}, runs=3),
                shaders.Column("fork", {"C": "fork"}, runs=3),
                shaders.Column("upstream", {"C": "up"})]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            shaders.run_columns("amd64", "panfrost", cols, here,
                                {"m1": "/m1.gguf", "m2": "/m2.gguf"}, [1])
        self.assertEqual(["%s %s" % (e["C"], m[1:3]) for m, e in here.runs],
                         ["ra m1", "fork m1", "ra m2", "fork m2",
                          "fork m1", "ra m1", "fork m2", "ra m2",
                          "ra m1", "fork m1", "ra m2", "fork m2",
                          "stock m1", "stock m2", "up m1", "up m2"])
        self.assertIn("fork: llama-bench m2 at ubatch 1, run 3 of 3", out.getvalue())
        self.assertTrue(all(c.done for c in cols))

    @staticmethod
    def stats(name, instrs, us):
        return ["ggml_vulkan: pipeline stats for %s:" % name,
                "ggml_vulkan:   Instructions: %d" % instrs,
                "ggml_vulkan:   Compile Time: %d" % us]

    def test_repeated_runs_keep_the_least_time_of_the_same_compile(self):
        here = self.Root("amd64")
        # Two pipelines of one name, printed in the other order in the
        # second run (ggml-vulkan compiles in several threads): matched by
        # their figures, not by NAME#2
        vk = ["load_backend: loaded Vulkan backend from /sid/libggml-vulkan.so"]
        here.output = ["\n".join(vk + self.stats("mm", 10, 500) + self.stats("mm", 20, 900)
                                 + self.stats("add", 5, 100)),
                       "\n".join(vk + self.stats("mm", 20, 700) + self.stats("mm", 10, 800)
                                 + self.stats("add", 5, 300))]
        fork = shaders.Column("fork", {}, runs=2, own=True)
        with contextlib.redirect_stdout(io.StringIO()):
            shaders.run_columns("amd64", "panfrost", [fork], here, {"m1": "/m1.gguf"}, [1])
        self.assertEqual(fork.pipes, {"m1 mm": {"instrs": 10, "compile_us": 500},
                                      "m1 mm#2": {"instrs": 20, "compile_us": 700},
                                      "m1 add": {"instrs": 5, "compile_us": 100}})
        self.assertEqual(fork.unstable, set())
        self.assertEqual(fork.reordered, {"m1 mm", "m1 mm#2"})
        self.assertTrue(fork.timed("m1 add"))
        self.assertFalse(fork.timed("m1 mm"))
        self.assertEqual(fork.spread(), (1.6, 3.0))
        self.assertTrue(fork.native)
        # The same pipeline in the same order matches its own name, even
        # where another row of that name has the same figures
        fork = shaders.Column("fork", {}, runs=2)
        for t in ((5, 6), (7, 8)):
            fork.merge("m", {"mm": {"instrs": 1, "compile_us": t[0]},
                             "mm#2": {"instrs": 1, "compile_us": t[1]}})
        self.assertEqual((fork.times["m mm"], fork.times["m mm#2"], fork.reordered),
                         ([5, 7], [6, 8], set()))
        # ... NAME#10 and past it too
        fork = shaders.Column("fork", {}, runs=2)
        rows = ["mm"] + ["mm#%d" % n for n in range(2, 12)]
        for r in range(2):
            fork.merge("m", {p: {"instrs": 1, "compile_us": 100 * r + i}
                             for i, p in enumerate(rows)})
        self.assertEqual(fork.times["m mm#10"], [9, 109])
        self.assertEqual(fork.reordered, set())

    def test_a_row_whose_figures_change_between_runs_is_unstable(self):
        fork = shaders.Column("fork", {}, runs=2)
        fork.merge("m1", {"mm": {"instrs": 10, "compile_us": 500},
                          "add": {"instrs": 5, "compile_us": 100}})
        fork.merge("m1", {"mm": {"instrs": 11, "compile_us": 400},
                          "sub": {"instrs": 5, "compile_us": 100}})
        # mm's second compile is another shader: its time is not taken;
        # add was not printed again, sub not the first time: neither is a
        # row of the table
        self.assertEqual(fork.pipes["m1 mm"]["compile_us"], 500)
        self.assertEqual(fork.unstable, {"m1 mm", "m1 mm (run 2)", "m1 add", "m1 sub (run 2)"})
        self.assertEqual(set(fork.pipes), {"m1 mm", "m1 add"})
        self.assertFalse(fork.timed("m1 add"))
        # Another model's rows stand apart
        fork.merge("m2", {"mm": {"instrs": 11, "compile_us": 400}})
        self.assertEqual(fork.pipes["m2 mm"], {"instrs": 11, "compile_us": 400})

    def test_timing_note_judges_only_native_runs(self):
        fork, ra = shaders.Column("fork", {}, runs=3), shaders.Column("stock-ra", {}, runs=3)
        fork.native = ra.native = True
        self.assertEqual(shaders.timing_note([fork, ra]), "natively, least of 3 runs each")
        fork.native = False
        self.assertIn("an indication", shaders.timing_note([fork, ra]))

    def test_columns_stock_ra_keeps_the_fast_paths(self):
        class Fork:
            conf = forklib.config()
        cols = {c.label: c.env for c in shaders.columns(Fork(), "/p", "panfrost")}
        self.assertEqual(list(cols), ["stock", shaders.RA_STOCK_LABEL, "fork"])
        ra, stock = cols[shaders.RA_STOCK_LABEL], cols["stock"]
        self.assertEqual(stock["PANVK_SHADER_FLOAT16"], "0")
        self.assertNotIn("PANVK_SHADER_FLOAT16", ra)
        self.assertEqual(ra["BIFROST_RA_EVICT"], "0")
        self.assertNotIn("BIFROST_RA_EVICT", cols["fork"])
        # Every column checks its allocations
        self.assertTrue(all("validatera" in e["BIFROST_MESA_DEBUG"] for e in cols.values()))

    def test_stock_ra_turns_off_every_compiler_switch_and_nothing_else(self):
        # Every BIFROST_* switch the series reads, from its patches: one
        # added without a [stock] entry would leave it on in stock-ra
        read = set()
        for name in glob.glob(os.path.join(forklib.TOP, "patches", "*.patch")):
            with open(name, errors="replace") as f:
                read |= set(re.findall(r'^\+.*"(BIFROST_\w+)"', f.read(), re.M))
        # Mesa's own debug flags variable is not a switch of ours
        read.discard("BIFROST_MESA_DEBUG")
        self.assertGreaterEqual(len(read), 4, read)
        knobs = shaders.ra_stock_knobs(forklib.config())
        self.assertEqual(knobs, {k: "0" for k in read})
        # The fast paths stay on (the SPIR-V is the fork column's): no
        # PANVK_* switch is in it though [stock] panfrost has them
        self.assertTrue(any(k.startswith("PANVK_")
                            for k in shaders.stock_knobs(forklib.config(), "panfrost")))

    def test_ratio_is_over_the_rows_both_built(self):
        a, b = shaders.Column("fork", {}), shaders.Column("stock", {})
        a.pipes = {"m x": {"cycles": 2.0}, "m y": {"cycles": 8.0}}
        b.pipes = {"m x": {"cycles": 4.0}, "m z": {"cycles": 1.0}}
        self.assertEqual(shaders.ratio([a, b], "fork", "stock", "cycles"),
                         (1, 2.0, 4.0, 0.5))


class FastPathsAmd64(FastPaths, unittest.TestCase):
    ARCH = "amd64"


class FastPathsArm64(FastPaths, unittest.TestCase):
    ARCH = "arm64"


class AssertionBuild(unittest.TestCase):
    """The fast-path pipelines on panvk built with assertions
    (.work/build/mesa-checks): the compiler's asserts run, and its check of
    every register allocation and spill (bi_validate_ra, issue 38)."""

    # The dense model in each type bench shaders uses; prompt processing
    # at ubatch 64 and 512, and token generation (ubatch 1).
    MODELS = ("dense-f16", "dense-q4_0", "dense-q4_k_m", "dense-q8_0")

    def test_llama_cpp_pipelines_compile_with_assertions(self):
        """Every pipeline sid's llama.cpp builds for the dense model in
        each type compiles on the assertion build with the fast paths on,
        and llama.cpp takes them: f16-accumulator matmuls for F16 weights,
        q8_1 (integer dot) matmuls and mat-vecs for the quantized types."""
        t = forklib.HOST
        root = sid_root(t)
        paths = shaders.model_files(root, forklib.WORK, list(self.MODELS))
        env = checks_env(GGML_VK_PIPELINE_STATS=shaders.STATS_FILTER,
                         MESA_SHADER_CACHE_DISABLE="true",
                         BIFROST_MESA_DEBUG=shaders.FORK_DEBUG["panfrost"])
        spilled = 0
        for name in self.MODELS:
            with self.subTest(model=name):
                r = root.run_in(["llama-bench", "-m", paths[name], "-r", "1", "-p", "512",
                                 "-ub", "64,512", "-b", "512", "-n", "4", "-o", "csv"],
                                env=env, capture=True, timeout=3600)
                text = r.stdout + r.stderr
                device, pipes, _ = shaders.parse_run(text)
                self.assertEqual(r.returncode, 0, text[-3000:])
                self.assertNotIn("Assertion", text)
                # bi_validate_ra checked every allocation and its spill code
                self.assertNotIn(shaders.RA_REJECTED, text)
                spilled += sum(1 for l in shaders.SHADERDB_RE.findall(text)
                               if " 0:0 spills:fills" not in l)
                self.assertIn("fp16: 1", device or "")
                self.assertIn("int dot: 1", device or "")
                # Each pipeline's backend compile time is reported
                # ("Compile Time", thread CPU time, patch 0063)
                self.assertTrue(pipes)
                self.assertEqual([p for p, s in pipes.items() if s.get("compile_us", 0) <= 0],
                                 [])
                if name == "dense-f16":
                    self.assertTrue(any("f16acc" in p for p in pipes), sorted(pipes))
                else:
                    self.assertTrue(any("q8_1" in p for p in pipes), sorted(pipes))
        # The check saw spill code, not only allocations that fit
        self.assertGreater(spilled, 0)

    def test_probe_pipelines_compile_with_assertions(self):
        env = checks_env()
        r = run([forklib.bin_path("mesa-fork-fastpath-probe"), "--compute"], env=env,
                timeout=600)
        checks = {l["check"]: l for l in map(json.loads, (x for x in r.stdout.splitlines()
                                                          if x.startswith('{"check"')))}
        self.assertNotIn("Assertion", r.stderr)
        self.assertTrue(checks.get("fp16", {}).get("ran"), r.stdout + r.stderr[-3000:])
        self.assertTrue(checks.get("int_dot", {}).get("ran"), r.stdout + r.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
