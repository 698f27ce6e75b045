# SPDX-License-Identifier: MIT
"""The CLI's own structure and its plain verbs: bin/mesafork has no import
cycle (one module per concern) and bench/ is layered (verb over the
measurements over shim), every verb's summary is a whole sentence,
`--version` and `help` answer, and the test runner's -k selects."""

import ast
import glob
import os
import subprocess
import sys
import unittest

import forklib
from forklib import CLI, run

PACKAGE = os.path.join(forklib.TOP, "bin", "mesafork")


def modules():
    """Every module of bin/mesafork by its dotted name under the package
    ('install', 'bench.shim'; a subpackage's __init__.py by the
    subpackage's name, 'bench') -> its path."""
    out = {}
    for path in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True):
        parts = os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph():
    """module -> the bin/mesafork modules it imports, at the top or inside
    a function alike (a function-level import closes a cycle just the same,
    only later). Names as modules() gives them; `from PACKAGE import NAME`
    counts NAME when it is a module, else PACKAGE."""
    names = modules()
    graph = {}
    for name, path in names.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        # The package a relative import starts from.
        here = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        if here == "__init__":
            here = ""
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = here.split(".") if here else []
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                elif node.module == "mesafork" or (node.module or "").startswith("mesafork."):
                    base = node.module[len("mesafork."):]
                else:
                    continue
                for a in node.names:
                    sub = base + "." + a.name if base else a.name
                    deps.add(sub if sub in names else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name[len("mesafork."):] for a in node.names
                            if a.name.startswith("mesafork."))
        graph[name] = deps & set(names)
    return graph


def cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


BENCH = "bench"


def bench_layering(graph):
    """What breaks bin/mesafork/bench's layers, one line each: verb.py
    over one module per measurement over shim.py, which runs the drivers.
    shim imports nothing of the package; a measurement imports bench.shim
    of it and none of install, upstream, chroot, apt (shim runs the
    drivers for it); only bench.verb imports a measurement; no module
    outside the package imports it (the CLI, bin/mesa-fork, is no module
    here)."""
    inside = {m for m in graph if m == BENCH or m.startswith(BENCH + ".")}
    shim, verb = BENCH + ".shim", BENCH + ".verb"
    measurements = inside - {BENCH, shim, verb}
    out = []
    if graph[shim] & inside:
        out.append("%s imports %s" % (shim, ", ".join(sorted(graph[shim] & inside))))
    for m in sorted(measurements):
        for dep in sorted(graph[m] & inside - {shim}):
            out.append("measurement %s imports %s" % (m, dep))
        for dep in sorted(graph[m] & {"install", "upstream", "chroot", "apt"}):
            out.append("measurement %s imports %s, not through %s" % (m, dep, shim))
    for m in sorted(graph):
        if m != verb:
            for dep in sorted(graph[m] & measurements):
                out.append("%s imports measurement %s" % (m, dep))
        if m not in inside:
            for dep in sorted(graph[m] & inside):
                out.append("%s, outside the package, imports %s" % (m, dep))
    return out


class Structure(unittest.TestCase):
    def test_no_import_cycle(self):
        graph = import_graph()
        self.assertIn("deps", graph["install"])
        # The subpackage's modules are in the graph, by their dotted names.
        self.assertIn("install", graph["bench.shim"])
        self.assertIn("bench.shim", graph["bench.hk"])
        self.assertEqual(cycle(graph), None)

    def test_the_cycle_finder_finds_one(self):
        """The control: a graph with a cycle three modules long."""
        self.assertEqual(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}),
                         ["a", "b", "c", "a"])
        graph = import_graph()
        graph["proc"] = graph["proc"] | {"install"}
        self.assertIsNotNone(cycle(graph))

    def test_bench_is_verb_over_measurements_over_shim(self):
        """Issue 40: every measurement in bin/mesafork/bench, data flowing
        one way (bench.__init__ says the layers in its docstring)."""
        graph = import_graph()
        self.assertEqual(bench_layering(graph), [])
        self.assertLessEqual({"bench.hk", "bench.panvk", "bench.sync", "bench.ops",
                              "bench.anv", "bench.memory", "bench.macs", "bench.shaders"},
                             graph["bench.verb"])
        with open(modules()[BENCH]) as f:
            init = ast.parse(f.read())
        self.assertEqual(len(init.body), 1, "bench/__init__.py holds its docstring only")
        doc = ast.get_docstring(init)
        for m in graph:
            if m.startswith(BENCH + "."):
                self.assertIn(m.split(".", 1)[1] + ".py", doc)

    def test_the_layering_check_finds_a_break(self):
        """The control: one measurement importing another, shim importing
        a measurement, and a module outside importing the package."""
        graph = import_graph()
        graph["bench.macs"] = graph["bench.macs"] | {"bench.memory"}
        graph["bench.shim"] = graph["bench.shim"] | {"bench.hk"}
        graph["report"] = graph["report"] | {"bench.ops"}
        self.assertEqual(bench_layering(graph), [
            "bench.shim imports bench.hk",
            "measurement bench.macs imports bench.memory",
            "bench.macs imports measurement bench.memory",
            "bench.shim imports measurement bench.hk",
            "report imports measurement bench.ops",
            "report, outside the package, imports bench.ops"])

    def test_no_module_only_re_exports(self):
        """Every module defines something of its own (tool.py re-exported
        other modules' names and nothing else)."""
        paths = modules()
        self.assertIn("bench.shim", paths)
        for name, path in sorted(paths.items()):
            if path.endswith("__init__.py"):
                continue
            with self.subTest(module=name), open(path) as f:
                tree = ast.parse(f.read())
                own = [n for n in tree.body if isinstance(
                    n, (ast.FunctionDef, ast.ClassDef, ast.Assign))]
                self.assertTrue(own)


