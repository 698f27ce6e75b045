# SPDX-License-Identifier: MIT
"""Reads what `bench sync` captures on stdout: the Khronos validation
layer's synchronization messages interleaved with the events of our
VK_LAYER_MESAFORK_synctrace (src/synctrace/), and tells for each hazard
which dispatches, buffers and byte ranges it is about.

The validation layer names a hazard's buffer, the descriptor binding of the
current dispatch and the debug label of the prior command, but no byte
range. The trace gives the ranges: each hazard message follows the
`dispatch` event of the call that produced it."""

import json
import re

WHOLE_SIZE = (1 << 64) - 1

HAZARD_RE = re.compile(r"\[ (SYNC-HAZARD-[A-Z-]+) \]")
FUNC_RE = re.compile(r"^(vk\w+)\(\):", re.M)
# At vkQueueSubmit both sides are named by label and command buffer.
CURRENT_RE = re.compile(r"hazard detected\..*? in (vk\w+)\[(.*?)\] "
                        r"\(from VkCommandBuffer (0x[0-9a-f]+)")
PRIOR_RE = re.compile(r"previously (?:written|read|accessed) by (?:another )?(vk\w+)"
                      r"(?:\[(.*?)\])?(?: command)?(?: \(from VkCommandBuffer (0x[0-9a-f]+))?")
DISPATCHES = ("vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect")
BINDING_RE = re.compile(r"descriptor binding (\d+)")
SET_RE = re.compile(r"\(VkDescriptorSet (0x[0-9a-f]+)")
BUFFER_RE = re.compile(r"\bVkBuffer (0x[0-9a-f]+)")
PIPELINE_RE = re.compile(r"VkPipeline 0x[0-9a-f]+\[([^\]]*)\]")


class Binding:
    def __init__(self, buffer, offset, rng, buffer_size):
        self.buffer = buffer
        self.offset = offset
        self.range = rng
        # Where the bound range ends; VK_WHOLE_SIZE runs to the buffer's end.
        end = buffer_size if rng == WHOLE_SIZE else offset + rng
        self.end = end if end is not None else offset
        self.open_ended = rng == WHOLE_SIZE or (buffer_size is not None and
                                                offset + rng == buffer_size)

    def overlaps(self, other):
        return (self.buffer == other.buffer and self.offset < other.end and
                other.offset < self.end)

    def text(self):
        return "[%#x, %#x)%s" % (self.offset, self.end, " to the end" if self.open_ended else "")


class Dispatch:
    def __init__(self, cb, index, segment, labels, pipeline, bindings, groups):
        self.cb = cb
        self.index = index          # dispatch number in this recording
        self.segment = segment      # barriers recorded before it
        self.labels = labels        # enclosing debug labels, outermost first
        self.pipeline = pipeline
        self.bindings = bindings    # {(set index, binding, element): Binding}
        self.groups = groups
        self.hazards = []

    def label(self):
        """The prior command's name as the validation layer prints it."""
        return "::".join(self.labels)

    def node(self):
        """The ggml node(s) of the dispatch: the innermost label that is not
        the pipeline's own (GGML_VK_DEBUG_MARKERS labels each node)."""
        names = [l for l in self.labels if not l.startswith("submit ")]
        return names[0] if names else self.pipeline


