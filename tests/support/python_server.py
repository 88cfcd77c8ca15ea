"""A Python that has already imported torch, transformers, peft and trl, for the tests' reference
scripts: importing them takes 6 to 10 s a process, most of a reference's time, and a test run
starts well over a hundred. python_client (tests/support/python_client.cpp) hands this server a
script's arguments, working directory, environment and its stdin, stdout and stderr; the server
forks, and the child runs the script as `python SCRIPT ARGS` would, on those descriptors, then
reports its exit status. A fork runs nothing the parent ran: the parent only imported modules,
started no thread and computed nothing, so every child starts as a fresh interpreter would once
its imports were done, with the environment of its caller.

    python_server.py ADDRESS   (an abstract Unix socket name, without the leading NUL)

The client picks ADDRESS from the build directory and every variable a library reads when it is
imported (OMP_*, MKL_*, ATEN_*, ...), so a caller with other such variables gets its own server.
The server exits after IDLE_SECONDS without a request.
"""
import array
import os
import runpy
import select
import signal
import socket
import struct
import sys
import traceback

IDLE_SECONDS = 300


def preload():
    import torch  # noqa: F401
    import transformers
    for name in ("AutoModelForCausalLM", "AutoTokenizer", "GPT2LMHeadModel", "LlamaForCausalLM",
                 "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM", "MixtralForCausalLM",
                 "Qwen3MoeForCausalLM"):
        getattr(transformers, name)
    for module in ("peft", "trl", "safetensors.torch", "numpy"):
        try:
            __import__(module)
        except ImportError:
            pass  # a script that needs it fails as it would without the server


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def run_script(argv, cwd, env, fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code & 0xFF)


def handle(conn):
    """In a child of the server: one request, its script run in a grandchild that this process
    waits on, killing it should the client go away first (the client's caller killed it)."""
    fds = array.array("i")
    msg, ancdata, _, _ = conn.recvmsg(4, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(msg) < 4 or len(fds) != 3:
        os._exit(1)
    (size,) = struct.unpack("=I", recv_exact(conn, 4 - len(msg)) if len(msg) < 4 else msg)
    fields = recv_exact(conn, size).decode("utf-8", "surrogateescape").split("\0")
    cwd, argc = fields[0], int(fields[1])
    argv = fields[2:2 + argc]
    env = dict(entry.split("=", 1) for entry in fields[2 + argc:] if "=" in entry)
    conn.sendall(b"S")  # started: from here on the client must not run the script itself
    pid = os.fork()
    if pid == 0:
        conn.close()
        run_script(argv, cwd, env, list(fds))
    for fd in fds:
        os.close(fd)
    while True:
        ready, _, _ = select.select([conn], [], [], 0.05)
        if ready and not conn.recv(1):
            os.kill(pid, signal.SIGKILL)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    code = os.waitstatus_to_exitcode(status)
    conn.sendall(struct.pack("=i", code if code >= 0 else 128 - code))
    os._exit(0)


def main():
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind("\0" + sys.argv[1])
    except OSError:
        return  # another server got there first
    listener.listen(64)
    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the handlers report for themselves
    while True:
        ready, _, _ = select.select([listener], [], [], IDLE_SECONDS)
        if not ready:
            return
        conn, _ = listener.accept()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            listener.close()
            try:
                handle(conn)
            finally:
                os._exit(1)
        conn.close()


if __name__ == "__main__":
    main()
