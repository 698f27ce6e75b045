# SPDX-License-Identifier: MIT
"""The CLI's own structure and its plain verbs: bin/mesafork has no import
cycle (one module per concern), every verb's summary is a whole sentence,
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


def import_graph():
    """module -> the bin/mesafork modules it imports, at the top or inside
    a function alike (a function-level import closes a cycle just the same,
    only later)."""
    names = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(PACKAGE, "*.py"))}
    graph = {}
    for name in names:
        with open(os.path.join(PACKAGE, name + ".py")) as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:
                    deps.add(node.module.split(".")[0])
                elif (node.level == 1 and not node.module) or node.module == "mesafork":
                    deps.update(a.name for a in node.names)
                elif node.module and node.module.startswith("mesafork."):
                    deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names
                            if a.name.startswith("mesafork."))
        graph[name] = deps & names
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


class Structure(unittest.TestCase):
    def test_no_import_cycle(self):
        graph = import_graph()
        self.assertIn("deps", graph["install"])
        self.assertEqual(cycle(graph), None)

    def test_the_cycle_finder_finds_one(self):
        """The control: a graph with a cycle three modules long."""
        self.assertEqual(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}),
                         ["a", "b", "c", "a"])
        graph = import_graph()
        graph["proc"] = graph["proc"] | {"install"}
        self.assertIsNotNone(cycle(graph))

    def test_no_module_only_re_exports(self):
        """Every module defines something of its own (tool.py re-exported
        other modules' names and nothing else)."""
        for path in glob.glob(os.path.join(PACKAGE, "*.py")):
            if path.endswith("__init__.py"):
                continue
            with self.subTest(module=os.path.basename(path)), open(path) as f:
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
