# SPDX-License-Identifier: MIT
"""`mesa-fork export --upstream DIR`: the merge-request series, cut from
the patch-queue branch.

Every commit of the branch says in its DEP-3 `Forwarded:` trailer whether
it is meant for upstream:
  Forwarded: no          a merge-request patch (exported);
  Forwarded: not-needed  stays in the fork. It is left out of the
                         upstream branch when every file it touches is test
                         scaffolding (config/fork.ini [upstream_mr]
                         scaffolding: the drm-shims) or when [upstream_mr]
                         left_out names it (fork-only code nothing sent
                         needs); otherwise it is a prerequisite: a backport
                         of what upstream main already has, or fork-only
                         code a later patch sits on, kept under the patches
                         that need it.
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

MR, PREREQUISITE, SCAFFOLDING, FORK_ONLY = ("merge request", "prerequisite", "scaffolding",
                                           "fork-only")
# Written when the branch is cut: the patch-queue commit it was cut from.
CUT_FROM = "cut-from"


def forwarded(fork, rev):
    """The commit's DEP-3 Forwarded trailer ('' when it has none)."""
    return series.git(fork, "log", "-1", "--format=%(trailers:key=Forwarded,valueonly)",
                      rev).strip()


def scaffolding_paths(conf):
    return conf["upstream_mr"]["scaffolding"].split()


def is_scaffolding(paths, prefixes):
    """Whether every path is under one of the scaffolding prefixes."""
    return bool(paths) and all(p.startswith(tuple(prefixes)) for p in paths)


def left_out_subjects(conf):
    return [l.strip() for l in conf["upstream_mr"].get("left_out", "").splitlines()
            if l.strip()]


def classify(fwd, paths, prefixes, subject="", left_out=()):
    """MR, PREREQUISITE, SCAFFOLDING or FORK_ONLY for a commit with that
    Forwarded value (as git reads trailers: any case) touching those
    paths."""
    fwd = fwd.strip().lower()
    if fwd == "no":
        return MR
    if fwd == "not-needed":
        if is_scaffolding(paths, prefixes):
            return SCAFFOLDING
        return FORK_ONLY if subject in left_out else PREREQUISITE
    raise ValueError(fwd)


def plan(fork):
    """[(rev, subject, kind)] of the branch, in order; stops on a commit
    without a Forwarded trailer we understand."""
    prefixes = scaffolding_paths(fork.conf)
    left_out = left_out_subjects(fork.conf)
    out, bad = [], []
    for rev in series.series_revs(fork):
        subject = series.git(fork, "log", "-1", "--format=%s", rev)
        fwd = forwarded(fork, rev)
        # Both sides of a rename: moving code into a shim directory does
        # not make a commit scaffolding.
        paths = series.git(fork, "show", "--format=", "--name-only", "--no-renames",
                           rev).split()
        try:
            out.append((rev, subject, classify(fwd, paths, prefixes, subject, left_out)))
        except ValueError:
            bad.append("%s (Forwarded: %r)" % (subject, fwd))
    kinds = {s: k for _, s, k in out}
    wrong = [s for s in left_out if kinds.get(s) != FORK_ONLY]
    if wrong:
        die("export --upstream: config/fork.ini [upstream_mr] left_out names %s, which is "
            "not a 'Forwarded: not-needed' commit of the branch outside the scaffolding"
            % "; ".join(repr(s) for s in wrong))
    if bad:
        die("export --upstream: each commit needs a trailer 'Forwarded: no' (meant for "
            "upstream) or 'Forwarded: not-needed' (stays in the fork); these have neither:"
            "\n  " + "\n  ".join(bad))
    return out


def strip_forwarded(message):
    """The commit message without the DEP-3 Forwarded line of its trailer
    paragraph (the last one; any case, as git reads trailers), and
    without that paragraph when it held nothing else. The body is left
    alone, even a line of it that starts with 'Forwarded:'."""
    paragraphs = message.rstrip("\n").split("\n\n")
    if len(paragraphs) < 2:
        return message.rstrip("\n") + "\n"
    last = [l for l in paragraphs[-1].split("\n")
            if not re.match(r"forwarded\s*:", l, re.IGNORECASE)]
    paragraphs = paragraphs[:-1] + (["\n".join(last)] if last else [])
    return "\n\n".join(paragraphs) + "\n"


def build_branch(fork):
    """Cherry-picks the prerequisites and merge-request patches onto the
    base in a scratch worktree; returns [(new rev, subject, kind)]."""
    steps = plan(fork)
    wt = os.path.join(fork.work, "upstream", "tree")
    left_out = [s for _, s, k in steps if k in (SCAFFOLDING, FORK_ONLY)]
    out = []
    with series.scratch_worktree(fork, wt, BASE_TAG):
        for rev, subject, kind in steps:
            if kind in (SCAFFOLDING, FORK_ONLY):
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
                die("export --upstream: '%s' does not apply without the commits left "
                    "out (%s). Either it needs one of them (then take that one off [upstream_mr] "
                    "left_out, or split the part it needs out of it), or it changes a shim "
                    "file itself (split that part out into a commit of its own):\n%s"
                    % (subject, "; ".join(left_out) or "none", r.stdout[-2000:]))
            # Mesa's commits carry no DEP-3 trailer.
            msg = series.git(fork, "log", "-1", "--format=%B", "HEAD", cwd=wt, raw=True)
            series.git(fork, "commit", "--amend", "--allow-empty", "-q", "-F", "-",
                       cwd=wt, env=env, stdin=strip_forwarded(msg))
            out.append((series.git(fork, "rev-parse", "HEAD", cwd=wt), subject, kind))
        series.git(fork, "branch", "-f", UPSTREAM_BRANCH, "HEAD", cwd=wt)
        with open(os.path.join(fork.work, "upstream", CUT_FROM), "w") as f:
            f.write(series.git(fork, "rev-parse", BRANCH) + "\n")
    return out, [(s, k) for _, s, k in steps if k in (SCAFFOLDING, FORK_ONLY)]