class Verbs(unittest.TestCase):
    def test_help_lists_every_verb_with_a_whole_sentence(self):
        r = run([CLI, "help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        text = " ".join(r.stdout.split())
        sys.path.insert(0, os.path.join(forklib.TOP, "bin"))
        import importlib.machinery
        cli = importlib.machinery.SourceFileLoader("mesa_fork_cli", CLI).load_module()
        for verb, (fn, _) in cli.VERBS.items():
            with self.subTest(verb=verb):
                summary = cli.first_sentence(fn.__doc__)
                self.assertTrue(summary.endswith("."), summary)
                self.assertIn("%s %s" % (verb, summary), text)
        self.assertEqual(cli.first_sentence("Does this. And that."), "Does this.")
        self.assertEqual(cli.first_sentence("Does this (a.b) and\n  that."),
                         "Does this (a.b) and that.")

    def test_version_names_the_release_and_the_base(self):
        c = forklib.config()
        r = run([CLI, "--version"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("mesa-fork %s, " % c["fork"]["release"]), r.stdout)
        self.assertIn(c["base"]["version"], r.stdout)

    def test_the_runner_selects_with_k(self):
        """tests/run.py -k runs what matches and counts it; a pattern that
        matches nothing fails rather than passing zero tests."""
        env = dict(os.environ, MESA_FORK_TEST_ARCHES=forklib.HOST.arch)
        runner = os.path.join(forklib.TOP, "tests", "run.py")
        one = subprocess.run([sys.executable, runner, "-k",
                              "test_cli.Verbs.test_version_names_the_release_and_the_base"],
                             env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(one.stdout.splitlines()[-1], "1 passed, 0 failed", one.stdout)
        self.assertEqual(one.returncode, 0)
        none = subprocess.run([sys.executable, runner, "-k", "no_test_is_called_this"],
                              env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(none.stdout.splitlines()[-1], "0 passed, 0 failed", none.stdout)
        self.assertNotEqual(none.returncode, 0)


class Docs(unittest.TestCase):
    def test_the_docs_index_names_every_doc(self):
        docs = os.path.join(forklib.TOP, "docs")
        with open(os.path.join(docs, "README.md")) as f:
            index = f.read()
        for path in glob.glob(os.path.join(docs, "**", "*.md"), recursive=True):
            rel = os.path.relpath(path, docs)
            if rel != "README.md":
                with self.subTest(doc=rel):
                    self.assertIn("](%s)" % rel, index)


class NoBaseLiterals(unittest.TestCase):
    def test_tests_take_the_base_version_from_the_config(self):
        """config/fork.ini owns the base's versions: no string in a test's
        code (docstrings aside) spells them, so that moving the base is a
        change of the config, not of the tests."""
        versions = (forklib.MESA_VERSION, forklib.DEBIAN_VERSION)
        for path in glob.glob(os.path.join(forklib.TOP, "tests", "*.py")):
            with open(path) as f:
                tree = ast.parse(f.read())
            docstrings = set()
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and \
                        node.body and isinstance(node.body[0], ast.Expr) and \
                        isinstance(node.body[0].value, ast.Constant):
                    docstrings.add(id(node.body[0].value))
            found = [n.lineno for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str) and
                     id(n) not in docstrings and any(v in n.value for v in versions)]
            with self.subTest(test=os.path.basename(path)):
                self.assertEqual(found, [])
