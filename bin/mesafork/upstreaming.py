# SPDX-License-Identifier: MIT
"""`mesa-fork export --upstream DIR`: the merge-request series, cut from
the patch-queue branch.

Every commit of the branch says in its DEP-3 `Forwarded:` trailer whether
it is meant for upstream:
  Forwarded: no          a merge-request patch (exported);
  Forwarded: not-needed  stays in the fork. If every file it touches is
                         test scaffolding (config/fork.ini
                         [upstream_mr] scaffolding: the drm-shims), it is
                         left out of the upstream branch; otherwise it is a
                         prerequisite: a backport of what upstream main
                         already has, or a fork-only change a later patch
                         sits on, kept under the patches that need it.
The upstream branch (`upstream-mr` in .work/mesa) is the base plus the
prerequisites and the merge-request patches, in the series' order,
without the scaffolding and without the `Forwarded:` trailers (Mesa's
commits carry none). `mesa-fork bisect --upstream` builds each of its
commits and runs the unit suites. docs/upstreaming.md says how each patch
moves onto main.
"""

import os
import re
import shutil
import subprocess

from . import series
from .config import BASE_TAG, BRANCH
from .proc import die, rel, step

UPSTREAM_BRANCH = "upstream-mr"

MR, PREREQUISITE, SCAFFOLDING = "merge request", "prerequisite", "scaffolding"


def forwarded(fork, rev):
    """The commit's DEP-3 Forwarded trailer ('' when it has none)."""
    return series.git(fork, "log", "-1", "--format=%(trailers:key=Forwarded,valueonly)",
                      rev).strip()


def scaffolding_paths(conf):
    return conf["upstream_mr"]["scaffolding"].split()


def is_scaffolding(paths, prefixes):
    """Whether every path is under one of the scaffolding prefixes."""
    return bool(paths) and all(p.startswith(tuple(prefixes)) for p in paths)


def classify(fwd, paths, prefixes):
    """MR, PREREQUISITE or SCAFFOLDING for a commit with that Forwarded
    value touching those paths."""
    if fwd == "no":
        return MR
    if fwd == "not-needed":
        return SCAFFOLDING if is_scaffolding(paths, prefixes) else PREREQUISITE
    raise ValueError(fwd)


def plan(fork):
    """[(rev, subject, kind)] of the branch, in order; stops on a commit
    without a Forwarded trailer we understand."""
    prefixes = scaffolding_paths(fork.conf)
    out, bad = [], []
    for rev in series.series_revs(fork):
        subject = series.git(fork, "log", "-1", "--format=%s", rev)
        fwd = forwarded(fork, rev)
        paths = series.git(fork, "show", "--format=", "--name-only", rev).split()
        try:
            out.append((rev, subject, classify(fwd, paths, prefixes)))
        except ValueError:
            bad.append("%s (Forwarded: %r)" % (subject, fwd))
    if bad:
        die("export --upstream: each commit needs a trailer 'Forwarded: no' (meant for "
            "upstream) or 'Forwarded: not-needed' (stays in the fork); these have neither:"
            "\n  " + "\n  ".join(bad))
    return out


def strip_forwarded(message):
    """The commit message without its DEP-3 Forwarded trailer line (and
    the blank line before it when it was the only trailer)."""
    lines = message.rstrip("\n").split("\n")
    lines = [l for l in lines if not re.match(r"Forwarded:\s", l)]
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