def upstream_revs(fork):
    """The commits of the upstream branch above the base, oldest first;
    stops when the branch was cut from another state of the patch queue."""
    if not series.git(fork, "rev-parse", "-q", "--verify", "refs/heads/" + UPSTREAM_BRANCH,
                      check=False):
        die("bisect --upstream: no branch %s; run 'bin/mesa-fork export --upstream DIR' "
            "first" % UPSTREAM_BRANCH)
    stamp = os.path.join(fork.work, "upstream", CUT_FROM)
    cut = open(stamp).read().strip() if os.path.exists(stamp) else None
    if cut != series.git(fork, "rev-parse", BRANCH):
        die("bisect --upstream: branch %s was cut from %s, not from %s as it is now; run "
            "'bin/mesa-fork export --upstream DIR' again"
            % (UPSTREAM_BRANCH, cut[:12] if cut else "an unknown commit", BRANCH))
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
    dest = os.path.abspath(dest)
    check_dest(fork, dest)
    with step("cut %s from %s: base + prerequisites + merge-request patches"
              % (UPSTREAM_BRANCH, BRANCH)):
        picked, left_out = build_branch(fork)
    if os.path.isdir(dest) and os.listdir(dest):
        # A series this verb wrote before (check_dest made sure): replaced.
        shutil.rmtree(os.path.join(dest, "prerequisites"), ignore_errors=True)
        for name in ["README.md", "series"] + [os.path.basename(p)
                                               for p in series.patch_files(dest)]:
            if os.path.exists(os.path.join(dest, name)):
                os.unlink(os.path.join(dest, name))
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
          "left out: %d scaffolding and %d fork-only commits; branch %s in %s (check it with "
          "'bin/mesa-fork bisect --upstream')"
          % (n_mr, rel(dest), n_pre, sum(k == SCAFFOLDING for _, k in left_out),
             sum(k == FORK_ONLY for _, k in left_out), UPSTREAM_BRANCH, rel(fork.tree)))


README_TITLE = "# The mesa-fork merge-request series"


def check_dest(fork, dest):
    """dest is new, empty, or a series this verb wrote before (its README
    says so and nothing else is there); never patches/ or the tree."""
    top = os.path.realpath(fork.top)
    real = os.path.realpath(dest)
    for own in (fork.patches, fork.tree):
        own = os.path.realpath(own)
        if real == own or real.startswith(own + os.sep) or own.startswith(real + os.sep):
            die("export --upstream: %s is or holds %s; give a directory of its own"
                % (rel(dest), rel(own)))
    if real == top:
        die("export --upstream: %s is the repository itself; give a directory of its own"
            % rel(dest))
    if os.path.exists(dest) and not os.path.isdir(dest):
        die("export --upstream: %s is not a directory" % rel(dest))
    if not os.path.isdir(dest) or not os.listdir(dest):
        return
    readme = os.path.join(dest, "README.md")
    ours = os.path.exists(readme) and open(readme).readline().rstrip("\n") == README_TITLE
    strays = [n for n in os.listdir(dest) if n not in ("README.md", "series", "prerequisites")
              and not n.endswith(".patch")]
    if not ours or strays:
        die("export --upstream: %s is not empty and holds no series this verb wrote (%s); "
            "give an empty or new directory" % (rel(dest), ", ".join(sorted(
                strays or os.listdir(dest))[:3])))


def write_readme(fork, dest, order, left_out):
    base = fork.conf["base"]
    mr = [(n, s) for n, s, k in order if k == MR]
    groups = {}
    for name, subject in mr:
        groups.setdefault(component(subject), []).append(name)
    lines = [
        README_TITLE,
        "",
        "Written by `bin/mesa-fork export --upstream` from the patch-queue branch",
        "at %s; regenerate it, do not edit it. The patches are git mails in"
        % series.git(fork, "rev-parse", "--short=12", BRANCH),
        "Mesa's commit style (no DEP-3 fields, no `Forwarded:` trailer).",
        "",
        "They apply on Mesa %s as Debian %s ships it, with the prerequisites"
        % (base["upstream_version"], base["version"]),
        "under `prerequisites/`, in the order of `series`; `bin/mesa-fork bisect",
        "--upstream` builds each commit of that branch and runs the unit suites.",
        "The prerequisites are not for review: they stand in for what upstream",
        "main already has (backports) or are fork-only changes a patch sits on.",
        "How each patch moves onto main: `docs/upstreaming.md` of mesa-fork.",
        "",
        "## Merge-request patches, by component",
        "",
    ]
    for comp, names in groups.items():
        lines.append("- `%s`: %s" % (comp, ", ".join("`%s`" % n for n in names)))
    lines += ["", "## Prerequisites (not for review)", ""]
    lines += ["- `%s`" % n for n, _, k in order if k == PREREQUISITE] or ["- none"]
    lines += ["", "## Left out: test scaffolding (the drm-shims)", ""]
    lines += ["- %s" % s for s, k in left_out if k == SCAFFOLDING] or ["- none"]
    lines += ["", "## Left out: fork-only (config/fork.ini [upstream_mr] left_out)", ""]
    lines += ["- %s" % s for s, k in left_out if k == FORK_ONLY] or ["- none"]
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
