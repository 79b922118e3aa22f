# targets: child_work, parent_work
# witness: scopes tests, targets
# witness: incomplete on 3.11: forked by process
# witness: incomplete on 3.13: forked by process
# witness: incomplete on 3.14: forked by process
# witness: incomplete on 3.15: forked by process
# A child forked inside a test window (issue 23.3): its stream had no window of its own, so
# under scope "tests"/"targets" every record of the child lay outside the windows and was
# dropped; the trace was complete and named only the parent's later call. flux does not follow
# such a child: the trace must say so. (Scope "run" follows a forked child; the settrace
# reference does not, so that scope is not compared here.)
import multiprocessing
import os


def child_work(x):
    y = x * 2
    return y


def parent_work(x):
    return x + 1


def test_os_fork():
    pid = os.fork()
    if pid == 0:
        child_work(3)
        os._exit(0)
    os.waitpid(pid, 0)
    assert parent_work(3) == 4


def test_multiprocessing_fork():
    p = multiprocessing.get_context("fork").Process(target=child_work, args=(5,))
    p.start()
    p.join()
    assert p.exitcode == 0
    assert parent_work(5) == 6