def build_branch(fork):
    """Cherry-picks the prerequisites and merge-request patches onto the
    base in a scratch worktree; returns [(new rev, subject, kind)]."""
    steps = plan(fork)
    wt = os.path.join(fork.work, "upstream", "tree")
    if os.path.exists(wt):
        series.git(fork, "worktree", "remove", "--force", wt, check=False)
        shutil.rmtree(wt, ignore_errors=True)
    series.git(fork, "worktree", "prune")
    os.makedirs(os.path.dirname(wt), exist_ok=True)
    series.git(fork, "worktree", "add", "--detach", wt, BASE_TAG)
    left_out = [s for _, s, k in steps if k == SCAFFOLDING]
    out = []
    try:
        for rev, subject, kind in steps:
            if kind == SCAFFOLDING:
                continue
            # The committer is the author, at the author's date: the same
            # input gives the same branch every time.
            env = dict(os.environ)
            for var, key in (("NAME", "an"), ("EMAIL", "ae"), ("DATE", "aD")):
                env["GIT_COMMITTER_" + var] = series.git(fork, "log", "-1", "--format=%" + key,
                                                         rev)
            r = subprocess.run(["git", "cherry-pick", "--allow-empty", rev], cwd=wt, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                series.git(fork, "cherry-pick", "--abort", cwd=wt, check=False)
                die("export --upstream: '%s' does not apply without the scaffolding left "
                    "out (%s). Either it needs one of them (then that one is no scaffolding: "
                    "mark it, or split the part it needs out of it), or it changes a shim "
                    "file itself (split that part out into a commit of its own):\n%s"
                    % (subject, "; ".join(left_out) or "none", r.stdout[-2000:]))
            # Mesa's commits carry no DEP-3 trailer.
            msg = series.git(fork, "log", "-1", "--format=%B", "HEAD", cwd=wt, raw=True)
            series.git(fork, "commit", "--amend", "--allow-empty", "-q", "-F", "-",
                       cwd=wt, env=env, stdin=strip_forwarded(msg))
            out.append((series.git(fork, "rev-parse", "HEAD", cwd=wt), subject, kind))
        series.git(fork, "branch", "-f", UPSTREAM_BRANCH, "HEAD", cwd=wt)
    finally:
        series.git(fork, "worktree", "remove", "--force", wt, check=False)
    return out, left_out


def upstream_revs(fork):
    """The commits of the upstream branch above the base, oldest first."""
    if not series.git(fork, "rev-parse", "-q", "--verify", "refs/heads/" + UPSTREAM_BRANCH,
                      check=False):
        die("bisect --upstream: no branch %s; run 'bin/mesa-fork export --upstream DIR' "
            "first" % UPSTREAM_BRANCH)
    return series.git(fork, "rev-list", "--reverse", BASE_TAG + ".." + UPSTREAM_BRANCH).split()


def write_mail(fork, rev, path):
    mail = series.git(fork, "format-patch", "-1", "--stdout", "--zero-commit", "--no-signature",
                      "--no-numbered", "--full-index", rev, raw=True)
    with open(path, "w") as f:
        f.write(mail)


def component(subject):
    """The component prefix of a Mesa subject ('hk', 'panvk', ...)."""
    return subject.split(":", 1)[0] if ":" in subject else "?"


def export_verb(fork, check=False, output=None, drop=False, upstream=None):
    """`export`: patches/ from the patch-queue branch (--check: fail if
    they differ), or with --upstream DIR the merge-request series."""
    if upstream is None:
        series.export(fork, check=check, output=output, drop=drop)
        return
    if check or output or drop:
        die("export: --upstream takes no --check, --output or --drop")
    if not series.tree_is_prepared(fork):
        die("export: no patch-queue tree; run 'bin/mesa-fork prepare' first")
    export_upstream(fork, upstream)


def export_upstream(fork, dest):
    """Writes the merge-request patches to dest (and the prerequisites
    they were tested on to dest/prerequisites), with a series file and a
    README naming the base."""
    if series.git(fork, "status", "--porcelain", "--untracked-files=no"):
        die("export: %s has uncommitted changes; commit them first" % rel(fork.tree))
    with step("cut %s from %s: base + prerequisites + merge-request patches"
              % (UPSTREAM_BRANCH, BRANCH)):
        picked, left_out = build_branch(fork)
    dest = os.path.abspath(dest)
    if os.path.isdir(dest) and os.listdir(dest):
        known = {"README.md", "series", "prerequisites"}
        strays = [n for n in os.listdir(dest) if n not in known and not n.endswith(".patch")]
        if strays:
            die("export --upstream: %s holds other files (%s); give an empty or new "
                "directory" % (rel(dest), ", ".join(sorted(strays)[:3])))
        shutil.rmtree(os.path.join(dest, "prerequisites"), ignore_errors=True)
        for p in series.patch_files(dest):
            os.unlink(p)
    os.makedirs(os.path.join(dest, "prerequisites"), exist_ok=True)
    order, n_mr, n_pre = [], 0, 0
    for rev, subject, kind in picked:
        if kind == MR:
            n_mr += 1
            name = "%04d-%s.patch" % (n_mr, series.slug(subject))
        else:
            n_pre += 1
            name = os.path.join("prerequisites", "%04d-%s.patch" % (n_pre, series.slug(subject)))
        write_mail(fork, rev, os.path.join(dest, name))
        order.append((name, subject, kind))
    with open(os.path.join(dest, "series"), "w") as f:
        f.write("# git am in this order on Mesa %s; the prerequisites stand in for what\n"
                "# upstream main already has (see README.md)\n"
                % fork.conf["base"]["upstream_version"])
        f.write("".join(name + "\n" for name, _, _ in order))
    write_readme(fork, dest, order, left_out)
    print("export --upstream: %d merge-request patches in %s, on %d prerequisites; "
          "%d scaffolding commits left out; branch %s in %s (check it with "
          "'bin/mesa-fork bisect --upstream')"
          % (n_mr, rel(dest), n_pre, len(left_out), UPSTREAM_BRANCH, rel(fork.tree)))


def write_readme(fork, dest, order, left_out):
    base = fork.conf["base"]
    mr = [(n, s) for n, s, k in order if k == MR]
    groups = {}
    for name, subject in mr:
        groups.setdefault(component(subject), []).append(name)
    lines = [
        "# The mesa-fork merge-request series",
        "",
        "Written by `bin/mesa-fork export --upstream` from the patch-queue branch;",
        "regenerate it, do not edit it. The patches are git mails in Mesa's",
        "commit style (no DEP-3 fields, no `Forwarded:` trailer).",
        "",
        "They were built and unit-tested (`bin/mesa-fork bisect --upstream`) on",
        "Mesa %s as Debian %s ships it, with the prerequisites under"
        % (base["upstream_version"], base["version"]),
        "`prerequisites/` applied in the order of `series`. The prerequisites are",
        "not for review: they stand in for what upstream main already has",
        "(backports) or are fork-only changes a patch sits on. How each patch",
        "moves onto main: `docs/upstreaming.md` of mesa-fork.",
        "",
        "## Merge-request patches, by component",
        "",
    ]
    for comp, names in groups.items():
        lines.append("- `%s`: %s" % (comp, ", ".join("`%s`" % n for n in names)))
    lines += ["", "## Prerequisites (not for review)", ""]
    lines += ["- `%s`" % n for n, _, k in order if k == PREREQUISITE] or ["- none"]
    lines += ["", "## Left out: test scaffolding (the drm-shims)", ""]
    lines += ["- %s" % s for s in left_out] or ["- none"]
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
