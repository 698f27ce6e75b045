# SPDX-License-Identifier: MIT
"""Output and processes: every verb says what it does and how long it took,
runs commands through run() and stops with die()."""

import contextlib
import os
import pickle
import pwd
import shutil
import subprocess
import sys
import time
import traceback


def fmt_time(s):
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%.1fs" % s


@contextlib.contextmanager
def step(what):
    print("==> %s" % what, flush=True)
    t0 = time.monotonic()
    yield
    print("    %s (%s)" % (what.split(" (")[0], fmt_time(time.monotonic() - t0)), flush=True)


def die(msg):
    print("mesa-fork: error: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, cwd=None, env=None, quiet=False):
    """Run a command; with quiet, show its output only when it fails."""
    if quiet:
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        if r.returncode != 0:
            sys.stdout.write(r.stdout[-20000:])
    else:
        r = subprocess.run(cmd, cwd=cwd, env=env)
    if r.returncode != 0:
        die("command failed (exit %d): %s" % (r.returncode, " ".join(cmd)))


def capture(cmd, cwd=None, env=None):
    """Run a command and return it with stdout and stderr as one text."""
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")


def readelf(args, path, program="readelf"):
    """readelf ARGS -W PATH, its output in the C locale: readelf's lines are
    translated otherwise, and the callers parse them."""
    return subprocess.run([program] + list(args) + ["-W", path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace",
                          env=dict(os.environ, LC_ALL="C"))


def rel(path):
    with contextlib.suppress(ValueError):
        r = os.path.relpath(path)
        if not r.startswith(".."):
            return r
    return path


def write_if_changed(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


# What the CLI makes, it marks: the topmost directory make_dirs() creates
# holds this file, and nothing is deleted unless it or a directory above it
# holds one. MESA_FORK_WORK may name a directory of the user's ($HOME, say)
# where a mesa/ or build/ of theirs must survive every verb.
MARK = ".mesa-fork-made"
# Work directories (Fork registers its own): make_dirs creates their
# parents unmarked and marks the work directory itself, so that no mark
# lands above it.
WORK_ROOTS = set()


def mark(d):
    """Record that mesa-fork made directory d (and may delete it)."""
    with open(os.path.join(d, MARK), "w") as f:
        f.write("mesa-fork made this directory; its verbs may delete it and what is "
                "below it.\n")


def _mkdir_marked(d):
    """mkdir d and mark it; False when another process made it first."""
    try:
        os.mkdir(d)
    except FileExistsError:
        return False
    mark(d)
    return True


def make_dirs(path):
    """os.makedirs(path, exist_ok=True) that marks the topmost directory
    it creates (a work directory's parents excepted: the work directory is
    marked instead). Returns path."""
    path = os.path.abspath(path)
    for root in WORK_ROOTS:
        if (path == root or path.startswith(root + os.sep)) and not os.path.lexists(root):
            os.makedirs(os.path.dirname(root), exist_ok=True)
            _mkdir_marked(root)
    top, p = None, path
    while not os.path.lexists(p):
        top, p = p, os.path.dirname(p)
    if top is not None:
        # The mark goes in before anything below it: a crash leaves no
        # unmarked directory of ours behind.
        os.makedirs(os.path.dirname(top), exist_ok=True)
        _mkdir_marked(top)
        os.makedirs(path, exist_ok=True)
    return path


def made_by_us(path):
    """The directory whose mark makes path mesa-fork's (path itself or a
    directory above it, followed through links to where it really is), or
    None. A link is judged by the directory that holds it."""
    p = os.path.realpath(path) if not os.path.islink(path) else \
        os.path.realpath(os.path.dirname(os.path.abspath(path)))
    while True:
        if os.path.isfile(os.path.join(p, MARK)):
            return p
        up = os.path.dirname(p)
        if up == p:
            return None
        p = up


def check_owned(path):
    """Stop, in one line, before deleting path if mesa-fork did not make
    it. A symbolic link is only ever unlinked, and only in a directory
    mesa-fork made."""
    if not os.path.lexists(path):
        return
    if made_by_us(path) is None:
        die("refusing to delete %s: mesa-fork did not make it (no %s in it or above "
            "it); move it away or point MESA_FORK_WORK elsewhere (if an older mesa-fork "
            "made it: touch %s)" % (path, MARK, os.path.join(path, MARK)
                                    if os.path.isdir(path) and not os.path.islink(path)
                                    else os.path.join(os.path.dirname(path), MARK)))


def remove_owned(path):
    """shutil.rmtree(path) (unlink for a link) when mesa-fork made it;
    nothing to do when it does not exist."""
    check_owned(path)
    try:
        if os.path.islink(path):
            os.unlink(path)
        elif os.path.exists(path):
            shutil.rmtree(path)
    except OSError as e:
        die("cannot delete %s: %s" % (path, e.strerror or e))


def mounts_under(root):
    """Mount points at or below root, deepest first, from the kernel's
    table (what an earlier, killed run may have left bind-mounted)."""
    root = os.path.realpath(root)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_tree(root):
    """rm -rf of a chroot, never through a bind mount into the host: what
    is still mounted below it is unmounted first, and the removal stays on
    the chroot's file system."""
    if not os.path.lexists(root):
        return
    check_owned(root)
    if os.path.islink(root):
        # Only the link goes: nothing is unmounted through it.
        os.unlink(root)
        return
    for point in mounts_under(root):
        subprocess.run(["umount", "-l", point])
    left = mounts_under(root)
    if left:
        die("%s is still mounted; not removing %s" % (left[0], rel(root)))
    run(["rm", "-rf", "--one-file-system", root], quiet=True)


def invoking_user(work, environ=None):
    """(uid, gid) of the user a verb run as root does its host-side work
    as (debsrc, and deb outside its chroots), so that what it writes under
    .work stays theirs: the user sudo was run by (SUDO_UID, SUDO_GID), else
    the owner of work (of its nearest existing parent while there is no
    work yet). None when this process is not root (it already is that
    user) or when that owner is root too (everything is root's)."""
    environ = os.environ if environ is None else environ
    if os.geteuid() != 0:
        return None
    uid = environ.get("SUDO_UID", "")
    if uid.isdigit() and int(uid) != 0:
        gid = environ.get("SUDO_GID", "")
        return int(uid), int(gid) if gid.isdigit() else int(uid)
    path = os.path.abspath(work)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    st = os.stat(path)
    return (st.st_uid, st.st_gid) if st.st_uid != 0 else None


def as_user(user, fn, *args, **kwargs):
    """fn(*args, **kwargs), run as user ((uid, gid), from invoking_user;
    None: in this process, as it is) in a child process that drops root
    for good before calling it: everything fn and the commands it runs
    write belongs to that user. Returns fn's result (pickled through a
    pipe). When fn stops with die(), the child has said why and this
    process exits with its status."""
    if user is None:
        return fn(*args, **kwargs)
    uid, gid = user
    sys.stdout.flush()
    sys.stderr.flush()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(rfd)
            try:
                entry = pwd.getpwuid(uid)
                os.initgroups(entry.pw_name, gid)
                if os.path.isdir(entry.pw_dir):
                    os.environ["HOME"] = entry.pw_dir
            except KeyError:   # a uid without a name (.work of uid 2000)
                os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            result = fn(*args, **kwargs)
            with os.fdopen(wfd, "wb") as f:
                pickle.dump(result, f)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(code)
    return pickle.loads(data)


def user_dir(path, user):
    """makedirs(path) by root for user ((uid, gid), or None: as it is):
    each directory it creates is handed to the user, so that the user's
    steps can write there."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.exists(path):
        missing.insert(0, path)
        path = os.path.dirname(path)
    for d in missing:
        os.mkdir(d)
        if d == missing[0]:
            mark(d)
            if user is not None:
                os.chown(os.path.join(d, MARK), *user)
        if user is not None:
            os.chown(d, *user)


def hand_back(user, paths):
    """What root wrote under paths (directories of .work a root verb
    writes into) goes back to user ((uid, gid); None: nothing to do):
    chown -R, never following symbolic links."""
    if user is None:
        return
    for p in paths:
        if os.path.lexists(p):
            run(["chown", "-R", "-P", "%d:%d" % user, p], quiet=True)
