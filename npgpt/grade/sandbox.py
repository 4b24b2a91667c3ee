"""Run the worker on a submission in a sandbox, and read what it sends back as hostile bytes.

Three modes (docs/grading.md, "Security"):

- "bwrap": bubblewrap. The child gets its own PID, IPC, UTS, network (none) and mount
  namespaces, a read-only file system holding only /usr (with every site-packages and
  dist-packages folder hidden under an empty tmpfs), numpy, the harness, the stub npgpt package,
  the submission and its inputs, and a private tmpfs for /tmp. Run as root, the child also drops
  to a uid of its own (setpriv); run as a user, bwrap maps it into a user namespace. The seccomp
  filter of "user" mode applies too (no keyrings: they belong to the uid, not to a namespace).
- "user": the grader is root but namespaces are blocked (Docker's default seccomp profile). The
  child runs under a uid of its own that owns nothing, with rlimits; after each component every
  process of that uid is killed, and what it left in world-writable folders and its SysV IPC
  objects (which outlive processes) are removed. Files the grader's user alone can read stay
  unreadable to it.
- "none": neither is available (a student on a laptop). Grading still runs, but the report says
  on its first line that the run is not isolated.

In every mode: a minimal environment, a memory cap (a cgroup over all the child's processes where
the grader may create one, else RLIMIT_AS per process plus a process cap), file size 0, a CPU
limit and a wall-clock timeout enforced from here. The results come back as frames on a private
pipe; frames.py checks every length, type and array header before allocating anything. Nothing is
returned to the caller until every process of the child is gone.
"""

import errno
import fcntl
import functools
import glob
import json
import os
import re
import resource
import selectors
import shutil
import signal
import site
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from .frames import clean, parse

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
NPGPT_DIR = os.path.dirname(HERE)
MODES = ("auto", "bwrap", "user", "none")
UID_BASE = 1_900_000_000  # sandbox uids UID_BASE + slot: owned by nobody else on the machine
UID_SLOTS = 256
LOCK_DIR = os.path.join(tempfile.gettempdir(), "npgpt-grade-uids")
NPROC = 64  # tasks (processes and threads) the sandbox uid may have
OUTPUT_LIMIT = 8_000  # characters of the submission's stdout/stderr kept for the report
RESULT_LIMIT = 32 << 20  # bytes accepted on the result pipe
STUB_FILES = ("module.py", "_checks.py", "gradcheck.py", os.path.join("layers", "dropout.py"))

STUB_INIT = '''"""npgpt while grading: Module, Parameter, Sequential, Dropout, numerical_gradient, gradcheck."""

from . import layers, module
from .gradcheck import gradcheck, numerical_gradient
from .layers import Dropout
from .module import Module, Parameter, Sequential

__version__ = "grading-stub"
__all__ = ["Module", "Parameter", "Sequential", "Dropout", "numerical_gradient", "gradcheck"]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(
        f"npgpt.{name} is not available while grading: write it yourself (a submission "
        "may use only Module, Parameter, Sequential, Dropout, numerical_gradient, gradcheck)"
    )
'''


class SandboxError(Exception):
    """The requested sandbox cannot run here (one line, for the command line)."""


@dataclass
class Sandbox:
    mode: str  # "bwrap", "user" or "none"
    isolated: bool
    detail: str  # what isolates the child, or why nothing does
    memory: str = ""  # how the memory cap is enforced


@dataclass
class ChildRun:
    frames: list = field(default_factory=list)  # (header dict, {name: ndarray})
    stdout: str = ""
    stderr: str = ""
    fate: str = ""  # "" when the worker finished, else what happened to it
    seconds: float = 0.0


# --- choosing a mode ----------------------------------------------------------------------------

_probe_cache = {}


