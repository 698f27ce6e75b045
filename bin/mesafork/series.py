# SPDX-License-Identifier: MIT
"""The patch-queue tree and patches/: `mesa-fork prepare` makes .work/mesa
(the base as one commit tagged 'base', then git am patches/), `mesa-fork
export` writes the branch back as git mails with DEP-3 fields."""

import contextlib
import glob
import hashlib
import os
import re
import subprocess
import tempfile

from . import sources
from .config import BASE_TAG, BRANCH
from .proc import MARK, check_owned, die, made_by_us, make_dirs, rel, remove_owned, run, step


def git(fork, *args, cwd=None, capture=True, check=True, env=None, raw=False, stdin=None):
    """Run git in the tree (or cwd), with stdin as its input; with capture,
    return its output (stripped unless raw), else whether it succeeded."""
    cwd = cwd or fork.tree
    if capture:
        r = subprocess.run(["git"] + list(args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, input=stdin)
        if r.returncode != 0:
            if check:
                die("git %s failed: %s" % (" ".join(args), r.stderr.strip()))
            return ""
        return r.stdout if raw else r.stdout.strip()
    r = subprocess.run(["git"] + list(args), cwd=cwd, env=env)
    if r.returncode != 0:
        if check:
            die("git %s failed" % " ".join(args))
        return False
    return True


@contextlib.contextmanager
def scratch_worktree(fork, path, rev):
    """A detached worktree of the tree at path, checked out at rev (one
    left there by an interrupted run is replaced), removed afterwards."""
    if os.path.exists(path):
        check_owned(path)
        git(fork, "worktree", "remove", "--force", path, check=False)
        remove_owned(path)
    git(fork, "worktree", "prune")
    make_dirs(os.path.dirname(path))
    git(fork, "worktree", "add", "--detach", path, rev)
    try:
        yield path
    finally:
        git(fork, "worktree", "remove", "--force", path, check=False)


def fixed_git_env(date):
    """Fixed identities and dates so that prepare makes the same commit ids every time."""
    env = dict(os.environ)
    env.update(GIT_AUTHOR_NAME="mesa-fork", GIT_AUTHOR_EMAIL="mesa-fork@localhost",
               GIT_COMMITTER_NAME="mesa-fork", GIT_COMMITTER_EMAIL="mesa-fork@localhost")
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return env


def patch_files(d):
    return sorted(glob.glob(os.path.join(d, "*.patch")))


def read_series(path):
    """The patch names of a quilt series file."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line.split()[0])
    return out


def slug(subject):
    s = re.sub(r"[^A-Za-z0-9._]+", "-", subject).strip("-.")
    s = re.sub(r"\.+", ".", s)
    return s[:52].rstrip("-.")


def add_dep3(mail, forwarded, last_update):
    """Add DEP-3 fields to the mail header, where git am ignores them."""
    head, sep, body = mail.partition("\n\n")
    extra = "Forwarded: %s\nLast-Update: %s" % (forwarded, last_update)
    return head + "\n" + extra + sep + body


def series_differs(a, b):
    """How the patches of directories a (the branch) and b (patches/) differ."""
    fa = {os.path.basename(p): p for p in patch_files(a)}
    fb = {os.path.basename(p): p for p in patch_files(b)}
    diff = []
    for n in sorted(set(fa) | set(fb)):
        if n not in fb:
            diff.append("%s: on the branch, not in patches/" % n)
        elif n not in fa:
            diff.append("%s: in patches/, not on the branch" % n)
        else:
            with open(fa[n], "rb") as x, open(fb[n], "rb") as y:
                if x.read() != y.read():
                    diff.append("%s: content differs" % n)
    return diff


def series_hash(d):
    """One hash over the names and contents of a directory's patches."""
    h = hashlib.sha256()
    for p in patch_files(d):
        with open(p, "rb") as f:
            h.update(os.path.basename(p).encode() + b"\0" + f.read())
    return h.hexdigest()


def tree_is_prepared(fork):
    return os.path.isdir(os.path.join(fork.tree, ".git")) and \
        git(fork, "rev-parse", "-q", "--verify", "refs/tags/" + BASE_TAG, check=False) != ""


def series_revs(fork):
    return git(fork, "rev-list", "--reverse", BASE_TAG + "..HEAD").split()


def prepared_stamp(fork):
    return os.path.join(fork.work, "prepared-series.sha256")


def base_message(fork):
    """The subject of the base commit prepare makes from what fetch chose."""
    b = fork.conf["base"]
    if sources.uses_upstream(fork):
        return "Mesa %s (upstream tarball, Debian's security fixes)" % b["upstream_version"]
    return "Debian mesa %s, quilt series applied" % b["version"]


def tree_state(fork):
    """(state, message): 'current' when the tree is base + patches/, 'behind'
    when it is what an earlier prepare made and patches/ or the base fetch
    chose has changed since (a pull), 'work' when it holds commits or edits
    patches/ does not."""
    if any(os.path.isdir(os.path.join(fork.tree, git(fork, "rev-parse", "--git-path", d)))
           for d in ("rebase-apply", "rebase-merge")):
        t = rel(fork.tree)
        return "work", ("a git am or rebase is in progress in %s (a patch that did not "
                        "apply, an interrupted prepare, your own rebase): finish it ('git -C "
                        "%s am --continue' or 'rebase --continue' once it applies, then the "
                        "patches after it, then 'bin/mesa-fork export'), or drop it ('am "
                        "--abort', 'rebase --abort')" % (t, t))
    if git(fork, "status", "--porcelain", "--untracked-files=no"):
        return "work", "uncommitted changes in %s" % rel(fork.tree)
    with tempfile.TemporaryDirectory() as tmp:
        export_series(fork, tmp)
        if not series_differs(tmp, fork.patches):
            base = git(fork, "log", "-1", "--format=%s", BASE_TAG)
            if base != base_message(fork):
                return "behind", "the base is '%s'; fetch chose '%s'" % (base, base_message(fork))
            return "current", None
        stamp = ""
        if os.path.exists(prepared_stamp(fork)):
            with open(prepared_stamp(fork)) as f:
                stamp = f.read().strip()
        if stamp and stamp == series_hash(tmp):
            return "behind", "patches/ changed since the tree was prepared"
    return "work", "commits in %s that patches/ does not hold (run export)" % rel(fork.tree)


def unpack_base(fork):
    """Unpacks the base fetch chose into the (empty) tree; returns its date."""
    if sources.uses_upstream(fork):
        tarball = sources.upstream_tarball(fork)
        with step("unpack upstream tarball"):
            run(["tar", "xf", tarball, "--strip-components=1", "-C", fork.tree])
        fixes = sources.security_patches(fork)
        debian_tar = sources.verify_debian_fixes(fork)
        if not debian_tar:
            die("prepare: Debian's %s, which holds the security fixes, is missing or not "
                "verified; run 'bin/mesa-fork fetch --tarball ...' again"
                % sources.debian_files(fork)["debian"][0])
        with step("apply Debian's security fixes: %s" % ", ".join(fixes)):
            for p in fixes:
                text = subprocess.run(["tar", "xJOf", debian_tar, "debian/patches/" + p],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if text.returncode != 0 or not text.stdout:
                    die("prepare: %s holds no debian/patches/%s" % (debian_tar, p))
                r = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"],
                                   input=text.stdout, cwd=fork.tree, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
                if r.returncode != 0:
                    die("prepare: Debian's %s does not apply to the release tarball:\n%s"
                        % (p, r.stdout.decode(errors="replace")))
        return sources.tarball_version(tarball)[1]
    orig = sources.debian_file(fork, "orig")
    with step("unpack %s and debian/" % os.path.basename(orig)):
        run(["tar", "xf", orig, "--strip-components=1", "-C", fork.tree])
        run(["tar", "xf", sources.debian_file(fork, "debian"), "-C", fork.tree])
    series = read_series(os.path.join(fork.tree, "debian", "patches", "series"))
    with step("apply Debian's quilt series (%d patches)" % len(series)):
        for p in series:
            run(["patch", "-p1", "-s", "--no-backup-if-mismatch", "-i",
                 os.path.join("debian", "patches", p)], cwd=fork.tree)
    return sources.debian_changelog_date(os.path.join(fork.tree, "debian", "changelog"))


def prepare(fork, force=False):
    """Unpack the base, apply Debian's series, make it a git tree, git am patches/."""
    if tree_is_prepared(fork) and not force:
        state, why = tree_state(fork)
        if state == "current":
            print("prepare: %s already holds base + patches/ (branch %s)"
                  % (rel(fork.tree), BRANCH))
            return
        if state == "work":
            die("prepare: %s; refusing to overwrite it. Export or drop that work, or pass "
                "--force to rebuild the tree from patches/ (%d patches)."
                % (why, len(patch_files(fork.patches))))
        print("prepare: %s; rebuilding the tree" % why)
    # Before anything else: a tree mesa-fork did not make is never replaced.
    check_owned(fork.tree)
    if sources.uses_upstream(fork):
        sources.verify_upstream(fork)
    elif sources.verify_debian(fork):
        die("prepare: sources missing or not verified; run 'bin/mesa-fork fetch'")
    if os.path.exists(fork.tree):
        with step("remove old %s" % rel(fork.tree)):
            remove_owned(fork.tree)
    make_dirs(fork.tree)
    env = fixed_git_env(unpack_base(fork))
    with step("git init, base commit, tag '%s'" % BASE_TAG):
        git(fork, "init", "-q", "-b", BRANCH)
        # A detached automatic gc would still be writing .git when a later
        # prepare removes the tree.
        git(fork, "config", "gc.autoDetach", "false")
        # The tree's mark (make_dirs) is the CLI's, never Mesa's.
        with open(os.path.join(fork.tree, ".git", "info", "exclude"), "a") as f:
            f.write("/%s\n" % MARK)
        git(fork, "add", "-A", "-f", ".", ":!/" + MARK)
        git(fork, "commit", "-q", "--no-verify", "-m", base_message(fork), env=env)
        git(fork, "tag", BASE_TAG)
    patches = patch_files(fork.patches)
    if patches:
        with step("git am %d patches" % len(patches)):
            env = fixed_git_env(None)
            for p in patches:
                if not git(fork, "am", "-q", "--keep-cr", "--committer-date-is-author-date", p,
                           check=False, capture=False, env=env):
                    rest = patches[patches.index(p) + 1:]
                    die("git am stopped on %s; %s is left in the middle of it. To fix the "
                        "patch: resolve the files, 'git -C %s add -A && git -C %s am "
                        "--continue'%s, then 'bin/mesa-fork export'. To start over: "
                        "'git -C %s am --abort' and 'bin/mesa-fork prepare --force'."
                        % (os.path.basename(p), rel(fork.tree), rel(fork.tree),
                           rel(fork.tree),
                           ", then apply the %d after it: 'git -C %s am $(ls %s/*.patch "
                           "| tail -n %d)'" % (len(rest), rel(fork.tree),
                                               os.path.abspath(fork.patches), len(rest))
                           if rest else "",
                           rel(fork.tree)))
    with open(prepared_stamp(fork), "w") as f:
        f.write(series_hash(fork.patches) + "\n")
    print("prepare: branch %s in %s = base + %d patches" % (BRANCH, rel(fork.tree), len(patches)))


def export_series(fork, dest):
    """Write the patch-queue branch as a series of git mails with DEP-3 fields."""
    os.makedirs(dest, exist_ok=True)
    for old in patch_files(dest):
        os.unlink(old)
    revs = series_revs(fork)
    for n, rev in enumerate(revs, 1):
        mail = git(fork, "format-patch", "-1", "--stdout", "--zero-commit", "--no-signature",
                   "--no-numbered", "--full-index", "--subject-prefix=PATCH", rev, raw=True)
        subject = git(fork, "log", "-1", "--format=%s", rev)
        adate = git(fork, "log", "-1", "--format=%as", rev)
        forwarded = git(fork, "log", "-1", "--format=%(trailers:key=Forwarded,valueonly)", rev)
        text = add_dep3(mail, forwarded=forwarded.strip() or "no", last_update=adate)
        with open(os.path.join(dest, "%04d-%s.patch" % (n, slug(subject))), "w") as f:
            f.write(text)
    return len(revs)


def patch_subject(path):
    """The subject of a git mail, unfolded, without its [PATCH] prefix."""
    import email
    with open(path, errors="replace") as f:
        msg = email.message_from_file(f)
    subject = " ".join((msg["Subject"] or "").split())
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject)


def export(fork, check=False, output=None, drop=False):
    """Regenerate patches/ from the patch-queue branch (--check: fail if they differ)."""
    if output and os.path.isdir(output) and os.listdir(output) and made_by_us(output) is None:
        # export_series replaces every NNNN-*.patch there.
        die("export --output %s: not empty and not made by mesa-fork; give a new or empty "
            "directory" % rel(output))
    if not tree_is_prepared(fork):
        die("export: no patch-queue tree; run 'bin/mesa-fork prepare' first")
    if git(fork, "status", "--porcelain", "--untracked-files=no"):
        die("export: %s has uncommitted changes; commit them first" % rel(fork.tree))
    if check:
        with tempfile.TemporaryDirectory() as tmp:
            n = export_series(fork, tmp)
            diff = series_differs(tmp, fork.patches)
        if diff:
            die("export --check: patches/ differs from branch %s:\n  %s"
                % (BRANCH, "\n  ".join(diff)))
        print("export --check: patches/ matches branch %s (%d patches)" % (BRANCH, n))
        return
    dest = os.path.abspath(output) if output else fork.patches
    if not output and not drop:
        # A branch behind patches/ (made before a pull, or by hand) would
        # delete the patches it lacks.
        on_branch = {git(fork, "log", "-1", "--format=%s", rev).strip()
                     for rev in series_revs(fork)}
        lost = [os.path.basename(p) for p in patch_files(dest)
                if patch_subject(p) not in on_branch]
        if lost:
            die("export: patches/ holds %d patch(es) the branch %s lacks (%s); exporting "
                "would delete them. If patches/ is newer (a pull), rebuild the branch: "
                "'bin/mesa-fork prepare --force' (after exporting your own work to "
                "another directory with 'export --output DIR'). If you dropped or reworded "
                "them on purpose, run 'bin/mesa-fork export --drop'."
                % (len(lost), BRANCH, ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")))
    if output:
        make_dirs(dest)
    with step("format-patch %s..%s into %s" % (BASE_TAG, BRANCH, rel(dest))):
        n = export_series(fork, dest)
    print("export: %d patches in %s" % (n, rel(dest)))
