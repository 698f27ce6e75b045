# SPDX-License-Identifier: MIT
"""`bench sync`'s evidence chain: VK_LAYER_MESAFORK_synctrace records what a
real client does (descriptor ranges, dispatches, barriers), and the parser
places each validation message on the dispatch that produced it, finds the
prior dispatch it names and tells open-ended overlaps from bounded ones."""

import json
import unittest

import forklib
from forklib import run
from mesafork import install, syncval
from mesafork.bench import anv, sync

LAYER_DIR = install.layer_dir(forklib.PREFIX)


def trace(scenario, count, driver="asahi", **extra):
    env = forklib.shim_env(driver, VK_INSTANCE_LAYERS="VK_LAYER_MESAFORK_synctrace",
                           VK_LAYER_PATH=LAYER_DIR, MESA_FORK_SYNCTRACE="stdout", **extra)
    r = run([forklib.bin_path("mesa-fork-scenarios"), "--count", str(count), scenario],
            env=env)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('{"ev":')]
    return r, events


class SynctraceLayer(unittest.TestCase):
    """The layer on our scenario client, over the fork's driver on a shim."""

    def test_records_every_dispatch_and_barrier(self):
        for scenario, barriers in (("dispatches", 0), ("chain", 4)):
            r, events = trace(scenario, 5)
            self.assertEqual(r.returncode, 0, r.stderr)
            kinds = [e["ev"] for e in events]
            self.assertEqual(kinds.count("dispatch"), 5, scenario)
            self.assertEqual(kinds.count("barrier"), barriers, scenario)

    def test_descriptor_range_is_the_buffer_the_client_bound(self):
        r, events = trace("dispatches", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        sizes = {e["buffer"]: e["size"] for e in events if e["ev"] == "buffer"}
        writes = [e for e in events if e["ev"] == "write"]
        # mf_vk binds its storage buffer whole: offset 0, VK_WHOLE_SIZE.
        self.assertEqual([(w["binding"], w["offset"], w["range"]) for w in writes],
                         [(0, 0, syncval.WHOLE_SIZE)])
        self.assertIn(writes[0]["buffer"], sizes)
        ds, unplaced = syncval.parse(r.stdout)
        self.assertEqual(len(ds), 2)
        self.assertEqual(unplaced, [])
        # Both dispatches see that buffer, to its end.
        for d in ds:
            self.assertEqual([(k[1], b.buffer, b.offset, b.end, b.open_ended)
                              for k, b in d.bindings.items()],
                             [(0, writes[0]["buffer"], 0, sizes[writes[0]["buffer"]], True)])

    def test_without_a_file_it_warns_and_traces_nothing(self):
        env = forklib.shim_env("asahi", VK_INSTANCE_LAYERS="VK_LAYER_MESAFORK_synctrace",
                               VK_LAYER_PATH=LAYER_DIR)
        r = run([forklib.bin_path("mesa-fork-scenarios"), "dispatches"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MESA_FORK_SYNCTRACE is not set", r.stderr)
        self.assertNotIn('{"ev":', r.stdout)


def ev(**kw):
    return json.dumps(kw) + "\n"


def recorded_dispatch(cb, labels, pipeline, dset, push=None):
    """The events of one dispatch inside its debug labels, outermost first."""
    s = "".join(ev(ev="label", cb=cb, name=n) for n in labels)
    s += ev(ev="pipeline", cb=cb, pipeline=pipeline)
    s += ev(ev="sets", cb=cb, index=0, set=dset, dynamic=0)
    if push:
        s += ev(ev="push", cb=cb, offset=0, data=push)
    return s + ev(ev="dispatch", cb=cb, groups=[1, 1, 1])


# A recording as the layer prints it: one set layout with three bindings of
# one descriptor, written in one call of three elements (so they continue
# into bindings 1 and 2, as ggml writes them), then two dispatches and the
# hazard message the validation layer prints during the second.
def stream(prior_range, current_binding=1, label_prior="submit 0::ADD x-0::add (1,1,1)"):
    s = ev(ev="buffer", buffer=7, size=0x1000)
    s += ev(ev="layout_binding", layout=3, binding=0, count=1)
    s += ev(ev="layout_binding", layout=3, binding=1, count=1)
    s += ev(ev="layout_binding", layout=3, binding=2, count=1)
    for st in (10, 11):
        s += ev(ev="set_layout", set=st, layout=3)
    s += ev(ev="name", type=19, handle=20, name="add")
    s += ev(ev="name", type=19, handle=21, name="mul")
    # Prior: reads [0, 0x100) and [0x100, 0x200), writes binding 2.
    for el, (off, rng) in enumerate(((0, 0x100), (0x100, 0x100), prior_range)):
        s += ev(ev="write", set=10, binding=0, element=el, type=7, buffer=7, offset=off,
                range=rng)
    for el, (off, rng) in enumerate(((0x800, 0x100), (0x900, 0x100), (0xa00, 0x100))):
        s += ev(ev="write", set=11, binding=0, element=el, type=7, buffer=7, offset=off,
                range=rng)
    s += ev(ev="begin", cb=1)
    s += recorded_dispatch(1, ["submit 0", "ADD x-0", "add (1,1,1)"], 20, 10, "40000000")
    s += ev(ev="end_label", cb=1)
    s += ev(ev="end_label", cb=1)
    s += ev(ev="label", cb=1, name="MUL y-0")
    s += ev(ev="label", cb=1, name="mul (1,1,1)")
    s += ev(ev="pipeline", cb=1, pipeline=21)
    s += ev(ev="sets", cb=1, index=0, set=11, dynamic=0)
    s += ev(ev="dispatch", cb=1, groups=[1, 1, 1])
    s += ("Validation Error: [ SYNC-HAZARD-READ-AFTER-WRITE ] | MessageID = 0xe4d96472\n"
          "vkCmdDispatch(): READ_AFTER_WRITE hazard detected. Shader stage "
          "VK_SHADER_STAGE_COMPUTE_BIT reads VkBuffer 0x7, which was previously written by "
          "another vkCmdDispatch[%s] command. \nThe buffer is referenced by descriptor "
          "binding %d (VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) from descriptor set 0 "
          "(VkDescriptorSet 0xb), VkPipeline 0x15[mul].\n\n" % (label_prior, current_binding))
    return s


class Parser(unittest.TestCase):
    def test_hazard_lands_on_its_dispatch_with_the_named_prior(self):
        ds, unplaced = syncval.parse(stream((0x200, syncval.WHOLE_SIZE)))
        self.assertEqual(unplaced, [])
        self.assertEqual([len(d.hazards) for d in ds], [0, 1])
        h = ds[1].hazards[0]
        self.assertIs(h["prior"], ds[0])
        self.assertEqual(ds[0].node(), "ADD x-0")
        self.assertEqual(ds[0].count, 0x40)
        self.assertEqual(h["kind"], "READ-AFTER-WRITE")

    def test_a_write_past_a_binding_continues_into_the_next(self):
        ds, _ = syncval.parse(stream((0x200, 0x100)))
        ranges = {k[1]: (b.offset, b.end) for k, b in ds[1].bindings.items()}
        self.assertEqual(ranges, {0: (0x800, 0x900), 1: (0x900, 0xa00), 2: (0xa00, 0xb00)})
        self.assertEqual([(b.offset, b.end) for b in ds[1].hazards[0]["current_ranges"]],
                         [(0x900, 0xa00)])

    def test_open_ended_overlap(self):
        # VK_WHOLE_SIZE and an explicit range to the buffer's end are both
        # "to the end"; the current range overlaps only that tail.
        for rng in (syncval.WHOLE_SIZE, 0x1000 - 0x200):
            ds, _ = syncval.parse(stream((0x200, rng)))
            h = ds[1].hazards[0]
            self.assertEqual([(b.offset, b.end) for b in h["prior_ranges"]], [(0x200, 0x1000)])
            self.assertEqual(sync.classify(h), "open-ended (unresolved)")

    def test_bounded_overlap_is_not_called_an_artefact(self):
        ds, _ = syncval.parse(stream((0x880, 0x100)))
        h = ds[1].hazards[0]
        self.assertEqual(sync.classify(h), "bounded overlap")

    def test_unmatched_prior_is_unknown(self):
        ds, _ = syncval.parse(stream((0x200, syncval.WHOLE_SIZE),
                                     label_prior="submit 0::SCALE z-0::scale (1,1,1)"))
        h = ds[1].hazards[0]
        self.assertIsNone(h["prior"])
        self.assertEqual(sync.classify(h), "unknown")

    def test_message_before_any_dispatch_is_kept(self):
        text = stream((0x200, 0x100)).split("Validation Error", 1)
        ds, unplaced = syncval.parse("Validation Error" + text[1] + text[0])
        self.assertEqual(len(unplaced), 1)


    def test_mixed_open_and_bounded_overlaps_are_bounded(self):
        # The current range meets the prior's open-ended write at 0x200
        # and its bounded read [0x900, 0xa00): one bounded pair is enough.
        text = stream((0x200, syncval.WHOLE_SIZE)).replace(
            '"offset": 256, "range": 256}', '"offset": 2304, "range": 256}', 1)
        ds, _ = syncval.parse(text)
        h = ds[1].hazards[0]
        self.assertEqual(sorted((b.offset, b.end) for b in h["prior_ranges"]),
                         [(0x200, 0x1000), (0x900, 0xa00)])
        self.assertEqual(sync.classify(h), "bounded overlap")

    def test_known_writes_decide_disjointness(self):
        # A matrix multiply whose result, N (word 1) x stride_d (word 5,
        # 0x100) f32 from 0x200, ends at 0x600 with N = 1: the current
        # [0x900, 0xa00) is disjoint; with N = 2 it ends at 0xa00 and meets it.
        for n, want in ((1, "disjoint (checked)"), (2, "open-ended (unresolved)")):
            text = stream((0x200, syncval.WHOLE_SIZE)).replace(
                '"name": "add"', '"name": "matmul_f32_f32_aligned_0"').replace(
                '"data": "40000000"', '"data": "%s"' % "".join(
                    v.to_bytes(4, "little").hex() for v in (0x40, n, 8, 8, 8, 0x100)))
            ds, _ = syncval.parse(text.replace("add (1,1,1)", "matmul_f32_f32_aligned_0 (1,1,1)"))
            self.assertEqual(sync.classify(ds[1].hazards[0]), want, n)

    def test_hazard_found_at_submit_is_placed_by_label_and_command_buffer(self):
        # The validation layer's own wording (sid 1.4.363): the current
        # dispatch is in command buffer 0x2, the prior in 0x1.
        text = stream((0x200, syncval.WHOLE_SIZE)).split("Validation Error", 1)[0]
        text += ev(ev="begin", cb=2)
        text += recorded_dispatch(2, ["submit 1", "MUL y-0", "mul (1,1,1)"], 21, 11)
        text += ev(ev="begin", cb=3)   # recorded later, not the one submitted
        text += ("Validation Error: [ SYNC-HAZARD-READ-AFTER-WRITE ] | MessageID = 0xe4d96472\n"
                 "vkQueueSubmit(): pSubmits[0].pCommandBuffers[0] READ_AFTER_WRITE hazard "
                 "detected. Shader stage VK_SHADER_STAGE_COMPUTE_BIT in vkCmdDispatch[submit 1::"
                 "MUL y-0::mul (1,1,1)] (from VkCommandBuffer 0x2 submitted on the current "
                 "VkQueue 0x9) reads VkBuffer 0x7, which was previously written by another "
                 "vkCmdDispatch[submit 0::ADD x-0::add (1,1,1)] command (from VkCommandBuffer "
                 "0x1 submitted on VkQueue 0x9). \nThe buffer is referenced by descriptor "
                 "binding 1 (VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) from descriptor set 0 "
                 "(VkDescriptorSet 0xb), VkPipeline 0x15[mul].\n\n")
        ds, unplaced = syncval.parse(text)
        self.assertEqual(unplaced, [])
        self.assertEqual([(d.cb, len(d.hazards)) for d in ds], [(1, 0), (1, 0), (2, 1)])
        h = ds[2].hazards[0]
        self.assertTrue(h["at_submit"])
        self.assertIs(h["prior"], ds[0])
        self.assertEqual(sync.classify(h), "open-ended (unresolved)")

    def test_hazard_of_another_command_is_not_pinned_on_a_dispatch(self):
        text = stream((0x200, 0x100)).replace("vkCmdDispatch(): READ_AFTER_WRITE",
                                              "vkCmdCopyBuffer(): READ_AFTER_WRITE")
        ds, unplaced = syncval.parse(text)
        self.assertEqual([len(d.hazards) for d in ds], [0, 0])
        self.assertEqual([f for f, _ in unplaced], ["vkCmdCopyBuffer"])


class AnvAllocationPairing(unittest.TestCase):
    """bench anv: each allocation takes the buffer created during its call,
    and a mapping belongs to the buffer that held the handle then."""

    def test_handle_reuse_and_internal_buffers(self):
        lines = [ev(ioctl="GEM_CREATE_EXT", handle=1, size=8192, pat_index=3),   # ANV's own
                 ev(ioctl="GEM_CREATE_EXT", handle=2, size=4096, pat_index=3),
                 ev(ev="alloc", size=100, type=3, result=0),
                 ev(ioctl="GEM_MMAP_OFFSET", handle=2, flags=2, mode="wb"),
                 ev(ioctl="GEM_CLOSE", handle=2),
                 ev(ioctl="GEM_CREATE_EXT", handle=2, size=65536, pat_index=1),
                 ev(ev="alloc", size=65536, type=0, result=0),
                 ev(ioctl="GEM_MMAP_OFFSET", handle=2, flags=4, mode="wc")]
        got = [(a["type"], c["pat_index"], c["size"], mode)
               for a, c, mode in anv.pair_allocations("".join(lines).splitlines())]
        self.assertEqual(got, [(3, 3, 4096, "wb"), (0, 1, 65536, "wc")])


if __name__ == "__main__":
    unittest.main()