def _bwrap_works():
    """(ok, reason): whether bwrap can build our namespaces here (tried once per process)."""
    if "bwrap" not in _probe_cache:
        exe = shutil.which("bwrap")
        if not exe:
            _probe_cache["bwrap"] = (False, "bubblewrap (bwrap) is not installed")
        else:
            cmd = [exe, *_ns_flags(), *_fs_flags(None), "--", "/bin/true"]
            try:
                p = subprocess.run(cmd, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
                err = p.stderr.decode("utf-8", "replace").strip().splitlines()
                ok = p.returncode == 0
                _probe_cache["bwrap"] = (
                    ok,
                    "" if ok else f"bwrap fails here: {err[-1] if err else p.returncode}",
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                _probe_cache["bwrap"] = (False, f"bwrap fails here: {e}")
    return _probe_cache["bwrap"]


@functools.lru_cache(maxsize=4)
def _bwrap_has(option):
    try:
        p = subprocess.run(
            [shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in p.stdout + p.stderr


def choose(requested="auto"):
    """The Sandbox for `requested` ("auto", "bwrap", "user", "none"); SandboxError if it cannot run."""
    if requested not in MODES:
        raise SandboxError(f"--sandbox must be one of {', '.join(MODES)}, not {requested!r}")
    root = os.geteuid() == 0
    memory = _cgroup_kind() or f"RLIMIT_AS per process, at most {NPROC} tasks"
    if requested in ("auto", "bwrap"):
        ok, why = _bwrap_works()
        if ok:
            who = "a uid of its own" if root else "a user namespace"
            return Sandbox(
                "bwrap",
                True,
                f"bubblewrap: own PID/network/IPC/mount namespaces, read-only files, {who}",
                memory,
            )
        if requested == "bwrap":
            raise SandboxError(f"--sandbox bwrap: {why}")
    if requested in ("auto", "user"):
        if root and interpreter(False)[0] is None:
            if requested == "user":
                raise SandboxError(
                    f"--sandbox user: no python{sys.version_info[0]}.{sys.version_info[1]} that another user "
                    "may run (install the distribution's python3 or put the grader's in a readable place)"
                )
        elif root:
            why = f": {_bwrap_works()[1]})" if requested == "auto" else ")"
            if others_can(os.path.join(NPGPT_DIR, "layers", "layernorm.py")):
                return Sandbox(
                    "user",
                    False,
                    f"NOT ISOLATED from the grader's files: {NPGPT_DIR} is readable by other users, so "
                    "also by the submission's uid (chmod -R go-rwx it; the Gradescope set-up does)"
                    f" (namespaces unavailable{why}",
                    memory,
                )
            return Sandbox(
                "user", True, f"an unprivileged uid of its own (namespaces unavailable{why}", memory
            )
        if requested == "user":
            raise SandboxError("--sandbox user needs the grader to run as root (to switch to another uid)")
    why = _bwrap_works()[1] if requested == "auto" else "--sandbox none"
    return Sandbox(
        "none",
        False,
        f"the submission runs as {'root' if root else 'your user'} and can read, write, signal and "
        f"reach over the network what you can ({why})",
        "RLIMIT_AS per process",
    )


# --- cgroups ------------------------------------------------------------------------------------


def _cgroup_kind():
    if os.geteuid() != 0:
        return ""
    if _cg2_parent():
        return "cgroup v2 over all its processes"
    if os.access("/sys/fs/cgroup/memory", os.W_OK) and os.path.exists("/sys/fs/cgroup/memory/cgroup.procs"):
        return "cgroup v1 over all its processes"
    return ""


def _cg2_parent():
    base = "/sys/fs/cgroup"
    try:
        with open(os.path.join(base, "cgroup.controllers")) as f:
            if "memory" not in f.read().split():
                return ""
        with open(os.path.join(base, "cgroup.subtree_control")) as f:
            have = f.read().split()
        if "memory" not in have or "pids" not in have:
            with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                f.write("+memory +pids")
        return base if os.access(base, os.W_OK) else ""
    except OSError:
        return ""


class Cgroup:
    """A memory (and pids) cgroup for one child; `paths` holds what preexec writes its pid to."""

    def __init__(self, memory_bytes):
        self.dirs, self.v2 = [], False
        name = f"npgpt-grade-{os.getpid()}-{time.monotonic_ns()}"
        parent = _cg2_parent()
        for d in (parent, "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"):
            if d:
                _sweep(d, "npgpt-grade-", rmdir=True)
        try:
            if parent:
                self.v2 = True
                d = os.path.join(parent, name)
                os.mkdir(d)
                self.dirs.append(d)
                _put(d, "memory.max", memory_bytes)
                _put(d, "memory.swap.max", 0, must=False)
                _put(d, "pids.max", NPROC, must=False)
            else:
                d = os.path.join("/sys/fs/cgroup/memory", name)
                os.mkdir(d)
                self.dirs.append(d)
                _put(d, "memory.limit_in_bytes", memory_bytes)
                _put(d, "memory.memsw.limit_in_bytes", memory_bytes, must=False)
                p = os.path.join("/sys/fs/cgroup/pids", name)
                if os.access("/sys/fs/cgroup/pids", os.W_OK):
                    os.mkdir(p)
                    self.dirs.append(p)
                    _put(p, "pids.max", NPROC, must=False)
        except OSError:
            self.remove()
            raise

    @property
    def procs(self):
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def pids(self):
        out = set()
        for path in self.procs:
            try:
                with open(path) as f:
                    out.update(int(x) for x in f.read().split())
            except OSError:
                pass
        return out

    def oom(self):
        for d in self.dirs[:1]:
            try:
                with open(os.path.join(d, "memory.events" if self.v2 else "memory.oom_control")) as f:
                    return bool(re.search(r"oom_kill [1-9]", f.read()))
            except OSError:
                return False
        return False

    def kill_all(self, deadline):
        """SIGKILL everything in the cgroup until it is empty (or `deadline`)."""
        if self.v2 and self.dirs:
            _put(self.dirs[0], "cgroup.kill", 1, must=False)
        while time.monotonic() < deadline:
            left = self.pids()
            if not left:
                return True
            for pid in left:
                _kill(pid)
            time.sleep(0.01)
        return not self.pids()

    def remove(self):
        for d in self.dirs:
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except OSError as e:
                    if e.errno == errno.ENOENT:
                        break
                    time.sleep(0.01)


def _sweep(folder, prefix, rmdir=False):
    """Remove what graders that died (SIGKILL, power loss) left: `prefix` + their pid + "-"."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for e in entries:
        m = re.match(re.escape(prefix) + r"(\d+)-", e.name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        try:
            if e.stat(follow_symlinks=False).st_uid != os.geteuid() or not e.is_dir(follow_symlinks=False):
                continue
            if rmdir:
                os.rmdir(e.path)  # an empty cgroup; one with processes left stays
            else:
                shutil.rmtree(e.path, ignore_errors=True)
        except OSError:
            pass


def _put(d, name, value, must=True):
    try:
        with open(os.path.join(d, name), "w") as f:
            f.write(str(value))
    except OSError:
        if must:
            raise


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# --- seccomp: no sockets, no ptrace, no io_uring, no kernel keyrings -------------------------

# audit arch, then socket, ptrace, io_uring_setup, add_key, request_key, keyctl
_ARCH = {
    "x86_64": (0xC000003E, 41, 101, 425, 248, 249, 250),
    "aarch64": (0xC00000B7, 198, 117, 425, 217, 218, 219),
}


def _seccomp_program():
    """A classic-BPF filter failing socket(), ptrace(), io_uring_setup() and the keyring calls
    (add_key, request_key, keyctl) with EACCES, or None.

    Sockets: "user" mode has no network namespace to take them away. Keyrings: they belong to the
    uid (and the session keyring is the grader's), not to a namespace, and outlive the sandbox: a
    child could leave a note there for the next submission graded under the same uid.
    """
    arch = _ARCH.get(os.uname().machine)
    if arch is None:
        return None
    audit, *denied = arch
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO
    prog = [
        (ld, 0, 0, 4),  # arch
        (jeq, 1, 0, audit),
        (ret, 0, 0, allow),  # another ABI (x32, compat): leave it (bwrap's namespaces are the defence)
        (ld, 0, 0, 0),  # syscall number
    ]
    prog += [(jeq, len(denied) - i, 0, nr) for i, nr in enumerate(denied)]  # a match: to `deny`
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def _install_seccomp(code):
    """prctl(PR_SET_NO_NEW_PRIVS) + prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER); False if refused."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(code)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def _parent_death_signal():
    """prctl(PR_SET_PDEATHSIG, SIGKILL): the child dies if the grader does."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


# --- the uid of a sandbox -----------------------------------------------------------------------


class UidSlot:
    """A uid no other grader on this machine uses while we hold it (an flock per slot)."""

    def __init__(self):
        os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
        st = os.lstat(LOCK_DIR)
        if st.st_uid != os.geteuid() or not os.path.isdir(LOCK_DIR) or st.st_mode & 0o077:
            raise SandboxError(f"{LOCK_DIR} is not a private folder of this user; remove it")
        for slot in range(UID_SLOTS):
            fd = os.open(
                os.path.join(LOCK_DIR, f"{slot}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.fd, self.uid = fd, UID_BASE + slot
            return
        raise SandboxError(f"all {UID_SLOTS} sandbox uids are in use")

    def close(self):
        os.close(self.fd)


def kill_uid(uid, deadline):
    """SIGKILL every process whose real uid is `uid` until there are none (or `deadline`)."""
    while True:
        left = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    m = re.search(r"^Uid:\s+(\d+)\s+(\d+)", f.read(), re.M)
            except OSError:
                continue
            if m and uid in (int(m.group(1)), int(m.group(2))):
                left.append(int(entry))
                _kill(int(entry))
        if not left:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")


def remove_files_of(uid):
    """Delete what `uid` left in the world-writable folders (empty files, folders, symlinks).

    "user" mode only: the sandbox uid may create entries there (RLIMIT_FSIZE keeps them empty).
    Entries are matched by owner with lstat and removed without following links.
    """
    rm = shutil.which("rm") or "/bin/rm"
    for d in sorted({tempfile.gettempdir(), *SHARED_WRITABLE}):
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    # rm (fts), not shutil.rmtree: a tree thousands of folders deep makes rmtree's
                    # recursion raise RecursionError in the grader (Python < 3.12).
                    subprocess.run([rm, "-rf", "--one-file-system", "--", e.path], check=False, timeout=120)
                else:
                    os.unlink(e.path)
            except (OSError, subprocess.TimeoutExpired):
                pass


def remove_ipc_of(uid):
    """Remove every SysV shared-memory segment, message queue and semaphore set `uid` owns.

    "user" mode only (bwrap's IPC namespace dies with the sandbox): these outlive every process,
    and a segment touched then detached holds memory that no rlimit of any process counts.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for kind, idcol in (("shm", "shmid"), ("msg", "msqid"), ("sem", "semid")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                head, *rows = [line.split() for line in f]
            col = {name: i for i, name in enumerate(head)}
            ids, owner, creator = col[idcol], col["uid"], col["cuid"]
        except (OSError, KeyError, ValueError):
            continue
        for row in rows:
            try:
                if uid not in (int(row[owner]), int(row[creator])):
                    continue
                if kind == "shm":
                    libc.shmctl(int(row[ids]), 0, None)  # IPC_RMID: gone at the last detach
                elif kind == "msg":
                    libc.msgctl(int(row[ids]), 0, None)
                else:
                    libc.semctl(int(row[ids]), 0, 0)
            except (IndexError, ValueError):
                pass


# --- the jail: what the child may see -----------------------------------------------------------


def others_can(path, mode=os.R_OK):
    """Whether a uid that neither owns `path` nor is in its group may reach and read/exec it."""
    path = os.path.realpath(path)
    try:
        parts = path.split(os.sep)
        for i in range(2, len(parts)):
            if not os.stat(os.sep.join(parts[:i]) or "/").st_mode & 0o001:
                return False
        m = os.stat(path).st_mode
    except OSError:
        return False
    need = 0o004 if mode == os.R_OK else 0o001
    return bool(m & need) and (not os.path.isdir(path) or bool(m & 0o001))


@functools.lru_cache(maxsize=2)
def interpreter(bound_prefix_ok):
    """(python, prefix) for the child: an interpreter of this Python version that others may run.

    The grader's own (base) interpreter first, then /usr/bin and /usr/local/bin. When none is
    reachable and `bound_prefix_ok` (bwrap binds the prefix in), the grader's own.
    """
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    own = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    cands = [(own, os.path.realpath(sys.base_prefix))]
    for d in ("/usr/bin", "/usr/local/bin"):
        cands.append((os.path.join(d, ver), os.path.dirname(d)))
    for exe, prefix in cands:
        if others_can(exe, os.X_OK) and others_can(os.path.join(prefix, "lib", ver, "os.py")):
            return exe, prefix
    if bound_prefix_ok:
        return cands[0]
    return None, None


def numpy_dirs():
    """[(name, folder)] of a copy of numpy and its bundled libraries that others may read.

    "user" mode shows the child its own copy, made once per numpy version in a cache folder only
    the grader's user may write: the real one would tell it where the grader's site-packages is
    (and, in a private venv, it could not read it).
    """
    real = os.path.realpath(os.path.dirname(np.__file__))
    found = [("numpy", real)]
    libs = os.path.join(os.path.dirname(real), "numpy.libs")
    if os.path.isdir(libs):
        found.append(("numpy.libs", libs))
    cache = os.path.join(tempfile.gettempdir(), f"npgpt-grade-numpy-{np.__version__}-{os.geteuid()}")
    if not os.path.isdir(cache):
        tmp = tempfile.mkdtemp(prefix="npgpt-grade-numpy-")
        for name, d in found:
            shutil.copytree(d, os.path.join(tmp, name), symlinks=True)
        for dirpath, _dirnames, filenames in os.walk(tmp):
            os.chmod(dirpath, 0o755)
            for f in filenames:
                p = os.path.join(dirpath, f)
                if not os.path.islink(p):
                    os.chmod(p, 0o755 if os.stat(p).st_mode & 0o100 else 0o644)
        try:
            os.rename(tmp, cache)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    st = os.lstat(cache)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not os.path.isdir(cache):
        raise SandboxError(f"{cache} is not a folder of this user that only it may write; remove it")
    return [(name, os.path.join(cache, name)) for name, _ in found]


def _hidden_dirs():
    """Folders under the read-only /usr (or the interpreter's prefix) that must look empty."""
    found = set()
    cands = list(site.getsitepackages()) + [site.getusersitepackages(), os.path.dirname(NPGPT_DIR)]
    for pat in ("/usr/lib/python*/*-packages", "/usr/local/lib/python*/*-packages", "/usr/share/pyshared"):
        cands += glob.glob(pat)
    cands += glob.glob(os.path.join(interpreter(True)[1], "lib", "python*", "*-packages"))
    for d in cands:
        d = os.path.realpath(d)
        if os.path.isdir(d) and any(d.startswith(r + os.sep) for r in _roots()):
            found.add(d)
    return sorted(found)


def _roots():
    roots = ["/usr"]
    prefix = interpreter(True)[1]
    if not prefix.startswith("/usr" + os.sep) and prefix != "/usr":
        roots.append(prefix)
    return roots


def _ns_flags():
    flags = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:
        flags.append("--unshare-user")
        if _bwrap_has("--disable-userns"):  # bubblewrap >= 0.8: no nested user namespaces
            flags.append("--disable-userns")
    # --as-pid-1: the worker is the namespace's init, so it has no parent to attack, and when it
    # ends, every process it left behind ends with it.
    return flags + ["--die-with-parent", "--new-session", "--as-pid-1"]


def _fs_flags(jail):
    args = []
    for r in _roots():
        args += ["--ro-bind", r, r]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for d in _hidden_dirs():
        args += ["--tmpfs", d, "--remount-ro", d]
    if os.path.exists("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    if jail is not None:
        args += ["--ro-bind", jail.root, "/sandbox"]
        for name, src in jail.numpy:
            args += ["--ro-bind", src, f"/sandbox/site/{name}"]
    args += ["--size", str(16 << 20), "--tmpfs", "/tmp"]  # the one writable place
    args += ["--remount-ro", "/"]  # the root tmpfs bwrap builds (its /etc, its mount points)
    return args + ["--chdir", "/tmp", "--clearenv"]


class Jail:
    """A folder with the stub package, the worker, the submission and (per run) the inputs.

    `source` is the submission's bytes as the grader read them (never the path again: a file
    swapped for a link after the read changes nothing).

        Owned by the grader and read-only to the child in every mode. In "user" mode the child reads
        it at its host path; in "bwrap" mode it is mounted at /sandbox.
    """

    def __init__(self, submission, sandbox, source):
        self.sandbox = sandbox
        self.slot = UidSlot() if os.geteuid() == 0 and sandbox.mode in ("bwrap", "user") else None
        _sweep(tempfile.gettempdir(), "npgpt-jail-")
        self.root = tempfile.mkdtemp(prefix=f"npgpt-jail-{os.getpid()}-")
        try:
            self._build(submission, source)
            # Only this sandbox may enter: as root, the folder's group is the sandbox's own gid
            # (another submission graded at the same time has another); else the user alone.
            if self.slot:
                os.chown(self.root, 0, self.slot.uid)
                os.chmod(self.root, 0o750)
            else:
                os.chmod(self.root, 0o700)
        except BaseException:
            self.close()
            raise

    def _build(self, submission, source):
        sandbox = self.sandbox  # self.root stays 0700 (mkdtemp) until it is complete
        lib = os.path.join(self.root, "lib")
        stub = os.path.join(lib, "npgpt")
        os.makedirs(os.path.join(stub, "layers"))
        for rel in STUB_FILES:
            shutil.copyfile(os.path.join(NPGPT_DIR, rel), os.path.join(stub, rel))
        with open(os.path.join(stub, "__init__.py"), "w") as f:
            f.write(STUB_INIT)
        with open(os.path.join(stub, "layers", "__init__.py"), "w") as f:
            f.write('"""npgpt.layers while grading: Dropout only."""\n\nfrom .dropout import Dropout\n')
        shutil.copyfile(WORKER, os.path.join(lib, "npgpt_worker.py"))
        os.makedirs(os.path.join(self.root, "sub"))
        self.sub_name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(submission)) or "submission.py"
        with open(os.path.join(self.root, "sub", self.sub_name), "wb") as f:
            f.write(source)
        self.inputs = os.path.join(self.root, "in")
        os.makedirs(self.inputs)
        site_dir = os.path.join(self.root, "site")
        os.makedirs(site_dir)
        self.python = interpreter(sandbox.mode == "bwrap")[0]
        if self.python is None:
            raise SandboxError(
                f"--sandbox user: no python{sys.version_info[0]}.{sys.version_info[1]} that another "
                "user may run (install the distribution's python3, or put the grader's in a readable place)"
            )
        if sandbox.mode == "bwrap" or os.geteuid() != 0:
            real = os.path.realpath(os.path.dirname(np.__file__))
            self.numpy = [("numpy", real)]
            if os.path.isdir(os.path.join(os.path.dirname(real), "numpy.libs")):
                self.numpy.append(("numpy.libs", os.path.join(os.path.dirname(real), "numpy.libs")))
        else:
            self.numpy = numpy_dirs()
        for name, src in self.numpy:
            if sandbox.mode == "bwrap":
                os.makedirs(os.path.join(site_dir, name))  # a mount point
            else:
                os.symlink(src, os.path.join(site_dir, name))
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                if not os.path.islink(p):
                    os.chmod(p, 0o755 if name in dirnames else 0o644)

    def path(self, *parts):
        """A path as the child sees it."""
        base = "/sandbox" if self.sandbox.mode == "bwrap" else self.root
        return os.path.join(base, *parts)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)
        if self.slot:
            self.slot.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- running one child --------------------------------------------------------------------------


def _preexec(memory_bytes, cpu_seconds, cgroup, uid, nproc, seccomp=None):
    procs = cgroup.procs if cgroup else []

    def apply():
        for path in procs:  # before anything else, so every descendant is counted
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if uid is not None:  # "user" mode: become the sandbox uid for good
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            _parent_death_signal()  # after the uid change, which clears it
        if seccomp and not _install_seccomp(seccomp):
            os._exit(121)  # never run the submission with sockets when it was meant to be without

    return apply


def _nproc(uid):
    """RLIMIT_NPROC for the child: NPROC tasks for a uid of its own, else NPROC more than now.

    RLIMIT_NPROC counts every task of the real uid, so a child sharing the grader's uid (bwrap
    run by a user, or "none") gets the user's present count plus NPROC. Root ignores it (bwrap's
    own set-up), the sandbox uid does not.
    """
    if uid is not None:
        return NPROC
    me, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    text = f.read()
            except OSError:
                continue
            m = re.search(r"^Uid:\s+(\d+)", text, re.M)
            t = re.search(r"^Threads:\s+(\d+)", text, re.M)
            if m and int(m.group(1)) == me:
                count += int(t.group(1)) if t else 1
    return 0 if me == 0 else count + NPROC


def _fate(code, timed_out, timeout, memory_mb, oom):
    if timed_out:
        return f"timed out after {timeout:g} s (every process of it was killed)"
    if oom:
        return f"ran out of memory (the limit is {memory_mb} MB over all its processes) and was killed"
    if code < 0:
        sig = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        if -code == signal.SIGXCPU:
            return "exceeded the CPU-time limit and was killed"
        if -code == signal.SIGKILL:
            return f"was killed (SIGKILL; out of memory? the limit is {memory_mb} MB)"
        return f"crashed (killed by signal {sig})"
    if code >= 128 and code - 128 in signal.valid_signals():  # bwrap reports a signal as 128 + n
        return _fate(-(code - 128), False, timeout, memory_mb, False)
    return f"exited early with status {code} (os._exit, or the interpreter died) before grading finished"


def run(jail, request, arrays, timeout=10.0, memory_mb=2048, *, use_cgroup=True):
    """Run the worker in `jail` with `request` (JSON) and `arrays`; return a ChildRun.

    Returns only after every process of the child is gone.
    """
    sb = jail.sandbox
    for f in os.listdir(jail.inputs):
        os.remove(os.path.join(jail.inputs, f))
    with open(os.path.join(jail.inputs, "request.json"), "w") as f:
        json.dump(dict(request, memory_mb=memory_mb), f)
    np.savez(os.path.join(jail.inputs, "request.npz"), **arrays)
    for f in os.listdir(jail.inputs):
        os.chmod(os.path.join(jail.inputs, f), 0o644)
    memory = memory_mb << 20
    cgroup = None
    if use_cgroup and sb.mode != "none" and _cgroup_kind():
        try:
            cgroup = Cgroup(memory)
        except OSError:
            cgroup = None
    uid = jail.slot.uid if jail.slot else None
    r, w = os.pipe()
    info_r = info_w = seccomp_r = -1
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    worker = [
        jail.path("lib", "npgpt_worker.py"),
        str(w),
        jail.path("site"),
        jail.path("lib"),
        jail.path("sub", jail.sub_name),
        jail.path("in"),
    ]
    python = jail.python
    if sb.mode == "bwrap":
        info_r, info_w = os.pipe()
        cmd = [shutil.which("bwrap"), *_ns_flags(), *_fs_flags(jail), "--info-fd", str(info_w)]
        code = _seccomp_program()
        if code:  # bwrap installs it right before it runs the command
            seccomp_r, seccomp_w = os.pipe()
            os.write(seccomp_w, code)  # a few hundred bytes: fits in the pipe's buffer
            os.close(seccomp_w)
            cmd += ["--seccomp", str(seccomp_r)]
        env_flags = []
        for k, v in dict(env, HOME="/tmp", TMPDIR="/tmp").items():
            env_flags += ["--setenv", k, v]
        cmd += env_flags + ["--"]
        if uid is not None:
            cmd += [
                "/usr/bin/setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
        cmd += [python, "-I", "-S", "-B", *worker]
        pre = _preexec(memory, int(timeout) + 1, cgroup, None, _nproc(uid))
        pass_fds, cwd, popen_env = (w, info_w) + ((seccomp_r,) if seccomp_r >= 0 else ()), "/", {}
    else:
        cmd = [python, "-I", "-S", "-B", *worker]
        home = jail.inputs
        env.update(HOME=home, TMPDIR=home)
        pre = _preexec(
            memory,
            int(timeout) + 1,
            cgroup,
            uid,
            _nproc(uid),
            _seccomp_program() if sb.mode == "user" else None,
        )
        pass_fds, cwd, popen_env = (w,), jail.inputs, env
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=popen_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=pre,
        )
    except BaseException:
        for fd in (r, w, info_r, info_w, seccomp_r):
            if fd >= 0:
                os.close(fd)
        if cgroup:
            cgroup.remove()
        raise
    os.close(w)
    for fd in (info_w, seccomp_r):
        if fd >= 0:
            os.close(fd)
    try:
        bufs, timed_out = _pump(proc, r, info_r, t0 + timeout)
        ns_init = _child_pid(bufs.get(info_r, b""))
        if not timed_out:  # its pipes are closed: give it a moment to exit by itself
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        running = proc.poll() is None
        # Everything of the child goes now. bwrap: its namespace's init, whose death kills the
        # whole PID namespace; bwrap exits only once init is reaped, which the kernel allows only
        # when the namespace is empty (init's pid cannot be reused while bwrap has not reaped it).
        # Then the session, the cgroup and the uid, until nothing is left.
        if running:
            _kill(ns_init if ns_init and sb.mode == "bwrap" else proc.pid)
        give_up = time.monotonic() + 10
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(proc.pid)
            code = proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        oom = False
        if cgroup:
            oom = cgroup.oom()
            cgroup.kill_all(give_up)
        if uid is not None:
            kill_uid(uid, give_up)
            if sb.mode == "user":
                remove_files_of(uid)
                remove_ipc_of(uid)
        run = ChildRun(seconds=time.monotonic() - t0)
        run.frames, bad = parse(bytes(bufs[r]))
        for attr, fd in (("stdout", proc.stdout.fileno()), ("stderr", proc.stderr.fileno())):
            text = bytes(bufs[fd][:OUTPUT_LIMIT]).decode("utf-8", "replace")
            if len(bufs[fd]) > OUTPUT_LIMIT:
                text += "\n[... output truncated]"
            setattr(run, attr, clean(text))
        if not any(h.get("stage") == "done" for h, _ in run.frames):
            if running and not timed_out:
                run.fate = "closed its result and output pipes before finishing, and was stopped"
            else:
                run.fate = _fate(code, timed_out, timeout, memory_mb, oom)
            if bad:
                run.fate += f"; its results were malformed: {bad}"
        elif bad:
            run.fate = f"sent malformed results: {bad}"
        return run
    finally:
        for fd in (r, info_r):
            if fd >= 0:
                os.close(fd)
        proc.stdout.close()
        proc.stderr.close()
        if cgroup:
            cgroup.remove()


def _child_pid(info):
    try:
        data = json.loads(bytes(info[:4096]))
        pid = data.get("child-pid") if isinstance(data, dict) else None
        return pid if isinstance(pid, int) and pid > 1 else None
    except (ValueError, RecursionError):
        return None


def _pump(proc, r, info_r, deadline):
    """Read the pipes until they close, the child exits, or the deadline passes."""
    sel = selectors.DefaultSelector()
    bufs = {}
    fds = [
        (r, RESULT_LIMIT),
        (proc.stdout.fileno(), OUTPUT_LIMIT + 1),
        (proc.stderr.fileno(), OUTPUT_LIMIT + 1),
    ]
    if info_r >= 0:
        fds.append((info_r, 4096))
    for fd, cap in fds:
        sel.register(fd, selectors.EVENT_READ, cap)
        bufs[fd] = bytearray()
    exited_at = None
    main = (r, proc.stdout.fileno(), proc.stderr.fileno())
    try:
        while any(fd in sel.get_map() for fd in main):
            now = time.monotonic()
            if now >= deadline:
                return bufs, True
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:  # a grandchild holds a pipe open
                break
            for key, _ in sel.select(timeout=min(0.1, deadline - now)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                elif len(bufs[key.fd]) < key.data:
                    bufs[key.fd] += chunk[: key.data - len(bufs[key.fd])]  # beyond the cap: dropped
        return bufs, False
    finally:
        sel.close()