def parse(stdout):
    """Replays the trace; returns the dispatches, each with the hazards
    the validation layer reported on it, and (command, message) of the
    hazards it could not place on a traced dispatch (the caller must
    report them, not drop them)."""
    buffers, names, sets = {}, {}, {}
    layouts, set_layout = {}, {}
    cbs = {}
    dispatches, unplaced = [], []
    last = None

    def new_cb(cb):
        cbs[cb] = {"pipeline": None, "sets": {}, "labels": [], "segment": 0, "n": 0,
                   "dispatches": [], "push": bytearray(256)}
        return cbs[cb]

    blocks = re.split(r"^(?=Validation Error: |\{\"ev\":)", stdout, flags=re.M)
    for block in blocks:
        if block.startswith('{"ev":'):
            line = block.split("\n", 1)[0]
            e = json.loads(line)
            ev = e["ev"]
            if ev == "buffer":
                buffers[e["buffer"]] = e["size"]
            elif ev == "name":
                names[e["handle"]] = e["name"]
            elif ev == "layout_binding":
                layouts.setdefault(e["layout"], {})[e["binding"]] = e["count"]
            elif ev == "set_layout":
                set_layout[e["set"]] = e["layout"]
                sets.pop(e["set"], None)
            elif ev == "write":
                b, el = resolve(layouts.get(set_layout.get(e["set"])), e["binding"],
                                e["element"])
                sets.setdefault(e["set"], {})[(b, el)] = (e["buffer"], e["offset"], e["range"])
            elif ev == "push":
                c = cbs.get(e["cb"]) or new_cb(e["cb"])
                data = bytes.fromhex(e["data"])
                pc = c["push"]
                pc[e["offset"]:e["offset"] + len(data)] = data
            elif ev == "begin":
                new_cb(e["cb"])
            elif ev in ("pipeline", "sets", "label", "end_label", "barrier", "dispatch"):
                c = cbs.get(e["cb"]) or new_cb(e["cb"])
                if ev == "pipeline":
                    c["pipeline"] = e["pipeline"]
                elif ev == "sets":
                    c["sets"][e["index"]] = e["set"]
                elif ev == "label":
                    c["labels"].append(e["name"])
                elif ev == "end_label":
                    if c["labels"]:
                        c["labels"].pop()
                elif ev == "barrier":
                    c["segment"] += 1
                else:
                    bindings = {}
                    for index, s in c["sets"].items():
                        for (b, el), (buf, off, rng) in sets.get(s, {}).items():
                            bindings[(index, b, el)] = Binding(buf, off, rng, buffers.get(buf))
                    pipe = names.get(c["pipeline"], "pipeline %#x" % (c["pipeline"] or 0))
                    d = Dispatch(e["cb"], c["n"], c["segment"], list(c["labels"]), pipe,
                                 bindings, e.get("groups"))
                    d.push = bytes(c["push"])
                    d.count = int.from_bytes(d.push[:4], "little")
                    c["n"] += 1
                    c["dispatches"].append(d)
                    dispatches.append(d)
                    last = d
        elif block.startswith("Validation Error: "):
            m = HAZARD_RE.search(block)
            if not m:
                continue
            # A hazard inside a command buffer comes during the call it is
            # about; one between command buffers is found at vkQueueSubmit,
            # which names both dispatches by label and command buffer.
            func = FUNC_RE.search(block)
            func = func.group(1) if func else "?"
            current, earlier = None, []
            if func.startswith("vkQueueSubmit"):
                cur_m = CURRENT_RE.search(block)
                if cur_m and cur_m.group(1) in DISPATCHES:
                    cb = int(cur_m.group(3), 16)
                    mine = cbs.get(cb, {}).get("dispatches", [])
                    current = next((d for d in reversed(mine) if d.label() == cur_m.group(2)),
                                   None)
                    prior_cb = PRIOR_RE.search(block)
                    if prior_cb and prior_cb.group(3):
                        earlier = cbs.get(int(prior_cb.group(3), 16), {}).get("dispatches", [])
            elif func in DISPATCHES and last:
                current, earlier = last, cbs[last.cb]["dispatches"]
            if not current:
                unplaced.append((func, block))
                continue
            current.hazards.append(hazard(block, m.group(1), current, earlier))
    return dispatches, unplaced


def resolve(counts, binding, element):
    """(binding, element) a descriptor write lands in: writing past a
    binding's descriptorCount continues into the next binding."""
    if not counts:
        return binding, element
    order = sorted(counts)
    i = order.index(binding) if binding in order else None
    while i is not None and i < len(order) and element >= counts[order[i]]:
        element -= counts[order[i]]
        i += 1
    return (order[i], element) if i is not None and i < len(order) else (binding, element)


def hazard(text, kind, current, recording):
    """One hazard message on `current`: its binding, the prior dispatch it
    names (the latest so labelled before it in `recording`), and the ranges
    of both on the buffer."""
    prior_m = PRIOR_RE.search(text)
    binding = BINDING_RE.search(text)
    h = {"kind": kind.replace("SYNC-HAZARD-", ""), "current": current,
         "at_submit": bool(re.search(r"^vkQueueSubmit\w*\(\):", text, re.M)),
         "binding": int(binding.group(1)) if binding else None,
         "prior_command": prior_m.group(1) if prior_m else None,
         "prior_label": prior_m.group(2) if prior_m else None,
         "prior": None, "text": text.strip()}
    if h["prior_label"]:
        # The label is "<regions>::<pipeline> (x,y,z)"; the latest earlier
        # dispatch of this recording whose regions match is the prior.
        before = recording[:recording.index(current)] if current in recording else recording
        for d in reversed(before):
            if d.label() == h["prior_label"]:
                h["prior"] = d
                break
    cur = [b for (s, n, _), b in current.bindings.items() if n == h["binding"]]
    h["current_ranges"] = cur
    h["prior_ranges"] = []
    if h["prior"]:
        h["prior_ranges"] = [b for b in h["prior"].bindings.values()
                             if any(b.overlaps(c) for c in cur)]
    return h
